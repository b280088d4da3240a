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
pub fn remove_run(run_dir: &Path, tensorboard_dir: &Path, inputs: &[&Path]) -> Result<()> {
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
