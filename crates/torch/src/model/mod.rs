//! The BERT model: configuration, layers, the masked-LM network, weight files and model
//! directories (indolm checkpoints and HF BERT directories alike); and causal LMs from HF
//! directories (`decoder`: Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3, BLOOM) and
//! encoder-decoders (`seq2seq`: T5, mT5), whose folders' config.json and tokenizer.json are opened
//! the same way (`hf_folder`); SentencePiece BPE models and IndoNLG's tokenizer (`sentencepiece`).
pub mod bert;
pub mod config;
pub mod decoder;
pub(crate) mod hf_folder;
pub mod layers;
pub mod model_dir;
pub mod notes;
pub mod sentencepiece;
pub mod seq2seq;
pub mod torch_file;
pub mod weights;

pub use crate::device::Precision;
pub use bert::{BertForMaskedLM, BertModel, IGNORE_INDEX};
pub use config::BertConfig;
pub use notes::{Component, LoadNote};
