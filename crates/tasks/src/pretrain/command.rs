//! `indolm train` and the pretraining `recipe check`: the command's arguments, the run of the
//! recipe (or of one of its seeds, or of each in turn) with its summary, and the check of a
//! recipe with everything `train` reads before it starts.
use super::recipe::PretrainRecipe;
use super::train::pretrain;
use crate::registry::Launcher;
use indolm_core::{out, outln};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};
use tch::Device;

/// `indolm train`'s own arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct TrainArgs {
    /// The recipe (TOML).
    pub recipe: PathBuf,
    /// Train the recipe with this seed instead, as the run `<name>-seed<N>` (pretraining
    /// seeds as replicates; compare compositions with `report bias-compare --group`).
    #[arg(long, conflicts_with = "seed_index")]
    pub seed: Option<u64>,
    /// Train the recipe's `seeds[I]` as the run `<name>-seed<N>` (a Slurm job array:
    /// `--seed-index $SLURM_ARRAY_TASK_ID`).
    #[arg(long)]
    pub seed_index: Option<usize>,
}

/// `indolm train` from its parsed command line.
pub(crate) fn run_command(matches: &clap::ArgMatches, launcher: &dyn Launcher) -> Result<()> {
    train(&super::TASK.arguments_of(matches)?, launcher)
}

/// `indolm train`: pretrains the recipe (or one of its seeds, or each in turn) and sums the run
/// up.
pub fn train(args: &TrainArgs, launcher: &dyn Launcher) -> Result<()> {
    let recipe_path = args.recipe.as_path();
    let recipe = PretrainRecipe::load(recipe_path)?;
    let seed = match (args.seed, args.seed_index) {
        (Some(s), _) => Some(s),
        (None, Some(i)) => Some(recipe.seed_at(i, recipe_path)?),
        (None, None) => None,
    };
    if let Some(seed) = seed {
        return train_one(recipe_path, recipe.with_seed(seed, recipe_path)?, launcher);
    }
    if recipe.seeds.is_empty() {
        return train_one(recipe_path, recipe, launcher);
    }
    if indolm_torch::distributed::Launch::from_env()?.is_some() {
        return Err(Error::field(
            recipe_path,
            "seeds",
            "under torchrun or srun, train one seed per job: `--seed-index I` (a job array) or `--seed N`",
        ));
    }
    let seeds = recipe.seeds.clone();
    for (i, &seed) in seeds.iter().enumerate() {
        outln!("seed {seed} ({} of {}): run {}-seed{seed}", i + 1, seeds.len(), recipe.name);
        train_one(recipe_path, recipe.clone().with_seed(seed, recipe_path)?, launcher)?;
    }
    Ok(())
}

/// Pretrains one run of `recipe`.
fn train_one(recipe_path: &Path, recipe: PretrainRecipe, launcher: &dyn Launcher) -> Result<()> {
    let (device, group) = launcher.launch(recipe.deterministic)?;
    let opts = launcher.options(device)?;
    let (summary, task) = pretrain(recipe_path, recipe, &opts, group)?;
    if summary.rank != 0 {
        return Ok(());
    }
    outln!("finished at step {} in {}", summary.final_step, summary.run_dir.display());
    if let (Some(first), Some(last)) = task.heldout_losses {
        outln!("held-out MLM loss {first:.4} -> {last:.4}");
    }
    if summary.nonfinite_skipped > 0 {
        outln!("{} step(s) skipped for non-finite loss", summary.nonfinite_skipped);
    }
    Ok(())
}

/// `indolm recipe check` of a pretraining recipe: the resolved recipe, its model configuration,
/// sources and outputs, after loading the checkpoint evaluations' data as `train` does.
pub(crate) fn check_recipe(path: &Path) -> Result<()> {
    let recipe = PretrainRecipe::load(path)?;
    // The checkpoint evaluations' data (pairs, IndoMMLU), as `train` loads it before starting.
    super::hooks::checkpoint_hooks(&recipe, Device::Cpu)?;
    out!("{}", recipe.resolved_toml());
    let tokenizer_path = recipe.resolve(&recipe.tokenizer.path);
    match TextTokenizer::from_path(&tokenizer_path) {
        Ok(tok) => {
            let config = recipe.model_config(tok.vocab_size(), path)?;
            outln!("\n# resolved model config.json\n{}", config.to_hf_json());
        }
        Err(e) => outln!(
            "\n# tokenizer not available yet ({e}); put one there (a folder with vocab.txt or tokenizer.json: IndoLEM's vocabulary for the paper recipes, docs/papers.md) or train indolm's own with `indolm tokenizer train --recipe {}`",
            path.display()
        ),
    }
    for source in &recipe.data.sources {
        let files = source.files(&recipe.base_dir)?;
        outln!("# source {} ({}): {} file(s), weight {}", source.name, source.lang, files.len(), source.weight);
    }
    if recipe.seeds.is_empty() {
        outln!("# run directory {}, TensorBoard {}", recipe.run_dir().display(), recipe.tensorboard_dir().display());
    } else {
        for &seed in &recipe.seeds {
            let run = recipe.clone().with_seed(seed, path)?;
            outln!(
                "# seed {seed}: run directory {}, TensorBoard {}",
                run.run_dir().display(),
                run.tensorboard_dir().display()
            );
        }
    }
    Ok(())
}
