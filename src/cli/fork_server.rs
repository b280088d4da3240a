//! Test-only, not a user option: with `INDOLM_TEST_FORK_SERVER=1`, `indolm` becomes a fork
//! server for the test suite. Every `indolm` process spends about half a second of CPU loading
//! libtorch (registering thousands of operators), more than most test commands take to run;
//! the server pays it once, then runs each command line in a child forked from that state: a
//! process of its own, running `main`'s code on its own arguments, environment, working directory
//! and output files, so nothing one command sets is seen by the next. No torch operation runs
//! before a fork (libtorch's thread pools start in each child, as in a fresh process), and the
//! server refuses to start when the loading left a second thread (a fork would copy only one).
//!
//! It reads one JSON request a line on stdin, `{"argv": ["indolm", …], "env": {NAME: VALUE, …},
//! "cwd": DIR, "stdout": PATH, "stderr": PATH}`, and answers one line on stdout once the child has
//! exited: `{"status": S}`, the raw wait status (an exit code or the signal that ended it). The
//! client is `indolm()` in `tests/it/common.rs`, which falls back to a fresh process without it.
use std::ffi::CString;
use std::io::Write;

/// Whether the variable asks for the server.
pub fn asked() -> bool {
    std::env::var("INDOLM_TEST_FORK_SERVER").is_ok_and(|v| v == "1")
}

/// One command line to run.
#[derive(serde::Deserialize)]
struct Request {
    argv: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    cwd: String,
    stdout: String,
    stderr: String,
}

/// Serves requests until stdin closes; `main` runs a command line in a child and returns its
/// exit code, with which `exit` ends the child as `main.rs` ends a process.
pub fn serve(main: fn(Vec<String>) -> i32, exit: fn(i32) -> !) -> ! {
    let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0);
    if threads != 1 {
        eprintln!("error: the fork server needs one thread after loading, found {threads}");
        std::process::exit(1);
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{{\"ready\": true}}").and_then(|_| out.flush());
    loop {
        // Read a line at a time with stdin's lock released before the fork (a child never sees it
        // held); requests come one at a time, so nothing is left buffered.
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: a fork server request: {e}");
                std::process::exit(1);
            }
        };
        // SAFETY: this process has one thread (checked above, and nothing here starts one), so
        // the child is a complete copy; it runs `main` and exits without returning here.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            run_child(request, main, exit);
        }
        let mut status = 0;
        if pid < 0 || unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            status = 127 << 8; // as a shell reports a command it could not run
        }
        let _ = writeln!(out, "{{\"status\": {status}}}").and_then(|_| out.flush());
    }
    std::process::exit(0)
}

/// In the child: the request's environment, folder and files, then `main` on its arguments.
fn run_child(request: Request, main: fn(Vec<String>) -> i32, exit: fn(i32) -> !) -> ! {
    let inherited: Vec<std::ffi::OsString> = std::env::vars_os().map(|(name, _)| name).collect();
    for name in inherited {
        std::env::remove_var(name);
    }
    for (name, value) in &request.env {
        std::env::set_var(name, value);
    }
    let redirected = std::env::set_current_dir(&request.cwd).is_ok()
        && redirect(0, "/dev/null", libc::O_RDONLY)
        && redirect(1, &request.stdout, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC)
        && redirect(2, &request.stderr, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
    if !redirected {
        unsafe { libc::_exit(127) };
    }
    exit(main(request.argv))
}

/// Opens `path` onto the descriptor `fd`.
fn redirect(fd: i32, path: &str, flags: i32) -> bool {
    let Ok(path) = CString::new(path) else { return false };
    // SAFETY: plain system calls on a valid C string and descriptors this process owns.
    unsafe {
        let opened = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
        if opened < 0 {
            return false;
        }
        let ok = libc::dup2(opened, fd) == fd;
        libc::close(opened);
        ok
    }
}
