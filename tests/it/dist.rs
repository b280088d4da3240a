//! Data-parallel plumbing on libtorch's c10d: two `indolm dist-check` processes on loopback,
//! launched with torchrun's and with Slurm's variables, join one Gloo process group and agree
//! on every collective, and one alone runs every check but the bandwidth; bad launches end in
//! one-line errors within their timeout; a rank lost while the others wait for rank 0 (under
//! torchrun itself too) is named within the stated limit; the Slurm job prepares its corpus
//! before it trains.
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on, kept for this test: it lies below the range the OS picks
/// ephemeral ports from (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default), so
/// no connection or `bind(0)` of another process can take it between this pick and rank 0's
/// store binding it; each call of this process takes the next free one of a block that depends on
/// its process id, so two test processes do not meet either.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = ephemeral_range();
    let base = 20_000u32.min(low.saturating_sub(10_000)).max(1_024);
    let span = (low - base).max(1);
    let start = std::process::id() * 97;
    loop {
        let port = (base + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        assert!(u32::from(port) < low || u32::from(port) > high);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The OS's range of ephemeral ports (Linux's default when it cannot be read).
fn ephemeral_range() -> (u32, u32) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let bounds: Vec<u32> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    match bounds[..] {
        [low, high] if low > 11_024 => (low, high),
        _ => (32_768, 60_999),
    }
}

/// Runs a job on a port of [`free_port`], again on another when something took it between the
/// pick and rank 0's store binding it ("address already in use": a listener another program
/// opened on that very port meanwhile); at most 5 tries.
pub(crate) fn on_a_free_port(job: impl Fn(String) -> Vec<Output>) -> Vec<Output> {
    for _ in 0..4 {
        let outputs = job(free_port().to_string());
        if !outputs.iter().any(|o| String::from_utf8_lossy(&o.stderr).contains("address already in use")) {
            return outputs;
        }
        eprintln!("the port was taken before rank 0 bound it; another one");
    }
    job(free_port().to_string())
}

