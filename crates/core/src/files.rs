//! File helpers: reading with an error that names the file, and atomic writes (a temporary
//! name in the same folder, fsynced, then renamed) so a crash never leaves half a file under
//! the final name.
use crate::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

/// Reads a whole file, mapping a missing file to a clear message and text that is not UTF-8 to
/// the line and byte where it stops being UTF-8.
pub fn read_to_string(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_path(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let line_start = bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::invalid(
            path,
            format!(
                "not UTF-8 text: line {line}, byte {} of the line (offset {at} in the file) is 0x{:02x}; convert the file to UTF-8",
                at - line_start + 1,
                bytes[at]
            ),
        )
    })
}

/// A CSV reader over `path` built by `builder`, and its header row: a missing file is
/// [`Error::MissingFile`] with `hint`, any other failure names the file.
pub fn open_csv(
    builder: &csv::ReaderBuilder,
    path: &Path,
    hint: &str,
) -> Result<(csv::Reader<std::fs::File>, Vec<String>)> {
    let mut reader = builder.from_path(path).map_err(|e| match e.kind() {
        csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            Error::MissingFile { path: path.into(), hint: hint.into() }
        }
        _ => Error::invalid(path, e.to_string()),
    })?;
    let header = reader.headers().map_err(|e| Error::invalid(path, e.to_string()))?.iter().map(String::from).collect();
    Ok((reader, header))
}

/// Writes `bytes` to `path` through a temporary file in the same folder, fsynced and renamed,
/// so a crash never leaves a half-written file under the final name (and a failed write, e.g.
/// a full disk, leaves no temporary file either).
/// Its errors name `path`, never the temporary name.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let staging = Staging::new(path);
    let mut f = std::fs::File::create(staging.path()).map_err(|e| write_error(path, e))?;
    f.write_all(bytes).map_err(|e| write_error(path, e))?;
    f.sync_all().map_err(|e| write_error(path, e))?;
    staging.commit()
}

/// The error of a failed write of `path` (through its temporary sibling): the final path named,
/// and a missing folder said as such rather than as a missing file.
pub(crate) fn write_error(path: &Path, e: std::io::Error) -> Error {
    let folder = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if e.kind() == std::io::ErrorKind::NotFound && !folder.is_dir() {
        return Error::invalid(path, format!("cannot be written: its folder {} does not exist", folder.display()));
    }
    Error::invalid(path, format!("cannot be written: {e}"))
}

/// A temporary sibling of `target` (`.<name>.<pid>-<n>-<host>.tmp`, unique to this process and
/// call) to write a file or a folder into. [`Staging::commit`] renames it to `target`; dropped
/// without a commit (an error, a panic), it is deleted, so a failed write leaves nothing
/// behind. Only SIGKILL can leave one: the next writer of the same target sweeps those of dead
/// processes on this host ([`sweep_dead_temps`]), and [`remove_stale_temps`] clears them all
/// under a lock.
#[derive(Debug)]
pub struct Staging {
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl Staging {
    /// A fresh temporary name beside `target`, after sweeping the temporaries that killed
    /// writers of `target` left; nothing is created yet.
    pub fn new(target: &Path) -> Self {
        Self::named(target, "")
    }

    /// The same, with the temporary name ending in `target`'s extension (`….tmp.png`), for
    /// writers that choose a format by the file name.
    pub fn keeping_extension(target: &Path) -> Self {
        let ext = target.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
        Self::named(target, &ext)
    }

    fn named(target: &Path, ext: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        sweep_dead_temps(target);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!(".{}.{}-{n}-{}.tmp{ext}", file_name(target), std::process::id(), host_tag());
        Staging { tmp: target.with_file_name(name), target: target.to_path_buf(), committed: false }
    }

    /// The temporary path to write.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the temporary file or folder to the target (a folder target must not exist).
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.target).map_err(|e| write_error(&self.target, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp).or_else(|_| std::fs::remove_dir_all(&self.tmp));
        }
    }
}

/// Deletes the temporary siblings of `target` that killed writers left (`.<name>.*.tmp`). Call
/// only while holding the lock of the folder they are in, so none of them is being written.
pub fn remove_stale_temps(target: &Path) -> Result<()> {
    let Some(dir) = target.parent().filter(|d| d.is_dir()) else { return Ok(()) };
    let prefix = format!(".{}.", file_name(target));
    for entry in std::fs::read_dir(dir).with_path(dir)?.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with(&prefix) && name.ends_with(".tmp") {
            let path = entry.path();
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.with_path(&path)?;
        }
    }
    Ok(())
}

/// This machine's name as temporary names carry it (letters, digits, `_`), so that a sweep on a
/// shared filesystem touches only temporaries of processes it can see.
pub fn host_tag() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let tag: String = name.trim().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        if tag.is_empty() {
            "host".into()
        } else {
            tag
        }
    })
}

