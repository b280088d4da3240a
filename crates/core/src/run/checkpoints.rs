//! A run's checkpoints: the atomic save and the checksum-verified restore of a set of named
//! parts, whatever the task. A checkpoint `<run>/step-<N>/` holds the files of its file parts
//! (a model's directory: so it is also a model directory for every other command; each
//! optimizer's state) and `trainer_state.json`: the step, the seed, the recipe's fingerprint, the
//! checksums of every file that holds tensors, the best evaluation so far, and each value part
//! (the data's cursor, the task's state) under its name. The store knows none of the parts: it
//! writes them, checksums what their writers say holds tensors, and on resume verifies those
//! checksums before the parts' owners read them back. A checkpoint is written to a temporary
//! folder, fsynced, renamed, and read back (every checksum) before `latest` points at it and
//! before any older checkpoint's tensors are deleted. The store decides when a checkpoint is due,
//! keeps the tensors of the newest `keep_last` and the weights parts of every
//! `keep_weights_every`-th ([`Retention`]), keeps the best weights apart in `<run>/best/`, and
//! finds where a run resumes.
use super::layout::{RunLayout, PENDING_EVALUATION};
use crate::error::{Error, IoContext, Result};
use crate::files::{read_to_string, remove_stale_temps, sha256_file, write_json, Staging};
use crate::outputs::RunFile;
use crate::recipe::Fingerprint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file of a checkpoint's state.
pub(crate) const STATE_FILE: &str = "trainer_state.json";
/// The file beside the best weights saying which step they are and how they scored.
pub const BEST_FILE: &str = "best.json";

crate::declare_run_files!(CHECKPOINT_FILES: RunFile::Named(STATE_FILE), RunFile::Named(BEST_FILE));

/// Writes a file part into a checkpoint's folder and returns the names of the files it wrote
/// that hold tensors.
pub(crate) type WritePart<'a> = Box<dyn Fn(&Path) -> Result<Vec<String>> + 'a>;

/// One named part of a checkpoint. The store saves it, checksums and verifies it, and lets its
/// tensors go when the checkpoint is no longer among the newest `keep_last`, without knowing
/// what it is; on resume its owner reads it back from the verified folder
/// ([`ResumePoint::dir`]) or value ([`ResumePoint::value`]).
pub enum Part<'a> {
    /// Files written into the checkpoint's folder (a model's directory, an optimizer's state).
    /// The files the writer returns hold tensors: they are checksummed, verified by every
    /// reader, and deleted with the tensors of older checkpoints (unless they are `weights` and
    /// [`Retention`] keeps this checkpoint's weights); the others (a model's config and
    /// tokenizer) stay.
    Files {
        /// The part's name, for messages (`model`, `optimizer-dec`).
        name: String,
        /// The part is the model's weights (kept for good when the retention keeps them), not
        /// training state (an optimizer's moments, needed only to resume).
        weights: bool,
        /// Writes the files into the folder it is given.
        write: WritePart<'a>,
    },
    /// A JSON value (the data's cursor, a task's state), kept in `trainer_state.json` under
    /// its name.
    Value {
        /// Its name: a key of `trainer_state.json` that the state's own fields do not use.
        name: String,
        /// The value.
        value: serde_json::Value,
    },
}

impl<'a> Part<'a> {
    /// A file part of training state (needed only to resume).
    pub fn files(name: impl Into<String>, write: impl Fn(&Path) -> Result<Vec<String>> + 'a) -> Self {
        Part::Files { name: name.into(), weights: false, write: Box::new(write) }
    }

    /// A file part holding the model's weights.
    pub fn weights(name: impl Into<String>, write: impl Fn(&Path) -> Result<Vec<String>> + 'a) -> Self {
        Part::Files { name: name.into(), weights: true, write: Box::new(write) }
    }

    /// A value part.
    pub fn value<T: Serialize + ?Sized>(name: impl Into<String>, value: &T) -> Self {
        Part::Value {
            name: name.into(),
            value: serde_json::to_value(value).expect("checkpoint values serialize to JSON"),
        }
    }
}

