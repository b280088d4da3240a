//! The task-7 sandbox (`eval bias-qa --run-code`, crates/eval/src/bias_qa/sandbox.rs) against programs
//! that try to get out: the namespaces new and the program without privileges; a `setsid` child
//! ended with the run (and not holding it until the time limit); only `/scratch` and a private
//! `/tmp` writable, nothing of the test's visible; no Unix socket (a path in a folder of the test,
//! in /tmp, an abstract one) reachable; no signal to a process outside; a fork bomb, a disk filler
//! and a memory hog stopped by their limits. Through the CLI: a program killing its parent does
//! not end indolm, flags out of range are refused in one line, and a kernel refusing the user
//! namespace stops `--run-code` naming the step. The library tests share one sandbox.
use crate::common::*;
use indolm_eval::bias_qa::sandbox::{CodeEnd, CodeLimits, CodeRun, Sandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The shared sandbox: the venv's python, 5 s, 512 MiB, 32 processes, 16 MiB of disk.
fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        let limits = CodeLimits { timeout: Duration::from_secs(5), memory_mb: 512, processes: 32, disk_mb: 16 };
        Sandbox::open(python().to_str().unwrap(), limits).unwrap_or_else(|e| panic!("the sandbox does not open: {e}"))
    })
}

/// Runs `code`, expecting it to exit 0 and print one JSON value: the value and the run.
fn run_json(code: &str) -> (Value, CodeRun) {
    let run = sandbox().run(code).unwrap();
    assert_eq!(run.end, CodeEnd::Exited(0), "{run:?}");
    let value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (value, run)
}

/// `text` as a Python string literal.
fn py(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// Python that tries `expression` and gives "ok" or the errno's name.
const TRY: &str = "import errno, json, os, socket, sys\n\
                   def attempt(f):\n    try:\n        f()\n        return 'ok'\n    except OSError as e:\n        \
                   return errno.errorcode.get(e.errno, str(e))\n";

/// Whether a process anywhere on the machine has `marker` among its arguments.
fn process_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == marker.as_bytes()))
    })
}

#[test]
fn namespaces_are_new_and_the_program_has_no_privileges() {
    let code = "import ctypes, errno, json, os, sys\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                def nested():\n    return 'ok' if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()]\n\
                def shm():\n    return 'ok' if libc.shmget(0, 1 << 20, 0o1600) >= 0 else errno.errorcode[ctypes.get_errno()]\n\
                status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n\
                ns = {n: os.readlink('/proc/self/ns/' + n) for n in ['user', 'mnt', 'pid', 'net', 'ipc', 'uts']}\n\
                print(json.dumps({'ns': ns, 'pid': os.getpid(), 'ppid': os.getppid(), 'uid': os.getuid(), \
                'gid': os.getgid(), 'groups': os.getgroups(), 'env': sorted(v.split('=')[0] for v in open('/proc/self/environ').read().split('\\0') if v), 'stdin': sys.stdin.read(), \
                'cwd': os.getcwd(), 'nnp': status['NoNewPrivs'].strip(), 'capeff': status['CapEff'].strip(), \
                'capprm': status['CapPrm'].strip(), 'nested': nested(), 'shm': shm(), 'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}))";
    let (seen, _) = run_json(code);
    for name in ["user", "mnt", "pid", "net", "ipc", "uts"] {
        let outside = std::fs::read_link(format!("/proc/self/ns/{name}")).unwrap();
        assert_ne!(seen["ns"][name].as_str().unwrap(), outside.to_str().unwrap(), "the {name} namespace is shared");
    }
    assert_eq!((seen["pid"].as_i64(), seen["ppid"].as_i64()), (Some(1), Some(0)), "{seen}");
    assert_eq!(seen["procs"], serde_json::json!([1]), "its /proc shows only itself");
    assert_eq!((seen["uid"].as_i64(), seen["gid"].as_i64()), (Some(1000), Some(1000)), "{seen}");
    assert_eq!((seen["nnp"].as_str(), seen["capeff"].as_str()), (Some("1"), Some("0000000000000000")), "{seen}");
    assert_eq!(seen["capprm"], "0000000000000000", "{seen}");
    // No user namespace inside (capabilities again), no System V shared memory (outside RLIMIT_AS).
    assert_eq!((seen["nested"].as_str(), seen["shm"].as_str()), (Some("ENOSPC"), Some("ENOSPC")), "{seen}");
    assert_eq!(seen["env"], serde_json::json!(["PATH"]), "{seen}");
    assert_eq!((seen["stdin"].as_str(), seen["cwd"].as_str()), (Some(""), Some("/scratch")), "{seen}");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // As root, the program is `nobody` outside: no group of root's either.
        assert!(seen["groups"].as_array().unwrap().iter().all(|g| g != 0), "{seen}");
    }
}

