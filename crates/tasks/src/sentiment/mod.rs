//! NusaX sentiment fine-tuning on the training engine: the data ([`data`]: the NusaX layout,
//! read and checked, and the scores of a classifier), the recipe ([`recipe`]), the task the
//! engine trains ([`task`]: texts tokenized once, a seeded order per epoch, validation macro-F1
//! after each), the NusaX paper's settings as resumable units of one run ([`run`]), and the same
//! fine-tuned from every kept checkpoint of a pretraining run, its utility beside its bias
//! ([`sweep`]), and the command (`indolm finetune sentiment`, [`command`]); [`TASK`] declares it.
pub mod baselines;
pub(crate) mod command;
pub mod data;
pub(crate) mod recipe;
pub mod run;
pub(crate) mod sweep;
pub mod task;

pub use data::{load_split, score, Example, Scores, LABELS, NUSAX_LANGUAGES};
pub use recipe::{Grid, SentimentData, SentimentEval, SentimentRecipe, Setting};
pub use run::{run, RunResult, SentimentResults};

use crate::registry::{Salt, TaskDeclaration};
use indolm_core::recipe::{OldRecipes, RecipeKind};

/// The salts of sentiment fine-tuning's random purposes (see [`indolm_core::seeds`]).
pub(crate) mod salt {
    /// The order of sentiment training examples (stream: the epoch).
    pub(crate) const SENTIMENT_SHUFFLE: u64 = 7;
    /// libtorch's generator in sentiment fine-tuning: the head's initialisation, then per step.
    pub(crate) const SENTIMENT_TORCH: u64 = 8;
}

/// A recipe without `kind` is a sentiment recipe when it has a `[data] setting` (and no
/// top-level `task`, which makes it a summarization recipe).
fn is_old_sentiment_recipe(table: &toml::Table) -> bool {
    !table.contains_key("task") && table.get("data").and_then(|d| d.get("setting")).is_some()
}

/// NusaX sentiment fine-tuning as the registry knows it: `kind = "sentiment"`, run by
/// `indolm finetune sentiment`.
pub(crate) const TASK: TaskDeclaration = TaskDeclaration {
    kind: RecipeKind {
        name: "sentiment",
        command: "indolm finetune sentiment",
        old_recipes: OldRecipes::When(is_old_sentiment_recipe),
    },
    about: "NusaX sentiment (negative/neutral/positive): monolingual, multilingual, leave-one-out or cross-lingual",
    salts: &[
        Salt { name: "SENTIMENT_SHUFFLE", value: salt::SENTIMENT_SHUFFLE },
        Salt { name: "SENTIMENT_TORCH", value: salt::SENTIMENT_TORCH },
    ],
    arguments: <command::SentimentArgs as clap::Args>::augment_args,
    run: command::run_command,
    check_recipe: command::check_recipe,
    parse_recipe: |path| indolm_core::recipe::parse_toml::<SentimentRecipe>(path).map(|_| ()),
};
