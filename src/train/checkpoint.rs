//! Training checkpoints and the manager that owns them. `<run>/step-<N>/` holds
//! `model.safetensors` (HF names), `optimizer.safetensors` (AdamW moments),
//! `trainer_state.json` (step, data cursor, seed, recipe fingerprint, file checksums),
//! `config.json` and the tokenizer files, so it is also a model directory for every other
//! command. A checkpoint is written to a temporary directory, fsynced and renamed; the `latest`
//! pointer is updated last. The manager decides when a checkpoint is due (`every`), keeps the
//! weights of the newest `keep_last`, and restores a run from one.
use crate::data::mixture::Cursor;
use crate::data::tokenizer::TextTokenizer;
use crate::error::{Error, IoContext, Result};
use crate::files::{read_to_string, remove_stale_temps, sha256_file, write_atomic, write_json, Staging};
use crate::model::{model_dir, model_dir::save_model_files, weights, BertConfig};
use crate::optim::AdamW;
use crate::recipe::pretrain::{CheckpointSection, Fingerprint};
use crate::recipe::Recipe;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::nn::VarStore;

/// Everything besides weights and moments that a resumed run needs, as `trainer_state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainerState {
    /// Optimizer updates done.
    pub step: u64,
    /// The recipe's seed.
    pub seed: u64,
    /// Where the data mixture stands.
    pub cursor: Cursor,
    /// Micro-batches drawn (numbers the masking streams).
    pub micro_batches: u64,
    /// Steps whose update was skipped for a non-finite loss.
    pub nonfinite_skipped: u64,
    /// How every random choice is made, for the reader: all streams derive from `seed`.
    pub rng: String,
    /// The recipe sections a resume must not change (see [`Recipe::fingerprint`]).
    pub recipe_fingerprint: Fingerprint,
    /// Each source's name with the content key of the files its shard was made from: a resume
    /// on changed text is refused like one with a changed recipe (empty in older checkpoints).
    #[serde(default)]
    pub corpus: BTreeMap<String, String>,
    /// SHA-256 of the weight files, verified on resume.
    pub checksums: BTreeMap<String, String>,
    /// The loss of the last update.
    pub last_loss: Option<f64>,
}

/// The state's `rng` text.
pub const RNG_NOTE: &str = "no RNG state is stored because none is needed: the data mixture, the masks and torch's generators (reseeded before every step, for dropout) all derive from `seed` and the step or sequence number";

impl TrainerState {
    /// The state of a run that has not taken a step.
    pub fn start(recipe: &Recipe, cursor: Cursor, corpus: BTreeMap<String, String>) -> Self {
        TrainerState {
            step: 0,
            seed: recipe.seed,
            cursor,
            micro_batches: 0,
            nonfinite_skipped: 0,
            rng: RNG_NOTE.into(),
            recipe_fingerprint: recipe.fingerprint(),
            corpus,
            checksums: Default::default(),
            last_loss: None,
        }
    }
}

/// The checkpoints of one run directory: when they are due, writing, pruning, resuming.
pub struct CheckpointManager {
    run_dir: PathBuf,
    every: u64,
    keep_last: usize,
    /// Says nothing (the data-parallel ranks other than 0, which only read checkpoints).
    quiet: bool,
}

impl CheckpointManager {
    /// The manager of `run_dir` with the recipe's `[checkpoint]` settings.
    pub fn new(run_dir: PathBuf, settings: &CheckpointSection) -> Self {
        CheckpointManager { run_dir, every: settings.every, keep_last: settings.keep_last, quiet: false }
    }

    /// The same manager, silent: for the data-parallel ranks other than 0.
    pub fn quiet(self) -> Self {
        CheckpointManager { quiet: true, ..self }
    }

    /// The run directory (`<output_dir>/<name>`).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Makes the run directory ready. A new run refuses to overwrite an earlier one unless
    /// `overwrite` (which also deletes the run's TensorBoard folder); a resumed run keeps it.
    pub fn prepare(&self, resuming: bool, overwrite: bool, tensorboard_dir: &Path) -> Result<()> {
        let run_dir = &self.run_dir;
        if !resuming && self.has_checkpoints()? {
            if !overwrite {
                return Err(Error::invalid(
                    run_dir,
                    "this run already has checkpoints: pass --resume latest to continue it, or --overwrite to start over",
                ));
            }
            std::fs::remove_dir_all(run_dir).with_path(run_dir)?;
            if tensorboard_dir.exists() {
                std::fs::remove_dir_all(tensorboard_dir).with_path(tensorboard_dir)?;
            }
        }
        std::fs::create_dir_all(run_dir).with_path(run_dir)
    }

