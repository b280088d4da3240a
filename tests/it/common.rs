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
/// subcommand runs in a child of the reference fork server ([`Zygote`]), a process of its own
/// that starts with torch and transformers already imported; without the server, in a fresh
/// interpreter.
pub fn reference(args: &[&str]) -> String {
    let (success, stdout, stderr) = {
        let mut zygote = ZYGOTE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if zygote.is_none() {
            *zygote = Zygote::start().map_err(|e| eprintln!("the reference fork server did not start ({e})")).ok();
        }
        match zygote.as_mut().map(|z| z.run(args)) {
            Some(Ok(done)) => done,
            failed => {
                if let Some(Err(e)) = failed {
                    eprintln!("the reference fork server failed ({e}); a fresh interpreter instead");
                }
                *zygote = None;
                let out = reference_command().arg(root().join("tests/reference/hf_reference.py")).args(args).output();
                let out = out.expect("run python");
                let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
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
static ZYGOTE: std::sync::Mutex<Option<Zygote>> = std::sync::Mutex::new(None);

/// A running fork server: requests on its stdin, answers on its stdout.
struct Zygote {
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Where each request's output goes.
    dir: PathBuf,
    requests: usize,
    _child: std::process::Child,
}

impl Zygote {
    /// Starts the server and waits until it has imported everything.
    fn start() -> std::io::Result<Zygote> {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = reference_command()
            .arg(root().join("tests/reference/zygote.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()) // its children write to their own files; a failure shows in the fallback
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut ready = String::new();
        stdout.read_line(&mut ready)?;
        if !ready.contains("\"ready\"") {
            return Err(std::io::Error::other(format!("expected its ready line, read {ready:?}")));
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("zygote-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Zygote { stdin, stdout, dir, requests: 0, _child: child })
    }

    /// Runs one subcommand: whether it exited 0, its stdout and its stderr.
    fn run(&mut self, args: &[&str]) -> std::io::Result<(bool, String, String)> {
        use std::io::{BufRead, Write};
        self.requests += 1;
        let (out, err) =
            (self.dir.join(format!("{}.out", self.requests)), self.dir.join(format!("{}.err", self.requests)));
        let request = serde_json::json!({"argv": args, "stdout": out, "stderr": err});
        writeln!(self.stdin, "{request}")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::other("it exited"));
        }
        let code = serde_json::from_str::<serde_json::Value>(&answer).ok().and_then(|v| v["code"].as_i64());
        let code = code.ok_or_else(|| std::io::Error::other(format!("unexpected answer {answer:?}")))?;
        let text = |path: &Path| std::fs::read(path).map(|b| String::from_utf8_lossy(&b).to_string());
        let (stdout, stderr) = (text(&out)?, text(&err)?);
        let _ = (std::fs::remove_file(&out), std::fs::remove_file(&err));
        Ok((code == 0, stdout, stderr))
    }
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

/// Runs the indolm binary.
pub fn indolm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_indolm")).args(args).output().expect("run indolm")
}

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
