//! Output folders that a command writes whole or replaces (an exported model, a tokenizer, an
//! evaluation, a run): where they may go and what `--overwrite` may remove. A command never
//! replaces the working directory, a folder it reads from, or a folder above either; and it
//! replaces an existing folder only when every file in it is one that the command itself writes
//! (judged by name, as `train --overwrite` judges a run folder), removing only those files. A
//! folder holding anything else (a user's notes, a checkpoint's optimizer state, a subfolder) is
//! refused with the first such file named, and nothing is removed.
use crate::error::{Error, IoContext, Result};
use linkme::distributed_slice;
use std::path::{Path, PathBuf};

/// The name of a file a writer puts into run or TensorBoard folders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFile {
    /// Exactly this name.
    Named(&'static str),
    /// Names that start with the first and end with the second (`optimizer` … `.safetensors`,
    /// `events.out.tfevents.` …, … `.candidate`).
    Pattern(&'static str, &'static str),
}

impl RunFile {
    /// Whether `name` is this file's name.
    pub fn matches(&self, name: &str) -> bool {
        match *self {
            RunFile::Named(n) => name == n,
            RunFile::Pattern(start, end) => {
                name.len() >= start.len() + end.len() && name.starts_with(start) && name.ends_with(end)
            }
        }
    }
}

/// One writer's declaration: who writes, and the names.
#[derive(Debug)]
pub struct RunFiles {
    /// The writing module.
    pub writer: &'static str,
    /// The names it writes.
    pub files: &'static [RunFile],
}

/// Every writer's declaration, gathered at link time.
#[distributed_slice]
pub static RUN_FILES: [RunFiles];

/// Declares, beside a writer, the names it writes into run folders:
/// `declare_run_files!(NAME: RunFile::Named(FILE), …);` adds them to [`RUN_FILES`].
#[macro_export]
macro_rules! declare_run_files {
    ($name:ident: $($file:expr),+ $(,)?) => {
        #[$crate::__linkme::distributed_slice($crate::outputs::RUN_FILES)]
        #[linkme(crate = $crate::__linkme)]
        static $name: $crate::outputs::RunFiles =
            $crate::outputs::RunFiles { writer: module_path!(), files: &[$($file),+] };
    };
}

/// Whether a writer declared this name ([`RUN_FILES`]).
pub(crate) fn declared(name: &str) -> bool {
    RUN_FILES.iter().any(|d| d.files.iter().any(|f| f.matches(name)))
}

/// Which file names a command writes into its output folder.
pub(crate) type Owned = fn(&str) -> bool;

/// Whether `name` is one of indolm's temporaries or locks (`.<name>.<pid>-<n>-<host>.tmp`,
/// `.<name>.lock`), which any indolm output folder may hold.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && (name.ends_with(".lock") || name.ends_with(".tmp") || name.contains(".tmp."))
}

/// The files under `dir` (recursively, in path order) that `owned` does not claim: every file
/// whose name it refuses, and every symlink (none of indolm's outputs is one).
pub(crate) fn foreign_files(dir: &Path, owned: &dyn Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
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
            found.extend(foreign_files(&path, owned)?);
        } else if kind.is_symlink() || !owned(&entry.file_name().to_string_lossy()) {
            found.push(path);
        }
    }
    Ok(found)
}

/// Refuses `dir` when it holds a file `owned` does not claim ([`foreign_files`]), naming it.
pub fn refuse_foreign(dir: &Path, owned: &dyn Fn(&str) -> bool) -> Result<()> {
    let foreign = foreign_files(dir, owned)?;
    if foreign.is_empty() {
        return Ok(());
    }
    Err(foreign_error(&foreign, dir))
}

/// The error for `foreign` files found in `dir` by `--overwrite`: the first named, the others
/// counted, and what to do.
fn foreign_error(foreign: &[PathBuf], dir: &Path) -> Error {
    let first = &foreign[0];
    let more = match foreign.len() {
        1 => String::new(),
        n => format!(" and {} other file(s)", n - 1),
    };
    Error::invalid(
        first,
        format!(
            "--overwrite removes only what indolm wrote, and this file{more} is not: move it out of {} (or delete it yourself), then run again",
            dir.display()
        ),
    )
}

