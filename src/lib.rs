//! indolm: pretraining, fine-tuning and bias evaluation of Indonesian BERT models on libtorch.
pub mod data;
pub mod device;
pub mod error;
pub mod eval;
pub mod model;
pub mod report;
pub mod tasks;
pub mod train;