/// `indolm --threads 1 dist-check <args>` with exactly the launch variables `vars`.
fn dist_check(vars: &[(&str, String)], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
    command.args(["--threads", "1", "dist-check"]).args(args);
    for name in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
        "TORCHELASTIC_USE_AGENT_STORE",
        "GLOO_SOCKET_IFNAME",
        "TORCH_CPP_LOG_LEVEL",
    ] {
        command.env_remove(name);
    }
    for (name, value) in vars {
        command.env(name, value);
    }
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Runs one process per element of `ranks` (each its variables) and waits for all.
fn run_job(ranks: Vec<Vec<(&str, String)>>, args: &[&str]) -> Vec<Output> {
    let children: Vec<_> = ranks.iter().map(|vars| dist_check(vars, args).spawn().unwrap()).collect();
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

#[test]
fn two_gloo_processes_agree_on_every_collective() {
    let torchrun = |rank: usize, port: &str| {
        vec![
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", rank.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
    };
    let outputs = on_a_free_port(|port| {
        run_job(vec![torchrun(0, &port), torchrun(1, &port)], &["--megabytes", "4", "--timeout", "60"])
    });
    for (rank, out) in outputs.iter().enumerate() {
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "rank {rank}: {stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!("rank {rank} of 2 (local rank {rank}, torchrun)"))
                && stdout.contains("sum, max, broadcast, barrier and store wait correct"),
            "{stdout}"
        );
        // The engine's gradient buckets: the check's model under two optimizers makes 5 buckets
        // of its 2 KiB (the first optimizer's weight and its bias; the second's last weight,
        // alone the first of its buffer, its middle weight, its bias), each all-reduced by the
        // hooks during backward in the updates after the one that records the order (fp32, then
        // bf16), their sums exact.
        assert!(
            stdout.contains(&format!(
                "rank {rank}: gradients all-reduced during backward (fp32 and bf16) equal the expected sums; 10 of 10 buckets launched during backward"
            )),
            "{stdout}"
        );
    }
    let rank0 = String::from_utf8_lossy(&outputs[0].stdout);
    assert!(rank0.contains("all-reduce of 4 MB over 2 Gloo ranks") && rank0.contains("bus bandwidth"), "{rank0}");
    println!("{}", rank0.lines().last().unwrap());

    // The same job under Slurm's variables: the store's host is the first of the node list.
    let slurm = |rank: usize, port: &str| {
        vec![
            ("SLURM_PROCID", rank.to_string()),
            ("SLURM_LOCALID", rank.to_string()),
            ("SLURM_NTASKS", "2".to_string()),
            ("SLURM_JOB_NODELIST", "localhost".to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
    };
    let outputs = on_a_free_port(|port| {
        run_job(vec![slurm(0, &port), slurm(1, &port)], &["--megabytes", "1", "--timeout", "60"])
    });
    for (rank, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "rank {rank}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("rank {rank} of 2 (local rank {rank}, slurm)")), "{stdout}");
    }
}

/// A world of one rank (the GPU check's one-rank NCCL run, rehearsed here on Gloo) runs every
/// check, the hooks' buckets during backward among them, and says that it measured no
/// bandwidth rather than printing one.
#[test]
fn one_rank_runs_every_check_but_the_bandwidth() {
    let outputs = on_a_free_port(|port| {
        let vars = vec![
            ("RANK", "0".to_string()),
            ("LOCAL_RANK", "0".to_string()),
            ("WORLD_SIZE", "1".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port),
        ];
        run_job(vec![vars], &["--megabytes", "1", "--timeout", "60"])
    });
    let (stdout, stderr) = (String::from_utf8_lossy(&outputs[0].stdout), String::from_utf8_lossy(&outputs[0].stderr));
    println!("{stdout}");
    assert!(outputs[0].status.success(), "{stdout}\n{stderr}");
    for line in [
        "rank 0 of 1 (local rank 0, torchrun): Gloo on cpu",
        "sum, max, broadcast, barrier and store wait correct",
        "rank 0: gradients all-reduced during backward (fp32 and bf16) equal the expected sums; 10 of 10 buckets launched during backward",
        "all-reduce of 1 MB over 1 Gloo rank: median ",
        "(one rank: no link crossed, no bandwidth measured)",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from:\n{stdout}");
    }
    assert!(!stdout.contains("bus bandwidth"), "{stdout}");
}

/// One line on stderr, exit 1, within the timeout (plus start-up), for each bad launch.
#[test]
fn bad_launches_end_in_one_line_errors_within_the_timeout() {
    let expect_error = |vars: Vec<(&str, String)>, wanted: &[&str]| {
        let started = Instant::now();
        let out = dist_check(&vars, &["--timeout", "3"]).output().unwrap();
        let elapsed = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{vars:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{vars:?}: not one line:\n{stderr}");
        for w in wanted {
            assert!(stderr.contains(w), "{vars:?}: expected {w:?} in {stderr}");
        }
        // The 3 s timeout, and start-up on a loaded machine: far below a hang.
        assert!(elapsed < Duration::from_secs(45), "{vars:?} took {elapsed:?}");
        println!("{:.1}s: {}", elapsed.as_secs_f64(), stderr.trim());
    };
    let launch = |rank: &str, port: String| {
        vec![
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port),
        ]
    };
    // MASTER_PORT already taken by another program.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    expect_error(launch("0", port.clone()), &["rank 0 of 2", &format!("127.0.0.1:{port}"), "address already in use"]);
    // No store where MASTER_ADDR:MASTER_PORT points (rank 0 never started, or a wrong address).
    expect_error(launch("1", free_port().to_string()), &["rank 1 of 2", "timed out after 3000ms"]);
    // Rank 0 alone: the other rank never comes.
    expect_error(launch("0", free_port().to_string()), &["waiting for clients", "1/2 clients joined"]);
    // Inconsistent variables.
    expect_error(launch("2", free_port().to_string()), &["environment RANK", "rank 2 does not fit a world of 2"]);
    expect_error(vec![], &["not launched by torchrun or srun"]);
}

/// A recipe of the tiny model without dropout (so that ranks and a single process compute the
/// same thing), its global batch of 16 sequences split among the ranks.
fn no_dropout_recipe(dir: &std::path::Path, name: &str, steps: u64) -> std::path::PathBuf {
    let model = format!("{}\nhidden_dropout_prob = 0.0\nattention_probs_dropout_prob = 0.0", crate::train::SMALL_MODEL);
    let run = format!("lr = 1e-3\nbatch_size = 16\nwarmup_steps = 5\nmax_steps = {steps}");
    crate::train::write_recipe(dir, name, &model, &run, 10, "")
}

/// The losses of a run's `train_log.jsonl`.
fn logged_losses(run: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("train_log.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
        .collect()
}

/// `indolm train` as rank `rank` of `world` torchrun-style ranks on loopback, one thread each.
fn rank_command(recipe: &std::path::Path, rank: usize, world: usize, port: &str, timeout: u64) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
    command
        .args(["--threads", "1", "--device", "cpu", "train", recipe.to_str().unwrap()])
        .args(["--dist-timeout", &timeout.to_string()])
        .env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// How long a survivor may take to name a rank lost while it waits for rank 0 (docs/clusters.md:
/// ten seconds of silence, read every half second), plus the process's exit on a loaded machine.
const NAMED_WITHIN: Duration = Duration::from_millis(10_500 + 4_500);

/// The process id rank 0 wrote to `file` when it began to hold (`INDOLM_TEST_HOLD_RANK0`); waits
/// for it two minutes at most.
fn held_rank0(file: &std::path::Path) -> String {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().filter(|p| !p.trim().is_empty()) {
            return pid.trim().to_string();
        }
        assert!(started.elapsed() < Duration::from_secs(120), "rank 0 never reached its hold at step 10");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The files named `name` under `dir`, at any depth.
fn files_named(dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, name));
        } else if path.file_name().is_some_and(|n| n == name) {
            found.push(path);
        }
    }
    found
}

/// A rank lost while the others wait for rank 0's work (rank 0 held at the end of its step-10
/// checkpoint and evaluations by the test-only `INDOLM_TEST_HOLD_RANK0`):
/// - under torchrun itself (its agent serves the store, sets its own
///   `TORCH_NCCL_ASYNC_ERROR_HANDLING` and SIGTERMs the survivors as soon as a worker dies), rank
///   0 killed: rank 1 names it by its silent heartbeat, in one line, within the stated ten and a
///   half seconds, before the agent's SIGKILL;
/// - launched plainly (rank 0 serves the store), rank 0 killed: rank 1 finds the store gone and
///   says rank 0 stopped, at once;
/// - rank 1 killed while rank 0 holds (rank 1 had already arrived at the wait), then rank 0 let
///   go: rank 0's next collective fails and it names rank 1 by its heartbeat (100 ms a beat here,
///   the test-only `INDOLM_TEST_HEARTBEAT_MS`).
///
/// Each survivor exits 1 with that one line; the three jobs run side by side.
#[test]
fn a_rank_lost_while_rank_0_evaluates_is_named_within_the_limit() {
    // Each job in its own folder: rank 0 of each prepares its corpus (under the corpus's lock).
    let run_torchrun = || {
        let dir = crate::common::scratch("ddp-lost-torchrun");
        let recipe = no_dropout_recipe(&dir, "t", 40);
        let (hold, logs) = (dir.join("hold-t"), dir.join("torchrun-logs"));
        let child = Command::new(crate::common::python())
            .args(["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1"])
            .args(["--master-port", &free_port().to_string(), "--redirects", "3", "--log-dir"])
            .arg(&logs)
            .arg("--no-python")
            .arg(env!("CARGO_BIN_EXE_indolm"))
            .args(["--threads", "1", "--device", "cpu", "train", recipe.to_str().unwrap(), "--dist-timeout", "60"])
            .env("INDOLM_TEST_HOLD_RANK0", format!("10:{}", hold.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = held_rank0(&hold);
        Command::new("kill").args(["-KILL", &pid]).status().unwrap();
        let killed_at = Instant::now();
        let out = child.wait_with_output().unwrap();
        let waited = killed_at.elapsed();
        let agent = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "torchrun succeeded:\n{agent}");
        let rank1 = files_named(&logs, "stderr.log").into_iter().find(|p| p.parent().unwrap().ends_with("1"));
        let stderr = std::fs::read_to_string(rank1.unwrap_or_else(|| panic!("no rank 1 log:\n{agent}"))).unwrap();
        (waited, stderr)
    };
    let run_plain = |name: &str, kill_rank: usize, extra_env: Option<(&str, &str)>| {
        let dir = crate::common::scratch(&format!("ddp-lost-{name}"));
        let recipe = no_dropout_recipe(&dir, name, 40);
        let hold = dir.join(format!("hold-{name}"));
        let port = free_port().to_string();
        let mut ranks: Vec<_> = (0..2)
            .map(|rank| {
                let mut command = rank_command(&recipe, rank, 2, &port, 60);
                command.env("INDOLM_TEST_HOLD_RANK0", format!("10:{}", hold.display())).stdout(Stdio::null());
                if let Some((key, value)) = extra_env {
                    command.env(key, value);
                }
                Some(command.spawn().unwrap())
            })
            .collect();
        held_rank0(&hold);
        let mut victim = ranks[kill_rank].take().unwrap();
        victim.kill().unwrap();
        victim.wait().unwrap();
        if kill_rank == 1 {
            std::fs::remove_file(&hold).unwrap(); // rank 0's evaluation ends: it waits for rank 1
        }
        let from = Instant::now();
        let survivor = ranks.into_iter().flatten().next().unwrap();
        let out = survivor.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        (from.elapsed(), stderr)
    };
    let ((t_waited, t_line), (p_waited, p_line), (r_waited, r_line)) = std::thread::scope(|scope| {
        let t = scope.spawn(run_torchrun);
        let p = scope.spawn(|| run_plain("p", 0, None));
        let r = scope.spawn(|| run_plain("r", 1, Some(("INDOLM_TEST_HEARTBEAT_MS", "100"))));
        (t.join().unwrap(), p.join().unwrap(), r.join().unwrap())
    });
    for (what, line) in [("torchrun", &t_line), ("plain", &p_line), ("rank 1 lost", &r_line)] {
        assert!(line.starts_with("error: ") && line.lines().count() == 1, "{what}: not one line:\n{line}");
        assert!(line.contains("the last checkpoint is intact: resume with --resume latest"), "{what}: {line}");
    }
    for (what, line) in [("torchrun", &t_line), ("plain", &p_line)] {
        let waiting = "error: waiting for rank 0's ";
        assert!(line.starts_with(waiting) && line.contains(" at step 10 on rank 1 of 2: "), "{what}: {line}");
    }
    println!("torchrun, rank 0 killed: rank 1 named it after {:.1}s: {}", t_waited.as_secs_f64(), t_line.trim());
    assert!(t_line.contains("on rank 1 of 2: rank 0 stopped (no heartbeat in the store): silent for 1"), "{t_line}");
    assert!(t_waited < NAMED_WITHIN, "torchrun: rank 1 took {t_waited:?} to name rank 0");
    println!("plain launch, rank 0 killed: rank 1 stopped after {:.1}s: {}", p_waited.as_secs_f64(), p_line.trim());
    let gone = "on rank 1 of 2: the rendezvous store is gone too: rank 0 (whose launch serves it)";
    assert!(p_line.contains(gone), "{p_line}");
    assert!(p_waited < Duration::from_secs(10), "plain: rank 1 took {p_waited:?}");
    println!("rank 1 killed, rank 0 let go: named after {:.1}s: {}", r_waited.as_secs_f64(), r_line.trim());
    let named = r_line.contains("on rank 0 of 2: ") && r_line.contains("rank 1 stopped (no heartbeat in the store)");
    assert!(named, "{r_line}");
    assert!(r_waited < Duration::from_secs(10), "rank 0 took {r_waited:?} to name rank 1");
}

/// `recipes/slurm/pretrain.sbatch` (with a stand-in `srun` that prints what it would run)
/// prepares the corpus as one task before it checks the network and trains, and trains with the
/// collectives' timeout and the wait for rank 0 given apart.
#[test]
fn the_slurm_job_prepares_its_corpus_before_it_trains() {
    let bin = crate::common::scratch("pretrain-sbatch").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("srun"), "#!/bin/sh\necho \"srun $*\"\n").unwrap();
    assert!(Command::new("chmod").arg("+x").arg(bin.join("srun")).status().unwrap().success());
    let out = Command::new("bash")
        .arg(crate::common::root().join("recipes/slurm/pretrain.sbatch"))
        .arg("recipes/indobias/1-cc100-id.toml")
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
        .env("SLURM_CPUS_PER_TASK", "8")
        .env("SLURM_CPUS_ON_NODE", "64")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("--ntasks=1") && lines[0].contains("corpus prepare recipes/indobias/1-cc100-id.toml"));
    assert!(lines[1].contains("dist-check") && lines[2].contains("train recipes/indobias/1-cc100-id.toml"), "{text}");
    assert!(lines[2].contains("--dist-timeout 300 --rank0-wait-timeout 7200"), "{text}");
}

