//! A bias evaluation's files are one unit, and reports never combine what does not belong
//! together: `bias.json` names the checksum of its `bias_pairs.csv`; a full disk between the two
//! writes, files of two evaluations side by side, an edited or cut CSV, evaluations of
//! different metrics, and one evaluation or run given twice are each refused, naming the file,
//! the row and the field.
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn pairs() -> PathBuf {
    root().join("tests/fixtures/indobias")
}

/// `eval bias --model <reference model> --out <out>` with extra arguments.
fn evaluate(out: &Path, extra: &[&str]) {
    let pairs = pairs();
    let mut args = vec!["eval", "bias", "--model", s(reference_model()), "--pairs", s(&pairs), "--out", s(out)];
    args.extend(extra);
    indolm_ok(&args);
}

fn copy_evaluation(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in ["bias.json", "bias_pairs.csv"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
}

/// Removes the report's checksum, as reports written before it existed are.
fn as_legacy(dir: &Path) {
    let path = dir.join("bias.json");
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    report.as_object_mut().unwrap().remove("records_sha256").expect("a checksum to remove");
    std::fs::write(path, report.to_string()).unwrap();
}

fn diff_fails(a: &Path, b: &Path) -> String {
    indolm_fails(&["report", "bias-diff", s(a), s(b)])
}

/// Rewrites one field of one data row (`row` counted from 2, as the errors count).
fn edit_csv(dir: &Path, edit: impl Fn(&mut Vec<Vec<String>>)) {
    let path = dir.join("bias_pairs.csv");
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_path(&path).unwrap();
    let mut rows: Vec<Vec<String>> = reader.records().map(|r| r.unwrap().iter().map(String::from).collect()).collect();
    edit(&mut rows);
    let mut writer = csv::WriterBuilder::new().flexible(true).from_path(&path).unwrap();
    for r in rows {
        writer.write_record(r).unwrap();
    }
    writer.flush().unwrap();
}

#[test]
fn an_evaluation_is_one_unit_and_reports_refuse_mixed_inputs() {
    let work = scratch("eval-unit");
    let (full, other, crows) = (work.join("full"), work.join("other"), work.join("crows"));
    evaluate(&full, &[]);
    evaluate(&other, &["--seed", "7"]);
    evaluate(&crows, &["--metric", "crows"]);
    let (stdout, _) = indolm_ok(&["report", "bias-diff", s(&full), s(&other)]);
    assert!(stdout.contains("metric pppl: each sentence's pseudo-perplexity"), "{stdout}");

    // One evaluation twice, and two metrics: refused.
    let err = diff_fails(&full, &full.join("bias_pairs.csv"));
    assert!(err.contains("are the same evaluation"), "{err}");
    let err = diff_fails(&full, &crows);
    assert!(err.contains("metric pppl, B with crows") && err.contains("not comparable"), "{err}");

    // A report beside records of another evaluation (one language instead of four).
    let one = work.join("one");
    evaluate(&one, &["--languages", "id"]);
    let mixed = work.join("mixed");
    copy_evaluation(&full, &mixed);
    std::fs::copy(one.join("bias_pairs.csv"), mixed.join("bias_pairs.csv")).unwrap();
    let err = diff_fails(&mixed, &other);
    assert!(
        err.contains("mixed/bias_pairs.csv") && err.contains("not the file") && err.contains("different evaluations"),
        "{err}"
    );
    // The same with a report from before the checksum: its counts give it away.
    as_legacy(&mixed);
    let err = diff_fails(&mixed, &other);
    assert!(err.contains("its languages [\"id\"] are not those of"), "{err}");

    // The disk fills while `eval bias --out` writes a one-language evaluation over the
    // four-language one: whichever write fails, no report ever pairs the two.
    let (csv_len, json_len) = (
        std::fs::metadata(one.join("bias_pairs.csv")).unwrap().len(),
        std::fs::metadata(one.join("bias.json")).unwrap().len(),
    );
    let target = work.join("target");
    copy_evaluation(&full, &target);
    // `ulimit -f` counts 512-byte blocks: room for the smaller file only.
    let limit = (csv_len.min(json_len) / 512 + 1).max(1);
    assert!(limit * 512 < csv_len.max(json_len), "the two files are too close in size: {csv_len} {json_len}");
    let script = format!(
        "trap '' XFSZ; ulimit -f {limit}; exec '{}' eval bias --model '{}' --pairs '{}' --languages id --out '{}' --overwrite",
        env!("CARGO_BIN_EXE_indolm"),
        s(reference_model()),
        s(&pairs()),
        s(&target)
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    if csv_len > json_len {
        // The records did not fit: the earlier evaluation is whole and still reads.
        indolm_ok(&["report", "bias-diff", s(&target), s(&other)]);
        assert_eq!(std::fs::read(target.join("bias.json")).unwrap(), std::fs::read(full.join("bias.json")).unwrap());
    } else {
        // The records were replaced, the report was not: refused.
        let err = diff_fails(&target, &other);
        assert!(err.contains("not the file") && err.contains("different evaluations"), "{err}");
    }
}

#[test]
fn corrupt_records_are_refused_by_row_and_field() {
    let work = scratch("eval-corrupt");
    let (good, other) = (work.join("good"), work.join("other"));
    evaluate(&good, &["--languages", "id", "jv"]);
    evaluate(&other, &["--languages", "id", "jv", "--seed", "7"]);
    let case = |name: &str, legacy: bool, edit: &dyn Fn(&mut Vec<Vec<String>>)| -> String {
        let dir = work.join(name);
        copy_evaluation(&good, &dir);
        if legacy {
            as_legacy(&dir);
        }
        edit_csv(&dir, edit);
        diff_fails(&dir, &other)
    };
    let col = |name: &str| indolm_eval::bias::records::RECORD_COLUMNS.iter().position(|c| *c == name).unwrap();

    // Any edit of a checksummed file: refused before its rows are read.
    let err = case("edited", false, &|rows| rows[3][col("gap")] = "0.5".into());
    assert!(err.contains("edited/bias_pairs.csv") && err.contains("not the file"), "{err}");

    // Without a checksum (older reports), every row is still checked.
    let err = case("nan", true, &|rows| rows[3][col("gap")] = "NaN".into());
    assert!(err.contains("nan/bias_pairs.csv") && err.contains("row 4") && err.contains("gap is NaN"), "{err}");
    let err = case("preferred", true, &|rows| {
        let p = col("preferred");
        rows[5][p] = if rows[5][p] == "pro" { "anti".into() } else { "pro".into() };
    });
    assert!(err.contains("row 6") && err.contains("do not follow from its scores"), "{err}");
    let protrope = {
        let mut reader = csv::Reader::from_path(good.join("bias_pairs.csv")).unwrap();
        reader.records().nth(4).unwrap().unwrap()[col("protrope")].to_string()
    };
    assert!(err.contains(&format!("{protrope:?}")), "the sentence is shown: {err}");
    let err = case("extra", true, &|rows| rows.iter_mut().for_each(|r| r.push("x".into())));
    assert!(err.contains("the header is") && err.contains(",x;"), "{err}");
    let err = case("extra-rows", true, &|rows| rows.iter_mut().skip(1).for_each(|r| r.push("x".into())));
    assert!(err.contains("row 2"), "{err}");
    let err = case("cut", true, &|rows| {
        let last = rows.last_mut().unwrap();
        let a = last[col("antitrope")].clone();
        last[col("antitrope")] = a[..a.len() / 2].to_string();
    });
    assert!(err.contains("has another antitrope in each"), "{err}");
}

/// A run's reports: one run given twice and evaluations of different metrics are refused.
#[test]
fn run_reports_refuse_a_run_twice_and_mixed_metrics() {
    let work = scratch("eval-runs");
    let (pppl, crows) = (work.join("pppl"), work.join("crows"));
    evaluate(&pppl, &["--languages", "id"]);
    evaluate(&crows, &["--languages", "id", "--metric", "crows"]);
    // Two runs laid out as the hook writes them.
    let (run_a, run_b) = (work.join("runs/a"), work.join("runs/b"));
    copy_evaluation(&pppl, &run_a.join("step-10"));
    copy_evaluation(&pppl, &run_a.join("step-20"));
    copy_evaluation(&pppl, &run_b.join("step-10"));
    copy_evaluation(&crows, &run_b.join("step-20"));
    let err = indolm_fails(&["report", "bias-compare", s(&run_a), s(&work.join("runs/../runs/a"))]);
    assert!(err.contains("are the same run"), "{err}");
    let err = indolm_fails(&["report", "bias-compare", s(&run_a), s(&run_b)]);
    assert!(err.contains("metric pppl") && err.contains("crows") && err.contains("not comparable"), "{err}");
    let (stdout, _) = indolm_ok(&["report", "bias-compare", s(&run_a), s(&run_b), "--step", "10"]);
    assert!(stdout.contains("metric pppl: each sentence's pseudo-perplexity"), "{stdout}");
    let err = indolm_fails(&["report", "bias-curve", "--run", s(&run_b), "--out", s(&work.join("c.svg"))]);
    assert!(err.contains("step 10") && err.contains("step 20") && err.contains("one curve needs one metric"), "{err}");
    let err = indolm_fails(&["report", "bias-flips", "--run", s(&run_b)]);
    assert!(err.contains("not comparable"), "{err}");
    let (stdout, _) = indolm_ok(&["report", "bias-flips", "--run", s(&run_a)]);
    assert!(stdout.contains("metric pppl"), "{stdout}");
}

/// `indolm train <recipe> [extra]` with `INDOLM_TEST_FAIL_EVALUATION=<fail>`: (exit code,
/// stdout, stderr).
fn train_failing(recipe: &Path, fail: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(["train", s(recipe)])
        .args(extra)
        .env("INDOLM_TEST_FAIL_EVALUATION", fail)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Nothing that was to be measured is lost: a checkpoint's evaluation that fails (a full disk)
/// stays pending with its weights kept (past `keep_last`), is redone at the next checkpoint or
/// on resume, and gives the very files an undisturbed run writes; a run that ends with one still
/// pending exits 1 and says how to redo it; a failed evaluation between checkpoints writes a
/// checkpoint and training goes on.
#[test]
fn failed_evaluations_stay_pending_and_are_redone() {
    use crate::bias_eval::hook_recipe;
    let work = scratch("eval-pending");
    let clean = hook_recipe(&work, "clean", 3407, "every = 2");
    indolm_ok(&["train", s(&clean)]);
    let records =
        |run: &str, step: &str| std::fs::read(work.join("ck").join(run).join(step).join("bias_pairs.csv")).unwrap();

    // Step 3's evaluation fails; training goes on, and checkpoint 6 redoes it.
    let recipe = hook_recipe(&work, "redo", 3407, "every = 2");
    let (code, stdout, _) = train_failing(&recipe, "checkpoint@3", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("warning: step 3: the checkpoint's evaluations failed"), "{stdout}");
    assert!(stdout.contains("step 3: the evaluations of this checkpoint did not complete; redoing them"), "{stdout}");
    assert_eq!(records("redo", "step-3"), records("clean", "step-3"), "the redone evaluation is the one it replaces");
    let run = work.join("ck/redo");
    assert!(!run.join("step-3/evaluation.pending").exists() && !run.join("step-3/model.safetensors").exists());

    // It fails again when redone: the run ends with exit 1, step 3's weights kept past
    // keep_last = 1; `--resume latest` redoes it.
    let recipe = hook_recipe(&work, "again", 3407, "every = 2");
    let (code, stdout, stderr) = train_failing(&recipe, "checkpoint@3,redo@3", &[]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the checkpoint(s) at step 3 could not be completed") && stderr.contains("--resume latest"),
        "{stderr}"
    );
    let run = work.join("ck/again");
    assert!(run.join("step-3/evaluation.pending").exists() && run.join("step-3/model.safetensors").exists());
    assert!(!run.join("step-3/bias.json").exists());
    let (stdout, _) = indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
    assert!(stdout.contains("step 3: the evaluations of this checkpoint did not complete; redoing them"), "{stdout}");
    assert_eq!(records("again", "step-3"), records("clean", "step-3"));
    assert!(!run.join("step-3/evaluation.pending").exists() && !run.join("step-3/model.safetensors").exists());
    let (report, _) = indolm_eval::bias::records::read_evaluation(&run.join("step-3")).unwrap();
    assert_eq!(report.step, Some(3));

    // An evaluation between checkpoints fails: a checkpoint at that step, evaluated, and the
    // run goes on to its end.
    let recipe = hook_recipe(&work, "dense", 3407, "every = 2");
    let (code, stdout, _) = train_failing(&recipe, "between@4", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("warning: step 4: the evaluations between checkpoints failed"), "{stdout}");
    assert!(stdout.contains("step 4: checkpoint") && stdout.contains("finished at step 6"), "{stdout}");
    assert_eq!(records("dense", "step-4"), records("clean", "evals/step-4"));
}

/// A reader of a run beside its trainer: while it holds the run (as `eval bias --run` does),
/// `keep_last` deletes no weights; `eval bias --run` refuses to replace the hook's results
/// unless `--overwrite`.
#[test]
fn readers_keep_their_checkpoints_and_the_hooks_results() {
    use crate::bias_eval::hook_recipe;
    use indolm_core::run::{readers::ReadHold, RunLayout};
    let work = scratch("eval-readers");
    let recipe = hook_recipe(&work, "r", 3407, "");
    indolm_ok(&["train", s(&recipe), "--stop-after", "3"]);
    let run = work.join("ck/r");
    {
        let _hold = ReadHold::take(&RunLayout::new(&run)).unwrap();
        let (stdout, stderr) = indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
        assert!(stdout.contains("finished at step 6"), "{stdout}");
        assert!(stderr.contains("another indolm process is reading this run's checkpoints"), "{stderr}");
        assert!(run.join("step-3/model.safetensors").exists(), "keep_last = 1 deleted weights a reader holds");
    }
    let (pairs, tb) = (pairs(), work.join("tb"));
    let mut args = vec!["eval", "bias", "--run", s(&run), "--pairs", s(&pairs), "--languages", "id"];
    let hook_report = std::fs::read(run.join("step-6/bias.json")).unwrap();
    let err = indolm_fails(&args);
    assert!(err.contains("step-3, step-6 already hold(s) a bias evaluation") && err.contains("--overwrite"), "{err}");
    assert_eq!(std::fs::read(run.join("step-6/bias.json")).unwrap(), hook_report);
    args.extend(["--overwrite", "--logdir", s(&tb)]);
    indolm_ok(&args);
    let (report, _) = indolm_eval::bias::records::read_evaluation(&run.join("step-6")).unwrap();
    assert_eq!(report.languages.len(), 1, "replaced by the one-language evaluation asked for");
}

/// The temporaries SIGKILLed writers leave (an evaluation under `--out`, a run's evaluation
/// between checkpoints, a report's picture) are swept by the next writer; a live process's stay.
#[test]
fn temporaries_of_killed_writers_are_swept() {
    use crate::bias_eval::hook_recipe;
    let work = scratch("eval-temps");
    let dead = (4_000_000u32..).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap();
    let (host, live) = (indolm_core::files::host_tag(), std::process::id());
    let plant = |dir: &Path, names: &[String]| {
        for n in names {
            std::fs::write(dir.join(n), b"half").unwrap();
        }
    };
    let out = work.join("out");
    evaluate(&out, &["--languages", "id"]);
    let stale = [format!(".bias.json.{dead}-1-{host}.tmp"), format!(".bias_pairs.csv.{dead}-0-{host}.tmp")];
    let alive = format!(".bias.json.{live}-0-{host}.tmp");
    plant(&out, &stale);
    plant(&out, std::slice::from_ref(&alive));
    evaluate(&out, &["--languages", "id", "--overwrite"]);
    assert!(stale.iter().all(|n| !out.join(n).exists()), "stale temporaries left under --out");
    assert!(out.join(&alive).exists(), "a live writer's temporary was removed");

    let recipe = hook_recipe(&work, "t", 3407, "every = 2");
    indolm_ok(&["train", s(&recipe)]);
    let evals = work.join("ck/t/evals/step-2");
    let stale = [format!(".bias.json.{dead}-1-{host}.tmp")];
    plant(&evals, &stale);
    indolm_ok(&["train", s(&recipe), "--resume", "latest"]);
    assert!(!evals.join(&stale[0]).exists(), "a run's next writer left a stale temporary");

    let plot = work.join("curve.svg");
    let stale = [format!(".curve.svg.{dead}-0-{host}.tmp.svg")];
    plant(&work, &stale);
    indolm_ok(&["report", "bias-curve", "--run", s(&work.join("ck/t")), "--out", s(&plot)]);
    assert!(plot.exists() && !work.join(&stale[0]).exists());
}
