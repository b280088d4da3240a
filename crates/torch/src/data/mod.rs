//! Text data: downloading the public sources, sources and their formats, tokenization and
//! tokenizer training, prepared token shards and weighted mixtures of them, inference
//! batches by length (`batching`), and work spread over every core (`parallel`).
pub mod batching;
pub mod download;
pub mod mixture;
pub mod parallel;
pub mod shards;
pub mod sources;
pub mod tokenizer;
pub mod tokenizer_train;
