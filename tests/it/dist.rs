//! Data-parallel plumbing on libtorch's c10d: two `indolm dist-check` processes on loopback,
//! launched with torchrun's and with Slurm's variables, join one Gloo process group and agree
//! on every collective; bad launches end in one-line errors within their timeout.
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on (the OS's pick, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
    let port = free_port().to_string();
    let torchrun = |rank: usize| {
        vec![
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", rank.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.clone()),
        ]
    };
    let outputs = run_job(vec![torchrun(0), torchrun(1)], &["--megabytes", "4", "--timeout", "60"]);
    for (rank, out) in outputs.iter().enumerate() {
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "rank {rank}: {stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!("rank {rank} of 2 (local rank {rank}, torchrun)"))
                && stdout.contains("sum, max, broadcast and barrier correct"),
            "{stdout}"
        );
    }
    let rank0 = String::from_utf8_lossy(&outputs[0].stdout);
    assert!(rank0.contains("all-reduce of 4 MB over 2 Gloo ranks") && rank0.contains("bus bandwidth"), "{rank0}");
    println!("{}", rank0.lines().last().unwrap());

    // The same job under Slurm's variables: the store's host is the first of the node list.
    let port = free_port().to_string();
    let slurm = |rank: usize| {
        vec![
            ("SLURM_PROCID", rank.to_string()),
            ("SLURM_LOCALID", rank.to_string()),
            ("SLURM_NTASKS", "2".to_string()),
            ("SLURM_JOB_NODELIST", "localhost".to_string()),
            ("MASTER_PORT", port.clone()),
        ]
    };
    for (rank, out) in run_job(vec![slurm(0), slurm(1)], &["--megabytes", "1", "--timeout", "60"]).iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "rank {rank}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("rank {rank} of 2 (local rank {rank}, slurm)")), "{stdout}");
    }
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
        assert!(elapsed < Duration::from_secs(20), "{vars:?} took {elapsed:?}");
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