/// How a run starts, for [`CheckpointStore::prepare`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    /// From a checkpoint.
    pub resuming: bool,
    /// `--resume auto` was asked (and found no checkpoint, when not `resuming`).
    pub auto: bool,
    /// `--overwrite`.
    pub overwrite: bool,
}

/// Which checkpoints keep what: the newest `keep_last` their whole training state (to resume
/// from), and every `keep_weights_every`-th their model's weights for good (to evaluate or
/// fine-tune later: a checkpoint that keeps only its weights is a model directory, not a point
/// to resume from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A checkpoint every this many steps.
    pub every: u64,
    /// The newest this many checkpoints keep everything.
    pub keep_last: usize,
    /// The weights of the checkpoints at multiples of `every × keep_weights_every` steps are
    /// never deleted (1: every checkpoint's); 0: only those of the newest `keep_last`.
    pub keep_weights_every: u64,
}

impl Retention {
    /// Whether the checkpoint of `step` keeps its weights for good.
    pub(crate) fn keeps_weights(&self, step: u64) -> bool {
        self.keep_weights_every > 0 && step.is_multiple_of(self.every * self.keep_weights_every)
    }
}

/// Everything besides tensors that a resumed run needs, as `trainer_state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainerState {
    /// Optimizer updates done.
    pub step: u64,
    /// The recipe's seed.
    pub seed: u64,
    /// Steps whose update was skipped for a non-finite loss.
    pub nonfinite_skipped: u64,
    /// How every random choice is made, for the reader: all streams derive from `seed`.
    pub rng: String,
    /// The recipe settings a resume must not change.
    pub recipe_fingerprint: Fingerprint,
    /// SHA-256 of the tensor files, verified on resume.
    pub checksums: BTreeMap<String, String>,
    /// Which of those files are the model's weights (the others are training state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_files: Vec<String>,
    /// The loss of the last update.
    pub last_loss: Option<f64>,
    /// The best evaluation so far (tasks that keep best weights).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<BestState>,
    /// Training stopped early (`patience` evaluations without a better score): the run is over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub early_stopped: bool,
    /// The checkpoint's value parts by name (the data's cursor, the task's state), kept at the
    /// top level of the file.
    #[serde(flatten)]
    pub values: serde_json::Map<String, serde_json::Value>,
}

/// The keys of `trainer_state.json` that are the state's own: no value part may take them.
const STATE_KEYS: [&str; 10] = [
    "step",
    "seed",
    "nonfinite_skipped",
    "rng",
    "recipe_fingerprint",
    "checksums",
    "weight_files",
    "last_loss",
    "best",
    "early_stopped",
];

/// The state's `rng` text.
pub(crate) const RNG_NOTE: &str = "no RNG state is stored because none is needed: the data order, the masks and torch's generators (reseeded before every step, for dropout) all derive from `seed` and the step or sequence number";

impl TrainerState {
    /// The state of a run that has not taken a step.
    pub fn start(seed: u64, recipe_fingerprint: Fingerprint) -> Self {
        TrainerState {
            step: 0,
            seed,
            nonfinite_skipped: 0,
            rng: RNG_NOTE.into(),
            recipe_fingerprint,
            checksums: BTreeMap::new(),
            weight_files: Vec::new(),
            last_loss: None,
            best: None,
            early_stopped: false,
            values: serde_json::Map::new(),
        }
    }

    /// The value part `name`, read as `T`; `None` when absent.
    pub fn value<T: serde::de::DeserializeOwned>(&self, name: &str, dir: &Path) -> Result<Option<T>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(v) => serde_json::from_value(v.clone())
                .map(Some)
                .map_err(|e| Error::invalid(dir.join(STATE_FILE), format!("field `{name}`: {e}"))),
        }
    }
}

