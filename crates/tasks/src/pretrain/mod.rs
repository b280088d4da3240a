//! Masked-LM pretraining, a task of the engine like the fine-tuning tasks: its recipe schema
//! ([`recipe`]: model, tokenizer, data mixture, masking, the evaluations at checkpoints), the
//! corpus a run reads ([`corpus`]: prepared shards, pinned by content), BERT's masking
//! ([`masking`]), the held-out loss ([`heldout`]), the evaluations at checkpoints ([`hooks`],
//! built from the recipe), the run itself ([`train`]: the task the engine drives), and the
//! command (`indolm train`, [`command`]); [`TASK`] declares it.
pub(crate) mod command;
pub mod corpus;
pub(crate) mod heldout;
pub mod hooks;
pub mod masking;
pub(crate) mod recipe;
pub mod train;

pub use recipe::PretrainRecipe;

use crate::registry::{Salt, TaskDeclaration};
use indolm_core::recipe::{OldRecipes, RecipeKind};

/// The salts of pretraining's random purposes (see [`indolm_core::seeds`]).
pub(crate) mod salt {
    /// Masked-LM masks (stream: the micro-batch number; held-out batches use [`HELDOUT_MASKS`]).
    pub(crate) const MASKING: u64 = 3;
    /// libtorch's generator before each pretraining step (dropout), see
    /// [`indolm_core::seeds::per_step`].
    pub(crate) const PRETRAIN_TORCH: u64 = 4;
    /// The masking stream prefix of held-out batches (`HELDOUT_MASKS << 48 | batch`), so every
    /// checkpoint is scored on the same predictions.
    pub(crate) const HELDOUT_MASKS: u64 = 5;
}

/// Masked-LM pretraining as the registry knows it: `kind = "pretrain"` (also every recipe
/// without `kind` that no other kind recognises), run by `indolm train`.
pub(crate) const TASK: TaskDeclaration = TaskDeclaration {
    kind: RecipeKind { name: "pretrain", command: "indolm train", old_recipes: OldRecipes::Otherwise },
    about: "Pretrain a masked LM from a `kind = \"pretrain\"` recipe (checkpoints, TensorBoard logs, evaluations)",
    salts: &[
        Salt { name: "MASKING", value: salt::MASKING },
        Salt { name: "PRETRAIN_TORCH", value: salt::PRETRAIN_TORCH },
        Salt { name: "HELDOUT_MASKS", value: salt::HELDOUT_MASKS },
    ],
    arguments: <command::TrainArgs as clap::Args>::augment_args,
    run: command::run_command,
    check_recipe: command::check_recipe,
    parse_recipe: |path| indolm_core::recipe::parse_toml::<PretrainRecipe>(path).map(|_| ()),
};
