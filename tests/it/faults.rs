//! Fault injection on the tiny recipe: kills at every stage of a checkpoint and of a shard, a
//! full disk, changed recipes and source text on resume, corrupt or missing checkpoints, and
//! closed pipes. After each fault: no earlier good data lost, no partial file taken as
//! complete, resume works, and the message names the file and what to do. (Locks, signals and
//! unsafe names are in `train`; stalled and cut downloads in `download`.) The submodules hold
//! the user's data against every command: what a command may replace (`outputs`), what a file
//! may make it read (`inputs`), a run's identity on resume (`runs`), and reports that read
//! evaluations whole (`reports`).
mod inputs;
mod outputs;
mod reports;
mod runs;

use crate::common::*;
use crate::train::{latest, spawn_train, write_recipe, KillOnDrop, SHORT_RUN, SMALL_MODEL};
use indolm_core::run::checkpoints::load_state;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `SHORT_RUN` with another `max_steps` and, optionally, another `lr`.
fn run_of(max_steps: u64, lr: &str) -> String {
    SHORT_RUN.replace("max_steps = 60", &format!("max_steps = {max_steps}")).replace("lr = 1e-3", &format!("lr = {lr}"))
}

/// Temporary files (`.<name>.<pid>-<n>.tmp`) anywhere under `dir`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().ends_with(".tmp") {
            found.push(path.clone());
        }
        if path.is_dir() {
            found.extend(temporaries(&path));
        }
    }
    found
}

/// `--resume --force` continues with the new recipe and records it: a later plain resume with
/// the new values is accepted, one with the old values refused, naming the field.
#[test]
fn resume_with_force_records_the_recipe_it_continues_with() {
    let dir = scratch("force-records");
    let old = write_recipe(&dir, "r", SMALL_MODEL, &run_of(10, "1e-3"), 5, "");
    indolm_ok(&["train", s(&old)]);
    let new = write_recipe(&dir, "r", SMALL_MODEL, &run_of(20, "2e-3"), 5, "");
    indolm_ok(&["train", s(&new), "--resume", "latest", "--force", "--stop-after", "15"]);
    let (stdout, _) = indolm_ok(&["train", s(&new), "--resume", "latest"]);
    assert!(stdout.contains("finished at step 20"), "{stdout}");
    let old = write_recipe(&dir, "r", SMALL_MODEL, &run_of(20, "1e-3"), 5, "");
    let err = indolm_fails(&["train", s(&old), "--resume", "latest"]);
    assert!(err.contains("optimizer.lr (0.002 -> 0.001)") && err.contains("--force"), "{err}");
}

/// Source text changed under a run: resume is refused before anything is re-tokenized (the
/// shard keeps its content key), `--force` continues on the new text and records it.
#[test]
fn changed_source_text_is_refused_on_resume_unless_forced() {
    let dir = scratch("changed-text");
    let csv = dir.join("nusax-train.csv");
    std::fs::copy(test_data().join("nusax/sentiment/indonesian/train.csv"), &csv).unwrap();
    let recipe = write_recipe(&dir, "t", SMALL_MODEL, &run_of(20, "1e-3"), 5, "");
    let text = std::fs::read_to_string(&recipe).unwrap();
    let shared_csv = test_data().join("nusax/sentiment/indonesian/train.csv");
    std::fs::write(&recipe, text.replace(s(&shared_csv), s(&csv))).unwrap();
    indolm_ok(&["train", s(&recipe), "--stop-after", "10"]);
    let meta_path = dir.join("corpora/shared-id/nusax-id.json");
    let meta_before = std::fs::read_to_string(&meta_path).unwrap();

    let mut rows = std::fs::read_to_string(&csv).unwrap();
    rows.push_str("\n9999,Kalimat baru yang ditambahkan setelah pelatihan dimulai.,positive\n");
    std::fs::write(&csv, rows).unwrap();
    let err = indolm_fails(&["train", s(&recipe), "--resume", "latest"]);
    assert!(
        err.contains("source `nusax-id`")
            && err.contains("changed since the run started")
            && err.contains("step-10/trainer_state.json")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&meta_path).unwrap(), meta_before, "the refused resume re-tokenized");

    indolm_ok(&["train", s(&recipe), "--resume", "latest", "--force", "--stop-after", "15"]);
    let state = load_state(&dir.join("checkpoints/t/step-15")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    assert_eq!(state.values["corpus"]["nusax-id"], meta["content_sha256"].as_str().unwrap());
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
    assert!(stdout.contains("finished at step 20"), "{stdout}");
}

