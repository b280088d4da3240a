//! Recipes: the TOML files users write. This module holds what every recipe kind shares (the
//! reader that reports an unknown key or a syntax error with its line and column, and the
//! defaults) and the pretraining recipe's schema, including the settings of the evaluations
//! it runs at checkpoints. Fine-tuning recipes keep their schemas beside their tasks.
//!
//! It imports only `error`, `files`, `seeds`, `model` (the configuration a preset resolves to),
//! `data` (source specifications) and `device` (the precision a recipe's setting gives), so
//! `train`, `eval`, `tasks` and the command line can all read it.
pub mod common;
pub mod fingerprint;
pub mod pretrain;
mod reader;

pub use common::{check_shared, CheckpointSection, LoggingSection, OptimizerSection, ScheduleKind};
pub use fingerprint::Fingerprint;
pub use pretrain::{resolve_precision, BiasMetric, IndommluMode, PrecisionSetting, Recipe};
pub use reader::{check_name, parse_toml};

/// The seed of a recipe that names none.
pub fn default_seed() -> u64 {
    crate::seeds::DEFAULT_SEED
}

/// Where a recipe's run writes checkpoints and results (`<output_dir>/<name>/`) by default.
pub fn default_output_dir() -> std::path::PathBuf {
    "checkpoints".into()
}

/// Where a recipe's run writes TensorBoard logs (`<tensorboard>/<name>/`) by default.
pub fn default_tensorboard() -> std::path::PathBuf {
    "runs".into()
}
