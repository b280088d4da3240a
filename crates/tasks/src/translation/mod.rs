//! NusaX machine translation (the NusaX paper's Tables 4–6): the parallel corpus and its
//! translation directions (`data`), the bilingual lexicon and the word-substitution translator
//! built from it (`lexicon`), the paper's figures (`paper`), and the baselines that need no
//! model, Copy and word substitution, scored with SacreBLEU and chrF in the tables' layout
//! (`baselines`). Fine-tuning on the training engine: the recipe (`recipe`), the model and its
//! directory (`model`), a pair as mBART's rows (`format`), the task of one direction (`task`),
//! validation and translation without gradients (`decoding`), one model per direction with its
//! test scores (`run`) and the command (`indolm finetune translation`, `command`); [`TASK`]
//! declares it.
pub mod baselines;
pub(crate) mod command;
pub mod data;
pub(crate) mod decoding;
pub mod format;
pub mod lexicon;
pub mod model;
pub mod paper;
pub mod recipe;
pub mod run;
pub(crate) mod task;

pub use recipe::{Selection, TranslationRecipe};
pub use run::{run, DirectionResult, TranslationResults};

use crate::registry::{Salt, TaskDeclaration};
use indolm_core::recipe::{OldRecipes, RecipeKind};

/// The salts of translation fine-tuning's random purposes (see [`indolm_core::seeds`]).
pub(crate) mod salt {
    /// The order of the training pairs (stream: the epoch).
    pub(crate) const TRANSLATION_SHUFFLE: u64 = 17;
    /// libtorch's generator in translation fine-tuning (dropout, per step).
    pub(crate) const TRANSLATION_TORCH: u64 = 18;
}

/// NusaX translation fine-tuning as the registry knows it: `kind = "translation"`, run by
/// `indolm finetune translation`.
pub(crate) const TASK: TaskDeclaration = TaskDeclaration {
    kind: RecipeKind { name: "translation", command: "indolm finetune translation", old_recipes: OldRecipes::Never },
    about: "NusaX machine translation: one mBART-layout model per direction, selected on validation SacreBLEU, tested by beam search",
    salts: &[
        Salt { name: "TRANSLATION_SHUFFLE", value: salt::TRANSLATION_SHUFFLE },
        Salt { name: "TRANSLATION_TORCH", value: salt::TRANSLATION_TORCH },
    ],
    arguments: <command::TranslationArgs as clap::Args>::augment_args,
    run: command::run_command,
    check_recipe: command::check_recipe,
    parse_recipe: |path| indolm_core::recipe::parse_toml::<TranslationRecipe>(path).map(|_| ()),
};
