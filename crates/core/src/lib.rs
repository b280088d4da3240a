//! indolm's foundations, the workspace's lowest crate, without libtorch: errors as values
//! (`error`), file helpers (`files`: atomic writes, locks, paths kept inside their folder), what a
//! command may replace or remove and the run-folder names every writer declares (`outputs`),
//! where randomness comes from (`seeds`), output a closed pipe cannot crash (`stdout`, `outln!`),
//! a bounded allocation budget (`memory_budget`), TensorBoard and progress (`logger`), the recipe
//! reader and the sections every recipe shares (`recipe`), the learning-rate schedules (`schedule`), and a run's folder, lock, stop
//! signals and checkpoints (`run`).
//!
//! The workspace's crates, lowest first (each depends only on those before it; crates/README.md):
//! `indolm-core` → `indolm-metrics` (ROUGE, statistics, classification metrics; no libtorch) →
//! `indolm-torch` (device, distributed, models, data, optimizers, the engine) → `indolm-eval`
//! (evaluations and generation) → `indolm-tasks` (the tasks and reports) → the `indolm` binary.
#![warn(missing_docs)]
/// `println!` that a closed pipe cannot crash (see [`stdout`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::stdout::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that a closed pipe cannot crash (see [`stdout`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::print(format_args!($($arg)*)) };
}

/// linkme, for [`declare_run_files!`] in the crates above (they need not depend on it).
#[doc(hidden)]
pub use linkme as __linkme;

pub mod error;
pub mod files;
pub mod json_fields;
pub mod logger;
pub mod memory_budget;
pub mod outputs;
pub mod recipe;
pub mod run;
pub mod schedule;
pub mod seeds;
pub mod stdout;
