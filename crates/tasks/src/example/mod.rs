//! A test-only task, added by following the guide's "Adding a task" steps (docs/architecture.md)
//! to show what a task declares and that the registry carries it everywhere without an edit
//! elsewhere: its recipe kind (`kind = "example"`), a seed salt of its own, its command
//! (`indolm finetune example`, with its own argument), its `recipe check`. Its training is
//! `indolm_train`'s example task's (steps 2 to 5); here the run loads the recipe and draws its
//! seeded numbers. Outside this folder it touched one file: `crates/tasks/src/lib.rs` (the
//! module line and the registration line).
use crate::registry::{Launcher, Salt, TaskDeclaration};
use indolm_core::recipe::{OldRecipes, RecipeKind};
use indolm_core::seeds::stream_rng;
use indolm_torch::error::{Error, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The salt of the example's one random purpose.
const EXAMPLE_DRAWS: u64 = 16;

/// The example's recipe: its kind, a name and seed, and how many numbers to draw.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExampleRecipe {
    /// `kind = "example"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    /// The run's name.
    name: String,
    /// Every draw derives from it.
    #[serde(default = "indolm_core::recipe::default_seed")]
    seed: u64,
    /// How many numbers a run draws (at least one).
    draws: usize,
}

impl ExampleRecipe {
    /// Reads and checks a recipe.
    fn load(path: &Path) -> Result<Self> {
        crate::registry::expect_kind(path, &TASK.kind)?;
        let mut recipe: ExampleRecipe = indolm_core::recipe::parse_toml(path)?;
        recipe.kind = Some(TASK.kind.name.to_string());
        if recipe.draws == 0 {
            return Err(Error::field(path, "draws", "expected at least 1, found 0"));
        }
        Ok(recipe)
    }

    /// The run's seeded numbers, the same for the same seed.
    fn draws(&self) -> Vec<u32> {
        let mut rng = stream_rng(self.seed, EXAMPLE_DRAWS, 0);
        (0..self.draws).map(|_| rng.random()).collect()
    }
}

/// `indolm finetune example`'s own arguments.
#[derive(clap::Args, Debug)]
struct ExampleArgs {
    /// The example recipe (TOML).
    recipe: PathBuf,
    /// Draw this many numbers instead of the recipe's `draws`.
    #[arg(long)]
    draws: Option<usize>,
}

/// `indolm finetune example`: the recipe's draws on the launched device, one a line.
fn run_command(matches: &clap::ArgMatches, launcher: &dyn Launcher) -> Result<()> {
    let args: ExampleArgs = TASK.arguments_of(matches)?;
    let mut recipe = ExampleRecipe::load(&args.recipe)?;
    recipe.draws = args.draws.unwrap_or(recipe.draws);
    let (device, _) = launcher.launch(false)?;
    let options = launcher.options(device)?;
    for n in recipe.draws() {
        indolm_core::outln!("{} {n} on {:?}", recipe.name, options.device);
    }
    Ok(())
}

/// `indolm recipe check` of an example recipe: the resolved recipe.
fn check_recipe(path: &Path) -> Result<()> {
    let recipe = ExampleRecipe::load(path)?;
    indolm_core::out!("{}", toml::to_string_pretty(&recipe).expect("recipes serialize"));
    Ok(())
}

/// The example task as the registry knows it.
pub(crate) const TASK: TaskDeclaration = TaskDeclaration {
    kind: RecipeKind { name: "example", command: "indolm finetune example", old_recipes: OldRecipes::Never },
    about: "A test-only task",
    salts: &[Salt { name: "EXAMPLE_DRAWS", value: EXAMPLE_DRAWS }],
    arguments: <ExampleArgs as clap::Args>::augment_args,
    run: run_command,
    check_recipe,
    parse_recipe: |path| indolm_core::recipe::parse_toml::<ExampleRecipe>(path).map(|_| ()),
};

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_torch::distributed::ProcessGroup;
    use indolm_train::engine::TrainOptions;
    use std::cell::Cell;
    use tch::Device;

    /// A launcher that records what it was asked.
    #[derive(Default)]
    struct Recorder {
        launched: Cell<bool>,
    }

    impl Launcher for Recorder {
        fn launch(&self, _deterministic: bool) -> Result<(Device, Option<ProcessGroup>)> {
            self.launched.set(true);
            Ok((Device::Cpu, None))
        }

        fn options(&self, device: Device) -> Result<TrainOptions> {
            Ok(TrainOptions::on(device))
        }
    }

    fn recipe(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("example.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_registry_carries_the_example_task_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        // The kind: read by every reader, named in their errors.
        let path = recipe(dir.path(), "kind = \"example\"\nname = \"ex\"\ndraws = 2\n");
        assert!(crate::registry::recipe_kinds().contains(&TASK.kind));
        let err = crate::pretrain::PretrainRecipe::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("this is a example recipe, run by `indolm finetune example`, not by `indolm train`"),
            "{err}"
        );
        let bad = recipe(dir.path(), "kind = \"exmaple\"\n");
        let err = crate::registry::check_recipe(&bad).unwrap_err().to_string();
        assert!(err.contains("expected one of pretrain, sentiment, summarize, translation, example"), "{err}");
        // `recipe check` dispatches to it.
        let path = recipe(dir.path(), "kind = \"example\"\nname = \"ex\"\ndraws = 2\n");
        crate::registry::check_recipe(&path).unwrap();
        let zero = recipe(dir.path(), "kind = \"example\"\nname = \"ex\"\ndraws = 0\n");
        let err = crate::registry::check_recipe(&zero).unwrap_err().to_string();
        assert!(err.contains("draws") && err.contains("expected at least 1, found 0"), "{err}");
        // The command: under `finetune`, with its own argument, parsed and run by the registry.
        let task = crate::registry::task_under(&["finetune"], "example").expect("registered under finetune");
        let finetune = clap::Command::new("finetune").subcommand(task.clap_command(|c| c));
        let path = recipe(dir.path(), "kind = \"example\"\nname = \"ex\"\ndraws = 2\n");
        let matches =
            finetune.try_get_matches_from(["finetune", "example", path.to_str().unwrap(), "--draws", "3"]).unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        assert_eq!(name, "example");
        let launcher = Recorder::default();
        (task.run)(sub, &launcher).unwrap();
        assert!(launcher.launched.get());
        // Its salt is its own (the registry's unit test checks them all), its draws seeded.
        let recipe = ExampleRecipe::load(&path).unwrap();
        assert_eq!(recipe.draws(), recipe.clone().draws());
        assert_eq!(recipe.draws().len(), 2);
    }
}