/// `recipes/slurm/compositions.sbatch` packed on one node: two array tasks at once, each a
/// one-task Slurm step (a stand-in `srun` sets Slurm's variables for one task, runs indolm on the
/// CPU, and points both at a port this test holds, so that a task serving a rendezvous store there
/// would fail with "address already in use"). Both train their recipe as plain processes and
/// finish; the script gave each task a port of its own all the same.
#[test]
fn packed_one_task_slurm_jobs_share_a_node() {
    let dir = crate::common::scratch("compositions-packed");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let held = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = held.local_addr().unwrap().port();
    let srun = format!(
        "#!/bin/bash\necho \"srun MASTER_PORT=$MASTER_PORT $*\"\nshift\nargs=()\nfor a in \"$@\"; do [ \"$a\" = cuda ] && a=cpu; args+=(\"$a\"); done\n\
         SLURM_NTASKS=1 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_JOB_NODELIST=localhost MASTER_PORT={port} exec {} \"${{args[@]}}\"\n",
        env!("CARGO_BIN_EXE_indolm")
    );
    std::fs::write(bin.join("srun"), srun).unwrap();
    assert!(Command::new("chmod").arg("+x").arg(bin.join("srun")).status().unwrap().success());
    let recipes = dir.join("recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    for i in 0..2 {
        let run = "lr = 1e-3\nbatch_size = 8\nwarmup_steps = 2\nmax_steps = 4";
        let path = crate::train::write_recipe(&recipes, &format!("packed-{i}"), crate::train::SMALL_MODEL, run, 4, "");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("corpus = \"shared-id\"", &format!("corpus = \"packed-{i}\""));
        std::fs::write(&path, text).unwrap();
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..2)
        .map(|task| {
            Command::new("bash")
                .arg(crate::common::root().join("recipes/slurm/compositions.sbatch"))
                .arg(format!("{}/*.toml", recipes.display()))
                .current_dir(&dir)
                .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
                .env("SLURM_ARRAY_TASK_ID", task.to_string())
                .env("SLURM_CPUS_PER_TASK", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = tasks.into_iter().map(|t| t.wait_with_output().unwrap()).collect();
    drop(held);
    for (task, out) in outputs.iter().enumerate() {
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "array task {task}:\n{text}");
        assert!(text.contains(&format!("srun MASTER_PORT={} ", 29500 + task)), "{text}");
        assert!(text.contains(&format!("packed-{task}.toml --resume auto")), "{text}");
        assert!(!text.contains("address already in use") && !text.contains("data parallel"), "{text}");
        let run = recipes.join(format!("checkpoints/packed-{task}"));
        assert!(run.join("step-4").is_dir(), "array task {task} wrote no checkpoint at step 4:\n{text}");
    }
    println!("two packed one-task Slurm jobs trained side by side in {:.1}s", started.elapsed().as_secs_f64());
}

/// Two torchrun-style ranks of `indolm train` on loopback, with `extra` arguments, each with the
/// variables `env` gives for its rank and `timeout` as `--dist-timeout`; returns their outputs.
pub(crate) fn train_two_ranks_with(
    recipe: &std::path::Path,
    timeout: u64,
    extra: &[&str],
    env: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<Output> {
    on_a_free_port(|port| {
        let children: Vec<_> = (0..2)
            .map(|rank| rank_command(recipe, rank, 2, &port, timeout).args(extra).envs(env(rank)).spawn().unwrap())
            .collect();
        children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
    })
}

/// Two torchrun-style ranks of `indolm train` on loopback; returns their outputs.
pub(crate) fn train_two_ranks(recipe: &std::path::Path, extra: &[&str]) -> Vec<Output> {
    train_two_ranks_with(recipe, 60, extra, |_| Vec::new())
}

/// Rank 1 records its gradients in another order than rank 0 (the test-only
/// `INDOLM_TEST_SWAP_GRADIENT_ORDER` swaps its first two, as a backward that differs between ranks
/// would): both ranks refuse at the first update, before any bucket is summed, naming the
/// parameter and its two positions, within seconds.
#[test]
fn ranks_that_record_different_gradient_orders_are_refused() {
    let dir = crate::common::scratch("dist-order");
    let recipe = no_dropout_recipe(&dir, "order", 4);
    let started = Instant::now();
    let outputs = train_two_ranks_with(&recipe, 60, &[], |rank| match rank {
        1 => vec![("INDOLM_TEST_SWAP_GRADIENT_ORDER", "1".to_string())],
        _ => vec![],
    });
    let seconds = started.elapsed().as_secs_f64();
    for (rank, out) in outputs.iter().enumerate() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "rank {rank}: {err}");
        let line = err.lines().find(|l| l.starts_with("error:")).unwrap_or_else(|| panic!("rank {rank}: {err}"));
        assert!(line.contains(&format!("rank {rank} of 2: the ranks' backward passes differ: parameter ")), "{line}");
        assert!(line.contains("at position 0 on some ranks and 1 on others"), "{line}");
        assert!(!line.contains("stopped") && !line.contains("lost"), "{line}");
        println!("rank {rank}: {line}");
    }
    assert!(!dir.join("checkpoints/order/step-4").exists());
    assert!(seconds < 45.0, "the refusal took {seconds:.1}s");
}

/// Two Gloo ranks on the same global batch train as one process does: the same losses to 4
/// significant digits and final weights within float summation tolerance; only rank 0 writes.
#[test]
fn two_ranks_train_like_one_process() {
    let dir = crate::common::scratch("ddp-equal");
    let one = no_dropout_recipe(&dir, "one", 20);
    let two = no_dropout_recipe(&dir, "two", 20);
    crate::common::indolm_ok(&["--threads", "1", "--device", "cpu", "train", one.to_str().unwrap()]);
    let outputs = train_two_ranks(&two, &[]);
    for (rank, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "rank {rank}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.contains("finished at step 20"), rank == 0, "rank {rank}: {stdout}");
    }
    // The gradients were summed bucket by bucket during backward: every bucket launched by the
    // hooks in the 19 updates after the first (which records the order the gradients become
    // ready in, and sums after backward).
    let rank0 = String::from_utf8_lossy(&outputs[0].stdout).to_string();
    let (during, buckets) = overlap_counts(&rank0);
    assert!(during == buckets && buckets % 19 == 0 && buckets >= 2 * 19, "{rank0}");
    let (run_one, run_two) = (dir.join("checkpoints/one"), dir.join("checkpoints/two"));
    let (a, b) = (logged_losses(&run_one), logged_losses(&run_two));
    assert_eq!(a.len(), 4);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(format!("{x:.4e}"), format!("{y:.4e}"), "losses {a:?} vs {b:?}");
    }
    let weights = |run: &std::path::Path| {
        indolm_torch::model::weights::read_file(&run.join("step-20/model.safetensors")).unwrap()
    };
    let (wa, wb) = (weights(&run_one), weights(&run_two));
    let mut max_diff = 0.0f64;
    for (name, t) in &wa {
        max_diff = max_diff.max((t - &wb[name]).abs().max().double_value(&[]));
    }
    println!("losses {a:?}; largest weight difference after 20 steps: {max_diff:.2e}");
    assert!(max_diff < 1e-4, "weights differ by {max_diff}");

    // Two-rank runs are deterministic: a second one is bit-identical to the first.
    let again = no_dropout_recipe(&dir, "again", 20);
    assert!(train_two_ranks(&again, &[]).iter().all(|o| o.status.success()));
    for file in ["model.safetensors", "optimizer.safetensors"] {
        let bytes = |run: &str| std::fs::read(dir.join(format!("checkpoints/{run}/step-20/{file}"))).unwrap();
        assert!(bytes("two") == bytes("again"), "{file} differs between two identical two-rank runs");
    }

    // Summed in bf16 (each rank's gradients and their sum rounded to bf16), in buckets of 64
    // KiB: the same training to within bf16's rounding, not bit for bit.
    let bf16 = no_dropout_recipe(&dir, "bf16", 20);
    let outputs = train_two_ranks(&bf16, &["--grad-reduce", "bf16", "--bucket-mb", "0.0625"]);
    assert!(outputs.iter().all(|o| o.status.success()));
    let rank0 = String::from_utf8_lossy(&outputs[0].stdout).to_string();
    let (during, buckets) = overlap_counts(&rank0);
    assert!(during == buckets && buckets > 0 && rank0.contains("(in bf16, buckets of 0.0625 MiB)"), "{rank0}");
    let c = logged_losses(&dir.join("checkpoints/bf16"));
    println!("losses summed in bf16: {c:?}");
    for (x, y) in b.iter().zip(&c) {
        assert!((x - y).abs() < 0.01 * x.abs(), "losses {b:?} (fp32 sums) vs {c:?} (bf16 sums)");
    }
    assert_ne!(b, c, "the bf16 sums changed nothing");
}