#[test]
fn a_setsid_child_ends_with_the_run_and_does_not_hold_it() {
    let marker = format!("indolm-sandbox-setsid-{}-{}", std::process::id(), line!());
    let code = format!(
        "import subprocess, sys\n\
         subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {}], start_new_session=True)\n\
         print('started', flush=True)\n",
        py(&marker)
    );
    let started = Instant::now();
    let run = sandbox().run(&code).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let survived = process_with(&marker);
    assert!(!survived, "a setsid child outlived the run");
    // It ended by its own exit, not at the 5-second limit, though its child held its stdout.
    assert_eq!((run.end, run.stdout.as_str()), (CodeEnd::Exited(0), "started\n"), "{run:?}");
    assert!(seconds < 4.0, "the run took {seconds:.1} s");
}

#[test]
fn only_scratch_and_a_private_tmp_are_writable() {
    let folder = scratch("sandbox-files");
    let file = folder.join("outside.txt");
    std::fs::write(&file, "outside").unwrap();
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let tag = format!("indolm-sandbox-{}-{}", std::process::id(), line!());
    let (home_probe, tmp_probe) = (home.join(&tag), Path::new("/tmp").join(&tag));
    let code = format!(
        "{TRY}\
         file, home_probe, tmp_probe, folder = {}, {}, {}, {}\n\
         def write(path):\n    with open(path, 'w') as f:\n        f.write('x')\n\
         print(json.dumps({{\n\
         'append': attempt(lambda: open(file, 'a').write('x')), 'remove': attempt(lambda: os.remove(file)),\n\
         'home': attempt(lambda: write(home_probe)), 'etc': attempt(lambda: write('/etc/' + {})),\n\
         'usr': attempt(lambda: write('/usr/' + {})), 'root': attempt(lambda: write('/' + {})),\n\
         'interpreter': attempt(lambda: write(sys.prefix + '/' + {})),\n\
         'tmp': attempt(lambda: write(tmp_probe)), 'scratch': attempt(lambda: write('here.txt')),\n\
         'folder_seen': os.path.exists(folder), 'home_seen': os.path.exists(home_probe),\n\
         'root_listing': sorted(os.listdir('/')), 'scratch_listing': sorted(os.listdir('.'))}}))\n",
        py(file.to_str().unwrap()),
        py(home_probe.to_str().unwrap()),
        py(tmp_probe.to_str().unwrap()),
        py(folder.to_str().unwrap()),
        py(&tag),
        py(&tag),
        py(&tag),
        py(&tag),
    );
    let (seen, _) = run_json(&code);
    for key in ["append", "remove", "home", "etc", "usr", "root", "interpreter"] {
        assert_ne!(seen[key], "ok", "{key}: {seen}");
    }
    assert_eq!((seen["tmp"].as_str(), seen["scratch"].as_str()), (Some("ok"), Some("ok")), "{seen}");
    assert_eq!(seen["folder_seen"], false, "the test's folder is visible: {seen}");
    assert_eq!(seen["scratch_listing"], serde_json::json!(["here.txt", "main.py"]), "{seen}");
    let allowed = ["bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "scratch", "tmp", "usr"];
    let extra: Vec<&Value> = seen["root_listing"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|name| {
            let name = name.as_str().unwrap();
            // The interpreter's prefixes lie in folders of their own (here /work and /root).
            !allowed.contains(&name)
                && !python().canonicalize().unwrap().starts_with(Path::new("/").join(name))
                && !python().starts_with(Path::new("/").join(name))
        })
        .collect();
    assert!(extra.is_empty(), "the root shows more than the interpreter needs: {extra:?} in {seen}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "outside");
    assert!(!home_probe.exists() && !tmp_probe.exists(), "a file was written outside the sandbox");
}

#[test]
fn no_unix_socket_outside_scratch_is_reachable() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let folder = scratch("sandbox-sockets");
    let tag = format!("indolm-sandbox-{}-{}", std::process::id(), line!());
    let (in_folder, in_tmp) = (folder.join("service.sock"), Path::new("/tmp").join(format!("{tag}.sock")));
    let _listeners = [
        UnixListener::bind(&in_folder).unwrap(),
        UnixListener::bind(&in_tmp).unwrap(),
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(tag.as_bytes()).unwrap()).unwrap(),
    ];
    let code = format!(
        "{TRY}\
         def connect(address):\n    s = socket.socket(socket.AF_UNIX)\n    s.settimeout(2)\n    s.connect(address)\n\
         print(json.dumps({{'folder': attempt(lambda: connect({})), 'tmp': attempt(lambda: connect({})),\n\
         'abstract': attempt(lambda: connect('\\0' + {}))}}))\n",
        py(in_folder.to_str().unwrap()),
        py(in_tmp.to_str().unwrap()),
        py(&tag),
    );
    let (seen, _) = run_json(&code);
    let _ = std::fs::remove_file(&in_tmp);
    for key in ["folder", "tmp", "abstract"] {
        assert!(["ENOENT", "ECONNREFUSED"].contains(&seen[key].as_str().unwrap()), "{key}: {seen}");
    }
}