/// The issue's stuck shard: a source prepared as text A, changed to text B, `corpus prepare`
/// SIGKILLed 0 to 250 ms after it begins to replace A's shard (at whatever stage it reached:
/// tokenizing, the token file, the index, the metadata), then the source put back to A. The next `prepare`
/// must give exactly A's shard: never B's data under A's metadata. Then a token file cut short
/// behind its metadata's back is found and rebuilt, not reported up to date.
#[test]
fn a_shard_killed_at_any_stage_is_prepared_again_and_whole() {
    let dir = scratch("shard-kills");
    let csv = dir.join("nusax-train.csv");
    let text_a = std::fs::read_to_string(test_data().join("nusax/sentiment/indonesian/train.csv")).unwrap();
    let rows_a: Vec<&str> = text_a.lines().collect();
    // Text B: the same rows in reverse order, three times over (another content, a longer write).
    let text_b =
        format!("{}\n{}", rows_a[0], rows_a[1..].iter().rev().cloned().collect::<Vec<_>>().repeat(3).join("\n"));
    std::fs::write(&csv, &text_a).unwrap();
    let recipe = write_recipe(&dir, "p", SMALL_MODEL, SHORT_RUN, 20, "");
    let shared_csv = test_data().join("nusax/sentiment/indonesian/train.csv");
    let recipe_text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, recipe_text.replace(s(&shared_csv), s(&csv))).unwrap();
    let corpus = dir.join("corpora/shared-id");
    let files = ["nusax-id.bin", "nusax-id.idx", "nusax-id.json", "ud-id.bin"];
    indolm_ok(&["corpus", "prepare", s(&recipe)]);
    let reference: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(corpus.join(f)).unwrap()).collect();

    let delays = [0, 5, 15, 30, 50, 80, 120, 170, 250];
    let mut killed_while_writing = 0;
    let meta = corpus.join("nusax-id.json");
    for delay_ms in delays {
        std::fs::write(&csv, &text_b).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_indolm"))
            .args(["corpus", "prepare", s(&recipe)])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // A's metadata goes first when its shard is replaced.
        while meta.exists() && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok();
        child.wait().unwrap();
        let b_incomplete = !meta.exists();
        killed_while_writing += (!finished && b_incomplete) as usize;
        std::fs::write(&csv, &text_a).unwrap();
        indolm_ok(&["corpus", "prepare", s(&recipe)]);
        for (file, bytes) in files.iter().zip(&reference) {
            assert!(
                std::fs::read(corpus.join(file)).unwrap() == *bytes,
                "{file} differs after a kill at {delay_ms} ms"
            );
        }
        assert!(temporaries(&corpus).is_empty(), "temporary files left: {:?}", temporaries(&corpus));
    }
    println!("{killed_while_writing} of {} kills landed after the re-preparation had begun", delays.len());
    assert!(killed_while_writing >= 1, "no kill landed during the re-preparation; adjust the delays");

    let bin = corpus.join("ud-id.bin");
    std::fs::write(&bin, &reference[3][..reference[3].len() / 2]).unwrap();
    let (stdout, _) = indolm_ok(&["corpus", "prepare", s(&recipe)]);
    assert!(stdout.contains("prepared `ud-id`"), "{stdout}");
    assert!(std::fs::read(&bin).unwrap() == reference[3]);
}

/// SIGKILL 0 to 20 ms after a checkpoint of a run that checkpoints every step (so within the
/// next step or the next save): `latest` always names a whole, checksum-verified checkpoint,
/// leftovers of an interrupted save are cleared, and the run resumes to the end.
#[test]
fn kills_during_checkpoints_never_leave_a_partial_checkpoint() {
    let dir = scratch("checkpoint-kills");
    let recipe = write_recipe(&dir, "k", SMALL_MODEL, &run_of(40, "1e-3"), 1, "");
    let run = dir.join("checkpoints/k");
    let mut child = spawn_train(&recipe, &["--stop-after", "2"]);
    assert!(child.wait().unwrap().success());
    for delay_ms in [0, 1, 2, 4, 7, 10, 14, 20] {
        let before = latest(&run);
        let mut child = KillOnDrop(spawn_train(&recipe, &["--resume", "latest"]));
        while latest(&run) == before && child.0.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.0.kill().ok();
        child.0.wait().unwrap();
        let last = latest(&run).unwrap();
        let state = load_state(&run.join(&last)).unwrap_or_else(|e| panic!("after a kill at {delay_ms} ms: {e}"));
        assert_eq!(format!("step-{}", state.step), last);
    }
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
    assert!(stdout.contains("finished at step 40"), "{stdout}");
    assert!(temporaries(&run).is_empty(), "leftovers of killed saves: {:?}", temporaries(&run));
}

