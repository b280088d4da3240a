//! Recipes: the TOML files users write. This module holds what every recipe kind shares: the
//! reader that reports an unknown key or a syntax error with its line and column, the sections
//! every kind has (`[optimizer]`, `[checkpoint]`, `[logging]`, `precision`), the fingerprint a
//! checkpoint records, and the defaults. Each task keeps its own schema beside it
//! (`tasks::pretrain::recipe`, `tasks::sentiment::recipe`, `tasks::summarization::recipe`).
//!
//! It imports only `error`, `files`, `seeds`, `model` (the precision) and `device` (the
//! precision a recipe's setting gives), so `train`, `eval`, `tasks` and the command line can all
//! read it.
pub(crate) mod common;
pub mod fingerprint;
pub(crate) mod kind;
mod reader;

pub use common::{
    bf16_on_cpu_for_tests, check_shared, CheckpointSection, LoggingSection, OptimizerSection, PrecisionSetting,
    ScheduleKind, SharedSections,
};
pub use fingerprint::Fingerprint;
pub use kind::{expect_kind, kind_of, OldRecipes, RecipeKind};
pub use reader::{check_name, parse_toml};

/// The seed of a recipe that names none.
pub fn default_seed() -> u64 {
    crate::seeds::DEFAULT_SEED
}

/// Where a recipe's run writes checkpoints and results (`<output_dir>/<name>/`) by default.
pub fn default_output_dir() -> std::path::PathBuf {
    "checkpoints".into()
}
