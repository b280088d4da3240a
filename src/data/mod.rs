//! Text data: downloading the public sources, sources and their formats, tokenization and
//! tokenizer training, prepared token shards and weighted mixtures of them, and inference
//! batches by length (`batching`).
pub mod batching;
pub mod download;
pub mod mixture;
pub mod shards;
pub mod sources;
pub mod tokenizer;
pub mod tokenizer_train;
