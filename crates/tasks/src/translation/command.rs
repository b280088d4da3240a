//! `indolm finetune translation` and the translation `recipe check`: the command's arguments,
//! the recipe's directions trained and tested with their results, and the check of a recipe with
//! the files the command reads.
use super::recipe::TranslationRecipe;
use super::run::run;
use crate::registry::{resolve_init, Launcher};
use indolm_core::{out, outln};
use indolm_torch::error::Result;
use std::path::{Path, PathBuf};

/// `indolm finetune translation`'s own arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct TranslationArgs {
    /// The fine-tuning recipe (TOML).
    pub recipe: PathBuf,
    /// Start from this model directory (overrides the recipe's `init`).
    #[arg(long)]
    pub init: Option<PathBuf>,
}

/// `indolm finetune translation` from its parsed command line.
pub(crate) fn run_command(matches: &clap::ArgMatches, launcher: &dyn Launcher) -> Result<()> {
    let args: TranslationArgs = super::TASK.arguments_of(matches)?;
    let recipe = TranslationRecipe::load(&args.recipe)?;
    let init = resolve_init(&args.recipe, args.init.as_deref(), recipe.init.as_deref())?;
    let (device, group) = launcher.launch(recipe.deterministic)?;
    let leader = group.as_ref().is_none_or(|g| g.rank() == 0);
    match run(&recipe, &init, &launcher.options(device)?, group)? {
        Some(results) => {
            outln!("\n{}", results.markdown());
            outln!("models, translations and results.{{json,md}} in {}", recipe.run_dir().display());
        }
        None if leader => outln!(
            "stopped before every direction was trained and tested: run the same command with --resume auto to continue ({})",
            recipe.run_dir().display()
        ),
        None => {}
    }
    Ok(())
}

/// `indolm recipe check` of a translation recipe: the three splits read and every direction's
/// columns found, as `finetune translation` does before training, then the resolved recipe.
pub(crate) fn check_recipe(path: &Path) -> Result<()> {
    let recipe = TranslationRecipe::load(path)?;
    let directions = recipe.directions()?;
    for split in ["train", "valid", "test"] {
        let data = super::data::ParallelSplit::load(&recipe.data.root, split)?;
        for d in &directions {
            data.column(d.source)?;
            data.column(d.target)?;
        }
    }
    out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
    let names: Vec<String> = directions.iter().map(|d| d.name()).collect();
    outln!(
        "# a `finetune translation` recipe: {} direction(s) ({}), one model each; run folder {}",
        names.len(),
        names.join(", "),
        recipe.run_dir().display()
    );
    Ok(())
}
