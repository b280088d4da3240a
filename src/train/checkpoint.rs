//! Training checkpoints: `<run>/step-<N>/` holds `model.safetensors` (HF names),
//! `optimizer.safetensors` (AdamW moments), `trainer_state.json` (step, data cursor, seed,
//! recipe fingerprint, file checksums), `config.json` and the tokenizer files, so it is also a
//! model directory for every other command. A checkpoint is written to a temporary directory,
//! fsynced and renamed; the `latest` pointer is updated last.
use crate::data::mixture::Cursor;
use crate::data::tokenizer::TextTokenizer;
use crate::error::{read_to_string, tmp_path, write_atomic, Error, Result};
use crate::model::{model_dir::save_model_files, weights, BertConfig};
use crate::train::optim::AdamW;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::nn::VarStore;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainerState {
    /// Optimizer updates done.
    pub step: u64,
    pub seed: u64,
    pub cursor: Cursor,
    /// Micro-batches drawn (numbers the masking streams).
    pub micro_batches: u64,
    pub nonfinite_skipped: u64,
    /// How every random choice is made, for the reader: all streams derive from `seed`.
    pub rng: String,
    pub recipe_fingerprint: Vec<(String, String)>,
    /// SHA-256 of the weight files, verified on resume.
    pub checksums: BTreeMap<String, String>,
    pub last_loss: Option<f64>,
}

pub const RNG_NOTE: &str = "no RNG state is stored because none is needed: the data mixture, the masks and torch's generators (reseeded before every step, for dropout) all derive from `seed` and the step or sequence number";

fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

pub fn step_dir(run_dir: &Path, step: u64) -> PathBuf {
    run_dir.join(format!("step-{step}"))
}

/// Writes checkpoint `step` of the run and points `latest` at it.
pub fn save(
    run_dir: &Path,
    state: &TrainerState,
    config: &BertConfig,
    vs: &VarStore,
    optimizer: &AdamW,
    tokenizer: &TextTokenizer,
) -> Result<PathBuf> {
    let final_dir = step_dir(run_dir, state.step);
    let staging = tmp_path(&final_dir);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    }
    save_model_files(&staging, config, vs, tokenizer)?;
    weights::write_file(&staging.join("optimizer.safetensors"), &optimizer.state_tensors())?;
    let mut state = state.clone();
    for file in ["model.safetensors", "optimizer.safetensors"] {
        state.checksums.insert(file.into(), sha256_file(&staging.join(file))?);
    }
    write_atomic(
        &staging.join("trainer_state.json"),
        (serde_json::to_string_pretty(&state).unwrap() + "\n").as_bytes(),
    )?;
    std::fs::File::open(&staging).and_then(|d| d.sync_all()).map_err(|e| Error::io(&staging, e))?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(|e| Error::io(&final_dir, e))?;
    }
    std::fs::rename(&staging, &final_dir).map_err(|e| Error::io(&final_dir, e))?;
    write_atomic(&run_dir.join("latest"), format!("step-{}\n", state.step).as_bytes())?;
    Ok(final_dir)
}

/// Resolves `latest` or a directory to a checkpoint directory.
pub fn resolve(run_dir: &Path, which: &str) -> Result<PathBuf> {
    if which != "latest" {
        return Ok(PathBuf::from(which));
    }
    let pointer = run_dir.join("latest");
    let name = read_to_string(&pointer).map_err(|_| Error::MissingFile {
        path: pointer.clone(),
        hint: "no checkpoint of this run to resume from".into(),
    })?;
    Ok(run_dir.join(name.trim()))
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

/// Deletes the weights of all but the newest `keep_last` checkpoints, keeping their
/// evaluation files (`*.json` other than the state) so curves survive.
pub fn prune(run_dir: &Path, keep_last: usize) -> Result<()> {
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(run_dir)
        .map_err(|e| Error::io(run_dir, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_prefix("step-").and_then(|n| n.parse().ok()).map(|n| (n, e.path()))
        })
        .filter(|(_, p)| p.join("model.safetensors").exists())
        .collect();
    steps.sort();
    let drop = steps.len().saturating_sub(keep_last);
    for (_, dir) in steps.into_iter().take(drop) {
        for file in ["model.safetensors", "optimizer.safetensors"] {
            let p = dir.join(file);
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
            }
        }
    }
    Ok(())
}