/// `(launched during backward, buckets)` from rank 0's closing line `data parallel: N of M
/// gradient buckets were all-reduced during backward`.
fn overlap_counts(stdout: &str) -> (u64, u64) {
    let line = stdout.lines().find(|l| l.contains("gradient buckets were all-reduced during backward")).expect(stdout);
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "of").expect(line);
    (words[at - 1].parse().expect(line), words[at + 1].parse().expect(line))
}

/// A rank killed outright mid-step: the other stops with one error line naming it within seconds
/// (under `--dist-timeout 300`: the collective fails when the connection drops, and the silent
/// heartbeat names the rank), the last checkpoint stays valid, and two ranks resume from it; a
/// global batch that does not divide among the ranks is refused with the numbers.
#[test]
fn a_killed_rank_stops_the_other_and_an_indivisible_batch_is_refused() {
    let dir = crate::common::scratch("ddp-kill");
    let recipe = no_dropout_recipe(&dir, "k", 100_000);
    let run = dir.join("checkpoints/k");
    let port = free_port().to_string();
    let spawn = |rank: usize| rank_command(&recipe, rank, 2, &port, 300).stdout(Stdio::null()).spawn().unwrap();
    let (rank0, mut rank1) = (spawn(0), spawn(1));
    let started = Instant::now();
    while crate::train::latest(&run).as_deref() != Some("step-10") {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    rank1.kill().unwrap();
    rank1.wait().unwrap();
    let killed_at = Instant::now();
    let out = rank0.wait_with_output().unwrap();
    let waited = killed_at.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("rank 0 of 2") && stderr.lines().count() == 1, "{stderr}");
    assert!(stderr.contains("rank 1 stopped (no heartbeat in the store)"), "the lost rank is named: {stderr}");
    // Three beats to tell a silent rank, and a loaded machine's delays: far below the timeout.
    assert!(waited < Duration::from_secs(20), "rank 0 took {waited:?} to notice");
    println!("rank 1 killed: rank 0 stopped after {:.1}s with: {}", waited.as_secs_f64(), stderr.trim());
    let last = crate::train::latest(&run).unwrap();
    indolm_core::run::checkpoints::load_state(&run.join(&last)).unwrap();

    let recipe = no_dropout_recipe(&dir, "k", 30);
    let outputs = train_two_ranks(&recipe, &["--resume", "latest", "--force"]);
    assert!(outputs.iter().all(|o| o.status.success()), "{}", String::from_utf8_lossy(&outputs[0].stderr));
    assert!(String::from_utf8_lossy(&outputs[0].stdout).contains("finished at step 30"));

    // 16 sequences among 3 ranks.
    let recipe = no_dropout_recipe(&dir, "three", 10);
    let port = free_port().to_string();
    let children: Vec<_> =
        (0..3).map(|rank| rank_command(&recipe, rank, 3, &port, 30).stdout(Stdio::null()).spawn().unwrap()).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("optimizer.batch_size") && stderr.contains("16 sequences do not divide among 3"),
            "{stderr}"
        );
    }
}