/// The best evaluation so far: which step, its score, and how many evaluations since then did
/// not beat it (early stopping).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BestState {
    /// The step whose weights are in `<run>/best/`.
    pub step: u64,
    /// Its score (higher is better).
    pub score: f64,
    /// What the score is (`valid macro-F1`, `dev ROUGE (mean of 1/2/L)`).
    pub metric: String,
    /// Evaluations since the best that did not beat it.
    pub since: u64,
}

/// What a checkpoint holds: its parts, in the order they are written.
pub struct CheckpointContents<'a> {
    /// The parts (names unique).
    pub parts: Vec<Part<'a>>,
    /// Evaluations are to run on this checkpoint: it is marked pending
    /// ([`crate::run::layout::PENDING_EVALUATION`]) until [`CheckpointStore::evaluated`].
    pub evaluations: bool,
}

/// A checkpoint to resume from: its folder and its (verified) state.
pub struct ResumePoint {
    /// The `step-<N>` folder.
    pub dir: PathBuf,
    /// Its `trainer_state.json`.
    pub state: TrainerState,
}

impl ResumePoint {
    /// The value part `name`; an error naming the state file when the checkpoint has none (it
    /// is then not a checkpoint of this kind of run).
    pub fn value<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.state.value(name, &self.dir)?.ok_or_else(|| {
            Error::invalid(self.dir.join(STATE_FILE), format!("no `{name}`: not a checkpoint of this kind"))
        })
    }
}

/// The checkpoints of one run: when they are due, writing, pruning, resuming, the best weights.
pub struct CheckpointStore {
    layout: RunLayout,
    retention: Retention,
    /// Says nothing (the data-parallel ranks other than 0, which only read checkpoints).
    quiet: bool,
}

impl CheckpointStore {
    /// The store of the run at `layout`, keeping what `retention` says.
    pub fn new(layout: RunLayout, retention: Retention) -> Self {
        CheckpointStore { layout, retention, quiet: false }
    }

    /// The same store, silent: for the data-parallel ranks other than 0.
    pub(crate) fn quiet(self) -> Self {
        CheckpointStore { quiet: true, ..self }
    }

    /// The run's layout.
    pub fn layout(&self) -> &RunLayout {
        &self.layout
    }

    /// The run folder.
    pub(crate) fn run_dir(&self) -> &Path {
        self.layout.dir()
    }

    /// Makes the run folder ready. A new run refuses to overwrite an earlier one unless
    /// `overwrite` (which also deletes the run's TensorBoard folder, when the two hold only what
    /// indolm wrote and neither holds one of `inputs`); a resumed run keeps it. An earlier start
    /// that wrote evaluations or a log but no checkpoint counts as an earlier run too, except
    /// under `--resume auto`, which starts it again from scratch: what it wrote is removed then,
    /// so no evaluation of the earlier start is read as one of this run's.
    pub(crate) fn prepare(&self, start: Start, tensorboard_dir: &Path, inputs: &[PathBuf]) -> Result<()> {
        let run_dir = self.layout.dir();
        let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        if !start.resuming && self.layout.has_checkpoints()? {
            if !start.overwrite {
                return Err(Error::invalid(
                    run_dir,
                    "this run already has checkpoints: pass --resume latest to continue it, or --overwrite to start over",
                ));
            }
            super::ownership::remove_run(run_dir, tensorboard_dir, &inputs)?;
        } else if !start.resuming && self.layout.has_outputs()? {
            if !(start.overwrite || start.auto) {
                return Err(Error::invalid(
                    run_dir,
                    "holds what an earlier start of this run wrote before its first checkpoint (evaluations, a log): pass --overwrite (or --resume auto) to start over",
                ));
            }
            super::ownership::remove_run(run_dir, tensorboard_dir, &inputs)?;
        }
        std::fs::create_dir_all(run_dir).with_path(run_dir)
    }

    /// Whether step `step` is one of the recipe's checkpoint steps.
    pub fn due(&self, step: u64) -> bool {
        step.is_multiple_of(self.retention.every)
    }

