//! Where task 7's generated code runs (only with `--run-code`): each program is `python -I main.py`
//! started by `clone` as pid 1 of new user, mount, PID, network, IPC and UTS namespaces. Its root is
//! a read-only tmpfs showing only what the interpreter needs — `/usr`, `/bin`, `/sbin`, `/lib*` and
//! `/etc` and the interpreter's prefixes bound read-only, a `/dev` of four devices, a fresh `/proc`
//! of its PID namespace — and two writable folders: `/scratch` (its working folder, holding
//! `main.py`) and a private `/tmp`, on one tmpfs of `--code-disk-mb` that ends with the run. It runs
//! as uid 1000 of its user namespace (outside, `nobody` when indolm runs as root, else the user
//! running indolm), without capabilities, with `no_new_privs`, no user namespace of its own inside
//! (`user.max_user_namespaces` 0), and under `setrlimit` limits on its address space, CPU time,
//! processes, open files and file size; a wall-clock limit kills its pid 1, and the end of pid 1
//! ends every process it started, `setsid` or not. No network (not even loopback, nor abstract
//! Unix sockets), no signal to anything outside, no filesystem socket outside `/scratch`.
//!
//! Where the kernel refuses a step (no unprivileged user namespaces, a container's seccomp, an old
//! kernel), [`Sandbox::open`] fails naming the step and the errno: code never runs with less. The
//! child between `clone` and `exec` makes only async-signal-safe system calls on values prepared
//! before (no allocation), and passes a failing step back over a close-on-exec pipe.
use indolm_torch::error::{Error, Result};
use std::ffi::{CString, OsStr};
use std::io::Read;
use std::ops::RangeInclusive;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// The most of a program's stdout kept (the rest is read and dropped).
pub(crate) const STDOUT_LIMIT: usize = 64 * 1024;
/// The most of a program's stderr kept (its end: where Python's traceback says what failed).
const STDERR_LIMIT: usize = 16 * 1024;
/// `--code-timeout`'s range, in seconds.
pub(crate) const TIMEOUT_RANGE: RangeInclusive<u64> = 1..=3600;
/// `--code-memory-mb`'s range: below 32 MiB the interpreter itself cannot start.
pub(crate) const MEMORY_MB_RANGE: RangeInclusive<u64> = 32..=65536;
/// `--code-processes`' range (processes and threads of the program at once, itself included).
pub(crate) const PROCESSES_RANGE: RangeInclusive<u64> = 1..=4096;
/// `--code-disk-mb`'s range (what `/scratch` and `/tmp` hold together, in MiB).
pub(crate) const DISK_MB_RANGE: RangeInclusive<u64> = 1..=4096;
/// The files and folders `/scratch` and `/tmp` may hold together.
const DISK_INODES: u64 = 16384;
/// The program's uid and gid inside its user namespace.
const INNER_ID: u32 = 1000;
/// The uid and gid it has outside when indolm runs as root (`nobody`, `nogroup`).
const NOBODY: u32 = 65534;
/// Where the new root is assembled before `pivot_root` (a folder every system has; the mount
/// over it is seen only in the program's mount namespace).
const STAGING: &str = "/tmp";
/// The host folders shown read-only (those that exist; a symbolic link is shown as one).
const SYSTEM_FOLDERS: [&str; 8] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];
/// The devices shown in `/dev`.
const DEVICES: [&str; 4] = ["null", "zero", "random", "urandom"];
/// Folders the sandbox makes itself: an interpreter prefix cannot lie in them.
const REPLACED: [&str; 3] = ["/proc", "/dev", "/scratch"];
/// The files a program may hold open at once: with the file-size limit, this bounds what it can
/// keep in memory outside its address space (`memfd_create` files, pipes).
const OPEN_FILES: u64 = 256;
/// The longest the sandbox's setup (from `clone` to `execve`) may take.
const SETUP_LIMIT: Duration = Duration::from_secs(20);
/// The most host folders shown (the system's and the interpreter's).
const MAX_SOURCES: usize = 32;

/// The limits a program runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodeLimits {
    /// Wall-clock time before the program is killed ([`TIMEOUT_RANGE`] whole seconds).
    pub timeout: Duration,
    /// Address space, in MiB ([`MEMORY_MB_RANGE`]).
    pub memory_mb: u64,
    /// Processes and threads at once ([`PROCESSES_RANGE`]).
    pub processes: u64,
    /// What `/scratch` and `/tmp` hold together, in MiB ([`DISK_MB_RANGE`]).
    pub disk_mb: u64,
}

impl Default for CodeLimits {
    /// The flags' defaults: 10 s, 512 MiB, 64 processes, 64 MiB written.
    fn default() -> CodeLimits {
        CodeLimits { timeout: Duration::from_secs(10), memory_mb: 512, processes: 64, disk_mb: 64 }
    }
}

