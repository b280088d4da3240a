//! Pretraining subcommands: `train` (which assembles the recipe's checkpoint hooks from `eval`
//! and hands them to the trainer) and `recipe check`.
use clap::Subcommand;
use indolm::data::tokenizer::TextTokenizer;
use indolm::error::Result;
use indolm::eval::bias::BiasHook;
use indolm::eval::indommlu::IndommluHook;
use indolm::eval::pairs::load_indobias;
use indolm::hooks::CheckpointHook;
use indolm::recipe::Recipe;
use indolm::train::trainer::{TrainOptions, Trainer};
use indolm::{out, outln};
use std::path::{Path, PathBuf};
use tch::Device;

#[derive(Subcommand, Debug)]
pub enum RecipeCommand {
    /// Parse and validate a recipe, then print its resolved values.
    Check { recipe: PathBuf },
}

/// `indolm train`: pretrains the recipe and sums the run up.
pub fn train(recipe_path: &Path, opts: &TrainOptions, dist_timeout: std::time::Duration) -> Result<()> {
    let recipe = Recipe::load(recipe_path)?;
    let launch = indolm::dist::Launch::from_env()?;
    // Under torchrun or srun on GPUs, each process takes the GPU of its local rank.
    let mut opts = opts.clone();
    if let (Some(launch), true) = (&launch, opts.device.is_cuda()) {
        opts.device = indolm::device::parse_device(&format!("cuda:{}", launch.local_rank))?;
    }
    let opts = &opts;
    if recipe.deterministic {
        // Read by cuBLAS when its first handle is made: without it, deterministic algorithms
        // refuse cuBLAS's matrix products on CUDA. Set before anything runs there, and before
        // NCCL's group is made (which reads the switch, too).
        if std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
            std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
        }
        indolm::device::kernels::set_deterministic(true)?;
    }
    let hooks = checkpoint_hooks(&recipe, opts.device)?;
    let group = match launch {
        Some(launch) => match opts.device {
            Device::Cuda(index) => Some(indolm::dist::ProcessGroup::nccl(&launch, index, dist_timeout)?),
            _ => Some(indolm::dist::ProcessGroup::gloo(&launch, dist_timeout)?),
        },
        None => None,
    };
    let summary = Trainer::new(recipe_path, recipe, opts, hooks, group)?.run()?;
    if summary.rank != 0 {
        return Ok(());
    }
    outln!("finished at step {} in {}", summary.final_step, summary.run_dir.display());
    if let (Some(first), Some(last)) = (summary.first_heldout_loss, summary.last_heldout_loss) {
        outln!("held-out MLM loss {first:.4} -> {last:.4}");
    }
    if summary.nonfinite_skipped > 0 {
        outln!("{} step(s) skipped for non-finite loss", summary.nonfinite_skipped);
    }
    Ok(())
}

/// The evaluations the recipe's `[eval.bias]` and `[eval.indommlu]` run at every checkpoint.
fn checkpoint_hooks(recipe: &Recipe, device: Device) -> Result<Vec<Box<dyn CheckpointHook>>> {
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

/// `indolm recipe check`: the resolved recipe, its model configuration, sources and outputs.
fn check_recipe(path: &Path) -> Result<()> {
    let recipe = Recipe::load(path)?;
    out!("{}", recipe.resolved_toml());
    let tokenizer_path = recipe.resolve(&recipe.tokenizer.path);
    match TextTokenizer::from_path(&tokenizer_path) {
        Ok(tok) => {
            let config = recipe.model_config(tok.vocab_size(), path)?;
            outln!("\n# resolved model config.json\n{}", config.to_hf_json());
        }
        Err(e) => outln!(
            "\n# tokenizer not available yet ({e}); train it with `indolm tokenizer train --recipe {}`",
            path.display()
        ),
    }
    for source in &recipe.data.sources {
        let files = source.files(&recipe.base_dir)?;
        outln!("# source {} ({}): {} file(s), weight {}", source.name, source.lang, files.len(), source.weight);
    }
    outln!("# run directory {}, TensorBoard {}", recipe.run_dir().display(), recipe.tensorboard_dir().display());
    Ok(())
}

/// Runs a `recipe` subcommand.
pub fn run_recipe(command: RecipeCommand) -> Result<()> {
    match command {
        RecipeCommand::Check { recipe } => check_recipe(&recipe),
    }
}