    /// Writes checkpoint `state.step`, reads it back, points `latest` at it, and only then
    /// deletes the weights of checkpoints older than the newest `keep_last`.
    pub fn save(&self, state: &TrainerState, contents: &CheckpointContents) -> Result<PathBuf> {
        let final_dir = self.layout.step_dir(state.step);
        remove_stale_temps(&final_dir)?; // a killed save's leftovers (the run lock is held)
        let staging = Staging::new(&final_dir);
        let tmp = staging.path();
        std::fs::create_dir_all(tmp).with_path(tmp)?;
        let mut state = state.clone();
        state.values.clear(); // the checkpoint's values are its parts, not a resumed one's
        state.weight_files.clear();
        let mut names = std::collections::BTreeSet::new();
        for part in &contents.parts {
            match part {
                Part::Files { name, weights, write } => {
                    assert!(names.insert(name.clone()), "checkpoint part `{name}` given twice");
                    for file in write(tmp)? {
                        let path = tmp.join(&file);
                        assert!(
                            crate::files::plain_file_name(&file).is_ok() && path.is_file(),
                            "checkpoint part `{name}` names {file:?}, not a file it wrote into the checkpoint"
                        );
                        assert!(
                            crate::outputs::declared(&file),
                            "checkpoint part `{name}` writes {file:?}, which no writer declares (declare_run_files!)"
                        );
                        state.checksums.insert(file.clone(), sha256_file(&path)?);
                        if *weights {
                            state.weight_files.push(file);
                        }
                    }
                }
                Part::Value { name, value } => {
                    assert!(names.insert(name.clone()), "checkpoint part `{name}` given twice");
                    assert!(
                        !STATE_KEYS.contains(&name.as_str()),
                        "checkpoint part `{name}` takes a key of the state's own"
                    );
                    state.values.insert(name.clone(), value.clone());
                }
            }
        }
        write_json(&tmp.join(STATE_FILE), &state)?;
        if contents.evaluations {
            let marker = tmp.join(PENDING_EVALUATION);
            std::fs::write(&marker, format!("{}\n", state.step)).with_path(&marker)?;
        }
        std::fs::File::open(tmp).and_then(|d| d.sync_all()).with_path(tmp)?;
        if final_dir.exists() {
            // A run resumed from an earlier checkpoint writes this step again.
            super::ownership::remove_run_folder(&final_dir)?;
        }
        staging.commit()?;
        // Read back before anything older is given up: a checkpoint that does not verify
        // (a disk that lost the write) leaves `latest` and the older weights as they were.
        load_state(&final_dir)?;
        self.layout.point_latest_at(state.step)?;
        self.prune()?;
        Ok(final_dir)
    }

    /// Writes the best weights so far, with `best.json` (the step and its score), replacing the
    /// previous best as one unit.
    pub fn save_best(&self, best: &BestState, model: &dyn Fn(&Path) -> Result<()>) -> Result<PathBuf> {
        let dir = self.layout.best_dir();
        remove_stale_temps(&dir)?;
        let staging = Staging::new(&dir);
        model(staging.path())?;
        write_json(&staging.path().join(BEST_FILE), best)?;
        std::fs::File::open(staging.path()).and_then(|d| d.sync_all()).with_path(staging.path())?;
        // Moved aside, then replaced: at every moment one complete `best/` or its old copy exists.
        let old = dir.with_file_name(format!(".{}.old", crate::run::layout::BEST_DIR));
        if old.exists() {
            std::fs::remove_dir_all(&old).with_path(&old)?;
        }
        if dir.exists() {
            std::fs::rename(&dir, &old).with_path(&dir)?;
        }
        staging.commit()?;
        if old.exists() {
            std::fs::remove_dir_all(&old).with_path(&old)?;
        }
        Ok(dir)
    }

    /// The checkpoints whose evaluations have not completed (marked pending) and whose weights
    /// are there to redo them, oldest first.
    pub fn pending_evaluations(&self) -> Result<Vec<(u64, PathBuf)>> {
        Ok(self
            .layout
            .checkpoints()?
            .into_iter()
            .filter(|(_, dir)| dir.join(PENDING_EVALUATION).exists() && has_tensors(dir))
            .collect())
    }