impl CodeLimits {
    /// Refuses a limit outside its range, naming its flag.
    pub fn check(&self) -> Result<()> {
        let within = |flag: &str, value: u64, range: RangeInclusive<u64>, unit: &str| {
            if range.contains(&value) {
                Ok(())
            } else {
                Err(Error::argument(
                    flag,
                    format!("must be from {} to {}{unit}, not {value}", range.start(), range.end()),
                ))
            }
        };
        let seconds = self.timeout.as_secs();
        if self.timeout.subsec_nanos() != 0 || !TIMEOUT_RANGE.contains(&seconds) {
            return Err(Error::argument(
                "--code-timeout",
                format!(
                    "must be whole seconds from {} to {}, not {:?}",
                    TIMEOUT_RANGE.start(),
                    TIMEOUT_RANGE.end(),
                    self.timeout
                ),
            ));
        }
        within("--code-memory-mb", self.memory_mb, MEMORY_MB_RANGE, " MiB")?;
        within("--code-processes", self.processes, PROCESSES_RANGE, "")?;
        within("--code-disk-mb", self.disk_mb, DISK_MB_RANGE, " MiB")
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it (SIGXCPU: its CPU time ran out).
    Signal(i32),
    /// It ran past the wall-clock limit and was killed.
    TimedOut,
}

/// What one program did.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRun {
    /// How it ended.
    pub end: CodeEnd,
    /// Its stdout (the first [`STDOUT_LIMIT`] bytes, invalid UTF-8 replaced).
    pub stdout: String,
    /// Whether it printed more than was kept.
    pub stdout_truncated: bool,
    /// The end of its stderr.
    pub stderr: String,
}

/// One step of assembling the new root, run in the child in order (paths under [`STAGING`]).
#[derive(Debug)]
enum Op {
    /// `mkdir`, an existing folder accepted.
    Mkdir(CString, libc::mode_t),
    /// A symbolic link `path` → `target`.
    Symlink { target: CString, path: CString },
    /// An empty file (a mount point for a device).
    Touch(CString),
    /// A tmpfs with these options.
    Tmpfs { path: CString, options: CString },
    /// A recursive bind of the host folder opened as source number `source`.
    BindOpened { source: usize, target: CString },
    /// A bind of `source` (a path of the mount namespace as it is then).
    BindPath { source: CString, target: CString },
    /// `mount_setattr` read-only, nosuid (and nodev unless `devices`), recursive or not.
    ReadOnly { path: CString, recursive: bool, devices: bool },
    /// A fresh procfs of the new PID namespace.
    Proc(CString),
    /// `umount2(MNT_DETACH)`.
    Detach(CString),
    /// `rmdir`.
    Rmdir(CString),
    /// A sysctl of the new namespaces set: `text` written to `path`.
    Sysctl { path: CString, text: CString },
}

impl Op {
    /// What the step does, for an error message.
    fn describe(&self, sources: &[CString]) -> String {
        let show = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            Op::Mkdir(path, _) => format!("mkdir {}", show(path)),
            Op::Symlink { target, path } => format!("symlink {} -> {}", show(path), show(target)),
            Op::Touch(path) => format!("create the mount point {}", show(path)),
            Op::Tmpfs { path, options } => format!("mount a tmpfs ({}) on {}", show(options), show(path)),
            Op::BindOpened { source, target } => {
                format!("bind {} on {}", sources.get(*source).map(show).unwrap_or_default(), show(target))
            }
            Op::BindPath { source, target } => format!("bind {} on {}", show(source), show(target)),
            Op::ReadOnly { path, recursive, .. } => {
                format!(
                    "make {} read-only (mount_setattr{})",
                    show(path),
                    if *recursive { ", AT_RECURSIVE" } else { "" }
                )
            }
            Op::Proc(path) => format!("mount a procfs of the new PID namespace on {}", show(path)),
            Op::Detach(path) => format!("detach {}", show(path)),
            Op::Rmdir(path) => format!("rmdir {}", show(path)),
            Op::Sysctl { path, text } => format!("write {} to {}", show(text), show(path)),
        }
    }
}

/// The fixed steps of the child, by number (the ops follow from [`OP_STEP`], the opened sources
/// from [`SOURCE_STEP`]).
const STEPS: [&str; 17] = [
    "prctl(PR_SET_PDEATHSIG)",
    "wait for the uid and gid maps",
    "setgroups (drop supplementary groups)",
    "setresgid",
    "setresuid",
    "make every mount private (MS_REC | MS_PRIVATE)",
    "chdir to the new root",
    "pivot_root",
    "detach the old root",
    "make the new root read-only (mount_setattr)",
    "chdir /scratch",
    "write /scratch/main.py",
    "setsid",
    "setrlimit",
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "redirect stdin, stdout and stderr (dup2, close_range)",
    "execve the interpreter",
];
const STEP_DEATHSIG: u32 = 0;
const STEP_WAIT: u32 = 1;
const STEP_SETGROUPS: u32 = 2;
const STEP_SETRESGID: u32 = 3;
const STEP_SETRESUID: u32 = 4;
const STEP_PRIVATE: u32 = 5;
const STEP_CHDIR_ROOT: u32 = 6;
const STEP_PIVOT: u32 = 7;
const STEP_DETACH_OLD: u32 = 8;
const STEP_ROOT_READ_ONLY: u32 = 9;
const STEP_CHDIR_SCRATCH: u32 = 10;
const STEP_WRITE_MAIN: u32 = 11;
const STEP_SETSID: u32 = 12;
const STEP_RLIMIT: u32 = 13;
const STEP_NO_NEW_PRIVS: u32 = 14;
const STEP_STDIO: u32 = 15;
const STEP_EXEC: u32 = 16;
/// Step numbers of the ops start here.
const OP_STEP: u32 = 1000;
/// Step numbers of opening the host folders start here.
const SOURCE_STEP: u32 = 2000;
/// Step numbers of the sysctls start here.
const SYSCTL_STEP: u32 = 3000;