/// The writer of a temporary `name` (a sibling of a target named `target_name`): its PID and
/// host tag (`None` for the names of older versions, which carried no host).
fn temp_writer(name: &str, target_name: &str) -> Option<(u32, Option<String>)> {
    let rest = name.strip_prefix(&format!(".{target_name}."))?;
    let core = rest.strip_suffix(".tmp").or_else(|| rest.rsplit_once(".tmp.").map(|(core, _)| core))?;
    let mut parts = core.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u64>().ok()?;
    Some((pid, parts.next().map(String::from)))
}

/// Whether process `pid` runs on this host.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes the temporaries of `target` that writers killed on this host left (their process is
/// gone); best effort: what cannot be read or deleted stays.
pub(crate) fn sweep_dead_temps(target: &Path) {
    let Some(dir) = target.parent().filter(|d| d.is_dir()) else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let name = file_name(target);
    for entry in entries.filter_map(|e| e.ok()) {
        let file = entry.file_name().to_string_lossy().to_string();
        let Some((pid, host)) = temp_writer(&file, &name) else { continue };
        if pid == std::process::id() || alive(pid) || host.is_some_and(|h| h != host_tag()) {
            continue;
        }
        let path = entry.path();
        let _ = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
    }
}

/// [`sweep_dead_temps`] for every file and folder under `dir`: what a run's next writer does on
/// opening it, so temporaries of killed evaluations and outputs do not stay forever.
pub fn sweep_dead_temps_under(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut targets = std::collections::BTreeSet::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if let Some(rest) = name.strip_prefix('.') {
            // `.<target>.<pid>-…`: the target is everything before the last `.<digits>-`.
            if let Some(i) = rest.match_indices('.').map(|(i, _)| i).rev().find(|&i| {
                rest[i + 1..].split('-').next().is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            }) {
                targets.insert(dir.join(&rest[..i]));
                continue;
            }
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            sweep_dead_temps_under(&path);
        }
    }
    for target in targets {
        sweep_dead_temps(&target);
    }
}

/// `text` quoted as an error message shows it: whole when short (`"…"`, escaped as `{:?}`
/// does), else its first 60 characters and how long it is, so that a 100,000-character line does
/// not fill the terminal.
pub fn quoted(text: &str) -> String {
    const SHOWN: usize = 60;
    let n = text.chars().count();
    if n <= SHOWN + 20 {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{:?} ({n} characters)", format!("{head}…"))
}

/// `name` when it is a plain file name (what a file may name beside itself: a shard in an
/// index, a checkpoint in `latest`, a file in a checksum list); otherwise why not. A folder, `..`,
/// `.` or an absolute path would let a file make indolm read or write outside its folder.
pub fn plain_file_name(name: &str) -> std::result::Result<&str, &'static str> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && Path::new(name).components().count() == 1;
    if plain {
        Ok(name)
    } else if name.is_empty() {
        Err("is empty, not a file name")
    } else if Path::new(name).is_absolute() {
        Err("is an absolute path, not a file name in this folder")
    } else {
        Err("is not a plain file name (no folders, `.` or `..`)")
    }
}

/// Whether `path` (named by a file or a server) stays inside the folder it is joined to: relative,
/// made of plain names only (no `..`, `.`, root or prefix).
pub fn stays_inside(path: &Path) -> bool {
    path.components().count() > 0 && path.components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The last component of `path`, as text (empty for `/`).
fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}

/// SHA-256 of a file's bytes, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path).with_path(path)?;
    std::io::copy(&mut file, &mut hasher).with_path(path)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// An exclusive hold on a folder that one process writes (a training run, a prepared corpus),
/// released when dropped or when the process dies, however it dies: an OS file lock
/// (`flock`) on `.<folder>.lock` beside the folder, so a SIGKILLed run never leaves a stale
/// lock. The file holds the holder's PID for the message a second writer gets.
#[derive(Debug)]
pub struct DirLock {
    _file: std::fs::File,
    path: PathBuf,
}

