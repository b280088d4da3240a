//! Where task 7's generated code runs (only with `--run-code`): a child `python3` in a process of
//! its own, started with `pre_exec` in a new user and network namespace
//! (`unshare(CLONE_NEWUSER | CLONE_NEWNET)`: no network, not even loopback), in a process group of
//! its own, with `setrlimit` limits on its address space (`--code-memory-mb`), CPU time (the time
//! limit, rounded up, plus one second), file size (16 MiB) and core files (none); a wall-clock
//! limit (`--code-timeout`) after which the whole group is killed; a fresh scratch folder as its
//! working folder, removed afterwards; an empty environment but `PATH`; stdin from /dev/null, and
//! stdout kept up to 64 KiB. Where a user namespace cannot be made, [`Sandbox::open`] fails with a
//! message saying network isolation is unavailable here: code never runs unisolated.
//!
//! The code can still read what the user running indolm may read, and write where they may write
//! (the limits bound how much): run it as a user, or in a container, that holds nothing to protect.
use crate::error::{Error, IoContext, Result};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most of a program's stdout kept (the rest is read and dropped).
pub const STDOUT_LIMIT: usize = 64 * 1024;
/// The most of a program's stderr kept (its end: where Python's traceback says what failed).
const STDERR_LIMIT: usize = 16 * 1024;
/// The largest file the code may write.
const FILE_SIZE_LIMIT: u64 = 16 * 1024 * 1024;
/// The least memory limit accepted: below it the interpreter itself cannot start.
pub const MIN_MEMORY_MB: u64 = 32;

/// The limits a program runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodeLimits {
    /// Wall-clock time before the program is killed.
    pub timeout: Duration,
    /// Address space, in MiB.
    pub memory_mb: u64,
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

/// A Python interpreter that runs code in isolation.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The interpreter, resolved to a path.
    python: PathBuf,
    /// The `PATH` the program sees.
    path_env: std::ffi::OsString,
    /// Its limits.
    limits: CodeLimits,
}

/// The executable `name` names: itself when it holds a `/`, else the first one on `PATH`.
fn resolve(name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        let path = PathBuf::from(name);
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

/// Whether this process may make a user and a network namespace: a forked child tries
/// `unshare(CLONE_NEWUSER | CLONE_NEWNET)` and exits with its errno.
fn isolation_available() -> std::result::Result<(), std::io::Error> {
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe, so forking from a
    // process with other threads is sound; the parent reaps it with waitpid.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            let code = if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
                0
            } else {
                std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM)
            };
            libc::_exit(code);
        }
        let mut status = 0;
        if libc::waitpid(pid, &mut status, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
            (true, 0) => Ok(()),
            (true, errno) => Err(std::io::Error::from_raw_os_error(errno)),
            _ => Err(std::io::Error::other("the probe process was ended by a signal")),
        }
    }
}

/// `rc` of a system call as a result.
fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `soft` and `hard` as a resource limit.
fn rlimit(soft: u64, hard: u64) -> libc::rlimit {
    libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t }
}

/// Run in the child between fork and exec: a process group of its own, a new user and network
/// namespace, and the limits. Only async-signal-safe system calls.
fn isolate(memory: u64, cpu: u64) -> std::io::Result<()> {
    // SAFETY: plain system calls on values of this frame, in the single-threaded child.
    unsafe {
        check(libc::setpgid(0, 0))?;
        check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET))?;
        check(libc::setrlimit(libc::RLIMIT_AS, &rlimit(memory, memory)))?;
        check(libc::setrlimit(libc::RLIMIT_CPU, &rlimit(cpu, cpu + 1)))?;
        check(libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit(FILE_SIZE_LIMIT, FILE_SIZE_LIMIT)))?;
        check(libc::setrlimit(libc::RLIMIT_CORE, &rlimit(0, 0)))?;
    }
    Ok(())
}

/// A fresh folder under the system's temporary folder, removed (with what the code left) when
/// dropped.
struct Scratch(PathBuf);

impl Scratch {
    /// Makes `indolm-code-<pid>-<n>`, the first `n` not taken.
    fn new() -> Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!("indolm-code-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Scratch(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the child `pid` has ended, without reaping it (its process group stays valid).
fn ended(pid: libc::pid_t) -> bool {
    // SAFETY: waitid on our own child with WNOWAIT fills `info`, which starts zeroed.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) == 0 && info.si_pid() != 0
    }
}

/// Kills every process of the group `pid` leads.
fn kill_group(pid: libc::pid_t) {
    // SAFETY: a signal to our own child's process group, while the child is not yet reaped (so
    // the group id cannot name anything else).
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
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

impl Sandbox {
    /// An interpreter for `python` (a path, or a name on `PATH`) under `limits`, checked to run:
    /// an error when this machine cannot isolate it, and when it cannot run `print("ok")`.
    pub fn open(python: &str, limits: CodeLimits) -> Result<Sandbox> {
        if limits.memory_mb < MIN_MEMORY_MB {
            return Err(Error::argument("--code-memory-mb", format!("must be at least {MIN_MEMORY_MB}")));
        }
        if limits.timeout.is_zero() {
            return Err(Error::argument("--code-timeout", "must be at least 1 second"));
        }
        let python = resolve(python)?;
        isolation_available().map_err(|e| {
            Error::system(
                "--run-code",
                format!(
                    "network isolation is unavailable here: unshare(CLONE_NEWUSER | CLONE_NEWNET) failed ({e}). \
                     indolm never runs generated code without it: run without --run-code (task-7 answers are then \
                     counted as not run), or where unprivileged user namespaces are allowed \
                     (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1)"
                ),
            )
        })?;
        let path_env = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let sandbox = Sandbox { python, path_env, limits };
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
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The limits.
    pub fn limits(&self) -> CodeLimits {
        self.limits
    }

    /// Runs `code` as `python -I main.py` in a fresh scratch folder, isolated and limited.
    pub fn run(&self, code: &str) -> Result<CodeRun> {
        let scratch = Scratch::new()?;
        let script = scratch.0.join("main.py");
        std::fs::write(&script, code).with_path(&script)?;
        let memory = self.limits.memory_mb * 1024 * 1024;
        let cpu = self.limits.timeout.as_secs() + u64::from(self.limits.timeout.subsec_nanos() > 0) + 1;
        let mut command = Command::new(&self.python);
        command
            .args(["-I", "main.py"])
            .current_dir(&scratch.0)
            .env_clear()
            .env("PATH", &self.path_env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: `isolate` makes only async-signal-safe system calls, on copied values.
        unsafe {
            command.pre_exec(move || isolate(memory, cpu));
        }
        let mut child = command.spawn().map_err(|e| {
            Error::system("--run-code", format!("cannot start {} in the sandbox: {e}", self.python.display()))
        })?;
        let pid = child.id() as libc::pid_t;
        let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let (mut truncated, mut stderr_cut) = (false, false);
        let deadline = Instant::now() + self.limits.timeout;
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
                std::thread::sleep(Duration::from_millis(5));
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
        // Whatever it left running in its group goes too; then the child is reaped.
        kill_group(pid);
        let status = child.wait().with_path(&self.python)?;
        let end = match (timed_out, status.code(), status.signal()) {
            (true, _, _) => CodeEnd::TimedOut,
            (false, Some(code), _) => CodeEnd::Exited(code),
            (false, None, Some(signal)) => CodeEnd::Signal(signal),
            (false, None, None) => CodeEnd::Exited(-1),
        };
        Ok(CodeRun {
            end,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stdout_truncated: truncated,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}
