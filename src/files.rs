//! File helpers: reading with an error that names the file, and atomic writes (a temporary
//! name in the same folder, fsynced, then renamed) so a crash never leaves half a file under
//! the final name.
use crate::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

/// Reads a whole file, mapping a missing file to a clear message.
pub fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_path(path)
}

/// Writes `bytes` to `path` through a temporary file in the same folder, fsynced and renamed,
/// so a crash never leaves a half-written file under the final name.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp).with_path(&tmp)?;
    f.write_all(bytes).with_path(&tmp)?;
    f.sync_all().with_path(&tmp)?;
    std::fs::rename(&tmp, path).with_path(path)
}

/// `dir/.name.tmp` beside `path`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// An exclusive hold on a folder that one process writes (a training run, a prepared corpus),
/// released when dropped or when the process dies, however it dies: an OS file lock
/// (`flock`) on `.<folder>.lock` beside the folder, so a SIGKILLed run never leaves a stale
/// lock. The file holds the holder's PID for the message a second writer gets.
#[derive(Debug)]
pub struct DirLock {
    _file: std::fs::File,
}

impl DirLock {
    /// Takes the lock for `dir` (creating its parent), or says which process holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        use std::io::{Read, Seek, Write};
        let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let lock_path = dir.with_file_name(format!(".{name}.lock"));
        if let Some(parent) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_path(parent)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .with_path(&lock_path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() { "PID unknown".to_string() } else { format!("PID {holder}") };
                return Err(Error::invalid(
                    dir,
                    format!(
                        "in use by another indolm process ({holder}, lock {}): wait for it to finish, or stop it",
                        lock_path.display()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
        }
        file.set_len(0).with_path(&lock_path)?;
        file.rewind().with_path(&lock_path)?;
        writeln!(file, "{}", std::process::id()).with_path(&lock_path)?;
        Ok(DirLock { _file: file })
    }
}

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("indolm's result types serialize to JSON") + "\n";
    write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_lock_refuses_a_second_holder_until_released() {
        let root = std::env::temp_dir().join(format!("indolm-lock-{}", std::process::id()));
        let dir = root.join("run");
        let first = DirLock::acquire(&dir).unwrap();
        assert!(root.join(".run.lock").exists());
        // flock conflicts between two open files even within one process.
        let err = DirLock::acquire(&dir).unwrap_err().to_string();
        assert!(err.contains(&format!("PID {}", std::process::id())) && err.contains("run"), "{err}");
        drop(first);
        let again = DirLock::acquire(&dir);
        assert!(again.is_ok(), "the lock was not released on drop");
        drop(again);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
