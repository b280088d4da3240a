//! Shared test helpers: the project's .venv python, the reference fixtures built by
//! `tests/reference/hf_reference.py`, and running the `indolm` binary.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data` in the repository: the subsets of NusaX, UD Indonesian and CrowS-Pairs the
/// tests read, in the upstream layout (`nusax/sentiment/<language>/{train,valid,test}.csv`,
/// `nusax/mt/train.csv`, `ud-indonesian/*.conllu`, `crows-pairs/crows_pairs_anonymized.csv`);
/// each folder's README says what was cut, and its LICENSE how it may be shared.
pub fn test_data() -> PathBuf {
    let dir = root().join("tests").join("data");
    assert!(dir.is_dir(), "the test data folder {} is missing", dir.display());
    dir
}

/// The project's venv python (made by `make setup`); the tests need transformers from it.
pub fn python() -> PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(p.exists(), "{} is missing: run `make setup` (make test does)", p.display());
    p
}

/// Runs `tests/reference/hf_reference.py <args>`; panics with its output on failure. The
/// subcommand runs in a child of the reference fork server ([`ZYGOTE`]), a process of its own
/// that starts with torch and transformers already imported; without the server, in a fresh
/// interpreter.
pub fn reference(args: &[&str]) -> String {
    let (success, stdout, stderr) = {
        let mut zygote = ZYGOTE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if zygote.is_none() {
            *zygote = start_zygote().map_err(|e| eprintln!("the reference fork server did not start ({e})")).ok();
        }
        match zygote.as_mut().map(|z| z.reference(args)) {
            Some(Ok(done)) => done,
            failed => {
                if let Some(Err(e)) = failed {
                    eprintln!("the reference fork server failed ({e}); a fresh interpreter instead");
                }
                *zygote = None;
                let out = reference_command().arg(root().join("tests/reference/hf_reference.py")).args(args).output();
                let out = out.expect("run python");
                (out.status.success(), text(&out.stdout), text(&out.stderr))
            }
        }
    };
    assert!(success, "reference {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// The venv's python with the environment every reference runs in.
fn reference_command() -> Command {
    let mut command = Command::new(python());
    command.env("HF_HUB_OFFLINE", "1").env("TRANSFORMERS_VERBOSITY", "error");
    command
}

/// The reference fork server (`tests/reference/zygote.py`), started by the first [`reference`]
/// and ended when this process ends (its stdin closes).
static ZYGOTE: std::sync::Mutex<Option<ForkServer>> = std::sync::Mutex::new(None);

/// Starts the reference fork server, once it has imported everything.
fn start_zygote() -> std::io::Result<ForkServer> {
    let mut command = reference_command();
    // Its children write to their own files; a failure shows in the fallback.
    command.arg(root().join("tests/reference/zygote.py")).stderr(std::process::Stdio::null());
    ForkServer::start(command, "zygote")
}

/// A running fork server, Python's or indolm's: one JSON request a line on its stdin, each run
/// in a child with its output in two files, one JSON answer a line on its stdout once the child
/// has exited.
struct ForkServer {
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Where each request's output goes.
    dir: PathBuf,
    requests: usize,
    _child: std::process::Child,
}

impl ForkServer {
    /// Starts `command` as a server and waits for its ready line; `name` names its output folder.
    fn start(mut command: Command, name: &str) -> std::io::Result<ForkServer> {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut ready = String::new();
        stdout.read_line(&mut ready)?;
        if !ready.contains("\"ready\"") {
            return Err(std::io::Error::other(format!("expected its ready line, read {ready:?}")));
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(ForkServer { stdin, stdout, dir, requests: 0, _child: child })
    }

    /// Sends `request` (the server's keys but `stdout` and `stderr`, which this adds) and waits
    /// for its child: the answer's `key` (an exit code or a wait status), its stdout and stderr.
    fn request(&mut self, mut request: serde_json::Value, key: &str) -> std::io::Result<(i64, Vec<u8>, Vec<u8>)> {
        use std::io::{BufRead, Write};
        self.requests += 1;
        let (out, err) =
            (self.dir.join(format!("{}.out", self.requests)), self.dir.join(format!("{}.err", self.requests)));
        request["stdout"] = serde_json::json!(out);
        request["stderr"] = serde_json::json!(err);
        writeln!(self.stdin, "{request}")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::other("it exited"));
        }
        let value = serde_json::from_str::<serde_json::Value>(&answer).ok().and_then(|v| v[key].as_i64());
        let value = value.ok_or_else(|| std::io::Error::other(format!("unexpected answer {answer:?}")))?;
        let (stdout, stderr) = (std::fs::read(&out)?, std::fs::read(&err)?);
        let _ = (std::fs::remove_file(&out), std::fs::remove_file(&err));
        Ok((value, stdout, stderr))
    }

    /// Runs one reference subcommand: whether it exited 0, its stdout and its stderr.
    fn reference(&mut self, args: &[&str]) -> std::io::Result<(bool, String, String)> {
        let (code, stdout, stderr) = self.request(serde_json::json!({ "argv": args }), "code")?;
        Ok((code == 0, text(&stdout), text(&stderr)))
    }

    /// Runs `indolm args` with this process's environment and working directory.
    fn indolm(&mut self, args: &[&str]) -> std::io::Result<Output> {
        use std::os::unix::process::ExitStatusExt;
        let argv: Vec<&str> = std::iter::once(env!("CARGO_BIN_EXE_indolm")).chain(args.iter().copied()).collect();
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let request = serde_json::json!({ "argv": argv, "env": env, "cwd": std::env::current_dir()? });
        let (status, stdout, stderr) = self.request(request, "status")?;
        Ok(Output { status: std::process::ExitStatus::from_raw(status as i32), stdout, stderr })
    }
}

/// Bytes as text, invalid UTF-8 replaced.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// How a [`python_script`] ended.
pub struct ScriptRun {
    /// It exited 0.
    pub success: bool,
    /// It ran past its patience and was ended.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `script` with the venv's python as `python SCRIPT` run in `cwd` with exactly the
/// environment `env` would: in a child of the reference fork server (its imports of torch and
/// transformers already done), or in a fresh interpreter when the server cannot be used; a run
/// past `patience` is ended.
pub fn python_script(
    script: &Path,
    env: &std::collections::BTreeMap<String, String>,
    cwd: &Path,
    patience: std::time::Duration,
) -> ScriptRun {
    {
        let mut zygote = ZYGOTE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if zygote.is_none() {
            *zygote = start_zygote().map_err(|e| eprintln!("the reference fork server did not start ({e})")).ok();
        }
        let request = serde_json::json!({
            "script": script, "env": env, "cwd": cwd, "timeout": patience.as_secs().max(1),
        });
        match zygote.as_mut().map(|z| z.request(request, "code")) {
            Some(Ok((code, stdout, stderr))) => {
                let (stdout, stderr) = (text(&stdout), text(&stderr));
                return ScriptRun { success: code == 0, timed_out: code == -14, stdout, stderr };
            }
            Some(Err(e)) => {
                eprintln!("the reference fork server failed ({e}); a fresh interpreter instead");
                *zygote = None;
            }
            None => {}
        }
    }
    let mut child = Command::new(python())
        .arg(script)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || std::io::read_to_string(&mut stdout).unwrap_or_default()),
        std::thread::spawn(move || std::io::read_to_string(&mut stderr).unwrap_or_default()),
    );
    let start = std::time::Instant::now();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status, false);
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            break (child.wait().unwrap(), true);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (stdout, stderr) = (readers.0.join().unwrap(), readers.1.join().unwrap());
    ScriptRun { success: status.success(), timed_out, stdout, stderr }
}