#[test]
fn no_signal_reaches_a_process_outside() {
    let mut outside = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let code = format!(
        "{TRY}\
         print(json.dumps({{'outside': attempt(lambda: os.kill({}, 9)), 'group': attempt(lambda: os.killpg(0, 9))}}))\n",
        outside.id()
    );
    let (seen, _) = run_json(&code);
    let alive = outside.try_wait().unwrap().is_none();
    let _ = outside.kill();
    let _ = outside.wait();
    assert!(alive, "the process outside was killed: {seen}");
    assert_eq!(seen["outside"], "ESRCH", "{seen}");
}

#[test]
fn a_fork_bomb_is_stopped_by_the_process_limit() {
    let marker = format!("indolm-sandbox-bomb-{}-{}", std::process::id(), line!());
    let code = format!(
        "{TRY}\
         import time\n\
         n, error = 0, None\n\
         for _ in range(200):\n    try:\n        pid = os.fork()\n    except OSError as e:\n        \
         error = errno.errorcode[e.errno]\n        break\n    if pid == 0:\n        \
         os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {}])\n    n += 1\n\
         print(json.dumps({{'forked': n, 'error': error}}))\n",
        py(&marker)
    );
    let (seen, _) = run_json(&code);
    assert!(!process_with(&marker), "a child of the bomb outlived the run");
    // 32 processes: the program and 31 children.
    assert_eq!((seen["forked"].as_i64(), seen["error"].as_str()), (Some(31), Some("EAGAIN")), "{seen}");
}

#[test]
fn the_disk_limit_bounds_scratch_and_tmp_together() {
    let code = format!(
        "{TRY}\
         written, error, chunk = 0, None, b'x' * (1 << 20)\n\
         try:\n    for i in range(40):\n        \
         with open(('/tmp/' if i % 2 else '') + 'fill%d' % i, 'wb') as f:\n            \
         f.write(chunk)\n            f.flush()\n            written += len(chunk)\n\
         except OSError as e:\n    error = errno.errorcode[e.errno]\n\
         print(json.dumps({{'written_mb': written >> 20, 'error': error}}))\n"
    );
    let (seen, _) = run_json(&code);
    let written = seen["written_mb"].as_i64().unwrap();
    assert!((14..=16).contains(&written) && seen["error"] == "ENOSPC", "16 MiB in all: {seen}");
}

#[test]
fn a_memory_hog_ends_in_memory_error() {
    let run = sandbox().run("b = bytearray(1 << 30)\nprint('allocated')").unwrap();
    assert_eq!(run.end, CodeEnd::Exited(1), "{run:?}");
    assert!(run.stderr.trim_end().ends_with("MemoryError"), "{run:?}");
}

