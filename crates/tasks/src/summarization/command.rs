//! `indolm finetune summarize` and the summarization `recipe check`: the command's arguments, a
//! BertExt, BertAbs or BertExtAbs trained with its Table 4 rows, and the check of a recipe with
//! the split folders the command reads.
use super::recipe::SummarizeRecipe;
use super::train::run;
use crate::registry::{resolve_init, Launcher};
use indolm_core::files::read_to_string;
use indolm_core::{out, outln};
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};

/// `indolm finetune summarize`'s own arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct SummarizeArgs {
    /// The fine-tuning recipe (TOML).
    pub recipe: PathBuf,
    /// Start from this model directory (overrides the recipe's `init`).
    #[arg(long)]
    pub init: Option<PathBuf>,
}

/// `indolm finetune summarize` from its parsed command line.
pub(crate) fn run_command(matches: &clap::ArgMatches, launcher: &dyn Launcher) -> Result<()> {
    finetune(&super::TASK.arguments_of(matches)?, launcher)
}

/// `finetune summarize`: a BertExt, BertAbs or BertExtAbs, then its Table 4 rows.
pub(crate) fn finetune(args: &SummarizeArgs, launcher: &dyn Launcher) -> Result<()> {
    let recipe_path = args.recipe.as_path();
    let recipe = SummarizeRecipe::load(recipe_path)?;
    let init = resolve_init(recipe_path, args.init.as_deref(), recipe.init.as_deref())?;
    let (device, group) = launcher.launch(recipe.deterministic)?;
    let leader = group.as_ref().is_none_or(|g| g.rank() == 0);
    let dir = recipe.run_dir();
    let Some(results) = run(&recipe, &init, &launcher.options(device)?, group)? else {
        if leader {
            outln!("stopped before the end: run the same command with --resume auto to continue ({})", dir.display());
        }
        return Ok(());
    };
    outln!(
        "dev ROUGE-1/2/L before training {:.2}/{:.2}/{:.2}, best (step {}) {:.2}/{:.2}/{:.2}",
        results.dev_before.rouge1,
        results.dev_before.rouge2,
        results.dev_before.rouge_l,
        results.best_step,
        results.dev_best.rouge1,
        results.dev_best.rouge2,
        results.dev_best.rouge_l
    );
    outln!("{}", read_to_string(&dir.join(crate::RESULTS_MD))?);
    outln!("model in {}", dir.join("best").display());
    Ok(())
}

/// `indolm recipe check` of a summarization recipe: the resolved recipe, after checking that
/// the split folders it names exist.
pub(crate) fn check_recipe(path: &Path) -> Result<()> {
    let recipe = SummarizeRecipe::load(path)?;
    out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
    // The split folders `finetune summarize` reads (their articles are checked as it
    // loads them).
    let d = &recipe.data;
    for split in std::iter::once(&d.train_split).chain([&d.dev_split]).chain(&d.test_splits) {
        let dir = d.root.join(split);
        if !dir.is_dir() {
            return Err(Error::MissingFile {
                path: dir,
                hint: "a Liputan6 split folder named in [data] (the release's layout: canonical/{train,dev,test})"
                    .into(),
            });
        }
    }
    outln!("# a `finetune summarize` recipe: run folder {}", recipe.run_dir().display());
    Ok(())
}