/// Everything the child needs, prepared once in [`Sandbox::open`].
#[derive(Debug)]
struct Layout {
    /// The host folders shown, opened (`O_PATH`) by the child before it changes its uid.
    sources: Vec<CString>,
    /// The namespaces' sysctls, set before the uid changes ([`Op::Sysctl`] only).
    sysctls: Vec<Op>,
    /// The steps that assemble the new root under [`STAGING`].
    ops: Vec<Op>,
    /// [`STAGING`].
    staging: CString,
    /// The interpreter's path (inside as outside).
    python: CString,
    /// Its arguments: `python -I main.py`.
    argv: Vec<CString>,
    /// Its environment: `PATH` only.
    envp: Vec<CString>,
    /// Whether indolm runs as root (the child then drops its supplementary groups).
    root: bool,
    /// The text of the program's `/proc/PID/uid_map`, `gid_map` and `setgroups` (none as root).
    uid_map: String,
    gid_map: String,
    setgroups: Option<&'static str>,
}

/// A Python interpreter that runs code in isolation.
#[derive(Debug)]
pub struct Sandbox {
    /// The interpreter, resolved to a path.
    python: PathBuf,
    /// Its limits.
    limits: CodeLimits,
    /// The prepared namespaces and mounts.
    layout: Layout,
}

/// The executable `name` names: itself when it holds a `/` (made absolute), else the first one on
/// `PATH`.
fn resolve(name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        let path = std::path::absolute(name).map_err(|e| Error::argument("--python", format!("{name}: {e}")))?;
        return if executable(&path) {
            Ok(path)
        } else {
            Err(Error::argument("--python", format!("{name} is not an executable file")))
        };
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var).map(|dir| dir.join(name)).find(|p| executable(p)).ok_or_else(|| {
        Error::argument("--python", format!("no executable `{name}` on PATH: name the interpreter with --python PATH"))
    })
}

/// A path as a C string (a NUL inside is refused).
fn c_path(path: impl AsRef<OsStr>) -> Result<CString> {
    let path = path.as_ref();
    CString::new(path.as_bytes())
        .map_err(|_| Error::system("--run-code", format!("the path {} holds a NUL byte", path.to_string_lossy())))
}

/// `path` (absolute) with `.` and `..` resolved lexically.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// The interpreter's prefixes (`sys.prefix`, `sys.exec_prefix` and their `base_` forms, each also
/// with its links resolved), asked once, outside the sandbox, with a 30-second limit.
fn interpreter_prefixes(python: &Path, path_env: &OsStr) -> Result<Vec<PathBuf>> {
    let script = "import os, sys\n\
                  sys.stdout.buffer.write(b'\\0'.join(os.fsencode(p) for p in \
                  (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)))";
    let failed =
        |why: String| Error::system("--run-code", format!("cannot ask {} for its prefixes: {why}", python.display()));
    let mut child = std::process::Command::new(python)
        .args(["-I", "-c", script])
        .env_clear()
        .env("PATH", path_env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().map_err(|e| failed(e.to_string()))?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed("it ran past 30 s".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!("{} ({})", output.status, String::from_utf8_lossy(&output.stderr).trim())));
    }
    let mut prefixes = Vec::new();
    for raw in output.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let prefix = PathBuf::from(OsStr::from_bytes(raw));
        if !prefix.is_absolute() {
            return Err(failed(format!("the prefix {} is not absolute", prefix.display())));
        }
        if let Ok(real) = prefix.canonicalize() {
            prefixes.push(real);
        }
        prefixes.push(normal(&prefix));
    }
    Ok(prefixes)
}

/// The path `inside` (absolute, as the program sees it) while the root is assembled.
fn staged(inside: &Path) -> Result<CString> {
    c_path(Path::new(STAGING).join(inside.strip_prefix("/").unwrap_or(inside)))
}

/// The steps that show the host folder `host` read-only at the same path: its missing parents
/// made, then bound and made read-only, recursively.
fn show_folder(host: &Path, sources: &mut Vec<CString>, ops: &mut Vec<Op>) -> Result<()> {
    let mut so_far = PathBuf::from("/");
    for part in host.components().skip(1) {
        so_far.push(part);
        ops.push(Op::Mkdir(staged(&so_far)?, 0o755));
    }
    sources.push(c_path(host)?);
    let target = staged(host)?;
    ops.push(Op::BindOpened { source: sources.len() - 1, target: target.clone() });
    ops.push(Op::ReadOnly { path: target, recursive: true, devices: false });
    Ok(())
}

/// Whether `path` is `folder` or lies in it.
fn within(path: &Path, folder: &Path) -> bool {
    path.starts_with(folder)
}

