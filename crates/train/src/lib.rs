//! indolm's training engine, for every task: the loop ([`engine`], with the [`task`] trait it
//! drives), batches drawn ahead on a background thread ([`loader`]), data parallelism, metrics,
//! per-phase step times and the training log. It builds on `indolm-core` (recipes, runs, logging)
//! and `indolm-torch` (models, optimizers, hooks), never on the evaluations (`indolm-eval`, beside
//! it) or the tasks (`indolm-tasks`, above it): the tasks use the engine, and evaluations reach it
//! as checkpoint hooks.
#![warn(missing_docs)]
pub(crate) mod buckets;
pub mod data_parallel;
pub mod engine;
#[cfg(test)]
mod example_task;
pub(crate) mod loader;
pub(crate) mod metrics;
mod overlap_check;
pub(crate) mod step_times;
pub mod task;
pub(crate) mod train_log;
