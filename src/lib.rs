//! indolm: pretraining, fine-tuning and bias evaluation of Indonesian BERT models on libtorch.
//!
//! The layers, lowest first; a module imports only from layers below it (README, "Architecture"):
//! - `error`, `files`, `outputs`, `seeds`, `stdout`: errors as values, file helpers, what a
//!   command may replace or remove, where randomness comes from, output a closed pipe cannot
//!   crash;
//! - `data`, `model`, `device`: text, tokenizers and corpora; the BERT network and model
//!   directories; the device and precision;
//! - `recipe`, `optim`, `logger`, `hooks`: the recipe files, optimizers and schedules, run
//!   output, the checkpoint hook trait — shared by the layers above;
//! - `run`: a run's folder, lock, logger, stop signals and checkpoints;
//! - `train` (the engine and pretraining) and `eval` (evaluations of masked LMs), which never
//!   import each other;
//! - `tasks` (fine-tuning heads, trained by `train`'s engine, scored with `eval`'s metrics) and
//!   `report` (pictures of results).
//!
//! The `indolm` binary (`src/cli`) assembles them: it builds a recipe's checkpoint hooks from
//! `eval` and hands them to the trainer.
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

pub mod data;
pub mod device;
pub mod dist;
pub mod error;
pub mod eval;
pub mod files;
pub mod hooks;
pub mod logger;
pub mod model;
pub mod optim;
pub mod outputs;
pub mod recipe;
pub mod report;
pub mod run;
pub mod seeds;
pub mod stdout;
pub mod tasks;
pub mod train;
