//! The evaluations a pretraining recipe runs at every checkpoint, built from its `[eval.bias]`
//! and `[eval.indommlu]` with `indolm_eval`'s hooks.
use super::recipe::PretrainRecipe;
use indolm_eval::bias::BiasHook;
use indolm_eval::indommlu::IndommluHook;
use indolm_eval::pairs::load_indobias;
use indolm_torch::error::Result;
use indolm_torch::hooks::CheckpointHook;
use tch::Device;

/// The evaluations the recipe's `[eval.bias]` and `[eval.indommlu]` run at every checkpoint, on
/// `device` (their data read and checked here, before training starts).
pub(crate) fn checkpoint_hooks(recipe: &PretrainRecipe, device: Device) -> Result<Vec<Box<dyn CheckpointHook>>> {
    let mut hooks: Vec<Box<dyn CheckpointHook>> = Vec::new();
    if let Some(bias) = &recipe.eval.bias {
        let pairs = load_indobias(&recipe.resolve(&bias.pairs))?;
        hooks.push(Box::new(BiasHook::new(pairs, bias, recipe.seed, device, recipe.tensorboard_dir())));
    }
    if let Some(mmlu) = &recipe.eval.indommlu {
        let data = recipe.resolve(&mmlu.data);
        hooks.push(Box::new(IndommluHook::new(&data, mmlu.mode, mmlu.subsample, recipe.seed, device)?));
    }
    Ok(hooks)
}
