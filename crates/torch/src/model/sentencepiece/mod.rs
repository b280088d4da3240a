//! SentencePiece BPE models read without the `sentencepiece` library: the `ModelProto` file
//! parsed from its protobuf wire format with every size bounded (`proto`), its vocabulary checked
//! as SentencePiece checks it (`vocab`), its normalizer with the `precompiled_charsmap`'s rules
//! (`normalizer`), the BPE merges (`bpe`), encoding and decoding as `SentencePieceProcessor` does
//! (`processor`), and IndoNLG's tokenizer class on top (`indonlg`: IndoBART-v2's and IndoGPT's
//! `sentencepiece.bpe.model` with the class's hard-coded special tokens).
mod bpe;
pub mod indonlg;
mod normalizer;
pub mod processor;
pub mod proto;
mod vocab;

pub use indonlg::IndoNlgTokenizer;
pub use processor::{EncodedPiece, SentencePieceModel};
