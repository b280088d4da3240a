//! What the fine-tuning runs made of units (sentiment's grid points, translation's directions)
//! share on top of [`indolm_core::run::units`]: which unit a `--resume DIR` names.
use indolm_core::run::RunLayout;
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The file a finished unit's results go in (a sentiment set's, a translation direction's).
pub(crate) const RESULT_FILE: &str = "result.json";

indolm_core::declare_run_files!(UNIT_RESULT_FILES: indolm_core::outputs::RunFile::Named(RESULT_FILE));

/// What `--resume DIR` names in a run of `units`: one unfinished unit's checkpoint
/// (`<unit>/step-<N>`), returned with that unit's layout; `None` for `latest`, `auto` or no
/// `--resume`. Any other folder is refused: each unit has its own checkpoints, and a folder that
/// is none of them would otherwise be ignored. A unit holding `finished_file` is finished;
/// `unit_word` and `pattern` (`<run>/<direction>/step-<N>`) name the units in messages.
pub(crate) fn checkpoint_to_resume(
    resume: Option<&str>,
    layout: &RunLayout,
    units: &[RunLayout],
    finished_file: &str,
    unit_word: &str,
    pattern: &str,
) -> Result<Option<(PathBuf, RunLayout)>> {
    let Some(dir) = resume.filter(|r| !matches!(*r, "latest" | "auto")) else { return Ok(None) };
    let dir = Path::new(dir);
    let refuse = |why: String| {
        Err(Error::argument(
            "--resume",
            format!(
                "{}: {why}; this run resumes with `latest` (each {unit_word} from its newest checkpoint, strictly), `auto`, or one unfinished {unit_word}'s checkpoint folder ({pattern})",
                dir.display()
            ),
        ))
    };
    let Ok(canonical) = dir.canonicalize() else { return refuse("no such folder".into()) };
    let is_step =
        dir.file_name().and_then(|n| n.to_str()).and_then(indolm_core::run::layout::parse_step_dir_name).is_some();
    for unit in units {
        let Ok(unit_dir) = unit.dir().canonicalize() else { continue };
        if canonical.parent() != Some(unit_dir.as_path()) || !is_step {
            continue;
        }
        if unit.dir().join(finished_file).exists() {
            return refuse(format!("its {unit_word} ({}) is finished", unit.dir().display()));
        }
        return Ok(Some((dir.to_path_buf(), unit.clone())));
    }
    refuse(format!("not a checkpoint of one of this run's {unit_word}s (under {})", layout.dir().display()))
}
