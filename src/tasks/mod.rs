//! Fine-tuning tasks on top of the pretrained encoder: sequence classification and NusaX
//! sentiment.
pub mod classifier;
pub mod sentiment;
pub mod summarization;

/// Defaults shared by the fine-tuning recipes.
pub(crate) fn default_seed() -> u64 {
    3407
}
pub(crate) fn default_output_dir() -> std::path::PathBuf {
    "checkpoints".into()
}
pub(crate) fn default_tensorboard() -> std::path::PathBuf {
    "runs".into()
}
