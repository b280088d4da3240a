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
use crate::files::{read_to_string, tmp_path, write_atomic, write_json};
use crate::model::{model_dir, model_dir::save_model_files, weights, BertConfig};
use crate::optim::AdamW;
use crate::recipe::pretrain::{CheckpointSection, Fingerprint};
use crate::recipe::Recipe;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
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
    /// SHA-256 of the weight files, verified on resume.
    pub checksums: BTreeMap<String, String>,
    /// The loss of the last update.
    pub last_loss: Option<f64>,
}

/// The state's `rng` text.
pub const RNG_NOTE: &str = "no RNG state is stored because none is needed: the data mixture, the masks and torch's generators (reseeded before every step, for dropout) all derive from `seed` and the step or sequence number";

impl TrainerState {
    /// The state of a run that has not taken a step.
    pub fn start(recipe: &Recipe, cursor: Cursor) -> Self {
        TrainerState {
            step: 0,
            seed: recipe.seed,
            cursor,
            micro_batches: 0,
            nonfinite_skipped: 0,
            rng: RNG_NOTE.into(),
            recipe_fingerprint: recipe.fingerprint(),
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
}

impl CheckpointManager {
    /// The manager of `run_dir` with the recipe's `[checkpoint]` settings.
    pub fn new(run_dir: PathBuf, settings: &CheckpointSection) -> Self {
        CheckpointManager { run_dir, every: settings.every, keep_last: settings.keep_last }
    }

    /// The run directory (`<output_dir>/<name>`).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Makes the run directory ready. A new run refuses to overwrite an earlier one unless
    /// `overwrite` (which also deletes the run's TensorBoard folder); a resumed run keeps it.
    pub fn prepare(&self, resuming: bool, overwrite: bool, tensorboard_dir: &Path) -> Result<()> {
        let run_dir = &self.run_dir;
        if !resuming && run_dir.join("latest").exists() {
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
        let staging = tmp_path(&final_dir);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).with_path(&staging)?;
        }
        save_model_files(&staging, config, vs, tokenizer)?;
        weights::write_file(&staging.join("optimizer.safetensors"), &optimizer.state_tensors())?;
        let mut state = state.clone();
        for file in ["model.safetensors", "optimizer.safetensors"] {
            state.checksums.insert(file.into(), sha256_file(&staging.join(file))?);
        }
        write_json(&staging.join("trainer_state.json"), &state)?;
        std::fs::File::open(&staging).and_then(|d| d.sync_all()).with_path(&staging)?;
        if final_dir.exists() {
            std::fs::remove_dir_all(&final_dir).with_path(&final_dir)?;
        }
        std::fs::rename(&staging, &final_dir).with_path(&final_dir)?;
        write_atomic(&self.run_dir.join("latest"), format!("step-{}\n", state.step).as_bytes())?;
        Ok(final_dir)
    }

    /// Deletes the weights of all but the newest `keep_last` checkpoints, keeping their
    /// evaluation files (`*.json` other than the state) so curves survive.
    pub fn prune(&self) -> Result<()> {
        let run_dir = &self.run_dir;
        let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(run_dir)
            .with_path(run_dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.strip_prefix("step-").and_then(|n| n.parse().ok()).map(|n| (n, e.path()))
            })
            .filter(|(_, p)| p.join("model.safetensors").exists())
            .collect();
        steps.sort();
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

    /// Resolves `latest` or a directory to a checkpoint directory.
    pub fn resolve(&self, which: &str) -> Result<PathBuf> {
        if which != "latest" {
            return Ok(PathBuf::from(which));
        }
        let pointer = self.run_dir.join("latest");
        let name = read_to_string(&pointer).map_err(|_| Error::MissingFile {
            path: pointer.clone(),
            hint: "no checkpoint of this run to resume from".into(),
        })?;
        Ok(self.run_dir.join(name.trim()))
    }

    /// Restores weights, optimizer moments and the trainer state from checkpoint `which`;
    /// refuses a recipe that differs in what the checkpoint recorded unless `force`.
    pub fn restore(
        &self,
        which: &str,
        recipe: &Recipe,
        force: bool,
        vs: &VarStore,
        optimizer: &mut AdamW,
    ) -> Result<TrainerState> {
        let dir = self.resolve(which)?;
        let state = load_state(&dir)?;
        let differing = recipe.differences_from(&state.recipe_fingerprint);
        if !differing.is_empty() && !force {
            return Err(Error::invalid(
                &dir,
                format!(
                    "the recipe differs from the one this checkpoint was trained with in: {} (pass --force to resume anyway)",
                    differing.join(", ")
                ),
            ));
        }
        // The same strict, shape-checked copy as any model load; nothing may be missing.
        let weights_path = dir.join("model.safetensors");
        model_dir::copy_into(vs, weights::read_file(&weights_path)?, &weights_path, &[])?;
        let opt_path = dir.join("optimizer.safetensors");
        optimizer.load_state(weights::read_file(&opt_path)?, state.step - state.nonfinite_skipped, &opt_path)?;
        outln!("resumed from {} at step {}", dir.display(), state.step);
        Ok(state)
    }
}

fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_path(path)?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
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
