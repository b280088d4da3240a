//! A run made of units: a fine-tuning's trained sets (languages, leave-one-out sets) and grid
//! points, each unit its own run folder with its checkpoints and best weights. The run's
//! manifest (`run.json`: the recipe kind and fingerprint) binds every unit to one recipe: a
//! rerun needs `--resume` (finished units are not redone, an interrupted one resumes from its
//! checkpoint, and a changed recipe is refused unless `--force`) or `--overwrite` (everything
//! starts over), so a run's outputs always come from one run.
use super::layout::RunLayout;
use crate::error::{Error, IoContext, Result};
use crate::files::{read_to_string, write_json, DirLock};
use crate::outputs::RunFile;
use crate::recipe::Fingerprint;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::path::Path;

/// The manifest's file name.
pub(crate) const MANIFEST: &str = "run.json";

crate::declare_run_files!(UNITS_FILES: RunFile::Named(MANIFEST));

/// What `run.json` records.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    /// The recipe kind (`sentiment`, `summarize`).
    kind: String,
    /// The recipe's fingerprint.
    fingerprint: Fingerprint,
    /// The model the run's units start from (runs of earlier versions did not record it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_model: Option<BaseModel>,
}

/// The model a run's units start from: where it was loaded from and its content's identity
/// (`model_dir::content_sha256`), which a resumed run must share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaseModel {
    /// The directory given (`--init`, or the recipe's `init`), as it was given.
    pub path: String,
    /// The SHA-256 of its content.
    pub sha256: String,
}

impl BaseModel {
    /// `path (SHA-256 abcdef012345…)`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} (SHA-256 {}…)", self.path, &self.sha256[..self.sha256.len().min(12)])
    }
}

/// How the command asked to treat an existing run.
#[derive(Debug, Clone, Default)]
pub struct Rerun {
    /// `--resume` (`latest` or `auto`).
    pub resume: Option<String>,
    /// `--overwrite`.
    pub overwrite: bool,
    /// `--force`: resume even though the recipe changed.
    pub force: bool,
    /// What the run reads (the model its units start from): `--overwrite` never removes it.
    pub inputs: Vec<std::path::PathBuf>,
}

/// An open run of units (its folder locked by the leader).
pub struct UnitRun {
    layout: RunLayout,
    /// The run was continued (`--resume` on an existing run): units may be done or half done.
    pub continued: bool,
    _lock: Option<DirLock>,
}

impl UnitRun {
    /// Opens the run at `layout` for a recipe of `kind` with `fingerprint`: a new run (the
    /// folder absent or empty), the same run continued (`--resume`; a changed recipe is refused,
    /// naming what changed, unless `--force`), or started over (`--overwrite`: the folder and
    /// the run's TensorBoard folder are removed first). Without either flag an existing run is
    /// refused. `leader`: this process writes (the others only read the manifest).
    pub fn open(
        layout: RunLayout,
        kind: &str,
        fingerprint: &Fingerprint,
        base_model: &BaseModel,
        rerun: &Rerun,
        tensorboard: &Path,
        leader: bool,
    ) -> Result<UnitRun> {
        if !leader {
            // The other ranks of a data-parallel launch follow rank 0, which checks and writes.
            let continued = rerun.resume.is_some() && !rerun.overwrite;
            return Ok(UnitRun { layout, continued, _lock: None });
        }
        let lock = Some(DirLock::acquire(layout.dir())?);
        let dir = layout.dir();
        // What writers killed earlier left (units' outputs, evaluations): their processes are gone.
        crate::files::sweep_dead_temps_under(dir);
        let manifest_path = dir.join(MANIFEST);
        let exists = dir.is_dir() && std::fs::read_dir(dir).with_path(dir)?.next().is_some();
        let mut continued = false;
        if exists && rerun.overwrite {
            let inputs: Vec<&Path> = rerun.inputs.iter().map(|p| p.as_path()).collect();
            super::ownership::remove_run(dir, tensorboard, &inputs)?;
        } else if exists {
            if rerun.resume.is_none() {
                return Err(Error::invalid(
                    dir,
                    "this run already exists: pass --resume auto to continue it (finished parts are not redone), or --overwrite to start over",
                ));
            }
            let recorded: Manifest = match read_to_string(&manifest_path) {
                Ok(text) => serde_json::from_str(&text).map_err(|e| Error::json(&manifest_path, &e))?,
                Err(_) => {
                    return Err(Error::invalid(
                        dir,
                        format!(
                            "has files but no {MANIFEST}: not a run of this indolm; pass --overwrite to start over"
                        ),
                    ))
                }
            };
            if recorded.kind != kind {
                return Err(Error::invalid(
                    &manifest_path,
                    format!("this folder holds a `{}` run, not a `{kind}` run: use another name", recorded.kind),
                ));
            }
            if recorded.base_model.as_ref() != Some(base_model) && !rerun.force {
                let was = recorded.base_model.as_ref().map_or_else(
                    || "a base model this run did not record (it was started by an earlier indolm)".to_string(),
                    BaseModel::describe,
                );
                return Err(Error::invalid(
                    &manifest_path,
                    format!(
                        "this run's units were started from {was}, not from {}: its remaining units would be trained from another model; pass the model it was started from, --overwrite to start over, or --force to continue anyway (each result then names the model its unit started from)",
                        base_model.describe()
                    ),
                ));
            }
            let differing = recorded.fingerprint.differences_to(fingerprint).unwrap_or_default();
            if !differing.is_empty() && !rerun.force {
                return Err(Error::invalid(
                    &manifest_path,
                    format!(
                        "the recipe differs from the one this run was started with in: {} (pass --overwrite to start over, or --force to continue anyway, mixing the two)",
                        differing.join(", ")
                    ),
                ));
            }
            continued = true;
        } else if rerun.resume.as_deref() == Some("latest") {
            return Err(Error::MissingFile {
                path: manifest_path,
                hint: "no run to resume (`--resume auto` starts it when there is none)".into(),
            });
        }
        std::fs::create_dir_all(dir).with_path(dir)?;
        if !continued || rerun.force {
            let manifest =
                Manifest { kind: kind.into(), fingerprint: fingerprint.clone(), base_model: Some(base_model.clone()) };
            write_json(&manifest_path, &manifest)?;
        }
        Ok(UnitRun { layout, continued, _lock: lock })
    }

    /// The run folder's layout.
    pub fn layout(&self) -> &RunLayout {
        &self.layout
    }

    /// The result a finished unit recorded in `file` under `unit`, if it did.
    pub fn done<T: DeserializeOwned>(&self, unit: &RunLayout, file: &str) -> Result<Option<T>> {
        let path = unit.dir().join(file);
        if !self.continued || !path.exists() {
            return Ok(None);
        }
        let text = read_to_string(&path)?;
        serde_json::from_str(&text).map(Some).map_err(|e| Error::json(&path, &e))
    }

    /// Records a finished unit's result (written to a temporary name and renamed: a unit is
    /// finished exactly when this file exists).
    pub fn finish<T: Serialize>(&self, unit: &RunLayout, file: &str, result: &T) -> Result<()> {
        std::fs::create_dir_all(unit.dir()).with_path(unit.dir())?;
        write_json(&unit.dir().join(file), result)
    }
}