impl Layout {
    /// The new root for `python` (with `prefixes`) under `limits`: what is shown, what is writable.
    fn new(python: &Path, prefixes: &[PathBuf], limits: &CodeLimits, path_env: &OsStr) -> Result<(Layout, PathBuf)> {
        let (mut sources, mut ops) = (Vec::new(), Vec::new());
        // SAFETY: geteuid and getegid cannot fail.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let root = euid == 0;
        // No user namespace inside this one (where the program would have capabilities again:
        // to mount a tmpfs without a size limit, say); as root, no System V shared memory either,
        // which outlives a detach and so escapes the address-space limit (the IPC namespace's
        // sysctls can be written only by its owner's uid 0, which a user's namespace lacks).
        let mut sysctls = vec![("/proc/sys/user/max_user_namespaces", "0")];
        if root {
            sysctls.push(("/proc/sys/kernel/shmall", "0"));
        }
        let sysctls = sysctls
            .into_iter()
            .map(|(path, text)| Ok(Op::Sysctl { path: c_path(path)?, text: c_path(text)? }))
            .collect::<Result<Vec<Op>>>()?;
        ops.push(Op::Tmpfs { path: c_path(STAGING)?, options: c_path("mode=0755,size=1m,nr_inodes=4096")? });
        let mut shown: Vec<PathBuf> = Vec::new();
        for folder in SYSTEM_FOLDERS {
            let host = Path::new(folder);
            match host.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = std::fs::read_link(host).map_err(|e| Error::io(host, e))?;
                    ops.push(Op::Symlink { target: c_path(&target)?, path: staged(host)? });
                    // What it points to is shown when it lies in a shown folder (`usr/bin`).
                    shown.push(host.to_path_buf());
                }
                Ok(meta) if meta.is_dir() => {
                    show_folder(host, &mut sources, &mut ops)?;
                    shown.push(host.to_path_buf());
                }
                _ => {}
            }
        }
        // /dev: four devices and the links to /proc's descriptors, the folder read-only.
        let dev = Path::new("/dev");
        ops.push(Op::Mkdir(staged(dev)?, 0o755));
        ops.push(Op::Tmpfs { path: staged(dev)?, options: c_path("mode=0755,size=64k,nr_inodes=64")? });
        for device in DEVICES {
            let host = dev.join(device);
            ops.push(Op::Touch(staged(&host)?));
            ops.push(Op::BindPath { source: c_path(&host)?, target: staged(&host)? });
        }
        for (name, target) in [("fd", "/proc/self/fd"), ("stdin", "fd/0"), ("stdout", "fd/1"), ("stderr", "fd/2")] {
            ops.push(Op::Symlink { target: c_path(target)?, path: staged(&dev.join(name))? });
        }
        ops.push(Op::ReadOnly { path: staged(dev)?, recursive: false, devices: true });
        ops.push(Op::Mkdir(staged(Path::new("/proc"))?, 0o555));
        ops.push(Op::Proc(staged(Path::new("/proc"))?));
        // /scratch and /tmp: two folders of one size-limited tmpfs, mounted aside, then detached.
        let disk = Path::new("/.disk");
        ops.push(Op::Mkdir(staged(disk)?, 0o700));
        let options = format!("mode=0700,size={}m,nr_inodes={DISK_INODES}", limits.disk_mb);
        ops.push(Op::Tmpfs { path: staged(disk)?, options: c_path(options)? });
        for (name, mode) in [("scratch", 0o700), ("tmp", 0o1777)] {
            ops.push(Op::Mkdir(staged(&disk.join(name))?, mode));
            ops.push(Op::Mkdir(staged(&Path::new("/").join(name))?, 0o755));
            ops.push(Op::BindPath { source: staged(&disk.join(name))?, target: staged(&Path::new("/").join(name))? });
        }
        ops.push(Op::Detach(staged(disk)?));
        ops.push(Op::Rmdir(staged(disk)?));
        // The interpreter's prefixes, shortest first, each unless a shown folder holds it.
        let mut prefixes: Vec<PathBuf> = prefixes.to_vec();
        prefixes.sort_by_key(|p| p.as_os_str().len());
        for prefix in prefixes {
            if prefix == Path::new("/") || shown.iter().any(|s| within(&prefix, s)) {
                continue;
            }
            if let Some(folder) = REPLACED.iter().find(|r| within(&prefix, Path::new(r))) {
                return Err(Error::system(
                    "--run-code",
                    format!(
                        "the interpreter's prefix {} lies in {folder}, which the sandbox replaces",
                        prefix.display()
                    ),
                ));
            }
            show_folder(&prefix, &mut sources, &mut ops)?;
            shown.push(prefix);
        }
        if sources.len() > MAX_SOURCES {
            return Err(Error::system("--run-code", format!("more than {MAX_SOURCES} folders to show")));
        }
        // The interpreter as named when a shown folder holds it (a venv's `bin/python` must keep
        // its path), else with its links resolved.
        let inside = |p: &Path| shown.iter().any(|s| within(p, s));
        let python = if inside(&normal(python)) {
            normal(python)
        } else {
            let real = python.canonicalize().map_err(|e| Error::io(python, e))?;
            if !inside(&real) {
                return Err(Error::system(
                    "--run-code",
                    format!("the interpreter {} lies outside the folders the sandbox shows", python.display()),
                ));
            }
            real
        };
        let (outer_uid, outer_gid) = if root { (NOBODY, NOBODY) } else { (euid, egid) };
        let mut path_bytes = b"PATH=".to_vec();
        path_bytes.extend_from_slice(path_env.as_bytes());
        let layout = Layout {
            sources,
            sysctls,
            ops,
            staging: c_path(STAGING)?,
            python: c_path(&python)?,
            argv: vec![c_path(&python)?, c_path("-I")?, c_path("main.py")?],
            envp: vec![CString::new(path_bytes).map_err(|_| Error::system("--run-code", "PATH holds a NUL byte"))?],
            root,
            uid_map: format!("{INNER_ID} {outer_uid} 1\n"),
            gid_map: format!("{INNER_ID} {outer_gid} 1\n"),
            setgroups: if root { None } else { Some("deny") },
        };
        Ok((layout, python))
    }

    /// What child step `step` did, for an error message.
    fn describe(&self, step: u32) -> String {
        if step >= SYSCTL_STEP {
            self.sysctls.get((step - SYSCTL_STEP) as usize).map(|op| op.describe(&self.sources)).unwrap_or_default()
        } else if step >= SOURCE_STEP {
            let source = self.sources.get((step - SOURCE_STEP) as usize);
            format!("open {} (O_PATH)", source.map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
        } else if step >= OP_STEP {
            self.ops.get((step - OP_STEP) as usize).map(|op| op.describe(&self.sources)).unwrap_or_default()
        } else {
            STEPS.get(step as usize).copied().unwrap_or("an unknown step").to_string()
        }
    }
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills `fds` with two new descriptors, which are then owned here.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// `soft` and `hard` as a resource limit.
fn rlimit(soft: u64, hard: u64) -> libc::rlimit {
    libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t }
}

