//! File helpers: reading with an error that names the file, and atomic writes (a temporary
//! name in the same folder, fsynced, then renamed) so a crash never leaves half a file under
//! the final name.
use crate::error::{IoContext, Result};
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

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("indolm's result types serialize to JSON") + "\n";
    write_atomic(path, text.as_bytes())
}