    /// Marks the evaluations of the checkpoint in `dir` complete, and lets its weights go when
    /// they are no longer among the newest `keep_last`.
    pub fn evaluated(&self, dir: &Path) -> Result<()> {
        let marker = dir.join(PENDING_EVALUATION);
        if marker.exists() {
            std::fs::remove_file(&marker).with_path(&marker)?;
        }
        self.prune()
    }

    /// Deletes the tensors (weights, optimizer states) of all but the newest `keep_last`
    /// checkpoints, keeping their evaluation files and state so curves survive; the tensors of a
    /// checkpoint whose evaluations are pending stay until they are done.
    pub(crate) fn prune(&self) -> Result<()> {
        let steps: Vec<(u64, PathBuf)> =
            self.layout.checkpoints()?.into_iter().filter(|(_, p)| has_tensors(p)).collect();
        let steps: Vec<(u64, PathBuf)> =
            steps.into_iter().filter(|(_, p)| !p.join(PENDING_EVALUATION).exists()).collect();
        let drop = steps.len().saturating_sub(self.retention.keep_last);
        if drop == 0 {
            return Ok(());
        }
        let Some(_exclusive) = super::readers::try_exclusive(&self.layout)? else {
            if !self.quiet {
                eprintln!(
                    "note: another indolm process is reading this run's checkpoints: the weights of older checkpoints are kept until a later checkpoint finds it done"
                );
            }
            return Ok(());
        };
        for (step, dir) in steps.into_iter().take(drop) {
            remove_tensors(&dir, self.retention.keeps_weights(step))?;
        }
        Ok(())
    }

    /// Where `--resume <which>` continues from, its state read and its weights' checksums
    /// verified: `None` to start a new run (no `--resume`, or `auto` on a run without
    /// checkpoints). `latest` whose checkpoint is missing or corrupt is an error that names the
    /// newest valid checkpoint and how to resume from it; `auto` (what a requeued job runs)
    /// resumes from that newest valid checkpoint itself, saying so: a job preempted between
    /// writing a checkpoint and pointing `latest` at it must come back on its own.
    pub(crate) fn find_resume_point(&self, which: Option<&str>) -> Result<Option<ResumePoint>> {
        let dir = match which {
            None => return Ok(None),
            Some("auto") if !self.layout.has_checkpoints()? => {
                if !self.quiet {
                    outln!("--resume auto: {} has no checkpoint yet, starting the run", self.run_dir().display());
                }
                return Ok(None);
            }
            Some("auto" | "latest") => match (self.latest_dir(), which) {
                (Ok(dir), _) => dir,
                (Err(e), Some("auto")) => return self.newest_valid_instead(e).map(Some),
                (Err(e), _) => return Err(e),
            },
            Some(dir) => PathBuf::from(dir),
        };
        match load_state(&dir) {
            Ok(state) => Ok(Some(ResumePoint { dir, state })),
            Err(e) if which == Some("auto") => self.newest_valid_instead(e).map(Some),
            Err(e) if which == Some("latest") => Err(self.with_valid_alternative(e, &dir)),
            Err(e) => Err(e),
        }
    }

    /// `--resume auto` when `latest` cannot be used (`problem`): the newest checkpoint whose
    /// state and checksums are good, with a note; `problem` when there is none.
    fn newest_valid_instead(&self, problem: Error) -> Result<ResumePoint> {
        let newest = self.layout.checkpoints()?.into_iter().rev().find_map(|(step, dir)| {
            let state = has_tensors(&dir).then(|| load_state(&dir).ok()).flatten()?;
            Some((step, dir, state))
        });
        match newest {
            Some((step, dir, state)) => {
                if !self.quiet {
                    outln!("--resume auto: {problem}; resuming from the newest valid checkpoint, step {step}");
                }
                Ok(ResumePoint { dir, state })
            }
            None => Err(Error::training(
                "resume",
                format!("{problem}; no valid checkpoint of this run remains: start over with --overwrite"),
            )),
        }
    }