/// The fixture's answers (tests/fixtures/indobias_qa) with the first task-7 answer's code
/// replaced by `code`, in a folder of its own: the folder and the answers file.
fn answers_with(name: &str, code: &str) -> (PathBuf, PathBuf) {
    let folder = scratch(name);
    let fixture = root().join("tests/fixtures/indobias_qa");
    let answers: Vec<String> = std::fs::read_to_string(fixture.join("answers.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            if record["id"] == "id|Kota|Kota Alfa|SPI|Nutrition|7" {
                record["answer"] = Value::from(format!("```python\n{code}\n```"));
            }
            record.to_string()
        })
        .collect();
    let file = folder.join("answers.jsonl");
    std::fs::write(&file, answers.join("\n") + "\n").unwrap();
    (folder, file)
}

/// `eval bias-qa --data DATA --answers ANSWERS --out OUT --run-code`, then `extra`.
fn run_code_args<'a>(data: &'a Path, answers: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["eval", "bias-qa", "--data", data.to_str().unwrap(), "--answers", answers.to_str().unwrap()];
    args.extend(["--out", out.to_str().unwrap(), "--run-code"]);
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_program_killing_its_parent_does_not_end_indolm() {
    let code = "import os\ntry:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\nprint('bergizi baik')";
    let (folder, answers) = answers_with("sandbox-kill-parent", code);
    let out = folder.join("out");
    let data = root().join("tests/fixtures/indobias_qa");
    let python = python();
    let (stdout, _) = indolm_ok(&run_code_args(
        &data,
        &answers,
        &out,
        &["--python", python.to_str().unwrap(), "--code-timeout", "1"],
    ));
    assert!(stdout.contains("0 not run"), "{stdout}");
    let records = std::fs::read_to_string(out.join("answers_scored.jsonl")).unwrap();
    let record: Value = records
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["id"] == "id|Kota|Kota Alfa|SPI|Nutrition|7")
        .unwrap();
    assert_eq!((record["label"].as_str(), record["code_output"].as_str()), (Some("positive"), Some("bergizi baik\n")));
}

#[test]
fn code_limits_out_of_range_are_refused_in_one_line() {
    let data = root().join("tests/fixtures/indobias_qa");
    let answers = data.join("answers.jsonl");
    let out = scratch("sandbox-flags").join("out");
    let cases = [
        ("--code-timeout", "18446744073709551615", "must be whole seconds from 1 to 3600"),
        ("--code-timeout", "0", "must be whole seconds from 1 to 3600"),
        ("--code-timeout", "3601", "must be whole seconds from 1 to 3600"),
        ("--code-memory-mb", "18446744073709551615", "must be from 32 to 65536 MiB"),
        ("--code-memory-mb", "17592186044416", "must be from 32 to 65536 MiB"),
        ("--code-memory-mb", "31", "must be from 32 to 65536 MiB"),
        ("--code-processes", "0", "must be from 1 to 4096"),
        ("--code-disk-mb", "4097", "must be from 1 to 4096 MiB"),
    ];
    for (flag, value, expected) in cases {
        let stderr = indolm_fails(&run_code_args(&data, &answers, &out, &[flag, value]));
        assert_eq!(stderr.trim_end().lines().count(), 1, "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains(expected), "{flag} {value}: {stderr}");
        assert!(!out.exists(), "{flag} {value}: the output folder was made");
    }
}

#[test]
fn a_kernel_refusing_user_namespaces_stops_run_code_naming_the_step() {
    // In a user namespace of its own whose user.max_user_namespaces is 0, indolm's clone of the
    // sandbox's namespaces fails with ENOSPC: the run must stop, saying so.
    let probe = std::process::Command::new("unshare").args(["-U", "-r", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("note: `unshare -U -r` is unavailable here; the refusal was not checked");
        return;
    }
    let out = scratch("sandbox-refused").join("out");
    let data = root().join("tests/fixtures/indobias_qa");
    let script = "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"";
    let ran = std::process::Command::new("unshare")
        .args(["-U", "-r", "sh", "-c", script, "sh", env!("CARGO_BIN_EXE_indolm"), "eval", "bias-qa", "--data"])
        .args([data.as_path(), Path::new("--answers"), &data.join("answers.jsonl"), Path::new("--out"), &out])
        .args(["--run-code", "--python", python().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.trim_end().lines().count() == 1, "{stderr}");
    assert!(stderr.contains("the sandbox cannot be set up here"), "{stderr}");
    assert!(stderr.contains("clone with new user, mount, PID, network, IPC and UTS namespaces"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!out.join("bias_qa.json").exists());
}
