//! The training commands and `recipe check`, built from the tasks' declarations
//! ([`indolm_tasks::TASKS`]): each task's command sits where its `kind.command` places it
//! (`indolm train` at the top, `indolm finetune <task>` under `finetune`), with the task's own
//! arguments followed by the flags every training command shares ([`super::RunArgs`]), and runs
//! by one call to the task; `recipe check` runs the check of the recipe's kind. A new task needs
//! no edit here.
use clap::{ArgMatches, Args, FromArgMatches, Subcommand};
use indolm_tasks::registry::{task_under, tasks_under, TaskDeclaration};
use indolm_torch::error::Result;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum RecipeCommand {
    /// Parse and validate a recipe, then print its resolved values.
    Check { recipe: PathBuf },
}

/// Runs a `recipe` subcommand.
pub fn run_recipe(command: RecipeCommand) -> Result<()> {
    match command {
        RecipeCommand::Check { recipe } => indolm_tasks::registry::check_recipe(&recipe),
    }
}

/// The training command of a task under `indolm` (`FINETUNE` false: `train`) or under
/// `indolm finetune` (true), parsed: the task and its command's matches.
#[derive(Debug, Clone)]
pub struct TaskCommand<const FINETUNE: bool> {
    task: &'static TaskDeclaration,
    matches: ArgMatches,
}

impl<const FINETUNE: bool> TaskCommand<FINETUNE> {
    /// The command the tasks of this level sit under.
    fn parent() -> &'static [&'static str] {
        if FINETUNE {
            &["finetune"]
        } else {
            &[]
        }
    }

    /// Runs the task on `device` with the shared flags of its command line.
    pub fn run(&self, device: tch::Device) -> Result<()> {
        let args = super::RunArgs::from_arg_matches(&self.matches)
            .map_err(|e| indolm_torch::error::Error::argument(self.task.kind.command, e.to_string()))?;
        (self.task.run)(&self.matches, &super::RunLauncher { args: &args, device })
    }
}

impl<const FINETUNE: bool> FromArgMatches for TaskCommand<FINETUNE> {
    fn from_arg_matches(matches: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let (name, sub) =
            matches.subcommand().ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
        let task = task_under(Self::parent(), name)
            .ok_or_else(|| clap::Error::raw(clap::error::ErrorKind::InvalidSubcommand, format!("no task `{name}`")))?;
        Ok(Self { task, matches: sub.clone() })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<const FINETUNE: bool> Subcommand for TaskCommand<FINETUNE> {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        tasks_under(Self::parent())
            .fold(command, |command, task| command.subcommand(task.clap_command(super::RunArgs::augment_args)))
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        Self::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        task_under(Self::parent(), name).is_some()
    }
}
