//! Pretraining subcommands: `train` (which assembles the recipe's checkpoint hooks from `eval`
//! and hands them to the trainer) and `recipe check`.
use clap::Subcommand;
use indolm_core::{out, outln};
use indolm_eval::bias::BiasHook;
use indolm_eval::indommlu::IndommluHook;
use indolm_eval::pairs::load_indobias;
use indolm_tasks::pretrain::train::pretrain;
use indolm_tasks::pretrain::PretrainRecipe;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::CheckpointHook;
use std::path::{Path, PathBuf};
use tch::Device;

#[derive(Subcommand, Debug)]
pub enum RecipeCommand {
    /// Parse and validate a recipe, then print its resolved values.
    Check { recipe: PathBuf },
}

/// Which seed `train` runs: `--seed N`, `--seed-index I` (the recipe's `seeds[I]`), or neither.
pub struct SeedChoice {
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--seed-index`.
    pub index: Option<usize>,
}

/// `indolm train`: pretrains the recipe (or one of its seeds, or each in turn) and sums the run
/// up.
pub fn train(recipe_path: &Path, choice: SeedChoice, args: &super::RunArgs, device: Device) -> Result<()> {
    let recipe = PretrainRecipe::load(recipe_path)?;
    let seed = match (choice.seed, choice.index) {
        (Some(s), _) => Some(s),
        (None, Some(i)) => Some(recipe.seed_at(i, recipe_path)?),
        (None, None) => None,
    };
    if let Some(seed) = seed {
        return train_one(recipe_path, recipe.with_seed(seed, recipe_path)?, args, device);
    }
    if recipe.seeds.is_empty() {
        return train_one(recipe_path, recipe, args, device);
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
        train_one(recipe_path, recipe.clone().with_seed(seed, recipe_path)?, args, device)?;
    }
    Ok(())
}

/// Pretrains one run of `recipe`.
fn train_one(recipe_path: &Path, recipe: PretrainRecipe, args: &super::RunArgs, device: Device) -> Result<()> {
    let (device, group) = super::launch(device, args.dist_timeout, recipe.deterministic)?;
    let opts = args.options(device)?;
    let hooks = checkpoint_hooks(&recipe, opts.device)?;
    let (summary, task) = pretrain(recipe_path, recipe, &opts, hooks, group)?;
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

/// The evaluations the recipe's `[eval.bias]` and `[eval.indommlu]` run at every checkpoint.
fn checkpoint_hooks(recipe: &PretrainRecipe, device: Device) -> Result<Vec<Box<dyn CheckpointHook>>> {
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

/// `indolm recipe check`: the resolved recipe (defaults filled in) of any kind; for pretraining
/// also its model configuration, sources and outputs.
fn check_recipe(path: &Path) -> Result<()> {
    use indolm_core::recipe::RecipeKind;
    let kind = indolm_core::recipe::kind_of(path)?.map_or(RecipeKind::Pretrain, |(kind, _)| kind);
    match kind {
        RecipeKind::Summarize => {
            let recipe = indolm_tasks::summarization::train::SummarizeRecipe::load(path)?;
            out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
            // The split folders `finetune summarize` reads (their articles are checked as it
            // loads them).
            let d = &recipe.data;
            for split in std::iter::once(&d.train_split).chain([&d.dev_split]).chain(&d.test_splits) {
                let dir = d.root.join(split);
                if !dir.is_dir() {
                    return Err(Error::MissingFile {
                        path: dir,
                        hint:
                            "a Liputan6 split folder named in [data] (the release's layout: canonical/{train,dev,test})"
                                .into(),
                    });
                }
            }
            outln!("# a `finetune summarize` recipe: run folder {}", recipe.run_dir().display());
            return Ok(());
        }
        RecipeKind::Sentiment => {
            let recipe = indolm_tasks::sentiment::SentimentRecipe::load(path)?;
            // Every language's three files, as `finetune sentiment` reads them before training.
            for language in recipe.languages() {
                for split in ["train", "valid", "test"] {
                    indolm_tasks::sentiment::data::load_split(&recipe.data.root, &language, split)?;
                }
            }
            out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
            outln!(
                "# a `finetune sentiment` recipe: {} grid point(s) for each trained set; run folder {}",
                recipe.grid_points().len(),
                recipe.run_dir().display()
            );
            return Ok(());
        }
        RecipeKind::Pretrain => {}
    }
    let recipe = PretrainRecipe::load(path)?;
    // The checkpoint evaluations' data (pairs, IndoMMLU), as `train` loads it before starting.
    checkpoint_hooks(&recipe, Device::Cpu)?;
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

/// Runs a `recipe` subcommand.
pub fn run_recipe(command: RecipeCommand) -> Result<()> {
    match command {
        RecipeCommand::Check { recipe } => check_recipe(&recipe),
    }
}