/// Refuses `out` as a folder to replace when it is the working directory or a folder above it,
/// or one of `reads` (the folders the command reads from) or a folder above one of them. A
/// folder that does not exist yet is always fine.
pub(crate) fn refuse_unsafe_target(out: &Path, reads: &[&Path]) -> Result<()> {
    let Ok(target) = out.canonicalize() else { return Ok(()) };
    if let Ok(cwd) = std::env::current_dir().and_then(|d| d.canonicalize()) {
        if cwd.starts_with(&target) {
            let which = if cwd == target { "the working directory" } else { "a folder above the working directory" };
            return Err(Error::invalid(
                out,
                format!("is {which}: indolm never replaces it; name a new folder for the output"),
            ));
        }
    }
    for read in reads {
        let Ok(source) = read.canonicalize() else { continue };
        if source.starts_with(&target) {
            let which = if source == target {
                "the folder this command reads from".to_string()
            } else {
                format!("a folder above {}, which this command reads from", read.display())
            };
            return Err(Error::invalid(
                out,
                format!(
                    "is {which}: writing the output there would destroy its input; name a new folder for the output"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks that `out` may take a new output: absent or empty; or, with `overwrite`, holding only
/// files `owned` claims, and not the working directory, one of `reads`, or a folder above them.
pub fn check_replaceable(out: &Path, overwrite: bool, reads: &[&Path], owned: Owned) -> Result<()> {
    if out.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
        return Err(Error::invalid(out, "is a symbolic link: name the folder it points to, or a new folder"));
    }
    let non_empty = out.is_dir() && std::fs::read_dir(out).with_path(out)?.next().is_some();
    if out.exists() && !out.is_dir() {
        return Err(Error::invalid(out, "exists and is not a folder: name a folder for the output"));
    }
    refuse_unsafe_target(out, reads)?;
    if !non_empty {
        return Ok(());
    }
    if !overwrite {
        return Err(Error::invalid(out, "output directory exists and is not empty (pass --overwrite to replace it)"));
    }
    refuse_foreign(out, &|name: &str| owned(name) || is_temporary(name))
}

/// Removes the files of `dir` that `owned` claims (and indolm's temporaries), then every folder
/// left empty, `dir` included (a `dir` that is a symbolic link stays, its target emptied).
/// Anything else stays where it is.
pub fn remove_owned(dir: &Path, owned: &dyn Fn(&str) -> bool) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).with_path(dir)?.filter_map(|e| e.ok()) {
        let path = entry.path();
        let kind = entry.file_type().with_path(&path)?;
        let name = entry.file_name().to_string_lossy().to_string();
        if kind.is_dir() {
            remove_owned(&path, owned)?;
        } else if !kind.is_symlink() && (owned(&name) || is_temporary(&name)) {
            std::fs::remove_file(&path).with_path(&path)?;
        }
    }
    let linked = dir.symlink_metadata().is_ok_and(|m| m.is_symlink());
    if !linked && std::fs::read_dir(dir).with_path(dir)?.next().is_none() {
        std::fs::remove_dir(dir).with_path(dir)?;
    }
    Ok(())
}

/// Writes the folder `out` as a whole: `write` fills a temporary sibling, which then takes its
/// place, so an interrupted command never leaves a half-written folder. An existing `out` is
/// replaced only as [`check_replaceable`] allows, checked before anything is written.
pub fn write_dir(
    out: &Path,
    overwrite: bool,
    reads: &[&Path],
    owned: Owned,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    check_replaceable(out, overwrite, reads, owned)?;
    let staging = crate::files::Staging::new(out);
    write(staging.path())?;
    // Checked again: the folder may have changed while the output was written.
    check_replaceable(out, overwrite, reads, owned)?;
    remove_owned(out, &owned)?;
    staging.commit()
}

/// A file or folder a command is asked to write: the flag that named it and the path as given.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    /// The flag that named it (`--out`, `--json`), named by the errors.
    pub flag: &'static str,
    /// The path as the user gave it.
    pub path: &'a Path,
    /// A folder the command creates (or writes into), not a file.
    pub folder: bool,
}

impl<'a> Output<'a> {
    /// The file `path`, named by `flag`.
    pub fn file(flag: &'static str, path: &'a Path) -> Self {
        Output { flag, path, folder: false }
    }

    /// The folder `path`, named by `flag`, created when missing.
    pub fn folder(flag: &'static str, path: &'a Path) -> Self {
        Output { flag, path, folder: true }
    }
}

/// Checks, before any work, what a command is asked to write (`--out`, `--json`, `--plot`),
/// given what it reads (`inputs`: files and folders). A file must go into a folder that exists and
/// can be written (or into one of the folder outputs, created first), and must not be a folder, one
/// of the inputs, a file of indolm's own inside an input folder (`reserved`: a report's `--json`
/// onto a checkpoint's `bias.json`), or the same file as another output. A folder must be a
/// folder, or be creatable: its nearest existing ancestor a folder that can be written. Each
/// error is one line naming the flag and the path as given.
pub fn check_outputs(outputs: &[Output], inputs: &[&Path], reserved: Owned) -> Result<()> {
    for output in outputs {
        check_place(output, outputs)?;
    }
    let files: Vec<&Output> = outputs.iter().filter(|o| !o.folder).collect();
    let resolved = |p: &Path| -> Option<PathBuf> {
        p.canonicalize().ok().or_else(|| {
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            Some(parent.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    let mut seen: Vec<(PathBuf, &Path)> = Vec::new();
    for output in files {
        let out = output.path;
        let Some(target) = resolved(out) else { continue };
        if let Some((_, other)) = seen.iter().find(|(t, _)| *t == target) {
            return Err(Error::invalid(out, format!("is also the output {}: name two files", other.display())));
        }
        for &input in inputs {
            let Some(source) = input.canonicalize().ok() else { continue };
            if source == target {
                return Err(Error::invalid(
                    out,
                    "is one of this command's inputs: writing it would destroy what it reads; name another file",
                ));
            }
            let name = target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            if source.is_dir() && target.starts_with(&source) && reserved(&name) {
                return Err(Error::invalid(
                    out,
                    format!(
                        "is where indolm keeps its own `{name}` inside {}, which this command reads: name a file outside it",
                        input.display()
                    ),
                ));
            }
        }
        seen.push((target, out));
    }
    Ok(())
}

/// Refuses `output` when it cannot be written where it is: a file that is a folder or whose folder
/// is missing, not a folder or not writable (unless that folder is one of the `all` folder outputs,
/// checked on its own); a folder that is a file, or whose nearest existing ancestor is not a
/// writable folder.
fn check_place(output: &Output, all: &[Output]) -> Result<()> {
    let Output { flag, path, folder } = *output;
    let refuse = |message: String| Err(Error::argument(flag, format!("{}: {message}", path.display())));
    if !folder {
        if path.is_dir() {
            return refuse("is a folder: name a file to write".to_string());
        }
        let parent = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if all.iter().any(|o| o.folder && o.path == parent) {
            return Ok(());
        }
        if !parent.exists() {
            return refuse(format!(
                "its folder {} does not exist: create it first, or name a file in an existing folder",
                parent.display()
            ));
        }
        if !parent.is_dir() {
            return refuse(format!("{} is not a folder, so no file can be written in it", parent.display()));
        }
        return match writable(parent) {
            Ok(()) => Ok(()),
            Err(e) => refuse(format!("its folder {} cannot be written: {e}", parent.display())),
        };
    }
    if path.exists() {
        if !path.is_dir() {
            return refuse("exists and is not a folder: name a folder for the output".to_string());
        }
        return match writable(path) {
            Ok(()) => Ok(()),
            Err(e) => refuse(format!("cannot be written: {e}")),
        };
    }
    // The nearest ancestor that exists: the folder is created in it.
    let mut ancestor = path;
    let existing = loop {
        match ancestor.parent() {
            Some(p) if p.as_os_str().is_empty() => break Path::new("."),
            Some(p) if p.exists() => break p,
            Some(p) => ancestor = p,
            None => break Path::new("/"),
        }
    };
    if !existing.is_dir() {
        return refuse(format!("cannot be created: {} is not a folder", existing.display()));
    }
    match writable(existing) {
        Ok(()) => Ok(()),
        Err(e) => refuse(format!("cannot be created in {}: {e}", existing.display())),
    }
}

/// Whether this process may create files in the folder `dir` (`access(2)` with `W_OK | X_OK`: its
/// permissions, a read-only mount); else the system's reason.
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path holds a NUL byte"))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call; access(2) only reads it.
    if unsafe { libc::access(name.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer_files(name: &str) -> bool {
        matches!(name, "tokenizer.json" | "vocab.txt")
    }

    #[test]
    fn a_folder_is_replaced_only_when_every_file_is_the_commands_own() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("tok");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("vocab.txt"), "old").unwrap();
        let write = |dir: &Path| std::fs::write(dir.join("vocab.txt"), "new").with_path(dir);
        let err = write_dir(&out, false, &[], tokenizer_files, |d| {
            std::fs::create_dir_all(d).with_path(d)?;
            write(d)
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("pass --overwrite"), "{err}");
        std::fs::write(out.join("notes.md"), "mine").unwrap();
        let err = write_dir(&out, true, &[], tokenizer_files, |d| {
            std::fs::create_dir_all(d).with_path(d)?;
            write(d)
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("notes.md") && err.contains("removes only what indolm wrote"), "{err}");
        assert_eq!(std::fs::read_to_string(out.join("vocab.txt")).unwrap(), "old", "nothing was replaced");
        std::fs::remove_file(out.join("notes.md")).unwrap();
        write_dir(&out, true, &[], tokenizer_files, |d| {
            std::fs::create_dir_all(d).with_path(d)?;
            write(d)
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(out.join("vocab.txt")).unwrap(), "new");
    }

    #[test]
    fn nothing_is_removed_through_a_symbolic_link_but_what_it_points_to_may_be_emptied() {
        let root = tempfile::tempdir().unwrap();
        let (target, link) = (root.path().join("scratch"), root.path().join("out"));
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("vocab.txt"), "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = check_replaceable(&link, true, &[], tokenizer_files).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        // A run folder on scratch storage: its files go, the link and its target stay.
        remove_owned(&link, &tokenizer_files).unwrap();
        assert!(link.symlink_metadata().unwrap().is_symlink() && target.is_dir());
        assert!(!target.join("vocab.txt").exists());
    }

    #[test]
    fn outputs_are_checked_where_they_go_and_named_by_their_flag_and_path() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("notes.txt");
        std::fs::write(&file, "mine").unwrap();
        let missing = root.path().join("missing/out.json");
        let check = |outputs: &[Output]| check_outputs(outputs, &[], |_| false).map_err(|e| e.to_string());
        let err = check(&[Output::file("--json", &missing)]).unwrap_err();
        let folder = root.path().join("missing");
        let expected = format!("--json: {}: its folder {} does not exist", missing.display(), folder.display());
        assert!(err.starts_with(&expected), "{err}");
        let under_file = file.join("out.json");
        let err = check(&[Output::file("--out", &under_file)]).unwrap_err();
        assert!(err.contains(&format!("--out: {}: {} is not a folder", under_file.display(), file.display())), "{err}");
        let err = check(&[Output::file("--out", root.path())]).unwrap_err();
        assert!(err.starts_with("--out: ") && err.contains("is a folder: name a file"), "{err}");
        // A folder: created in its nearest existing ancestor, which must be a folder.
        check(&[Output::folder("--out", &root.path().join("a/b/c"))]).unwrap();
        let err = check(&[Output::folder("--out", &file.join("sub"))]).unwrap_err();
        assert!(err.contains(&format!("cannot be created: {} is not a folder", file.display())), "{err}");
        let err = check(&[Output::folder("--out", &file)]).unwrap_err();
        assert!(err.contains("exists and is not a folder"), "{err}");
        // A file inside a folder output goes where that folder will be; a relative name in `.`.
        let dir = root.path().join("new");
        check(&[Output::folder("--out", &dir), Output::file("--out", &dir.join("results.json"))]).unwrap();
        check(&[Output::file("--out", Path::new("relative-output.json"))]).unwrap();
        // A folder that cannot be written (root may write anywhere but on a read-only mount).
        let locked = root.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
        let inside = locked.join("out.json");
        if writable(&locked).is_err() {
            let err = check(&[Output::file("--json", &inside)]).unwrap_err();
            assert!(err.contains("cannot be written: Permission denied"), "{err}");
        }
    }

    #[test]
    fn the_working_directory_a_source_and_folders_above_them_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let source = root.path().join("run/step-5");
        std::fs::create_dir_all(&source).unwrap();
        for out in [source.clone(), root.path().join("run"), root.path().to_path_buf()] {
            let err = refuse_unsafe_target(&out, &[&source]).unwrap_err().to_string();
            assert!(err.contains("reads from"), "{}: {err}", out.display());
        }
        let cwd = std::env::current_dir().unwrap();
        let err = refuse_unsafe_target(Path::new("."), &[]).unwrap_err().to_string();
        assert!(err.contains("the working directory"), "{err}");
        let err = refuse_unsafe_target(cwd.parent().unwrap(), &[]).unwrap_err().to_string();
        assert!(err.contains("above the working directory"), "{err}");
        refuse_unsafe_target(&root.path().join("elsewhere"), &[&source]).unwrap();
        refuse_unsafe_target(&source.join("inside"), &[&source]).unwrap();
    }
}
