//! Readers of a run beside its trainer: a process that reads checkpoint weights (`eval bias
//! --run`) holds the run's readers lock shared ([`ReadHold`]) for as long as it reads, and the
//! trainer deletes old weights (`keep_last`) only while it can hold that lock exclusively, so a
//! reader never loses the checkpoint it is reading. OS file locks (`flock`): released when the
//! process ends, however it ends.
use super::layout::RunLayout;
use crate::error::{IoContext, Result};
use std::fs::{File, OpenOptions, TryLockError};

/// A shared hold on a run's checkpoints, released when dropped.
#[derive(Debug)]
pub struct ReadHold {
    _file: File,
}

fn open(layout: &RunLayout) -> Result<File> {
    let path = layout.readers_lock();
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).with_path(&path)
}

impl ReadHold {
    /// Holds the run's checkpoints for reading: waits only while the trainer is deleting weights.
    pub fn take(layout: &RunLayout) -> Result<ReadHold> {
        let file = open(layout)?;
        file.lock_shared().with_path(layout.readers_lock())?;
        Ok(ReadHold { _file: file })
    }
}

/// The trainer's side: the exclusive hold under which weights may be deleted, or `None` while
/// some reader holds the run.
pub(super) fn try_exclusive(layout: &RunLayout) -> Result<Option<File>> {
    let file = open(layout)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e).with_path(layout.readers_lock()),
    }
}