/// A disk that fills during a checkpoint (`ulimit -f`, with SIGXFSZ ignored so the write fails
/// with an error instead of killing the process): one error naming the file, exit 1, no
/// temporary file left, the previous checkpoint intact, and resume works once there is room.
#[test]
fn a_full_disk_during_a_checkpoint_loses_nothing_and_leaves_no_temporaries() {
    let dir = scratch("full-disk");
    let recipe = write_recipe(&dir, "d", SMALL_MODEL, &run_of(20, "1e-3"), 10, "");
    let run = dir.join("checkpoints/d");
    indolm_ok(&["train", s(&recipe), "--stop-after", "10"]);
    let weights = std::fs::metadata(run.join("step-10/model.safetensors")).unwrap().len();
    // Room for the logs and the tokenizer files, not for the weights (`sh`'s blocks: 512 bytes).
    let limit_blocks = weights / 512 / 2;
    let script = format!(
        "trap '' XFSZ; ulimit -f {limit_blocks}; exec '{}' train '{}' --resume latest",
        env!("CARGO_BIN_EXE_indolm"),
        s(&recipe)
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked") && stderr.contains("step-20") && stderr.contains(".tmp"), "{stderr}");
    assert_eq!(latest(&run).as_deref(), Some("step-10"));
    load_state(&run.join("step-10")).unwrap();
    assert!(!run.join("step-20").exists());
    assert!(temporaries(&run).is_empty(), "temporary files left after the failed write: {:?}", temporaries(&run));
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
    assert!(stdout.contains("finished at step 20"), "{stdout}");
}

/// One command for a job's first launch and its requeues: `--resume auto` starts a run that has
/// no checkpoint and continues one that has.
#[test]
fn resume_auto_starts_a_new_run_and_continues_an_old_one() {
    let dir = scratch("resume-auto");
    let recipe = write_recipe(&dir, "a", SMALL_MODEL, &run_of(10, "1e-3"), 5, "");
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "auto", "--stop-after", "5"]);
    assert!(stdout.contains("no checkpoint yet, starting the run"), "{stdout}");
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "auto"]);
    assert!(stdout.contains("resumed from") && stdout.contains("finished at step 10"), "{stdout}");
}

/// A corrupt `latest` checkpoint is refused, naming the newest valid one and the command that
/// resumes from it; `info` and `fill-mask` verify the checksums too. A missing `latest` pointer
/// with checkpoints present names the newest valid one, and does not let a new run start over
/// them.
#[test]
fn a_corrupt_or_missing_latest_names_the_newest_valid_checkpoint() {
    let dir = scratch("corrupt-latest");
    let recipe = write_recipe(&dir, "c", SMALL_MODEL, &run_of(10, "1e-3"), 5, "");
    indolm_ok(&["train", s(&recipe)]);
    let run = dir.join("checkpoints/c");
    let weights = run.join("step-10/model.safetensors");
    let good = std::fs::read(&weights).unwrap();
    let mut bad = good.clone();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x55;
    std::fs::write(&weights, &bad).unwrap();

    let step5 = run.join("step-5");
    let err = indolm_fails(&["train", s(&recipe), "--resume", "latest"]);
    assert!(
        err.contains("checksum mismatch")
            && err.contains("newest valid checkpoint is step 5")
            && err.contains(&format!("--resume {}", step5.display())),
        "{err}"
    );
    for args in [
        vec!["info", "--model", s(&run.join("step-10"))],
        vec!["fill-mask", "--model", s(&run.join("step-10")), "--text", "saya [MASK] nasi"],
    ] {
        let err = indolm_fails(&args);
        assert!(err.contains("model.safetensors: checksum mismatch") && err.contains("corrupt"), "{args:?}: {err}");
    }
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", s(&step5)]);
    assert!(stdout.contains("finished at step 10"), "{stdout}");

    std::fs::remove_file(run.join("latest")).unwrap();
    let err = indolm_fails(&["train", s(&recipe), "--resume", "latest"]);
    assert!(err.contains("`latest` pointer is missing") && err.contains("newest valid checkpoint is step 10"), "{err}");
    let err = indolm_fails(&["train", s(&recipe)]);
    assert!(err.contains("already has checkpoints"), "{err}");
}

