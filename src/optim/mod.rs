//! Optimizers and learning-rate schedules, shared by pretraining and the fine-tuning tasks.
pub mod adamw;
pub mod schedule;

pub use adamw::AdamW;
pub use schedule::{linear_schedule, noam};