/// `mount_setattr(2)`'s argument (not in every libc).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// The descriptors and numbers the child uses, all made before `clone`.
struct ChildPlan<'a> {
    layout: &'a Layout,
    code: &'a [u8],
    go: RawFd,
    go_write: RawFd,
    report: RawFd,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    memory: u64,
    cpu: u64,
    disk: u64,
    processes: u64,
}

/// A failed child step: its number and errno.
type StepError = (u32, i32);

/// `Err((step, errno))` when `rc` is negative.
fn step(step: u32, rc: libc::c_long) -> std::result::Result<(), StepError> {
    if rc < 0 {
        // SAFETY: reading errno is async-signal-safe.
        Err((step, unsafe { *libc::__errno_location() }))
    } else {
        Ok(())
    }
}

/// `/proc/self/fd/<fd>` written NUL-terminated into `buffer`, without allocating.
fn fd_path(fd: RawFd, buffer: &mut [u8; 32]) -> *const libc::c_char {
    let prefix = b"/proc/self/fd/";
    buffer[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 12];
    let (mut n, mut count) = (fd.unsigned_abs(), 0);
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 || count == digits.len() {
            break;
        }
    }
    for i in 0..count {
        buffer[prefix.len() + i] = digits[count - 1 - i];
    }
    buffer[prefix.len() + count] = 0;
    buffer.as_ptr().cast()
}

/// The child's steps from its start in the new namespaces to `execve`; returns only on failure.
/// Only async-signal-safe system calls, on values prepared before `clone`.
fn child_steps(plan: &ChildPlan) -> std::result::Result<(), StepError> {
    let layout = plan.layout;
    // SAFETY: plain system calls in the single-threaded child on pointers into `plan`, which the
    // parent keeps alive (the child has its own copy of the memory).
    unsafe {
        let deathsig = || {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        step(STEP_DEATHSIG, deathsig() as _)?;
        libc::close(plan.go_write);
        let mut byte = 0u8;
        if libc::read(plan.go, (&mut byte as *mut u8).cast(), 1) != 1 {
            // The parent is gone or could not write the maps (it then reports why itself).
            return Err((STEP_WAIT, libc::EPIPE));
        }
        libc::umask(0);
        // The host folders, opened while the uid still lets every parent be searched.
        let mut opened = [-1 as RawFd; MAX_SOURCES];
        for (i, source) in layout.sources.iter().enumerate().take(MAX_SOURCES) {
            let fd = libc::open(source.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
            step(SOURCE_STEP + i as u32, fd as _)?;
            opened[i] = fd;
        }
        for (i, op) in layout.sysctls.iter().enumerate() {
            step(SYSCTL_STEP + i as u32, run_op(op, &opened))?;
        }
        if layout.root {
            step(STEP_SETGROUPS, libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()))?;
        }
        let id = INNER_ID as libc::uid_t;
        // The system calls, not glibc's wrappers: those broadcast the change to every thread of
        // the parent they still believe in, and wait for them (a fork would have reset that list;
        // this clone does not), which hangs.
        step(STEP_SETRESGID, libc::syscall(libc::SYS_setresgid, id, id, id))?;
        step(STEP_SETRESUID, libc::syscall(libc::SYS_setresuid, id, id, id))?;
        // Changing the uid cleared the parent-death signal: set again, then check the parent is
        // still there (it holds the report pipe's read end until the exec).
        step(STEP_DEATHSIG, deathsig() as _)?;
        let mut parent = libc::pollfd { fd: plan.report, events: 0, revents: 0 };
        if libc::poll(&mut parent, 1, 0) != 0 && parent.revents & libc::POLLERR != 0 {
            libc::_exit(126);
        }
        let none: *const libc::c_char = std::ptr::null();
        step(
            STEP_PRIVATE,
            libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) as _,
        )?;
        for (i, op) in layout.ops.iter().enumerate() {
            step(OP_STEP + i as u32, run_op(op, &opened))?;
        }
        for fd in opened.iter().filter(|fd| **fd >= 0) {
            libc::close(*fd);
        }
        step(STEP_CHDIR_ROOT, libc::chdir(layout.staging.as_ptr()) as _)?;
        step(STEP_PIVOT, libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()))?;
        step(STEP_DETACH_OLD, libc::umount2(c".".as_ptr(), libc::MNT_DETACH) as _)?;
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let size = std::mem::size_of::<MountAttr>();
        step(
            STEP_ROOT_READ_ONLY,
            libc::syscall(libc::SYS_mount_setattr, libc::AT_FDCWD, c"/".as_ptr(), 0, &attr as *const MountAttr, size),
        )?;
        step(STEP_CHDIR_SCRATCH, libc::chdir(c"/scratch".as_ptr()) as _)?;
        libc::umask(0o022);
        let fd =
            libc::open(c"main.py".as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o644);
        step(STEP_WRITE_MAIN, fd as _)?;
        let mut written = 0;
        while written < plan.code.len() {
            let n = libc::write(fd, plan.code[written..].as_ptr().cast(), plan.code.len() - written);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            step(STEP_WRITE_MAIN, n as _)?;
            written += n as usize;
        }
        libc::close(fd);
        step(STEP_SETSID, libc::setsid() as _)?;
        for (resource, soft, hard) in [
            (libc::RLIMIT_AS, plan.memory, plan.memory),
            (libc::RLIMIT_CPU, plan.cpu, plan.cpu + 1),
            (libc::RLIMIT_FSIZE, plan.disk, plan.disk),
            (libc::RLIMIT_CORE, 0, 0),
            (libc::RLIMIT_NPROC, plan.processes, plan.processes),
            (libc::RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
        ] {
            step(STEP_RLIMIT, libc::setrlimit(resource, &rlimit(soft, hard)) as _)?;
        }
        let one = 1 as libc::c_ulong;
        let zero = 0 as libc::c_ulong;
        step(STEP_NO_NEW_PRIVS, libc::prctl(libc::PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) as _)?;
        for (from, to) in [(plan.stdin, 0), (plan.stdout, 1), (plan.stderr, 2)] {
            step(STEP_STDIO, libc::dup2(from, to) as _)?;
        }
        // Every other descriptor (indolm's, other runs') closes at exec.
        step(STEP_STDIO, libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC))?;
        let argv: [*const libc::c_char; 4] =
            [layout.argv[0].as_ptr(), layout.argv[1].as_ptr(), layout.argv[2].as_ptr(), std::ptr::null()];
        let envp: [*const libc::c_char; 2] = [layout.envp[0].as_ptr(), std::ptr::null()];
        libc::execve(layout.python.as_ptr(), argv.as_ptr(), envp.as_ptr());
        step(STEP_EXEC, -1)
    }
}

