//! What indolm writes in a run folder and in the run's TensorBoard folder, by file name, so that
//! `--overwrite` removes only that: a run or TensorBoard folder holding any other file (a user's
//! notes, an export, a plot) is refused, naming the file, and nothing is deleted.
use crate::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

/// The file names indolm writes into run folders (checkpoints, units, evaluations, results).
const FILES: [&str; 21] = [
    super::layout::LATEST,
    super::layout::PENDING_EVALUATION,
    "train_log.jsonl",
    "run.json",
    "unit.json",
    "result.json",
    "results.json",
    "results.md",
    "trainer_state.json",
    "best.json",
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "bias.json",
    "bias_pairs.csv",
    "indommlu.json",
    "indommlu_questions.csv",
    ".readers.lock",
];

/// Whether indolm writes files of this name in a run or TensorBoard folder.
fn written_by_indolm(name: &str) -> bool {
    FILES.contains(&name)
        || (name.starts_with("optimizer") && name.ends_with(".safetensors"))
        || name.starts_with("events.out.tfevents.")
        || name.ends_with(".candidate")
        || name.ends_with(".gold")
        || (name.starts_with('.') && (name.ends_with(".lock") || name.ends_with(".tmp")))
}

/// The files under `dir` (recursively) that indolm does not write, in path order.
pub fn foreign_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    if !dir.is_dir() {
        return Ok(found);
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).with_path(dir)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().with_path(&path)?;
        if kind.is_dir() {
            found.extend(foreign_files(&path)?);
        } else if kind.is_symlink() || !written_by_indolm(&entry.file_name().to_string_lossy()) {
            found.push(path);
        }
    }
    Ok(found)
}

/// `--overwrite`: removes the run folder and its TensorBoard folder when they hold only what
/// indolm writes; otherwise an error naming the other files, with nothing removed.
pub fn remove_run(run_dir: &Path, tensorboard_dir: &Path) -> Result<()> {
    let mut foreign = foreign_files(run_dir)?;
    foreign.extend(foreign_files(tensorboard_dir)?);
    if let Some(first) = foreign.first() {
        let more = match foreign.len() {
            1 => String::new(),
            n => format!(" and {} other file(s)", n - 1),
        };
        return Err(Error::invalid(
            first,
            format!(
                "--overwrite removes only what indolm wrote, and this file{more} is not: move it out of {} (or delete it yourself), then run again",
                if first.starts_with(run_dir) { run_dir.display() } else { tensorboard_dir.display() }
            ),
        ));
    }
    for dir in [run_dir, tensorboard_dir] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_path(dir)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_run_of_indolm_files_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let (run, tb) = (root.path().join("ck/r"), root.path().join("runs/r"));
        for f in ["step-5/model.safetensors", "step-5/optimizer-dec.safetensors", "evals/step-2/bias.json", "latest"] {
            std::fs::create_dir_all(run.join(f).parent().unwrap()).unwrap();
            std::fs::write(run.join(f), "x").unwrap();
        }
        std::fs::create_dir_all(tb.join("bias-id")).unwrap();
        std::fs::write(tb.join("bias-id/events.out.tfevents.1.host.1.0"), "x").unwrap();
        std::fs::write(tb.join("notes.txt"), "mine").unwrap();
        let err = remove_run(&run, &tb).unwrap_err().to_string();
        assert!(err.contains("runs/r/notes.txt") && err.contains("removes only what indolm wrote"), "{err}");
        assert!(run.join("latest").exists() && tb.join("notes.txt").exists(), "nothing removed");
        std::fs::remove_file(tb.join("notes.txt")).unwrap();
        remove_run(&run, &tb).unwrap();
        assert!(!run.exists() && !tb.exists());
    }
}