    /// Whether the run has written a checkpoint: a `latest` pointer or a `step-<N>` folder.
    pub fn has_checkpoints(&self) -> Result<bool> {
        Ok(self.run_dir.join("latest").exists() || !self.step_dirs()?.is_empty())
    }

    /// The run's `step-<N>` folders, oldest first.
    fn step_dirs(&self) -> Result<Vec<(u64, PathBuf)>> {
        if !self.run_dir.is_dir() {
            return Ok(Vec::new());
        }
        let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(&self.run_dir)
            .with_path(&self.run_dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.strip_prefix("step-").and_then(|n| n.parse().ok()).map(|n| (n, e.path()))
            })
            .collect();
        steps.sort();
        Ok(steps)
    }

    /// Whether step `step` is one of the recipe's checkpoint steps.
    pub fn due(&self, step: u64) -> bool {
        step.is_multiple_of(self.every)
    }

    /// Writes checkpoint `state.step` and points `latest` at it.
    pub fn save(
        &self,
        state: &TrainerState,
        config: &BertConfig,
        vs: &VarStore,
        optimizer: &AdamW,
        tokenizer: &TextTokenizer,
    ) -> Result<PathBuf> {
        let final_dir = step_dir(&self.run_dir, state.step);
        remove_stale_temps(&final_dir)?; // a killed save's leftovers (the run lock is held)
        let staging = Staging::new(&final_dir);
        let tmp = staging.path();
        save_model_files(tmp, config, vs, tokenizer)?;
        weights::write_file(&tmp.join("optimizer.safetensors"), &optimizer.state_tensors())?;
        let mut state = state.clone();
        for file in ["model.safetensors", "optimizer.safetensors"] {
            state.checksums.insert(file.into(), sha256_file(&tmp.join(file))?);
        }
        write_json(&tmp.join("trainer_state.json"), &state)?;
        std::fs::File::open(tmp).and_then(|d| d.sync_all()).with_path(tmp)?;
        if final_dir.exists() {
            std::fs::remove_dir_all(&final_dir).with_path(&final_dir)?;
        }
        staging.commit()?;
        write_atomic(&self.run_dir.join("latest"), format!("step-{}\n", state.step).as_bytes())?;
        Ok(final_dir)
    }

    /// Deletes the weights of all but the newest `keep_last` checkpoints, keeping their
    /// evaluation files (`*.json` other than the state) so curves survive.
    pub fn prune(&self) -> Result<()> {
        let steps: Vec<(u64, PathBuf)> =
            self.step_dirs()?.into_iter().filter(|(_, p)| p.join("model.safetensors").exists()).collect();
        let drop = steps.len().saturating_sub(self.keep_last);
        for (_, dir) in steps.into_iter().take(drop) {
            for file in ["model.safetensors", "optimizer.safetensors"] {
                let p = dir.join(file);
                if p.exists() {
                    std::fs::remove_file(&p).with_path(&p)?;
                }
            }
        }
        Ok(())
    }

    /// Where `--resume <which>` continues from, its state read and its weights' checksums
    /// verified: `None` to start a new run (no `--resume`, or `auto` on a run without
    /// checkpoints). `latest` (or `auto`) whose checkpoint is missing or corrupt is an error that
    /// names the newest valid checkpoint and how to resume from it.
    pub fn find_resume_point(&self, which: Option<&str>) -> Result<Option<ResumePoint>> {
        let dir = match which {
            None => return Ok(None),
            Some("auto") if !self.has_checkpoints()? => {
                if !self.quiet {
                    outln!("--resume auto: {} has no checkpoint yet, starting the run", self.run_dir.display());
                }
                return Ok(None);
            }
            Some("auto" | "latest") => self.latest_dir()?,
            Some(dir) => PathBuf::from(dir),
        };
        match load_state(&dir) {
            Ok(state) => Ok(Some(ResumePoint { dir, state })),
            Err(e) if which == Some("latest") || which == Some("auto") => Err(self.with_valid_alternative(e, &dir)),
            Err(e) => Err(e),
        }
    }

    /// The folder `latest` names; without the pointer, an error naming the newest valid one.
    fn latest_dir(&self) -> Result<PathBuf> {
        let pointer = self.run_dir.join("latest");
        if let Ok(name) = read_to_string(&pointer) {
            return Ok(self.run_dir.join(name.trim()));
        }
        if self.step_dirs()?.is_empty() {
            return Err(Error::MissingFile {
                path: pointer,
                hint: "this run has no checkpoint to resume from (`--resume auto` starts it when there is none)".into(),
            });
        }
        let missing = Error::MissingFile { path: pointer.clone(), hint: "the `latest` pointer is missing".into() };
        Err(self.with_valid_alternative(missing, &pointer))
    }

    /// `error` (about `bad`), followed by the newest checkpoint whose state and checksums are
    /// good and the command that resumes from it, or by the news that there is none.
    fn with_valid_alternative(&self, error: Error, bad: &Path) -> Error {
        let bad = bad.to_path_buf();
        let newest_valid = self
            .step_dirs()
            .ok()
            .into_iter()
            .flatten()
            .rev()
            .find(|(_, dir)| *dir != bad && dir.join("model.safetensors").exists() && load_state(dir).is_ok());
        let advice = match newest_valid {
            Some((step, dir)) => {
                format!("the newest valid checkpoint is step {step}: resume from it with --resume {}", dir.display())
            }
            None => "no valid checkpoint of this run remains: start over with --overwrite".into(),
        };
        Error::training("resume", format!("{error}; {advice}"))
    }

    /// Refuses a recipe that differs from the one the checkpoint recorded, unless `force`.
    pub fn check_recipe(&self, point: &ResumePoint, recipe: &Recipe, force: bool) -> Result<()> {
        let differing = recipe.differences_from(&point.state.recipe_fingerprint);
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

    /// Restores weights and optimizer moments from the checkpoint; returns its trainer state,
    /// now recording `recipe` and `corpus` (what the run continues with, which `--force` may have
    /// changed), so later checkpoints describe the run as it is.
    pub fn restore(
        &self,
        point: ResumePoint,
        recipe: &Recipe,
        corpus: BTreeMap<String, String>,
        vs: &VarStore,
        optimizer: &mut AdamW,
    ) -> Result<TrainerState> {
        let ResumePoint { dir, mut state } = point;
        // The same strict, shape-checked copy as any model load; nothing may be missing.
        let weights_path = dir.join("model.safetensors");
        model_dir::copy_into(vs, weights::read_file(&weights_path)?, &weights_path, &[])?;
        let opt_path = dir.join("optimizer.safetensors");
        optimizer.load_state(weights::read_file(&opt_path)?, state.step - state.nonfinite_skipped, &opt_path)?;
        state.recipe_fingerprint = recipe.fingerprint();
        state.corpus = corpus;
        if !self.quiet {
            outln!("resumed from {} at step {}", dir.display(), state.step);
        }
        Ok(state)
    }

    /// The step of the newest checkpoint `latest` points at, if any.
    pub fn latest_step(&self) -> Option<u64> {
        let name = read_to_string(&self.run_dir.join("latest")).ok()?;
        name.trim().strip_prefix("step-")?.parse().ok()
    }
}

/// A checkpoint to resume from: its folder and its (verified) trainer state.
pub struct ResumePoint {
    /// The `step-<N>` folder.
    pub dir: PathBuf,
    /// Its `trainer_state.json`.
    pub state: TrainerState,
}

/// `<run>/step-<step>`.
pub fn step_dir(run_dir: &Path, step: u64) -> PathBuf {
    run_dir.join(format!("step-{step}"))
}

/// Reads a checkpoint's trainer state and verifies the weight files' checksums.
pub fn load_state(dir: &Path) -> Result<TrainerState> {
    let path = dir.join("trainer_state.json");
    let state: TrainerState = serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    for (file, expected) in &state.checksums {
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