/// Runs one op in the child (see [`child_steps`]): its result as a system call's.
///
/// # Safety
/// Only in the child between `clone` and `execve`; `opened` holds the sources' descriptors.
unsafe fn run_op(op: &Op, opened: &[RawFd; MAX_SOURCES]) -> libc::c_long {
    let none: *const libc::c_char = std::ptr::null();
    // SAFETY: plain system calls on the op's C strings.
    unsafe {
        match op {
            Op::Mkdir(path, mode) => {
                let rc = libc::mkdir(path.as_ptr(), *mode);
                if rc != 0 && *libc::__errno_location() == libc::EEXIST {
                    0
                } else {
                    rc as _
                }
            }
            Op::Symlink { target, path } => libc::symlink(target.as_ptr(), path.as_ptr()) as _,
            Op::Touch(path) => {
                let fd =
                    libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o644);
                if fd >= 0 {
                    libc::close(fd);
                }
                fd as _
            }
            Op::Tmpfs { path, options } => libc::mount(
                c"tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            ) as _,
            Op::BindOpened { source, target } => {
                let mut buffer = [0u8; 32];
                let source = fd_path(opened.get(*source).copied().unwrap_or(-1), &mut buffer);
                libc::mount(source, target.as_ptr(), none, libc::MS_BIND | libc::MS_REC, std::ptr::null()) as _
            }
            Op::BindPath { source, target } => {
                libc::mount(source.as_ptr(), target.as_ptr(), none, libc::MS_BIND, std::ptr::null()) as _
            }
            Op::ReadOnly { path, recursive, devices } => {
                let set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | if *devices { 0 } else { MOUNT_ATTR_NODEV };
                let attr = MountAttr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 };
                libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    if *recursive { AT_RECURSIVE } else { 0 },
                    &attr as *const MountAttr,
                    std::mem::size_of::<MountAttr>(),
                )
            }
            Op::Proc(path) => libc::mount(
                c"proc".as_ptr(),
                path.as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) as _,
            Op::Detach(path) => libc::umount2(path.as_ptr(), libc::MNT_DETACH) as _,
            Op::Rmdir(path) => libc::rmdir(path.as_ptr()) as _,
            Op::Sysctl { path, text } => {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    fd as _
                } else {
                    let bytes = text.as_bytes();
                    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                    libc::close(fd);
                    if n == bytes.len() as isize {
                        0
                    } else {
                        -1
                    }
                }
            }
        }
    }
}

/// The child: its steps, then (on failure) the step and errno to the parent, and exit 127.
fn child_main(plan: &ChildPlan) -> ! {
    let (number, errno) = child_steps(plan).err().unwrap_or((STEP_EXEC, 0));
    let mut message = [0u8; 8];
    message[..4].copy_from_slice(&number.to_ne_bytes());
    message[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: write and _exit are async-signal-safe; the message is on this frame.
    unsafe {
        libc::write(plan.report, message.as_ptr().cast(), message.len());
        libc::_exit(127)
    }
}

/// Whether the child `pid` has ended, without reaping it.
fn ended(pid: libc::pid_t) -> bool {
    // SAFETY: waitid on our own child with WNOWAIT fills `info`, which starts zeroed.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) == 0 && info.si_pid() != 0
    }
}

