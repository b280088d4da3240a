//! What a command may replace (#37): `--overwrite` removes only what indolm wrote, never the
//! working directory, the folder it reads from or a folder above either (`export-hf`,
//! `import-hf`, `init`, `tokenizer train`); `eval bias --out` and `eval indommlu --out` replace an
//! earlier evaluation only when asked, and then all of it; a report's file never lands on a file
//! indolm keeps inside what it reads.
use super::s;
use crate::common::*;
use indolm_core::outputs::RUN_FILES;
use indolm_core::run::ownership;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A run folder holding one checkpoint as `train` writes it: the model's files, its state and an
/// optimizer state. Returns (run, checkpoint).
pub(super) fn fake_run(work: &Path) -> (PathBuf, PathBuf) {
    let run = work.join("ck/r");
    let checkpoint = run.join("step-60");
    std::fs::create_dir_all(&checkpoint).unwrap();
    for entry in std::fs::read_dir(reference_model()).unwrap().flatten() {
        let name = entry.file_name();
        if ["config.json", "model.safetensors", "vocab.txt", "tokenizer.json"].iter().any(|f| name == *f) {
            std::fs::copy(entry.path(), checkpoint.join(&name)).unwrap();
        }
    }
    std::fs::write(checkpoint.join("optimizer-main.safetensors"), b"state").unwrap();
    std::fs::write(checkpoint.join("trainer_state.json"), r#"{"step": 60, "checksums": {}}"#).unwrap();
    std::fs::write(run.join("latest"), "step-60\n").unwrap();
    (run, checkpoint)
}

/// Every file under `dir`, relative, sorted: what must survive a refused command unchanged.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Runs indolm in `cwd`; expects one clean error and returns it.
fn fails_in(cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_indolm")).current_dir(cwd).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "indolm {args:?} in {}: {stderr}", cwd.display());
    assert!(stderr.starts_with("error: ") && !stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn overwrite_never_removes_the_working_directory_the_source_or_what_indolm_did_not_write() {
    let work = scratch("overwrite-ownership");
    let (run, checkpoint) = fake_run(&work);
    let before = listing(&work);

    // The working directory and a folder above it.
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "mine").unwrap();
    for out in [".", ".."] {
        let err = fails_in(&home, &["export-hf", s(&checkpoint), out, "--overwrite"]);
        assert!(err.contains("working directory") && err.contains("never replaces it"), "{err}");
    }
    assert!(home.join("notes.txt").exists());
    // The checkpoint itself (its optimizer state would go: no longer resumable), and its run.
    let err = indolm_fails(&["export-hf", s(&checkpoint), s(&checkpoint), "--overwrite"]);
    assert!(err.contains("is the folder this command reads from"), "{err}");
    let err = indolm_fails(&["export-hf", s(&checkpoint), s(&run), "--overwrite"]);
    assert!(err.contains("is a folder above") && err.contains("step-60"), "{err}");
    let err = indolm_fails(&["import-hf", s(&checkpoint), s(&work), "--overwrite"]);
    assert!(err.contains("is a folder above"), "{err}");
    std::fs::remove_file(home.join("notes.txt")).unwrap();
    std::fs::remove_dir(&home).unwrap();
    assert_eq!(listing(&work), before, "a refused command removed something");

    // A folder holding a file a model directory does not: refused, naming it, nothing removed.
    let out = work.join("export");
    indolm_ok(&["export-hf", s(&checkpoint), s(&out)]);
    let err = indolm_fails(&["export-hf", s(&checkpoint), s(&out)]);
    assert!(err.contains("pass --overwrite"), "{err}");
    std::fs::write(out.join("README.md"), "my notes").unwrap();
    let err = indolm_fails(&["export-hf", s(&checkpoint), s(&out), "--overwrite"]);
    assert!(err.contains("README.md") && err.contains("removes only what indolm wrote"), "{err}");
    let err = indolm_fails(&[
        "init",
        "--config",
        s(&reference_model().join("config.json")),
        "--tokenizer",
        s(reference_model()),
        "--out",
        s(&out),
        "--overwrite",
    ]);
    assert!(err.contains("README.md"), "{err}");
    // A tokenizer folder is refused before anything is trained.
    let err = indolm_fails(&[
        "tokenizer",
        "train",
        "--files",
        s(&test_data().join("ud-indonesian")),
        "--out",
        s(&out),
        "--overwrite",
    ]);
    assert!(err.contains("README.md"), "{err}");
    assert!(out.join("README.md").exists() && out.join("model.safetensors").exists());
    // What indolm wrote alone is replaced.
    std::fs::remove_file(out.join("README.md")).unwrap();
    indolm_ok(&["export-hf", s(&checkpoint), s(&out), "--overwrite"]);
    // `init` never writes over the config it reads.
    let config_dir = work.join("configs");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::copy(reference_model().join("config.json"), config_dir.join("config.json")).unwrap();
    let err = indolm_fails(&[
        "init",
        "--config",
        s(&config_dir.join("config.json")),
        "--tokenizer",
        s(reference_model()),
        "--out",
        s(&config_dir),
        "--overwrite",
    ]);
    assert!(err.contains("reads from"), "{err}");
}

/// `eval bias --model <reference model> --out <out>` with extra arguments; the result.
fn evaluate(out: &Path, extra: &[&str]) -> std::process::Output {
    let pairs = root().join("tests/fixtures/indobias");
    let mut args = vec!["eval", "bias", "--model", s(reference_model()), "--pairs", s(&pairs), "--out", s(out)];
    args.extend(extra);
    indolm(&args)
}

#[test]
fn an_evaluation_is_replaced_only_when_asked_and_then_whole() {
    let work = scratch("replace-evaluation");
    let out = work.join("eval");
    assert!(evaluate(&out, &["--metric", "pppl", "aul", "--languages", "id"]).status.success());
    assert!(out.join("bias-aul/bias.json").exists());
    let first = std::fs::read(out.join("bias.json")).unwrap();
    let refused = evaluate(&out, &["--metric", "crows", "--languages", "id"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("already holds a bias evaluation") && err.contains("--overwrite")
    );
    assert_eq!(std::fs::read(out.join("bias.json")).unwrap(), first, "the evaluation was replaced");
    // With --overwrite: the new one whole, and nothing of the old (its AUL folder) beside it.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    assert!(evaluate(&out, &["--metric", "crows", "--languages", "id", "--overwrite"]).status.success());
    assert!(!out.join("bias-aul").exists(), "the old evaluation's AUL is left beside the new one");
    assert!(out.join("notes.txt").exists(), "a file indolm did not write was removed");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bias.json")).unwrap()).unwrap();
    assert_eq!(report["metric"], "crows");
    indolm_ok(&["report", "bias-table", s(&out)]);

    // A checkpoint's evaluation is the training hook's: refused without --overwrite, and always
    // while its trainer has it pending.
    let (_, checkpoint) = fake_run(&work);
    assert!(evaluate(&checkpoint, &["--languages", "id"]).status.success());
    let again = evaluate(&checkpoint, &["--languages", "id"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a bias evaluation"));
    std::fs::write(checkpoint.join("evaluation.pending"), "60\n").unwrap();
    let pending = evaluate(&checkpoint, &["--languages", "id", "--overwrite"]);
    assert!(String::from_utf8_lossy(&pending.stderr).contains("pending in the run's trainer"));

    // IndoMMLU likewise.
    let data = root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv");
    let mmlu = work.join("mmlu");
    let args = ["eval", "indommlu", "--model", s(reference_model()), "--data", s(&data), "--out", s(&mmlu)];
    indolm_ok(&args);
    let err = indolm_fails(&args);
    assert!(err.contains("already holds an IndoMMLU evaluation"), "{err}");
    indolm_ok(&[&args[..], &["--overwrite"]].concat());

    // A report's file never replaces one indolm keeps in what the report reads, nor its input.
    let err = indolm_fails(&["report", "bias-table", s(&out), "--json", s(&out.join("bias.json"))]);
    assert!(err.contains("is where indolm keeps its own `bias.json`"), "{err}");
    let err = indolm_fails(&["report", "bias-table", s(&out), "--out", s(&out)]);
    assert!(err.contains("is a folder"), "{err}");
    let report_file = work.join("table.md");
    indolm_ok(&["report", "bias-table", s(&out), "--out", s(&report_file)]);
    let err = indolm_fails(&["report", "bias-table", s(&out), "--out", s(&report_file), "--json", s(&report_file)]);
    assert!(err.contains("is also the output"), "{err}");
}

#[test]
fn a_missing_output_folder_is_named_with_its_flag_before_any_work() {
    let work = scratch("output-folders");
    let notes = work.join("notes.txt");
    std::fs::write(&notes, "mine").unwrap();
    let nothing = work.join("no-such-input"); // never read: the output is refused first
    let n = s(&nothing);
    let missing = |name: &str| work.join("no-such-folder").join(name);
    let (json, out) = (missing("r.json"), missing("o.jsonl"));
    let (j, o) = (s(&json), s(&out));
    let cases: [(&[&str], &str, &Path); 6] = [
        (&["generate", "--model", n, "--prompts", n, "--out", o], "--out", &out),
        (&["eval", "rouge", "--pred", n, "--ref", n, "--json", j], "--json", &json),
        (&["eval", "bertscore", "--model", n, "--pred", n, "--ref", n, "--json", j], "--json", &json),
        (&["eval", "bias", "--model", n, "--pairs", n, "--json", j], "--json", &json),
        (&["eval", "indommlu", "--model", n, "--data", n, "--json", j], "--json", &json),
        (&["report", "bias-table", n, "--out", o], "--out", &out),
    ];
    for (args, flag, path) in cases {
        let err = indolm_fails(args);
        let expected = format!(
            "error: {flag}: {}: its folder {} does not exist: create it first, or name a file in an existing folder\n",
            path.display(),
            path.parent().unwrap().display()
        );
        assert_eq!(err, expected, "{args:?}");
    }
    // The path as given, relative; a folder output under a file.
    let err = fails_in(&work, &["eval", "rouge", "--pred", n, "--ref", n, "--json", "sub/r.json"]);
    assert!(err.starts_with("error: --json: sub/r.json: its folder sub does not exist"), "{err}");
    let under = notes.join("eval");
    for command in
        [&["eval", "indommlu", "--model", n, "--data", n][..], &["eval", "bias-qa", "--data", n, "--answers", n]]
    {
        let err = indolm_fails(&[command, &["--out", s(&under)]].concat());
        let expected =
            format!("error: --out: {}: cannot be created: {} is not a folder\n", under.display(), notes.display());
        assert_eq!(err, expected, "{command:?}");
    }
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 1, "nothing written");
}

/// Every name a writer puts in a run folder is declared by exactly one writer, over the whole
/// workspace (the declarations are gathered at link time, so this runs where every crate is linked).
#[test]
fn every_file_indolm_writes_into_runs_is_declared_once() {
    let names = [
        "latest",
        "evaluation.pending",
        "train_log.jsonl",
        ".readers.lock",
        "run.json",
        "unit.json",
        "result.json",
        "results.json",
        "results.md",
        "sweep.json",
        "trainer_state.json",
        "best.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
        "bias.json",
        "bias_pairs.csv",
        "indommlu.json",
        "indommlu_questions.csv",
        "optimizer.safetensors",
        "optimizer-dec.safetensors",
        "events.out.tfevents.1.host.1.0",
        "test.candidate",
        "test.gold",
    ];
    for name in names {
        let writers: Vec<&str> =
            RUN_FILES.iter().filter(|d| d.files.iter().any(|f| f.matches(name))).map(|d| d.writer).collect();
        assert_eq!(writers.len(), 1, "{name}: declared by {writers:?}");
    }
    for name in ["notes.txt", "optimizer.txt", "plot.png", "model.bin", "tokenizer.json.bak"] {
        assert!(!ownership::written_by_indolm(name), "{name}");
    }
}

#[test]
fn only_a_run_of_indolm_files_is_removed() {
    let root = tempfile::tempdir().unwrap();
    let (run, tb) = (root.path().join("ck/r"), root.path().join("runs/r"));
    for f in ["step-5/model.safetensors", "step-5/optimizer-dec.safetensors", "evals/step-2/bias.json", "latest"] {
        std::fs::create_dir_all(run.join(f).parent().unwrap()).unwrap();
        std::fs::write(run.join(f), "x").unwrap();
    }
    std::fs::create_dir_all(tb.join("bias-id")).unwrap();
    std::fs::write(tb.join("bias-id/events.out.tfevents.1.host.1.0"), "x").unwrap();
    std::fs::write(tb.join("notes.txt"), "mine").unwrap();
    let err = ownership::remove_run(&run, &tb, &[]).unwrap_err().to_string();
    assert!(err.contains("runs/r/notes.txt") && err.contains("removes only what indolm wrote"), "{err}");
    assert!(run.join("latest").exists() && tb.join("notes.txt").exists(), "nothing removed");
    std::fs::remove_file(tb.join("notes.txt")).unwrap();
    ownership::remove_run(&run, &tb, &[]).unwrap();
    assert!(!run.exists() && !tb.exists());
}
