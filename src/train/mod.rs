//! Training: the engine that drives every task ([`engine`], with the [`task`] trait it drives,
//! batches drawn ahead on a background thread ([`loader`]), data parallelism, metrics and
//! per-phase step times), and masked-LM pretraining as its first task ([`pretrain`]: corpus
//! preparation for a run, masking, the held-out loss). Imports the shared layers (`recipe`,
//! `optim`, `logger`, `hooks`) and the run layer (`run`), never `eval` or `tasks`: evaluations
//! reach pretraining as checkpoint hooks, and the fine-tuning tasks (in `tasks`) use the engine.
pub mod corpus;
pub mod data_parallel;
pub mod engine;
pub mod heldout;
pub mod loader;
pub mod masking;
pub mod metrics;
pub mod pretrain;
pub mod step_times;
pub mod task;
pub mod train_log;