/// Kills the child `pid` (pid 1 of its namespace: every process in it goes with it) and reaps it:
/// its wait status.
fn kill_and_reap(pid: libc::pid_t, kill: bool) -> std::io::Result<libc::c_int> {
    // SAFETY: a signal to, and a wait for, our own child, not yet reaped (so `pid` names nothing
    // else).
    unsafe {
        if kill {
            libc::kill(pid, libc::SIGKILL);
        }
        let mut status = 0;
        loop {
            if libc::waitpid(pid, &mut status, 0) >= 0 {
                return Ok(status);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Appends what `pipe` has to `kept`, keeping at most `limit` bytes (the first ones when
/// `keep_start`, else the last); `false` once it is closed.
fn drain<R: Read>(pipe: &mut R, kept: &mut Vec<u8>, limit: usize, keep_start: bool, dropped: &mut bool) -> bool {
    let mut buffer = [0u8; 8192];
    match Read::read(pipe, &mut buffer) {
        Ok(0) => false,
        Ok(n) => {
            if keep_start {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                *dropped |= n > room;
            } else {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > limit {
                    let excess = kept.len() - limit;
                    kept.drain(..excess);
                    *dropped = true;
                }
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
        Err(_) => false,
    }
}

/// An error of the sandbox's setup, with the advice every one shares.
fn refused(what: String) -> Error {
    Error::system(
        "--run-code",
        format!(
            "the sandbox cannot be set up here: {what}. indolm never runs generated code with less isolation: run \
             without --run-code (task-7 answers are then counted as not run), or where user namespaces are allowed \
             (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1, no seccomp filter refusing \
             clone/mount) on Linux 5.12 or later (docs/bias-qa.md, \"Task 7 and the sandbox\")"
        ),
    )
}

impl Sandbox {
    /// An interpreter for `python` (a path, or a name on `PATH`) under `limits`, checked to run:
    /// an error when a limit is out of range, when this machine cannot build the sandbox (the step
    /// and errno named), and when the interpreter cannot run `print("ok")` in it.
    pub fn open(python: &str, limits: CodeLimits) -> Result<Sandbox> {
        limits.check()?;
        let python = resolve(python)?;
        let path_env = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let prefixes = interpreter_prefixes(&python, &path_env)?;
        let (layout, python) = Layout::new(&python, &prefixes, &limits, &path_env)?;
        let sandbox = Sandbox { python, limits, layout };
        let probe = sandbox.run("print('ok')")?;
        if probe.end != CodeEnd::Exited(0) || probe.stdout.trim() != "ok" {
            return Err(Error::system(
                "--run-code",
                format!(
                    "{} did not run a one-line program in the sandbox ({:?}): {}",
                    sandbox.python.display(),
                    probe.end,
                    probe.stderr.trim()
                ),
            ));
        }
        Ok(sandbox)
    }

    /// The interpreter.
    pub(crate) fn python(&self) -> &Path {
        &self.python
    }

    /// The limits.
    pub(crate) fn limits(&self) -> CodeLimits {
        self.limits
    }

    /// Runs `code` as `python -I main.py` in `/scratch` of a fresh sandbox, isolated and limited.
    pub fn run(&self, code: &str) -> Result<CodeRun> {
        let system = |what: &str, e: std::io::Error| Error::system("--run-code", format!("{what}: {e}"));
        let (go, go_write) = pipe().map_err(|e| system("pipe", e))?;
        let (report, report_write) = pipe().map_err(|e| system("pipe", e))?;
        let (out, out_write) = pipe().map_err(|e| system("pipe", e))?;
        let (err, err_write) = pipe().map_err(|e| system("pipe", e))?;
        let stdin = std::fs::File::open("/dev/null").map_err(|e| system("/dev/null", e))?;
        let plan = ChildPlan {
            layout: &self.layout,
            code: code.as_bytes(),
            go: go.as_raw_fd(),
            go_write: go_write.as_raw_fd(),
            report: report_write.as_raw_fd(),
            stdin: stdin.as_raw_fd(),
            stdout: out_write.as_raw_fd(),
            stderr: err_write.as_raw_fd(),
            memory: self.limits.memory_mb * 1024 * 1024,
            cpu: self.limits.timeout.as_secs() + 1,
            disk: self.limits.disk_mb * 1024 * 1024,
            processes: self.limits.processes,
        };
        let flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::SIGCHLD;
        // SAFETY: clone without CLONE_VM is a fork: the child gets a copy of this memory and runs
        // only `child_main` (async-signal-safe calls on `plan`, prepared above) until execve.
        let pid = unsafe { libc::syscall(libc::SYS_clone, flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            return Err(refused(format!(
                "clone with new user, mount, PID, network, IPC and UTS namespaces failed ({e})"
            )));
        }
        if pid == 0 {
            child_main(&plan);
        }
        let pid = pid as libc::pid_t;
        drop((go, report_write, out_write, err_write, stdin));
        // The program's uid and gid, written from here (the child cannot map `nobody` itself).
        let mut maps = vec![("uid_map", self.layout.uid_map.as_str()), ("gid_map", self.layout.gid_map.as_str())];
        if let Some(setgroups) = self.layout.setgroups {
            maps.insert(0, ("setgroups", setgroups));
        }
        for (file, text) in maps {
            let path = format!("/proc/{pid}/{file}");
            if let Err(e) = std::fs::write(&path, text) {
                let _ = kill_and_reap(pid, true);
                return Err(refused(format!("writing {:?} to {path} failed ({e})", text.trim())));
            }
        }
        let mut go_write = std::fs::File::from(go_write);
        if let Err(e) = std::io::Write::write_all(&mut go_write, &[1]) {
            let _ = kill_and_reap(pid, true);
            return Err(system("starting the sandbox", e));
        }
        drop(go_write);
        // Its setup: nothing comes (the pipe closes at exec), or the failed step and errno; a
        // setup that hangs is refused too.
        let setup_deadline = Instant::now() + SETUP_LIMIT;
        loop {
            let left = setup_deadline.saturating_duration_since(Instant::now());
            let mut ready = libc::pollfd { fd: report.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd.
            if unsafe { libc::poll(&mut ready, 1, left.as_millis() as libc::c_int) } > 0 {
                break;
            }
            if left.is_zero() {
                let _ = kill_and_reap(pid, true);
                return Err(refused(format!("its setup did not finish within {} s", SETUP_LIMIT.as_secs())));
            }
        }
        let mut message = Vec::new();
        let _ = std::fs::File::from(report).read_to_end(&mut message);
        if message.len() >= 8 {
            let _ = kill_and_reap(pid, true);
            let number = u32::from_ne_bytes([message[0], message[1], message[2], message[3]]);
            let errno = i32::from_ne_bytes([message[4], message[5], message[6], message[7]]);
            let e = std::io::Error::from_raw_os_error(errno);
            return Err(refused(format!("{} failed ({e})", self.layout.describe(number))));
        }
        let (mut out, mut err) = (Some(std::fs::File::from(out)), Some(std::fs::File::from(err)));
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let (mut truncated, mut stderr_cut) = (false, false);
        let deadline = Instant::now() + self.limits.timeout;
        // Until both pipes close: when pid 1 ends, the kernel ends every process of its namespace,
        // so a child left holding stdout does not keep the run going.
        let timed_out = loop {
            if Instant::now() >= deadline {
                break true;
            }
            let mut fds: Vec<libc::pollfd> = [out.as_ref().map(|p| p.as_raw_fd()), err.as_ref().map(|p| p.as_raw_fd())]
                .into_iter()
                .flatten()
                .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
                .collect();
            if fds.is_empty() {
                if ended(pid) {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            // SAFETY: `fds` is a live array of `fds.len()` pollfd structures.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 20) };
            if ready <= 0 {
                continue;
            }
            for fd in fds.iter().filter(|fd| fd.revents != 0) {
                if let Some(pipe) = out.as_mut().filter(|p| p.as_raw_fd() == fd.fd) {
                    if !drain(pipe, &mut stdout, STDOUT_LIMIT, true, &mut truncated) {
                        out = None;
                    }
                } else if let Some(pipe) = err.as_mut().filter(|p| p.as_raw_fd() == fd.fd) {
                    if !drain(pipe, &mut stderr, STDERR_LIMIT, false, &mut stderr_cut) {
                        err = None;
                    }
                }
            }
        };
        let status = kill_and_reap(pid, timed_out).map_err(|e| system("waiting for the program", e))?;
        let end = if timed_out {
            CodeEnd::TimedOut
        } else if libc::WIFEXITED(status) {
            CodeEnd::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            CodeEnd::Signal(libc::WTERMSIG(status))
        } else {
            CodeEnd::Exited(-1)
        };
        Ok(CodeRun {
            end,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stdout_truncated: truncated,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_paths_are_written_without_allocating() {
        for (fd, expected) in [(0, "/proc/self/fd/0"), (7, "/proc/self/fd/7"), (1234567, "/proc/self/fd/1234567")] {
            let mut buffer = [0u8; 32];
            let path = fd_path(fd, &mut buffer);
            // SAFETY: fd_path wrote a NUL-terminated string into `buffer`.
            assert_eq!(unsafe { std::ffi::CStr::from_ptr(path) }.to_str().unwrap(), expected);
        }
    }

    #[test]
    fn limits_are_checked_against_their_ranges() {
        let ok = CodeLimits::default();
        assert!(ok.check().is_ok());
        let refused = [
            CodeLimits { timeout: Duration::from_secs(0), ..ok },
            CodeLimits { timeout: Duration::from_secs(3601), ..ok },
            CodeLimits { timeout: Duration::from_millis(1500), ..ok },
            CodeLimits { memory_mb: 31, ..ok },
            CodeLimits { memory_mb: u64::MAX, ..ok },
            CodeLimits { processes: 0, ..ok },
            CodeLimits { disk_mb: 4097, ..ok },
        ];
        for limits in refused {
            assert!(limits.check().is_err(), "{limits:?}");
        }
        let edges = CodeLimits { timeout: Duration::from_secs(3600), memory_mb: 65536, processes: 4096, disk_mb: 4096 };
        assert!(edges.check().is_ok());
    }

    #[test]
    fn the_layout_shows_the_prefixes_outside_the_system_folders_once() {
        let prefixes = [PathBuf::from("/opt/py/venv"), PathBuf::from("/opt/py"), PathBuf::from("/usr/local")];
        let (layout, python) =
            Layout::new(Path::new("/bin/sh"), &prefixes, &CodeLimits::default(), OsStr::new("/bin")).unwrap();
        let shown: Vec<&str> = layout.sources.iter().map(|s| s.to_str().unwrap()).collect();
        // /opt/py holds the venv; /usr/local lies in /usr.
        assert!(
            shown.contains(&"/opt/py") && !shown.contains(&"/opt/py/venv") && !shown.contains(&"/usr/local"),
            "{shown:?}"
        );
        assert!(python.starts_with("/bin") || python.starts_with("/usr"), "{python:?}");
        let replaced =
            Layout::new(Path::new("/bin/sh"), &[PathBuf::from("/proc/x")], &CodeLimits::default(), OsStr::new(""));
        assert!(replaced.is_err());
    }
}
