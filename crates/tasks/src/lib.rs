//! indolm's tasks and reports. The tasks the training engine drives, one folder each: masked-LM pretraining (`pretrain`),
//! NusaX sentiment on a sequence classifier (`sentiment`, `classifier`), and Liputan6
//! summarization (`summarization`: BertExt, BertAbs, BertExtAbs). Each task owns its recipe
//! schema (read through `recipe::parse_toml`, with the sections every recipe shares), its
//! `train::task::Task` implementation and its inference; they share `optim`, `logger` and
//! `eval`'s metrics.
#![warn(missing_docs)]
use indolm_core::outputs::RunFile;

/// A fine-tuning run's results, every unit's together (JSON).
pub(crate) const RESULTS_JSON: &str = "results.json";
/// The same results as Markdown tables.
pub const RESULTS_MD: &str = "results.md";

indolm_core::declare_run_files!(RESULTS_FILES: RunFile::Named(RESULTS_JSON), RunFile::Named(RESULTS_MD));

pub mod classifier;
pub mod pretrain;
pub mod report;
pub mod sentiment;
pub mod summarization;
