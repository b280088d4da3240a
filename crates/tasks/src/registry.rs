//! What a task declares about itself, in its own folder, so that adding one is its folder plus
//! one line in the registration list ([`crate::TASKS`]): the kind of its recipes (name, command,
//! how an old recipe without `kind` shows it), its seed salts, its command-line arguments and
//! the run they start, and its `recipe check`. The command line builds its training commands
//! from the list, `recipe check` dispatches through it, and the recipe readers read the kinds
//! from it.
use indolm_core::recipe::RecipeKind;
use indolm_torch::distributed::ProcessGroup;
use indolm_torch::error::{Error, Result};
use indolm_train::engine::TrainOptions;
use std::path::Path;
use tch::Device;

/// A random purpose of a task: its name and salt (see [`indolm_core::seeds`]). Changing a value
/// changes every run that uses it.
#[derive(Debug, Clone, Copy)]
pub struct Salt {
    /// The purpose, as the constant is named.
    pub name: &'static str,
    /// The salt (below 256, see [`indolm_core::seeds::per_step`]).
    pub value: u64,
}

/// How a training command starts the run a task sets up: the command line implements it from
/// its flags (`--resume`, `--dist-timeout`, …) and `--device`.
pub trait Launcher {
    /// Joins the data-parallel group when torchrun or srun launched this process (after asking
    /// for deterministic algorithms when `deterministic`); the device to train on and the group.
    fn launch(&self, deterministic: bool) -> Result<(Device, Option<ProcessGroup>)>;
    /// The engine's options on `device` (the device [`Self::launch`] gave).
    fn options(&self, device: Device) -> Result<TrainOptions>;
}

/// A task as it declares itself (`pub const TASK` in its folder).
#[derive(Debug, Clone, Copy)]
pub struct TaskDeclaration {
    /// Its recipes' kind; `kind.command` also places its command in the tree (`indolm train`,
    /// `indolm finetune sentiment`).
    pub kind: RecipeKind,
    /// The command's one-line description (`indolm -h`), without a final period.
    pub about: &'static str,
    /// Every random purpose of the task with its salt (the unit test refuses two purposes,
    /// of all tasks and of `indolm_core::seeds::salt`, sharing one).
    pub salts: &'static [Salt],
    /// Adds the command's own arguments (a `clap::Args`'s `augment_args`); the command line adds
    /// the flags every training command shares after them.
    pub arguments: fn(clap::Command) -> clap::Command,
    /// Runs the command: its parsed arguments (the shared flags among them, read through the
    /// launcher) and how to start.
    pub run: fn(&clap::ArgMatches, &dyn Launcher) -> Result<()>,
    /// `indolm recipe check`: loads and validates a recipe, checks what the command reads before
    /// training, and prints the resolved recipe.
    pub check_recipe: fn(&Path) -> Result<()>,
    /// Reads a file as this kind's recipe schema, unvalidated (the guide's check asks it which
    /// keys it accepts).
    pub parse_recipe: fn(&Path) -> Result<()>,
}

impl TaskDeclaration {
    /// The words of its command after `indolm`: `["train"]`, `["finetune", "sentiment"]`.
    pub(crate) fn command_path(&self) -> Vec<&'static str> {
        self.kind.command.split_whitespace().skip(1).collect()
    }

    /// The clap command of the task: its name, its own arguments, then those `shared` adds (the
    /// flags every training command has), and its description (set last: a flattened
    /// `clap::Args` sets its own).
    pub fn clap_command(&self, shared: impl FnOnce(clap::Command) -> clap::Command) -> clap::Command {
        let name = *self.command_path().last().expect("a task's command names a subcommand");
        shared((self.arguments)(clap::Command::new(name))).about(self.about).long_about(None)
    }

    /// The task's own arguments from the matches of its command.
    pub(crate) fn arguments_of<A: clap::FromArgMatches>(&self, matches: &clap::ArgMatches) -> Result<A> {
        A::from_arg_matches(matches).map_err(|e| Error::argument(self.kind.command, e.to_string()))
    }
}

/// The recipe kinds of the registered tasks, in the guide's order.
pub fn recipe_kinds() -> Vec<RecipeKind> {
    crate::TASKS.iter().map(|t| t.kind).collect()
}

/// The tasks whose command sits directly under `parent` (`[]`: the top level, `["finetune"]`).
pub fn tasks_under<'p>(parent: &'p [&'p str]) -> impl Iterator<Item = &'static TaskDeclaration> + 'p {
    crate::TASKS.iter().copied().filter(move |t| {
        let path = t.command_path();
        path.len() == parent.len() + 1 && path[..parent.len()] == *parent
    })
}

/// The task whose command is `name` under `parent`.
pub fn task_under(parent: &[&str], name: &str) -> Option<&'static TaskDeclaration> {
    tasks_under(parent).find(|t| t.command_path().last() == Some(&name))
}

/// Refuses the recipe at `path` unless it is of `kind` (see [`indolm_core::recipe::expect_kind`]).
pub fn expect_kind(path: &Path, kind: &RecipeKind) -> Result<()> {
    indolm_core::recipe::expect_kind(path, kind, &recipe_kinds())
}

