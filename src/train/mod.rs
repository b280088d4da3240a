//! Pretraining a masked LM: corpus preparation for a run, masking, batches drawn ahead on a
//! background thread (`loader`), the held-out loss, metrics, checkpoints, per-phase step times
//! (`--step-times`) and the trainer itself. Imports the shared layers (`recipe`, `optim`,
//! `logger`, `hooks`) and never `eval` or `tasks`: evaluations reach the trainer as checkpoint
//! hooks.
pub mod checkpoint;
pub mod corpus;
pub mod data_parallel;
pub mod heldout;
pub mod loader;
pub mod masking;
pub mod metrics;
pub mod step_times;
pub mod train_log;
pub mod trainer;