    /// The folder `latest` names; without the pointer, an error naming the newest valid one.
    fn latest_dir(&self) -> Result<PathBuf> {
        if let Some(dir) = self.layout.latest_dir() {
            return Ok(dir);
        }
        let pointer = self.layout.latest_pointer();
        if self.layout.checkpoints()?.is_empty() {
            return Err(Error::MissingFile {
                path: pointer,
                hint: "this run has no checkpoint to resume from (`--resume auto` starts it when there is none)".into(),
            });
        }
        let problem = if pointer.exists() {
            let named = read_to_string(&pointer).unwrap_or_default();
            Error::invalid(
                &pointer,
                format!("names {}, not a checkpoint folder of this run (step-<N>)", crate::files::quoted(named.trim())),
            )
        } else {
            Error::MissingFile { path: pointer.clone(), hint: "the `latest` pointer is missing".into() }
        };
        Err(self.with_valid_alternative(problem, &pointer))
    }

    /// `error` (about `bad`), followed by the newest checkpoint whose state and checksums are
    /// good and the command that resumes from it, or by the news that there is none.
    fn with_valid_alternative(&self, error: Error, bad: &Path) -> Error {
        let bad = bad.to_path_buf();
        let newest_valid = self
            .layout
            .checkpoints()
            .ok()
            .into_iter()
            .flatten()
            .rev()
            .find(|(_, dir)| *dir != bad && has_tensors(dir) && load_state(dir).is_ok());
        let advice = match newest_valid {
            Some((step, dir)) => {
                format!("the newest valid checkpoint is step {step}: resume from it with --resume {}", dir.display())
            }
            None => "no valid checkpoint of this run remains: start over with --overwrite".into(),
        };
        Error::training("resume", format!("{error}; {advice}"))
    }

