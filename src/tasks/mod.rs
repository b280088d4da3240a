//! Fine-tuning tasks on top of the pretrained encoder: sequence classification and NusaX
//! sentiment.
pub mod classifier;
pub mod sentiment;
pub mod summarization;