/// Training into a closed pipe (`indolm train … | head -1`): the run goes on to its last
/// checkpoint and exits 0, and so do the one-shot commands that print a recipe or a corpus.
#[test]
fn a_closed_pipe_neither_stops_training_nor_panics() {
    let dir = scratch("pipe-train");
    let recipe = write_recipe(&dir, "p", SMALL_MODEL, &run_of(20, "1e-3"), 10, "");
    let commands: [&[&str]; 4] = [
        &["train", s(&recipe)],
        &["recipe", "check", s(&recipe)],
        &["corpus", "stats", s(&recipe)],
        &["fill-mask", "--model", s(reference_model()), "--text", "saya [MASK] nasi"],
    ];
    for args in commands {
        indolm_into_closed_pipe(args);
    }
    assert_eq!(latest(&dir.join("checkpoints/p")).as_deref(), Some("step-20"), "training stopped early");
}

/// `--overwrite` removes only what indolm wrote: a user's file in the run's TensorBoard folder
/// or in the run folder is named and nothing is deleted; without it, the run starts over.
#[test]
fn overwrite_removes_only_what_indolm_wrote() {
    let dir = scratch("overwrite-own");
    let recipe = write_recipe(&dir, "o", SMALL_MODEL, &run_of(10, "1e-3"), 10, "");
    indolm_ok(&["train", s(&recipe)]);
    let (run, tb) = (dir.join("checkpoints/o"), dir.join("runs/o"));
    for (folder, name) in [(&tb, "notes.txt"), (&run, "step-10/my-plot.png")] {
        let mine = folder.join(name);
        std::fs::write(&mine, "the user's own").unwrap();
        let err = indolm_fails(&["train", s(&recipe), "--overwrite"]);
        assert!(err.contains(name) && err.contains("--overwrite removes only what indolm wrote"), "{err}");
        assert!(mine.exists() && run.join("step-10/model.safetensors").exists(), "something was deleted");
        std::fs::remove_file(&mine).unwrap();
    }
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--overwrite"]);
    assert!(stdout.contains("finished at step 10"), "{stdout}");
}

/// `recipe check` refuses what `train` refuses (a sequence too short, a name too long, with a
/// short message), and a `train` refused after it opened its run (here: no tokenizer) leaves no
/// run folder, TensorBoard folder or lock file behind.
#[test]
fn recipe_check_refuses_what_train_refuses_and_a_refused_train_leaves_nothing() {
    let dir = scratch("check-train");
    let recipe = write_recipe(&dir, "c", SMALL_MODEL, &run_of(10, "1e-3"), 10, "");
    let text = std::fs::read_to_string(&recipe).unwrap();
    let variant = |name: &str, from: &str, to: &str| {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        path
    };
    let short = variant("short", "seq_len = 64", "seq_len = 2");
    for command in [vec!["recipe", "check", s(&short)], vec!["train", s(&short)]] {
        let err = indolm_fails(&command);
        assert!(err.contains("data.seq_len") && err.contains("expected at least 8, found 2"), "{command:?}: {err}");
    }
    for n in [250, 10_000] {
        let long = variant(&format!("long{n}"), "name = \"c\"", &format!("name = \"{}\"", "a".repeat(n)));
        let err = indolm_fails(&["recipe", "check", s(&long)]);
        assert!(
            err.contains("is too long: at most 100 characters") && err.len() < 400,
            "{}",
            &err[..err.len().min(500)]
        );
    }
    let no_tokenizer =
        variant("notok", &reference_model().display().to_string(), &dir.join("none").display().to_string());
    indolm_fails(&["train", s(&no_tokenizer)]);
    let leftovers: Vec<_> =
        ["checkpoints/c", "checkpoints/.c.lock", "runs/c"].iter().filter(|p| dir.join(p).exists()).collect();
    assert!(leftovers.is_empty(), "a refused train left {leftovers:?}");
}
