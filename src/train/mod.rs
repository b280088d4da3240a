//! Training: the engine that drives every task ([`engine`], with the [`task`] trait it drives,
//! batches drawn ahead on a background thread ([`loader`]), data parallelism, metrics,
//! per-phase step times and the training log). Imports the shared layers (`recipe`, `optim`,
//! `logger`, `hooks`) and the run layer (`run`), never `eval` or `tasks`: the tasks (in `tasks`:
//! masked-LM pretraining, the fine-tuning tasks) use the engine, and evaluations reach them as
//! checkpoint hooks.
pub(crate) mod buckets;
pub mod data_parallel;
pub mod engine;
#[cfg(test)]
mod example_task;
pub mod loader;
pub mod metrics;
mod overlap_check;
pub mod step_times;
pub mod task;
pub mod train_log;