/// A fresh scratch directory under the target folder, `<name>-<pid>-<n>` with `n` counting the
/// calls in this process. Every module runs in this one process, so two calls never share a
/// folder, whatever names they pass; one left by an earlier run with the same pid is removed.
pub fn scratch(name: &str) -> PathBuf {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The small random HF BertForMaskedLM with its reference outputs, built once per run (by the
/// first test that asks) and shared by every module; tests that alter it work on a `copy_dir`.
pub fn reference_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("hf-reference-model");
        reference(&["make-model", dir.to_str().unwrap()]);
        dir
    })
}

/// Runs the indolm binary with `args`, as `Command::new(indolm).args(args).output()` would: in
/// a child of indolm's test-only fork server ([`FORKER`]), which has loaded libtorch once for
/// every command, or in a fresh process when the server cannot be used.
pub fn indolm(args: &[&str]) -> Output {
    {
        let mut forker = FORKER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if forker.is_none() {
            let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
            command.env("INDOLM_TEST_FORK_SERVER", "1");
            *forker = ForkServer::start(command, "forker")
                .map_err(|e| eprintln!("indolm's fork server did not start ({e})"))
                .ok();
        }
        match forker.as_mut().map(|f| f.indolm(args)) {
            Some(Ok(output)) => return output,
            Some(Err(e)) => {
                eprintln!("indolm's fork server failed ({e}); a fresh process instead");
                *forker = None;
            }
            None => {}
        }
    }
    Command::new(env!("CARGO_BIN_EXE_indolm")).args(args).output().expect("run indolm")
}

/// indolm's fork server (`INDOLM_TEST_FORK_SERVER=1`, `src/cli/fork_server.rs`), started by the
/// first [`indolm`] and ended when this process ends (its stdin closes).
static FORKER: std::sync::Mutex<Option<ForkServer>> = std::sync::Mutex::new(None);

/// Runs indolm and expects failure; returns stderr, checked to be one clean error (no panic).
pub fn indolm_fails(args: &[&str]) -> String {
    let out = indolm(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(1),
        "indolm {args:?}: expected exit 1, got {:?}, stderr:\n{stderr}",
        out.status.code()
    );
    assert!(!stderr.contains("panicked"), "indolm {args:?} panicked:\n{stderr}");
    assert!(stderr.starts_with("error: "), "indolm {args:?}: expected one error message, got:\n{stderr}");
    stderr
}

/// Runs indolm and expects success; returns (stdout, stderr).
pub fn indolm_ok(args: &[&str]) -> (String, String) {
    let out = indolm(args);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    assert!(out.status.success(), "indolm {args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Runs indolm with its stdout closed before it writes (`indolm … | head -0`), and expects it to
/// end quietly: exit 0, no panic.
pub fn indolm_into_closed_pipe(args: &[&str]) {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run indolm");
    drop(child.stdout.take()); // the reader is gone before the command has loaded anything
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "indolm {args:?} panicked on a closed pipe:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "indolm {args:?}: {stderr}");
}

/// Copies every file of `src` into a new scratch directory.
pub fn copy_dir(src: &Path, name: &str) -> PathBuf {
    let dst = scratch(name);
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dst.join(entry.file_name())).unwrap();
        }
    }
    dst
}
