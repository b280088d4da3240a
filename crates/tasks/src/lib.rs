//! indolm's tasks and reports. The tasks the training engine drives, one folder each: masked-LM pretraining (`pretrain`),
//! NusaX sentiment on a sequence classifier (`sentiment`, `classifier`), and Liputan6
//! summarization (`summarization`: BertExt, BertAbs, BertExtAbs). NusaX translation's data,
//! lexicon and model-free baselines live in `translation`. Each task owns its recipe
//! schema (read through `recipe::parse_toml`, with the sections every recipe shares), its
//! `train::task::Task` implementation and its inference; they share `optim`, `logger` and
//! `eval`'s metrics. Each declares itself in its folder (`TASK`: its recipe kind, seed salts,
//! command and recipe check, see [`registry`]) and is registered by one line of [`TASKS`].
#![warn(missing_docs)]
use indolm_core::outputs::RunFile;

/// A fine-tuning run's results, every unit's together (JSON).
pub(crate) const RESULTS_JSON: &str = "results.json";
/// The same results as Markdown tables.
pub(crate) const RESULTS_MD: &str = "results.md";

indolm_core::declare_run_files!(RESULTS_FILES: RunFile::Named(RESULTS_JSON), RunFile::Named(RESULTS_MD));

pub mod classifier;
pub(crate) mod epochs;
#[cfg(test)]
mod example;
pub mod pretrain;
pub mod registry;
pub mod report;
pub mod sentiment;
pub mod summarization;
pub mod translation;
pub(crate) mod units;

/// Every task, one line each, in the guide's order: the command line's training commands, the
/// recipe kinds and `recipe check` come from this list.
pub const TASKS: &[&registry::TaskDeclaration] = &[
    &pretrain::TASK,
    &sentiment::TASK,
    &summarization::TASK,
    &translation::TASK,
    #[cfg(test)]
    &example::TASK,
];
