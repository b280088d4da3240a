//! Fine-tuning on the training engine: BertAbs killed with SIGKILL at random moments and resumed
//! ends bit-identical to an uninterrupted run; SIGUSR1 during `finetune summarize` checkpoints
//! and exits 0, and `--resume auto` finishes the run; sentiment on two Gloo ranks trains as one
//! process does; a NusaX grid killed midway redoes no finished configuration when run again,
//! and a rerun with another seed never leaves the outputs of two runs side by side.
use crate::bertabs::{copy_split, recipe, tiny_bert, ud_sentences, write_split};
use crate::common::*;
use crate::dist::free_port;
use crate::sentiment::{random_init, write_recipe};
use crate::train::{latest, KillOnDrop};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A tiny BertAbs setup: data, an initial BERT, and a recipe of `steps` updates with a dev
/// evaluation every `steps / 3` and a checkpoint every 10 updates.
fn bertabs_setup(work: &Path, name: &str, steps: u64) -> PathBuf {
    let sentences = ud_sentences(12);
    let data = work.join("liputan6");
    if !data.exists() {
        write_split(&data, "train", &sentences[..48], 16, 1);
        for split in ["dev", "test"] {
            copy_split(&data, "train", split);
        }
        tiny_bert(&work.join("init"), &sentences);
    }
    let abs =
        "layers = 1\nheads = 2\nff = 64\ndropout = 0.1\nbeam = 2\nmin_length = 2\nmax_length = 12\nmin_sentences = 1";
    let optimizer = format!(
        "lr = 0.05\nwarmup_steps = 30\nlr_dec = 0.05\nwarmup_dec = 30\nmax_steps = {steps}\nbatch_size = 4\neval_every = {}\neval_articles = 4",
        steps / 3
    );
    let path = work.join(format!("{name}.toml"));
    recipe(&path, work, name, "abs", &work.join("init"), &optimizer, abs);
    let text = std::fs::read_to_string(&path).unwrap().replace("[checkpoint]\nevery = 100", "[checkpoint]\nevery = 10");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `indolm --threads 1 --device cpu ARGS` as two ranks of a Gloo job (the variables
/// torchrun sets) and expects both to succeed.
pub(crate) fn two_gloo_ranks(args: &[&str]) {
    let port = free_port().to_string();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_indolm"))
                .args(["--threads", "1", "--device", "cpu"])
                .args(args)
                .args(["--dist-timeout", "60"])
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = ranks.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let errors: Vec<String> = outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).collect();
    for (rank, out) in outputs.iter().enumerate() {
        assert!(out.status.success(), "rank {rank} failed; the ranks' errors: {errors:?}");
    }
}

fn finetune(kind: &str, recipe: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
    command.args(["--threads", "2", "finetune", kind, recipe.to_str().unwrap()]).args(extra);
    command
}

/// The files a finished BertAbs run ends with that must be bit-identical between runs.
fn final_files(run: &Path, last: u64) -> Vec<(String, Vec<u8>)> {
    let step = run.join(format!("step-{last}"));
    let mut out = Vec::new();
    for file in ["model.safetensors", "optimizer-bert.safetensors", "optimizer-dec.safetensors"] {
        out.push((format!("step-{last}/{file}"), std::fs::read(step.join(file)).unwrap()));
    }
    out.push(("best/model.safetensors".into(), std::fs::read(run.join("best/model.safetensors")).unwrap()));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    out.push(("results.json".into(), results.to_string().into_bytes()));
    out
}

#[test]
fn bertabs_killed_three_times_and_resumed_ends_bit_identical() {
    let work = scratch("abs-kill");
    let steps = 90;
    let whole = bertabs_setup(&work, "whole", steps);
    indolm_ok(&["--threads", "2", "finetune", "summarize", whole.to_str().unwrap()]);
    let cut = bertabs_setup(&work, "cut", steps);
    let run = work.join("ck/cut");
    // Three SIGKILLs at different moments after the first checkpoints, each followed by a resume.
    let mut kills = Vec::new();
    let mut extra: Vec<&str> = Vec::new();
    for (k, delay_ms) in [150u64, 700, 400].into_iter().enumerate() {
        let child = finetune("summarize", &cut, &extra).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let mut child = KillOnDrop(child);
        let started = Instant::now();
        let floor = (k as u64 + 1) * 10;
        while latest(&run).and_then(|l| l.trim_start_matches("step-").parse::<u64>().ok()).is_none_or(|s| s < floor) {
            assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint in time");
            if child.0.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.0.kill();
        let _ = child.0.wait();
        kills.push(latest(&run).unwrap_or_default());
        extra = vec!["--resume", "auto"];
    }
    let (stdout, _) =
        indolm_ok(&["--threads", "2", "finetune", "summarize", cut.to_str().unwrap(), "--resume", "auto"]);
    assert!(stdout.contains("dev ROUGE-1/2/L before training"), "{stdout}");
    println!("killed with SIGKILL after {kills:?}; resumed each time");
    for ((name, a), (_, b)) in final_files(&work.join("ck/whole"), steps).iter().zip(final_files(&run, steps)) {
        assert!(*a == b, "{name} differs between the uninterrupted run and the killed and resumed one");
    }
}

#[test]
fn sigusr1_during_finetune_summarize_checkpoints_and_resume_auto_finishes() {
    let work = scratch("abs-usr1");
    let recipe = bertabs_setup(&work, "u", 3000);
    let run = work.join("ck/u");
    let mut child = KillOnDrop(finetune("summarize", &recipe, &[]).stdout(Stdio::piped()).spawn().unwrap());
    let started = Instant::now();
    while latest(&run).is_none() {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill").args(["-USR1", &child.0.id().to_string()]).status().unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "SIGUSR1 ended the run with {status}");
    let stopped: u64 = latest(&run).unwrap().trim_start_matches("step-").parse().unwrap();
    indolm_core::run::checkpoints::load_state(&run.join(format!("step-{stopped}"))).unwrap();
    assert!(!run.join("results.json").exists(), "a stopped run has no results yet");
    // The same recipe, shortened to end soon after the stop, continues and finishes.
    let end = stopped + 10;
    let text = std::fs::read_to_string(&recipe).unwrap().replace("max_steps = 3000", &format!("max_steps = {end}"));
    std::fs::write(&recipe, text).unwrap();
    let (stdout, _) = indolm_ok(&[
        "--threads",
        "2",
        "finetune",
        "summarize",
        recipe.to_str().unwrap(),
        "--resume",
        "auto",
        "--force",
    ]);
    println!("SIGUSR1: checkpoint at step {stopped}, exit 0; --resume auto finished at step {end}");
    assert!(stdout.contains("resumed from") && run.join("results.json").exists(), "{stdout}");
}

/// The sentiment recipe of the data-parallel test: no dropout anywhere (the init model's
/// config says so), so that ranks and one process compute the same thing.
fn no_dropout_init(work: &Path) -> PathBuf {
    let init = copy_dir(random_init(), "sentiment-no-dropout");
    let config = init.join("config.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["hidden_dropout_prob"] = 0.0.into();
    json["attention_probs_dropout_prob"] = 0.0.into();
    std::fs::write(&config, json.to_string()).unwrap();
    let _ = work;
    init
}

#[test]
fn sentiment_on_two_gloo_ranks_trains_as_one_process() {
    let dir = scratch("sentiment-ddp");
    let init = no_dropout_init(&dir);
    let make = |name: &str| {
        let path = write_recipe(&dir, name, 1, "");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&format!("init = \"{}\"", random_init().display()), &format!("init = \"{}\"", init.display()));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (one, two) = (make("one"), make("two"));
    indolm_ok(&["--threads", "1", "--device", "cpu", "finetune", "sentiment", one.to_str().unwrap()]);
    two_gloo_ranks(&["finetune", "sentiment", two.to_str().unwrap()]);
    let unit = "indonesian/lr1e-3-bs32";
    let losses = |run: &str| -> Vec<f64> {
        std::fs::read_to_string(dir.join("ck").join(run).join(unit).join("train_log.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
            .collect()
    };
    let (a, b) = (losses("one"), losses("two"));
    assert!(a.len() >= 3 && a.len() == b.len(), "{a:?} {b:?}");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(format!("{x:.3e}"), format!("{y:.3e}"), "losses {a:?} vs {b:?}");
    }
    let weights = |run: &str| {
        indolm_torch::model::weights::read_file(&dir.join("ck").join(run).join("indonesian/model.safetensors")).unwrap()
    };
    let (wa, wb) = (weights("one"), weights("two"));
    let mut worst = 0.0f64;
    for (name, t) in &wa {
        worst = worst.max((t - &wb[name]).abs().max().double_value(&[]));
    }
    println!("sentiment, 2 Gloo ranks against 1 process: losses {a:?} vs {b:?}; largest weight difference {worst:.2e}");
    assert!(worst < 1e-6, "weights differ by {worst}");
}

#[test]
fn a_grid_killed_midway_redoes_nothing_finished_and_a_new_seed_never_mixes_runs() {
    let dir = scratch("sentiment-grid");
    let make = |name: &str, seed: u64| {
        let path = write_recipe(&dir, name, 2, "[grid]\nlr = [1e-3, 5e-4]\nbatch_size = [32]\n");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("[\"indonesian\"]", "[\"indonesian\", \"javanese\"]")
            .replace("[checkpoint]\nevery = 50", "[checkpoint]\nevery = 10")
            .replace("seed = 3407", &format!("seed = {seed}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let whole = make("whole", 3407);
    indolm_ok(&["--threads", "2", "finetune", "sentiment", whole.to_str().unwrap()]);
    let grid = make("grid", 3407);
    let run = dir.join("ck/grid");
    let first_unit = run.join("indonesian/lr1e-3-bs32/unit.json");
    let mut child = KillOnDrop(finetune("sentiment", &grid, &[]).stdout(Stdio::null()).spawn().unwrap());
    let started = Instant::now();
    while !run.join("indonesian/lr5e-4-bs32/step-10").exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "the second grid point never checkpointed");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let finished_at = std::fs::metadata(&first_unit).unwrap().modified().unwrap();
    let checkpoints = || -> Vec<(String, std::time::SystemTime)> {
        let unit = run.join("indonesian/lr1e-3-bs32");
        let mut out: Vec<_> = std::fs::read_dir(&unit)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("step-"))
            .map(|n| {
                let state = unit.join(&n).join("trainer_state.json");
                (n, std::fs::metadata(state).unwrap().modified().unwrap())
            })
            .collect();
        out.sort();
        out
    };
    let first_checkpoints = checkpoints();
    // Run again without a flag: refused, naming the two ways on.
    let err = indolm_fails(&["finetune", "sentiment", grid.to_str().unwrap()]);
    assert!(err.contains("--resume auto") && err.contains("--overwrite"), "{err}");
    let (stdout, _) =
        indolm_ok(&["--threads", "2", "finetune", "sentiment", grid.to_str().unwrap(), "--resume", "auto"]);
    assert!(!stdout.contains("indonesian/lr1e-3-bs32: step"), "a finished grid point was trained again:\n{stdout}");
    assert_eq!(std::fs::metadata(&first_unit).unwrap().modified().unwrap(), finished_at);
    assert_eq!(checkpoints(), first_checkpoints, "a finished grid point's checkpoints were written again");
    let results = |name: &str| std::fs::read_to_string(dir.join("ck").join(name).join("results.json")).unwrap();
    assert_eq!(results("grid"), results("whole"), "the killed and resumed grid differs from an uninterrupted one");

    // Another seed: refused as a continuation; with --overwrite it starts over, and stopped
    // midway it leaves nothing of the first run.
    let reseeded = make("grid", 7);
    let err = indolm_fails(&["finetune", "sentiment", reseeded.to_str().unwrap(), "--resume", "auto"]);
    assert!(err.contains("seed (3407 -> 7)"), "{err}");
    let mut child = KillOnDrop(
        finetune("sentiment", &reseeded, &["--overwrite"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    let started = Instant::now();
    let restarted = || std::fs::read_to_string(run.join("run.json")).is_ok_and(|m| m.contains("\"seed\": 7"));
    while !restarted() || !run.join("indonesian/lr1e-3-bs32/step-10").exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "the new run never checkpointed");
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
    assert!(child.0.wait().unwrap().success());
    for old in ["results.json", "results.md", "indonesian/result.json", "indonesian/model.safetensors", "javanese"] {
        assert!(!run.join(old).exists(), "{old} of the first run is still there beside the second");
    }
    let manifest = std::fs::read_to_string(run.join("run.json")).unwrap();
    assert!(manifest.contains("\"seed\": 7"), "{manifest}");
}
