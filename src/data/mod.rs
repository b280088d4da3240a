//! Text data: tokenization (and, later, corpora, batching and masking).
pub mod tokenizer;
