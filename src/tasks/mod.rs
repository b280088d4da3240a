//! Fine-tuning tasks on top of the pretrained encoder: sequence classification and NusaX
//! sentiment, and Liputan6 summarization (BertExt, BertAbs, BertExtAbs). Each task owns its
//! recipe schema (read through `recipe::parse_toml`), its training loop and its inference; they
//! share `optim`, `logger` and `eval`'s metrics.
pub mod classifier;
pub mod sentiment;
pub mod summarization;
