//! The layout of a run folder, in one place: every other module asks here for a checkpoint's
//! folder, the `latest` pointer, the evaluations between checkpoints or the best weights, and
//! nothing else spells or parses `step-<N>`.
//!
//! ```text
//! <output_dir>/<name>/
//!   step-<N>/          a checkpoint: weights, optimizer states, trainer_state.json (and the
//!                      evaluations made there: bias.json, ...); old ones keep only evaluations
//!   latest             the name of the newest checkpoint folder
//!   evals/step-<N>/    evaluations made between checkpoints
//!   best/              the weights with the best evaluation so far (fine-tuning), best.json
//!   <unit>/            a fine-tuning run's units (a language, a grid point), each a run folder
//! ```
use crate::error::{IoContext, Result};
use crate::files::{read_to_string, write_atomic};
use crate::outputs::RunFile;
use std::path::{Path, PathBuf};

/// The folder under a run that holds the evaluations made between checkpoints.
pub(crate) const EVALS_DIR: &str = "evals";
/// The folder under a run that holds the best weights.
pub const BEST_DIR: &str = "best";
/// The file naming the newest checkpoint folder.
pub(crate) const LATEST: &str = "latest";
/// The training log, one JSON line a logged step.
pub(crate) const TRAIN_LOG: &str = "train_log.jsonl";
/// In a checkpoint's folder while the evaluations that run on it (the checkpoint hooks) have
/// not completed: they are redone from its weights, which are kept until then.
pub const PENDING_EVALUATION: &str = "evaluation.pending";

/// The lock file readers of a run (`eval bias --run`) hold while they read its checkpoints.
pub(crate) const READERS_LOCK: &str = ".readers.lock";

crate::declare_run_files!(
    LAYOUT_FILES: RunFile::Named(LATEST),
    RunFile::Named(TRAIN_LOG),
    RunFile::Named(PENDING_EVALUATION),
    RunFile::Named(READERS_LOCK),
);

/// A checkpoint folder's name: `step-<N>`.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step}")
}

/// The step of a `step-<N>` folder name.
pub fn parse_step_dir_name(name: &str) -> Option<u64> {
    name.strip_prefix("step-")?.parse().ok()
}

/// The folder of one run, and the names inside it.
#[derive(Debug, Clone)]
pub struct RunLayout {
    dir: PathBuf,
}

impl RunLayout {
    /// The layout of the run folder `dir` (`<output_dir>/<name>`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RunLayout { dir: dir.into() }
    }

    /// The run folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<run>/step-<step>`: the checkpoint of `step`.
    pub fn step_dir(&self, step: u64) -> PathBuf {
        self.dir.join(step_dir_name(step))
    }

    /// `<run>/evals/step-<step>`: the evaluations made at `step` between checkpoints.
    pub fn evals_dir(&self, step: u64) -> PathBuf {
        self.dir.join(EVALS_DIR).join(step_dir_name(step))
    }

    /// `<run>/best`: the weights with the best evaluation so far.
    pub fn best_dir(&self) -> PathBuf {
        self.dir.join(BEST_DIR)
    }

    /// `<run>/<unit>`: a unit of a fine-tuning run (itself a run folder).
    pub fn unit(&self, name: &str) -> RunLayout {
        RunLayout::new(self.dir.join(name))
    }

    /// `<run>/.readers.lock`: held shared by processes that read the run's checkpoint weights
    /// (see [`crate::run::readers`]).
    pub(crate) fn readers_lock(&self) -> PathBuf {
        self.dir.join(READERS_LOCK)
    }

    /// `<run>/latest`.
    pub(crate) fn latest_pointer(&self) -> PathBuf {
        self.dir.join(LATEST)
    }

    /// The checkpoint folder `latest` names, if the pointer is there and names a `step-<N>`
    /// folder of this run (anything else, such as `../x` or an absolute path, is not followed).
    pub fn latest_dir(&self) -> Option<PathBuf> {
        let step = self.latest_step()?;
        Some(self.step_dir(step))
    }

    /// The step of the checkpoint `latest` names (`None` when it names no `step-<N>` folder).
    pub fn latest_step(&self) -> Option<u64> {
        let text = read_to_string(&self.latest_pointer()).ok()?;
        let name = text.trim();
        parse_step_dir_name(name).filter(|&step| step_dir_name(step) == name)
    }

    /// Points `latest` at the checkpoint of `step` (written to a temporary name and renamed).
    pub(crate) fn point_latest_at(&self, step: u64) -> Result<()> {
        write_atomic(&self.latest_pointer(), format!("{}\n", step_dir_name(step)).as_bytes())
    }

    /// The `step-<N>` folders of the run, oldest first.
    pub fn checkpoints(&self) -> Result<Vec<(u64, PathBuf)>> {
        step_dirs(&self.dir)
    }

    /// The `evals/step-<N>` folders of the run, oldest first.
    pub fn evaluations_between_checkpoints(&self) -> Result<Vec<(u64, PathBuf)>> {
        step_dirs(&self.dir.join(EVALS_DIR))
    }

    /// Whether the run has written a checkpoint: a `latest` pointer or a `step-<N>` folder.
    pub fn has_checkpoints(&self) -> Result<bool> {
        Ok(self.latest_pointer().exists() || !self.checkpoints()?.is_empty())
    }

    /// Whether the run has written anything besides checkpoints: evaluations between them, its
    /// training log.
    pub(crate) fn has_outputs(&self) -> Result<bool> {
        Ok(!self.evaluations_between_checkpoints()?.is_empty() || self.dir.join(TRAIN_LOG).exists())
    }
}

/// The `step-<N>` folders directly under `dir`, oldest first (none when `dir` does not exist).
/// A symlink named `step-<N>` is not one of them: pruning would delete weights in its target.
fn step_dirs(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .with_path(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| parse_step_dir_name(&e.file_name().to_string_lossy()).map(|n| (n, e.path())))
        .collect();
    steps.sort();
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_folders_list_by_step() {
        assert_eq!(parse_step_dir_name(&step_dir_name(25_000)), Some(25_000));
        for bad in ["step-", "step-x", "steps-3", "best", "latest", "step--1"] {
            assert_eq!(parse_step_dir_name(bad), None, "{bad}");
        }
        let dir = std::env::temp_dir().join(format!("indolm-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let run = RunLayout::new(&dir);
        assert!(!run.has_checkpoints().unwrap());
        for step in [20, 5, 100] {
            std::fs::create_dir_all(run.step_dir(step)).unwrap();
        }
        std::fs::create_dir_all(run.evals_dir(7)).unwrap();
        std::fs::write(dir.join("step-9"), "a file, not a checkpoint").unwrap();
        let steps: Vec<u64> = run.checkpoints().unwrap().into_iter().map(|(s, _)| s).collect();
        assert_eq!(steps, vec![5, 20, 100]);
        assert_eq!(run.evaluations_between_checkpoints().unwrap()[0].0, 7);
        assert_eq!(run.latest_step(), None);
        run.point_latest_at(20).unwrap();
        assert_eq!(run.latest_step(), Some(20));
        assert_eq!(run.latest_dir().unwrap(), run.step_dir(20));
        assert!(run.has_checkpoints().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