    /// Refuses to resume from `point` when the recipe differs from the one it was trained with in
    /// `differing` (dotted keys, from the recipe's fingerprint), unless `force`.
    pub fn check_recipe(&self, point: &ResumePoint, differing: &[String], force: bool) -> Result<()> {
        if !differing.is_empty() && !force {
            return Err(Error::invalid(
                &point.dir,
                format!(
                    "the recipe differs from the one this checkpoint was trained with in: {} (pass --force to resume anyway)",
                    differing.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The step of the newest checkpoint `latest` points at, if any.
    pub fn latest_step(&self) -> Option<u64> {
        self.layout.latest_step()
    }
}

/// The files of the checkpoint in `dir` that hold tensors, as its state lists them (each a plain
/// name inside `dir` that a writer declares: a state edited by hand cannot make pruning delete
/// anything else), with those that are the model's weights; `None` when its state cannot be
/// read.
fn tensor_files(dir: &Path) -> Option<(Vec<String>, Vec<String>)> {
    #[derive(Deserialize)]
    struct Listed {
        #[serde(default)]
        checksums: BTreeMap<String, String>,
        #[serde(default)]
        weight_files: Vec<String>,
    }
    let listed: Listed = serde_json::from_str(&read_to_string(&dir.join(STATE_FILE)).ok()?).ok()?;
    let files: Vec<String> = listed.checksums.into_keys().collect();
    let ours = |f: &String| crate::files::plain_file_name(f).is_ok() && crate::outputs::declared(f);
    files.iter().all(ours).then_some((files, listed.weight_files))
}

/// Whether the checkpoint in `dir` still has all its tensors (so that a run can resume from it):
/// its state lists some, and they are all there (older checkpoints keep their state without
/// them, or with their weights only).
fn has_tensors(dir: &Path) -> bool {
    tensor_files(dir).is_some_and(|(files, _)| !files.is_empty() && files.iter().all(|f| dir.join(f).is_file()))
}

/// Deletes the tensors of the checkpoint in `dir` (the files its state checksums), but its
/// model's weights when `keep_weights`; its other files, its state and its evaluations stay.
fn remove_tensors(dir: &Path, keep_weights: bool) -> Result<()> {
    let (files, weights) = tensor_files(dir).unwrap_or_default();
    for file in files.into_iter().filter(|f| !(keep_weights && weights.contains(f))) {
        let path = dir.join(file);
        if path.exists() {
            std::fs::remove_file(&path).with_path(&path)?;
        }
    }
    Ok(())
}

/// Deletes the tensors of every checkpoint of a finished run (a unit of a fine-tuning, whose
/// best weights are all that is used later) but the weights `retention` keeps for good; states
/// and evaluations stay.
pub fn release_checkpoint_weights(layout: &RunLayout, retention: &Retention) -> Result<()> {
    for (step, dir) in layout.checkpoints()? {
        remove_tensors(&dir, retention.keeps_weights(step))?;
    }
    Ok(())
}

/// The seed a run recorded: its newest checkpoint's `trainer_state.json`, read without verifying
/// the weights (a report needs only the seed, and old checkpoints keep their state without their
/// weights); `None` when no checkpoint has a readable state.
pub fn recorded_seed(layout: &RunLayout) -> Option<u64> {
    layout.checkpoints().ok()?.into_iter().rev().find_map(|(_, dir)| {
        let text = read_to_string(&dir.join(STATE_FILE)).ok()?;
        serde_json::from_str::<serde_json::Value>(&text).ok()?.get("seed")?.as_u64()
    })
}

/// Reads a checkpoint's state and verifies the tensor files' checksums.
pub fn load_state(dir: &Path) -> Result<TrainerState> {
    let path = dir.join(STATE_FILE);
    let state: TrainerState = serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    for (file, expected) in &state.checksums {
        crate::files::plain_file_name(file).map_err(|why| {
            Error::field(&path, "checksums", format!("{file:?} {why}: a checkpoint lists only its own files"))
        })?;
        let found = sha256_file(&dir.join(file))?;
        if &found != expected {
            return Err(Error::invalid(
                dir.join(file),
                format!("checksum mismatch (expected {expected}, found {found}): the file is corrupt"),
            ));
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint of two parts the store knows nothing of: `table` writes a tensor file and a
    /// note, `count` is a value.
    fn contents(count: u64, evaluations: bool) -> CheckpointContents<'static> {
        CheckpointContents {
            parts: vec![
                Part::files("table", move |dir: &Path| {
                    std::fs::write(dir.join("table.bin"), count.to_le_bytes()).unwrap();
                    std::fs::write(dir.join("table.txt"), "kept with the state").unwrap();
                    Ok(vec!["table.bin".to_string()])
                }),
                Part::value("count", &count),
            ],
            evaluations,
        }
    }

    crate::declare_run_files!(
        TEST_PART_FILES: RunFile::Named("table.bin"),
        RunFile::Named("w.bin"),
        RunFile::Named("m.bin"),
    );

    const RETAIN_1: Retention = Retention { every: 1, keep_last: 1, keep_weights_every: 0 };

    fn state(step: u64) -> TrainerState {
        TrainerState { step, ..TrainerState::start(7, Fingerprint::of(&[])) }
    }

    #[test]
    fn any_parts_are_saved_verified_pruned_and_read_back() {
        let root = tempfile::tempdir().unwrap();
        let store = CheckpointStore::new(RunLayout::new(root.path().join("run")), RETAIN_1).quiet();
        store.save(&state(1), &contents(10, false)).unwrap();
        let second = store.save(&state(2), &contents(20, false)).unwrap();
        let first = root.path().join("run/step-1");
        // The older checkpoint lost its tensors (keep_last 1) and kept its other files and state.
        assert!(!first.join("table.bin").exists() && first.join("table.txt").exists());
        assert!(first.join(STATE_FILE).exists() && second.join("table.bin").exists());
        let point = store.find_resume_point(Some("latest")).unwrap().unwrap();
        assert_eq!((point.state.step, point.value::<u64>("count").unwrap()), (2, 20));
        assert!(point.value::<u64>("cursor").unwrap_err().to_string().contains("no `cursor`"));
        // A tensor file that changed is refused, and `auto` finds no other valid checkpoint.
        std::fs::write(second.join("table.bin"), 99u64.to_le_bytes()).unwrap();
        let err = store.find_resume_point(Some("latest")).err().unwrap().to_string();
        assert!(err.contains("table.bin") && err.contains("checksum mismatch"), "{err}");
    }

    #[test]
    fn tensors_of_a_checkpoint_pending_evaluation_stay_until_it_is_evaluated() {
        let root = tempfile::tempdir().unwrap();
        let store = CheckpointStore::new(RunLayout::new(root.path().join("run")), RETAIN_1).quiet();
        let first = store.save(&state(1), &contents(10, true)).unwrap();
        store.save(&state(2), &contents(20, false)).unwrap();
        assert!(first.join("table.bin").exists());
        assert_eq!(store.pending_evaluations().unwrap(), vec![(1, first.clone())]);
        store.evaluated(&first).unwrap();
        assert!(!first.join("table.bin").exists() && store.pending_evaluations().unwrap().is_empty());
    }

    #[test]
    fn retention_keeps_the_weights_of_every_kth_checkpoint_and_resumes_only_from_whole_ones() {
        let root = tempfile::tempdir().unwrap();
        let retention = Retention { every: 1, keep_last: 1, keep_weights_every: 2 };
        let store = CheckpointStore::new(RunLayout::new(root.path().join("run")), retention).quiet();
        let contents = |step: u64| CheckpointContents {
            parts: vec![
                Part::weights("model", move |dir: &Path| {
                    std::fs::write(dir.join("w.bin"), step.to_le_bytes()).unwrap();
                    Ok(vec!["w.bin".to_string()])
                }),
                Part::files("moments", move |dir: &Path| {
                    std::fs::write(dir.join("m.bin"), step.to_le_bytes()).unwrap();
                    Ok(vec!["m.bin".to_string()])
                }),
            ],
            evaluations: false,
        };
        for step in 1..=4 {
            store.save(&state(step), &contents(step)).unwrap();
        }
        let has = |step: u64, file: &str| root.path().join(format!("run/step-{step}/{file}")).exists();
        let kept: Vec<(bool, bool)> = (1..=4).map(|s| (has(s, "w.bin"), has(s, "m.bin"))).collect();
        assert_eq!(kept, vec![(false, false), (true, false), (false, false), (true, true)]);
        assert!(load_state(&root.path().join("run/step-2")).unwrap_err().to_string().contains("m.bin"));
        // The newest whole checkpoint is the only one to resume from: with it corrupt, `auto`
        // finds none (step 2 holds weights only).
        std::fs::write(root.path().join("run/step-4/m.bin"), b"x").unwrap();
        let err = store.find_resume_point(Some("auto")).err().unwrap().to_string();
        assert!(err.contains("no valid checkpoint of this run remains"), "{err}");
    }

    #[test]
    fn a_state_listing_a_file_no_writer_declares_deletes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let layout = RunLayout::new(root.path().join("run"));
        let store = CheckpointStore::new(layout.clone(), RETAIN_1).quiet();
        let dir = store.save(&state(1), &contents(10, false)).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let text = std::fs::read_to_string(dir.join(STATE_FILE)).unwrap();
        std::fs::write(dir.join(STATE_FILE), text.replace("\"table.bin\"", "\"notes.txt\": \"0\", \"table.bin\""))
            .unwrap();
        release_checkpoint_weights(&layout, &RETAIN_1).unwrap();
        assert!(dir.join("notes.txt").exists() && dir.join("table.bin").exists());
    }

    #[test]
    #[should_panic(expected = "takes a key of the state's own")]
    fn a_value_part_cannot_take_a_key_of_the_state() {
        let root = tempfile::tempdir().unwrap();
        let store = CheckpointStore::new(RunLayout::new(root.path().join("run")), RETAIN_1).quiet();
        let contents = CheckpointContents { parts: vec![Part::value("step", &3)], evaluations: false };
        let _ = store.save(&state(1), &contents);
    }
}