/// A rank that fails alone (a libtorch out-of-memory error in its update at step 5, the
/// test-only `INDOLM_TEST_OOM_AT_STEP`, on rank 1 only) tells the other through the store before
/// it leaves: rank 0, waiting in the gradient all-reduce, names rank 1 as failed (not lost)
/// within seconds under `--dist-timeout 300`, each rank with one error line.
#[test]
fn a_rank_that_fails_alone_is_named_by_the_other_within_seconds() {
    let dir = crate::common::scratch("ddp-fails-alone");
    let recipe = no_dropout_recipe(&dir, "alone", 20);
    let started = Instant::now();
    let outputs = train_two_ranks_with(&recipe, 300, &[], |rank| match rank {
        1 => vec![("INDOLM_TEST_OOM_AT_STEP", "5".to_string())],
        _ => vec![],
    });
    let seconds = started.elapsed().as_secs_f64();
    let errors: Vec<String> = outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).collect();
    for (rank, out) in outputs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(1), "rank {rank}: {}", errors[rank]);
        assert_eq!(errors[rank].lines().count(), 1, "rank {rank}: {}", errors[rank]);
    }
    assert!(errors[1].contains("update of step 5") && errors[1].contains("out of memory"), "{}", errors[1]);
    assert!(
        errors[0].contains("on rank 0 of 2") && errors[0].contains("rank 1 failed (its own output says why)"),
        "{}",
        errors[0]
    );
    println!("rank 1: {}\nrank 0: {}\nboth ended {seconds:.1}s after the start", errors[1], errors[0]);
    assert!(seconds < 60.0, "{seconds:.1}s: rank 0 waited for the collectives' timeout");
}

