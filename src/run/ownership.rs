//! What indolm writes in a run folder and in the run's TensorBoard folder, by file name, so that
//! `--overwrite` removes only that: a run or TensorBoard folder holding any other file (a user's
//! notes, an export, a plot) is refused, naming the file, and nothing is deleted. Every writer
//! declares the names it writes beside its code ([`declare_run_files!`](crate::declare_run_files));
//! the declarations are gathered at link time ([`crate::outputs::RUN_FILES`]), and nothing else
//! lists them.
use crate::error::Result;
use std::path::{Path, PathBuf};

/// Whether indolm writes files of this name in a run or TensorBoard folder: a declared name, or
/// a temporary one of an atomic write.
pub fn written_by_indolm(name: &str) -> bool {
    crate::outputs::declared(name) || crate::outputs::is_temporary(name)
}

/// The files under `dir` (recursively) that indolm does not write, in path order.
pub(crate) fn foreign_files(dir: &Path) -> Result<Vec<PathBuf>> {
    crate::outputs::foreign_files(dir, &written_by_indolm)
}

/// `--overwrite`: removes the run folder and its TensorBoard folder when they hold only what
/// indolm writes; otherwise an error naming the other files, with nothing removed. Neither may
/// be the working directory, one of `inputs` (what the run reads: the model it starts from) or
/// a folder above one of them.
pub(crate) fn remove_run(run_dir: &Path, tensorboard_dir: &Path, inputs: &[&Path]) -> Result<()> {
    for dir in [run_dir, tensorboard_dir] {
        crate::outputs::refuse_unsafe_target(dir, inputs)?;
    }
    for dir in [run_dir, tensorboard_dir] {
        crate::outputs::refuse_foreign(dir, &written_by_indolm)?;
    }
    for dir in [run_dir, tensorboard_dir] {
        crate::outputs::remove_owned(dir, &written_by_indolm)?;
    }
    Ok(())
}

/// Removes one folder of a run (a checkpoint about to be written again, after a resume from an
/// earlier one) when it holds only what indolm writes; otherwise an error naming the other file.
pub(crate) fn remove_run_folder(dir: &Path) -> Result<()> {
    crate::outputs::refuse_foreign(dir, &written_by_indolm)?;
    crate::outputs::remove_owned(dir, &written_by_indolm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::RUN_FILES;

    #[test]
    fn every_file_indolm_writes_into_runs_is_declared_once() {
        let names = [
            "latest",
            "evaluation.pending",
            "train_log.jsonl",
            ".readers.lock",
            "run.json",
            "unit.json",
            "result.json",
            "results.json",
            "results.md",
            "sweep.json",
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
            "optimizer.safetensors",
            "optimizer-dec.safetensors",
            "events.out.tfevents.1.host.1.0",
            "test.candidate",
            "test.gold",
        ];
        for name in names {
            let writers: Vec<&str> =
                RUN_FILES.iter().filter(|d| d.files.iter().any(|f| f.matches(name))).map(|d| d.writer).collect();
            assert_eq!(writers.len(), 1, "{name}: declared by {writers:?}");
        }
        for name in ["notes.txt", "optimizer.txt", "plot.png", "model.bin", "tokenizer.json.bak"] {
            assert!(!written_by_indolm(name), "{name}");
        }
    }

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
        let err = remove_run(&run, &tb, &[]).unwrap_err().to_string();
        assert!(err.contains("runs/r/notes.txt") && err.contains("removes only what indolm wrote"), "{err}");
        assert!(run.join("latest").exists() && tb.join("notes.txt").exists(), "nothing removed");
        std::fs::remove_file(tb.join("notes.txt")).unwrap();
        remove_run(&run, &tb, &[]).unwrap();
        assert!(!run.exists() && !tb.exists());
    }
}