/// `indolm recipe check`: the check of the recipe's kind (a file that is not TOML is read as the
/// kind of recipes without `kind`, whose reader names the line).
pub fn check_recipe(path: &Path) -> Result<()> {
    let kinds = recipe_kinds();
    let kind = match indolm_core::recipe::kind_of(path, &kinds)? {
        Some((kind, _)) => kind.name,
        None => {
            let fallback = kinds.iter().find(|k| matches!(k.old_recipes, indolm_core::recipe::OldRecipes::Otherwise));
            fallback.map_or("", |k| k.name)
        }
    };
    match crate::TASKS.iter().find(|t| t.kind.name == kind) {
        Some(task) => (task.check_recipe)(path),
        None => Err(Error::field(path, "kind", "no kind: add `kind = \"…\"` at the recipe's top")),
    }
}

/// The model to start from: `--init`, else the recipe's `init`.
pub(crate) fn resolve_init(
    recipe_path: &Path,
    cli: Option<&Path>,
    recipe: Option<&Path>,
) -> Result<std::path::PathBuf> {
    cli.or(recipe).map(Path::to_path_buf).ok_or_else(|| {
        Error::field(recipe_path, "init", "no model to start from: set `init` in the recipe or pass --init")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_core::seeds::{per_step, salt};

    /// Every salt of the registered tasks and of the layers below them.
    fn all_salts() -> Vec<(String, u64)> {
        let below = salt::ALL.iter().map(|(name, v)| (format!("seeds::salt::{name}"), *v));
        let tasks =
            crate::TASKS.iter().flat_map(|t| t.salts.iter().map(|s| (format!("{}::{}", t.kind.name, s.name), s.value)));
        below.chain(tasks).collect()
    }

    #[test]
    fn salts_are_distinct_and_fit_below_the_step_bits() {
        let salts = all_salts();
        for (i, (name, a)) in salts.iter().enumerate() {
            assert!(*a < 256, "{name} = {a} would collide with per_step's step bits");
            for (other, b) in &salts[i + 1..] {
                assert_ne!(a, b, "salts {name} and {other} are equal");
            }
        }
    }

    #[test]
    fn salts_keep_their_values() {
        // Runs resume bit-identically only if no salt moves: the values before the tasks
        // declared them.
        let value = |name: &str| all_salts().into_iter().find(|(n, _)| n == name).map(|(_, v)| v);
        for (name, v) in [
            ("pretrain::MASKING", 3),
            ("pretrain::PRETRAIN_TORCH", 4),
            ("pretrain::HELDOUT_MASKS", 5),
            ("sentiment::SENTIMENT_SHUFFLE", 7),
            ("sentiment::SENTIMENT_TORCH", 8),
            ("summarize::SUMMARIZATION_INIT", 10),
            ("summarize::SUMMARIZATION_SHUFFLE", 11),
            ("summarize::SUMMARIZATION_TORCH", 12),
        ] {
            assert_eq!(value(name), Some(v), "{name}");
        }
    }

    #[test]
    fn per_step_salts_never_meet_across_purposes() {
        let torch: Vec<u64> = (0..1000).map(|s| per_step(crate::pretrain::salt::PRETRAIN_TORCH, s)).collect();
        let other: Vec<u64> = (0..1000).map(|s| per_step(crate::summarization::salt::SUMMARIZATION_TORCH, s)).collect();
        assert!(torch.iter().all(|t| !other.contains(t)));
    }

    #[test]
    fn kinds_and_commands_are_distinct_and_the_shipped_ones_stay() {
        let kinds = recipe_kinds();
        for (i, a) in kinds.iter().enumerate() {
            for b in &kinds[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.command, b.command);
            }
        }
        let shipped: Vec<(&str, &str)> = kinds.iter().take(3).map(|k| (k.name, k.command)).collect();
        assert_eq!(
            shipped,
            [
                ("pretrain", "indolm train"),
                ("sentiment", "indolm finetune sentiment"),
                ("summarize", "indolm finetune summarize")
            ]
        );
        assert_eq!(tasks_under(&[]).map(|t| t.kind.name).collect::<Vec<_>>(), ["pretrain"]);
        assert_eq!(task_under(&["finetune"], "summarize").map(|t| t.kind.name), Some("summarize"));
    }

    #[test]
    fn an_old_recipe_is_read_as_the_kind_its_keys_show() {
        let dir = tempfile::tempdir().unwrap();
        let kinds = recipe_kinds();
        let guess = |text: &str| {
            let path = dir.path().join("old.toml");
            std::fs::write(&path, text).unwrap();
            indolm_core::recipe::kind_of(&path, &kinds).unwrap().map(|(k, _)| k.name)
        };
        assert_eq!(guess("task = \"ext\"\n[data]\nsetting = \"x\"\n"), Some("summarize"));
        assert_eq!(guess("name = \"a\"\n[data]\nsetting = \"x\"\n"), Some("sentiment"));
        assert_eq!(guess("name = \"a\"\n[data]\nroot = \"x\"\n"), Some("pretrain"));
    }
}
