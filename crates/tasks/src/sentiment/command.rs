//! `indolm finetune sentiment` and the sentiment `recipe check`: the command's arguments, the
//! recipe's NusaX setting (or the same from every kept checkpoint of a pretraining run,
//! `--from-run`) with its results, and the check of a recipe with the files the command reads.
use super::recipe::SentimentRecipe;
use super::run::run;
use super::sweep::{sweep, SweepRequest, MACRO_F1_TAG};
use crate::registry::{resolve_init, Launcher};
use indolm_core::{out, outln};
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};

/// `indolm finetune sentiment`'s own arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct SentimentArgs {
    /// The fine-tuning recipe (TOML).
    pub recipe: PathBuf,
    /// Start from this model directory (overrides the recipe's `init`).
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Fine-tune from every kept checkpoint of this pretraining run instead (a resumable sweep,
    /// each into <recipe's run folder>/from-step-N/), and write each step's test macro-F1 into
    /// the pretraining run's TensorBoard beside its bias curves.
    #[arg(long, conflicts_with = "init")]
    pub from_run: Option<PathBuf>,
    /// With --from-run: every K-th kept checkpoint, from the first (default 1: all); the last
    /// is always swept.
    #[arg(long, requires = "from_run")]
    pub every: Option<usize>,
    /// With --from-run: the pretraining run's TensorBoard folder (default runs/<run>).
    #[arg(long, requires = "from_run")]
    pub logdir: Option<PathBuf>,
}

/// `indolm finetune sentiment` from its parsed command line.
pub(crate) fn run_command(matches: &clap::ArgMatches, launcher: &dyn Launcher) -> Result<()> {
    finetune(super::TASK.arguments_of(matches)?, launcher)
}

/// `indolm finetune sentiment`: the recipe's setting, or with `--from-run` the sweep over a
/// pretraining run's checkpoints.
pub(crate) fn finetune(args: SentimentArgs, launcher: &dyn Launcher) -> Result<()> {
    match args.from_run {
        Some(from_run) => {
            let request = SweepRequest { run: from_run, every: args.every.unwrap_or(1), tensorboard: args.logdir };
            sweep_sentiment(&args.recipe, &request, launcher)
        }
        None => finetune_sentiment(&args.recipe, args.init.as_deref(), launcher),
    }
}

/// `finetune sentiment`: the recipe's NusaX setting, then its results table.
fn finetune_sentiment(recipe_path: &Path, init: Option<&Path>, launcher: &dyn Launcher) -> Result<()> {
    let recipe = SentimentRecipe::load(recipe_path)?;
    let init = resolve_init(recipe_path, init, recipe.init.as_deref())?;
    let (device, group) = launcher.launch(recipe.deterministic)?;
    let leader = group.as_ref().is_none_or(|g| g.rank() == 0);
    match run(&recipe, &init, &launcher.options(device)?, group)? {
        Some(results) => {
            outln!("\n{}", results.markdown());
            outln!("models and results.{{json,md}} in {}", recipe.run_dir().display());
        }
        None if leader => outln!(
            "stopped before every set was trained and tested: run the same command with --resume auto to continue ({})",
            recipe.run_dir().display()
        ),
        None => {}
    }
    Ok(())
}

/// `finetune sentiment --from-run`: the recipe's setting fine-tuned from each kept checkpoint of
/// a pretraining run, then each step's test macro-F1.
fn sweep_sentiment(recipe_path: &Path, request: &SweepRequest, launcher: &dyn Launcher) -> Result<()> {
    let recipe = SentimentRecipe::load(recipe_path)?;
    if indolm_torch::distributed::Launch::from_env()?.is_some() {
        return Err(Error::argument(
            "--from-run",
            "a sweep runs in one process: start it without torchrun or srun (each checkpoint's fine-tuning is small)",
        ));
    }
    let (device, _) = launcher.launch(recipe.deterministic)?;
    let outcome = sweep(&recipe, request, &launcher.options(device)?)?;
    if !outcome.utilities.is_empty() {
        outln!("\n| step | test macro-F1 |\n|---:|---:|");
        for u in &outcome.utilities {
            outln!("| {} | {:.4} |", u.step, u.macro_f1);
        }
        outln!(
            "\nmacro-F1 per step in TensorBoard: {} (tags {MACRO_F1_TAG} and {MACRO_F1_TAG}/<language>)",
            outcome.board.display()
        );
    }
    if !outcome.complete {
        outln!(
            "stopped before every checkpoint was fine-tuned: run the same command with --resume auto to continue ({})",
            recipe.run_dir().display()
        );
        return Ok(());
    }
    outln!(
        "swept {} checkpoint(s): {} fine-tuned now, {} skipped (finished earlier); sub-runs in {}",
        outcome.utilities.len(),
        outcome.trained,
        outcome.skipped,
        recipe.run_dir().display()
    );
    outln!(
        "win rate and macro-F1 over the steps: indolm report bias-utility --run {} --out bias-utility.png",
        request.run.display()
    );
    Ok(())
}

/// `indolm recipe check` of a sentiment recipe: every language's three files read as
/// `finetune sentiment` reads them before training, then the resolved recipe.
pub(crate) fn check_recipe(path: &Path) -> Result<()> {
    let recipe = SentimentRecipe::load(path)?;
    // Every language's three files, as `finetune sentiment` reads them before training.
    for language in recipe.languages() {
        for split in ["train", "valid", "test"] {
            super::data::load_split(&recipe.data.root, &language, split)?;
        }
    }
    out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
    outln!(
        "# a `finetune sentiment` recipe: {} grid point(s) for each trained set; run folder {}",
        recipe.grid_points().len(),
        recipe.run_dir().display()
    );
    Ok(())
}
