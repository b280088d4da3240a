//! WordPiece training: an uncased BERT WordPiece (`[PAD] [UNK] [CLS] [SEP] [MASK]` as ids
//! 0–4) trained with the `tokenizers` crate, with the same settings as HF's
//! `BertWordPieceTokenizer` (min frequency 2, alphabet limit 1000, `##` continuation).
use super::tokenizer::{TextTokenizer, SPECIAL_TOKENS};
use crate::error::{Error, Result};
use std::path::Path;
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainer};
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::models::TrainerWrapper;
use tokenizers::{AddedToken, Tokenizer};

/// IndoBERT's (IndoLEM) vocabulary size.
pub const DEFAULT_VOCAB_SIZE: usize = 31_923;

#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub vocab_size: usize,
    pub min_frequency: u64,
    pub lowercase: bool,
    pub show_progress: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { vocab_size: DEFAULT_VOCAB_SIZE, min_frequency: 2, lowercase: true, show_progress: false }
    }
}

/// Trains a WordPiece tokenizer on `texts` (one paragraph each).
pub fn train_wordpiece(texts: &[String], options: &TrainOptions) -> Result<TextTokenizer> {
    let source = Path::new("<trained>");
    if options.vocab_size <= SPECIAL_TOKENS.len() {
        return Err(Error::usage("--vocab-size", format!("must exceed the {} special tokens, found {}", SPECIAL_TOKENS.len(), options.vocab_size)));
    }
    if texts.is_empty() {
        return Err(Error::usage("tokenizer training", "no text to train on"));
    }
    let special: Vec<AddedToken> = SPECIAL_TOKENS.iter().map(|t| AddedToken::from(*t, true)).collect();
    let trainer = WordPieceTrainer::builder()
        .vocab_size(options.vocab_size)
        .min_frequency(options.min_frequency)
        .special_tokens(special.clone())
        .limit_alphabet(1000)
        .continuing_subword_prefix("##".into())
        .show_progress(options.show_progress)
        .build();
    let mut trainer = TrainerWrapper::from(trainer);
    let model = WordPiece::builder().unk_token("[UNK]".into()).build().map_err(|e| Error::Tokenizer { path: source.into(), message: e.to_string() })?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(BertNormalizer::new(true, true, None, options.lowercase)));
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_decoder(Some(WordPieceDecoder::default()));
    tokenizer
        .train(&mut trainer, texts.iter())
        .map_err(|e| Error::Tokenizer { path: source.into(), message: format!("training failed: {e}") })?;
    tokenizer.add_special_tokens(&special);
    let id = |t: &str| tokenizer.token_to_id(t).expect("special tokens are part of the trained vocabulary");
    let (cls, sep) = (id("[CLS]"), id("[SEP]"));
    tokenizer.with_post_processor(Some(BertProcessing::new(("[SEP]".into(), sep), ("[CLS]".into(), cls))));
    TextTokenizer::from_tokenizer(tokenizer, source, options.lowercase)
}