impl DirLock {
    /// Takes the lock for `dir` (creating its parent), or says which process holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        use std::io::{Read, Seek, Write};
        let lock_path = dir.with_file_name(format!(".{}.lock", file_name(dir)));
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
        Ok(DirLock { _file: file, path: lock_path })
    }

    /// Deletes the lock file, then releases the lock: for a folder that a refused command
    /// created and removed again.
    pub(crate) fn release_and_remove(self) {
        let _ = std::fs::remove_file(&self.path);
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
    fn names_from_files_stay_in_their_folder_and_long_text_is_quoted_short() {
        for ok in ["model-00001-of-00002.safetensors", "step-60", ".hidden"] {
            assert_eq!(plain_file_name(ok), Ok(ok));
        }
        for bad in ["", ".", "..", "../x", "a/b", "/etc/passwd", "a\\b"] {
            assert!(plain_file_name(bad).is_err(), "{bad:?} was taken as a plain file name");
        }
        assert!(stays_inside(Path::new("20231101.id/train-00000-of-00001.parquet")));
        for bad in ["", "../x.parquet", "/abs.parquet", "a/../../b", "./a"] {
            assert!(!stays_inside(Path::new(bad)), "{bad:?} was taken as inside");
        }
        assert_eq!(quoted("kata \"kutip\""), "\"kata \\\"kutip\\\"\"");
        let long = quoted(&"kata ".repeat(20_000));
        assert!(long.ends_with("…\" (100000 characters)") && long.chars().count() < 100, "{long}");
    }

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

    #[test]
    fn a_failed_atomic_write_names_the_final_path_not_the_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("missing/out.json");
        let err = write_atomic(&target, b"{}").unwrap_err().to_string();
        let expected = format!(
            "{}: cannot be written: its folder {} does not exist",
            target.display(),
            target.parent().unwrap().display()
        );
        assert_eq!(err, expected);
        let err = write_atomic(dir.path(), b"{}").unwrap_err().to_string();
        assert_eq!(err, format!("{}: cannot be written: Is a directory (os error 21)", dir.path().display()));
    }

    #[test]
    fn text_that_is_not_utf8_is_named_by_line_and_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, b"baik sekali\nburuk \xff sekali\n").unwrap();
        let err = read_to_string(&path).unwrap_err().to_string();
        assert!(err.contains("line 2, byte 7 of the line (offset 18 in the file) is 0xff"), "{err}");
    }

    #[test]
    fn staging_is_deleted_unless_committed_and_stale_temps_are_swept() {
        let root = std::env::temp_dir().join(format!("indolm-staging-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let target = root.join("step-5");
        let (a, b) = (Staging::new(&target), Staging::new(&target));
        assert_ne!(a.path(), b.path(), "two stagings of one target share a name");
        std::fs::create_dir_all(a.path().join("inner")).unwrap();
        std::fs::write(b.path(), b"x").unwrap();
        drop(a); // an error before the commit
        assert!(!root.join(".step-5.tmp").exists() && std::fs::read_dir(&root).unwrap().count() == 1);
        b.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"x");

        // What SIGKILL leaves on this host: swept by the next writer of the same target when
        // its process is gone; a live writer's, another host's and another target's stay.
        let dead = dead_pid();
        let host = host_tag();
        let stale = [format!(".step-5.{dead}-0-{host}.tmp"), format!(".step-5.{dead}-3.tmp")];
        let kept = [
            format!(".step-5.{}-0-{host}.tmp", std::os::unix::process::parent_id()),
            format!(".step-5.{dead}-0-otherhost.tmp"),
            format!(".step-6.{dead}-0-{host}.tmp"),
        ];
        for name in stale.iter().chain(&kept) {
            std::fs::write(root.join(name), b"half").unwrap();
        }
        std::fs::create_dir_all(root.join(format!(".step-5.{dead}-1-{host}.tmp/inner"))).unwrap();
        let c = Staging::new(&target);
        drop(c);
        let mut left: Vec<String> =
            std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
        left.sort();
        let mut expected: Vec<String> = kept.to_vec();
        expected.push("step-5".into());
        expected.sort();
        assert_eq!(left, expected);
        for name in &kept {
            std::fs::remove_file(root.join(name)).unwrap();
        }
        // A plot's temporary keeps its extension, and a sweep of a whole folder finds it.
        let plot = root.join("sub/cmp.png");
        std::fs::create_dir_all(plot.parent().unwrap()).unwrap();
        assert!(Staging::keeping_extension(&plot).path().to_string_lossy().ends_with(".tmp.png"));
        let stale_plot = root.join(format!("sub/.cmp.png.{dead}-0-{host}.tmp.png"));
        std::fs::write(&stale_plot, b"half").unwrap();
        sweep_dead_temps_under(&root);
        assert!(!stale_plot.exists());

        // Under the folder's lock, every temporary of the target goes.
        std::fs::write(root.join(".step-5.999-0.tmp"), b"half").unwrap();
        std::fs::create_dir_all(root.join(".step-5.999-1.tmp/inner")).unwrap();
        std::fs::write(root.join(".step-50.999-0.tmp"), b"another target's").unwrap();
        remove_stale_temps(&target).unwrap();
        let mut left: Vec<String> =
            std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
        left.sort();
        assert_eq!(left, [".step-50.999-0.tmp", "step-5", "sub"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A PID no process has.
    fn dead_pid() -> u32 {
        (4_000_000..).find(|p| !alive(*p)).unwrap()
    }
}
