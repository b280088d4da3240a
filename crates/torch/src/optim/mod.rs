//! Optimizers, shared by pretraining and the fine-tuning tasks (their learning-rate schedules,
//! torch-free, are `indolm_core::schedule`).
pub(crate) mod adamw;

pub use adamw::AdamW;