/// SIGTERM to one rank only: both ranks agree on the step, rank 0 writes one checkpoint there,
/// both exit 0; the checkpoint (written by two ranks) resumes in one process to the end.
#[test]
fn a_signal_to_one_rank_stops_both_at_one_checkpoint_and_one_process_resumes_it() {
    let dir = crate::common::scratch("ddp-stop");
    let recipe = no_dropout_recipe(&dir, "s", 100_000);
    let run = dir.join("checkpoints/s");
    let port = free_port().to_string();
    let mut ranks: Vec<_> =
        (0..2).map(|rank| rank_command(&recipe, rank, 2, &port, 60).stdout(Stdio::null()).spawn().unwrap()).collect();
    let started = Instant::now();
    while crate::train::latest(&run).as_deref() != Some("step-10") {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill").args(["-TERM", &ranks[1].id().to_string()]).status().unwrap();
    for (rank, child) in ranks.iter_mut().enumerate() {
        let status = child.wait().unwrap();
        assert!(status.success(), "rank {rank} ended with {status}");
    }
    let last = crate::train::latest(&run).unwrap();
    let step: u64 = last.trim_start_matches("step-").parse().unwrap();
    assert!(step > 10, "no checkpoint at the stop step: latest is {last}");
    indolm_core::run::checkpoints::load_state(&run.join(&last)).unwrap();
    println!("SIGTERM to rank 1: both ranks stopped at step {step}, one checkpoint, exit 0");

    // One process, the same global batch, continues the two-rank run.
    let recipe = no_dropout_recipe(&dir, "s", step + 5);
    let (stdout, _) = crate::common::indolm_ok(&[
        "--threads",
        "1",
        "--device",
        "cpu",
        "train",
        recipe.to_str().unwrap(),
        "--resume",
        "latest",
        "--force",
    ]);
    assert!(stdout.contains(&format!("finished at step {}", step + 5)), "{stdout}");

    // Requeued as two ranks with `--resume auto`: it continues from the latest checkpoint.
    let recipe = no_dropout_recipe(&dir, "s", step + 10);
    let outputs = train_two_ranks(&recipe, &["--resume", "auto", "--force"]);
    assert!(outputs.iter().all(|o| o.status.success()), "{}", String::from_utf8_lossy(&outputs[0].stderr));
    // Only rank 0 speaks.
    assert!(outputs[1].stdout.is_empty(), "rank 1 printed: {}", String::from_utf8_lossy(&outputs[1].stdout));
    let stdout = String::from_utf8_lossy(&outputs[0].stdout);
    assert!(stdout.contains("resumed from") && stdout.contains(&format!("finished at step {}", step + 10)), "{stdout}");
}

/// SIGKILL of the whole two-rank job at a random moment after its first checkpoint, then a
/// two-rank resume from `latest`: the final model and optimizer are bit-identical to an
/// uninterrupted two-rank run. The checkpoint the kill left, resumed by one process with the
/// global batch of 16 in two micro-batches of 8 (accumulation 2, no `--force`: the global
/// batch is the same), ends within float summation tolerance of the two-rank run.
#[test]
fn a_killed_job_resumes_bit_identically_and_one_process_with_accumulation_continues_it() {
    const STEPS: u64 = 120;
    let dir = crate::common::scratch("ddp-sigkill");
    let full = no_dropout_recipe(&dir, "full", STEPS);
    assert!(train_two_ranks(&full, &[]).iter().all(|o| o.status.success()));

    let killed = no_dropout_recipe(&dir, "killed", STEPS);
    let run = dir.join("checkpoints/killed");
    let port = free_port().to_string();
    let mut ranks: Vec<_> =
        (0..2).map(|rank| rank_command(&killed, rank, 2, &port, 60).stdout(Stdio::null()).spawn().unwrap()).collect();
    // Killed by what the run wrote, not by the clock: once its log shows a step past the first
    // checkpoint (step 10), between two checkpoints, whatever the machine's speed.
    let started = Instant::now();
    let logged_past_the_checkpoint = || {
        std::fs::read_to_string(run.join("train_log.jsonl")).unwrap_or_default().lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v["step"].as_u64().is_some_and(|s| s > 10))
        })
    };
    while crate::train::latest(&run).is_none() || !logged_past_the_checkpoint() {
        assert!(started.elapsed() < Duration::from_secs(300), "no checkpoint in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    for child in ranks.iter_mut() {
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let left = crate::train::latest(&run).unwrap();
    assert_ne!(left, format!("step-{STEPS}"), "the job finished before the kill; kill sooner");
    // A copy of what the kill left, for the one-process resume below.
    let accumulated_run = dir.join("checkpoints/accumulated");
    assert!(Command::new("cp").args(["-a"]).arg(&run).arg(&accumulated_run).status().unwrap().success());

    let outputs = train_two_ranks(&killed, &["--resume", "latest"]);
    assert!(outputs.iter().all(|o| o.status.success()), "{}", String::from_utf8_lossy(&outputs[0].stderr));
    for file in ["model.safetensors", "optimizer.safetensors"] {
        let bytes = |run: &str| std::fs::read(dir.join(format!("checkpoints/{run}/step-{STEPS}/{file}"))).unwrap();
        assert!(
            bytes("full") == bytes("killed"),
            "{file}: the resumed two-rank run differs from the uninterrupted one"
        );
    }
    println!("two ranks killed at {left} (SIGKILL), resumed with two ranks: step-{STEPS} bit-identical");

    // One process, two micro-batches of 8 an update, from the same checkpoint.
    let model = format!("{}\nhidden_dropout_prob = 0.0\nattention_probs_dropout_prob = 0.0", crate::train::SMALL_MODEL);
    let accumulated = crate::train::write_recipe(
        &dir,
        "accumulated",
        &model,
        &format!("lr = 1e-3\nbatch_size = 8\ngrad_accumulation = 2\nwarmup_steps = 5\nmax_steps = {STEPS}"),
        10,
        "",
    );
    let args = ["--threads", "1", "--device", "cpu", "train", accumulated.to_str().unwrap(), "--resume", "latest"];
    let (stdout, _) = crate::common::indolm_ok(&args);
    assert!(stdout.contains(&format!("finished at step {STEPS}")), "{stdout}");
    let weights = |run: &str| {
        indolm_torch::model::weights::read_file(&dir.join(format!("checkpoints/{run}/step-{STEPS}/model.safetensors")))
            .unwrap()
    };
    let (wa, wb) = (weights("full"), weights("accumulated"));
    let max_diff = wa.iter().map(|(name, t)| (t - &wb[name]).abs().max().double_value(&[])).fold(0.0, f64::max);
    println!(
        "resumed from {left} by one process with accumulation 2: largest weight difference at step {STEPS} {max_diff:.2e}"
    );
    assert!(max_diff < 1e-4, "weights differ by {max_diff}");
}

/// With dropout on, each rank draws its own masks, so the runs differ, but not in what they
/// learn: the final held-out loss of two ranks is within 2% of one process's.
#[test]
fn with_dropout_two_ranks_reach_the_held_out_loss_of_one_process() {
    let dir = crate::common::scratch("ddp-dropout");
    let run = "lr = 1e-3\nbatch_size = 16\nwarmup_steps = 5\nmax_steps = 40";
    let one = crate::train::write_recipe(&dir, "one", crate::train::SMALL_MODEL, run, 20, "");
    let two = crate::train::write_recipe(&dir, "two", crate::train::SMALL_MODEL, run, 20, "");
    let final_loss = |stdout: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with("held-out MLM loss")).unwrap_or_else(|| panic!("{stdout}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (stdout, _) = crate::common::indolm_ok(&["--threads", "1", "--device", "cpu", "train", one.to_str().unwrap()]);
    let single = final_loss(&stdout);
    let outputs = train_two_ranks(&two, &[]);
    assert!(outputs.iter().all(|o| o.status.success()), "{}", String::from_utf8_lossy(&outputs[1].stderr));
    let parallel = final_loss(&String::from_utf8_lossy(&outputs[0].stdout));
    println!("final held-out loss: one process {single:.4}, two ranks {parallel:.4}");
    assert!((parallel - single).abs() / single < 0.02, "{parallel} vs {single}");
}
