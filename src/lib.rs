//! indolm: pretraining, fine-tuning and bias evaluation of Indonesian language models on
//! libtorch.
//!
//! The layers, lowest first; a module imports only from layers below it (docs/architecture.md):
//! - `error`, `files`, `outputs`, `seeds`, `stdout`: errors as values, file helpers, what a
//!   command may replace or remove (and the run-folder names every writer declares), where
//!   randomness comes from, output a closed pipe cannot crash;
//! - `data`, `model`, `device`, `distributed`: text, tokenizers and corpora; BERT and its family, the
//!   causal LM families and model directories; the device and precision; the data-parallel
//!   launch and process group;
//! - `recipe`, `optim`, `logger`, `hooks`: what every recipe shares (its kind, the shared
//!   sections, the fingerprint), optimizers and schedules, run output, the checkpoint hook
//!   trait — shared by the layers above;
//! - `run`: a run's folder, lock, logger, stop signals and checkpoints;
//! - `train` (the engine, for every task: the `Task` trait and, beside it, `Evaluations` and
//!   their plan) and `eval` (evaluations of masked and causal LMs through one scoring
//!   interface, `eval::scorer`), which never import each other;
//! - `tasks` (masked-LM pretraining and the fine-tuning tasks, each with its recipe, trained by
//!   `train`'s engine and scored with `eval`'s metrics) and `report` (reports of results).
//!
//! The `indolm` binary (`src/cli`) assembles them: it builds a recipe's checkpoint hooks from
//! `eval` and hands them to the task it runs.
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
pub mod distributed;
pub mod error;
pub mod eval;
pub mod files;
pub mod generate;
pub mod hooks;
pub mod logger;
pub mod memory_budget;
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
