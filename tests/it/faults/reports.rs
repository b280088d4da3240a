//! Reports read evaluations whole (#37): `bias-table` and `bias-curve` refuse an edited, swapped
//! or deleted `bias_pairs.csv` as every other report does; `bias-table` says when its "all
//! languages" row averages different languages; `bias-compare --group` refuses two runs of one
//! seed as two replicates.
use super::s;
use crate::common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One evaluation of the reference model on the Indonesian and Javanese fixture pairs, made
/// once; tests work on copies.
fn evaluation() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch("reports-evaluation");
        let pairs = root().join("tests/fixtures/indobias");
        indolm_ok(&[
            "eval",
            "bias",
            "--model",
            s(reference_model()),
            "--pairs",
            s(&pairs),
            "--out",
            s(&out),
            "--languages",
            "id",
            "jv",
        ]);
        out
    })
}

/// A run folder whose checkpoints `steps` each hold a copy of the evaluation (and a state
/// recording `seed`).
fn run_of(dir: &Path, steps: &[u64], seed: u64) -> PathBuf {
    for step in steps {
        let checkpoint = dir.join(format!("step-{step}"));
        std::fs::create_dir_all(&checkpoint).unwrap();
        for f in ["bias.json", "bias_pairs.csv"] {
            std::fs::copy(evaluation().join(f), checkpoint.join(f)).unwrap();
        }
        std::fs::write(checkpoint.join("trainer_state.json"), format!("{{\"step\": {step}, \"seed\": {seed}}}"))
            .unwrap();
    }
    dir.to_path_buf()
}

#[test]
fn bias_table_and_bias_curve_read_an_evaluation_whole() {
    let work = scratch("reports-whole");
    let run = run_of(&work.join("run"), &[2, 4], 1);
    let plot = work.join("curve.svg");
    indolm_ok(&["report", "bias-table", s(&run.join("step-4"))]);
    indolm_ok(&["report", "bias-curve", "--run", s(&run), "--out", s(&plot)]);
    // An edited row, then a deleted file: both reports refuse, naming the records.
    let records = run.join("step-2/bias_pairs.csv");
    let text = std::fs::read_to_string(&records).unwrap();
    let edited = text.replacen(",pro,", ",anti,", 1).replacen(",anti,", ",pro,", 1);
    std::fs::write(&records, if edited == text { text.replacen('1', "2", 1) } else { edited }).unwrap();
    let err = indolm_fails(&["report", "bias-curve", "--run", s(&run), "--out", s(&plot)]);
    assert!(err.contains("step-2/bias_pairs.csv") && err.contains("not the file"), "{err}");
    let err = indolm_fails(&["report", "bias-table", s(&run.join("step-2"))]);
    assert!(err.contains("step-2/bias_pairs.csv"), "{err}");
    std::fs::remove_file(&records).unwrap();
    let err = indolm_fails(&["report", "bias-table", s(&run.join("step-2"))]);
    assert!(err.contains("step-2/bias_pairs.csv"), "{err}");
}

#[test]
fn averages_over_other_languages_and_runs_of_one_seed_are_named() {
    let work = scratch("reports-languages");
    let other = work.join("other");
    let pairs = root().join("tests/fixtures/indobias");
    let args = ["eval", "bias", "--model", s(reference_model()), "--pairs", s(&pairs), "--out", s(&other)];
    indolm_ok(&[&args[..], &["--languages", "id", "su"]].concat());
    let (a, b) = (format!("a={}", evaluation().display()), format!("b={}", other.display()));
    let (table, _) = indolm_ok(&["report", "bias-table", &a, &b]);
    assert!(table.contains("scored on different languages") && table.contains("a: id, jv; b: id, su"), "{table}");
    let (table, _) = indolm_ok(&["report", "bias-table", &a, "--language", "id"]);
    assert!(table.contains("not over the languages shown above") && !table.contains("different languages"), "{table}");

    // Two runs of seed 1 in one group are one replicate twice.
    let a = run_of(&work.join("a"), &[4], 1);
    let b = run_of(&work.join("b"), &[4], 1);
    let c = run_of(&work.join("c"), &[4], 2);
    let group =
        |runs: &[&Path]| format!("g={}", runs.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(","));
    let err = indolm_fails(&["report", "bias-compare", "--group", &group(&[&a, &b]), "--against-step", "4"]);
    assert!(err.contains("were both trained with seed 1"), "{err}");
    indolm_ok(&["report", "bias-compare", "--group", &group(&[&a, &c]), "--against-step", "4", "--replicates", "50"]);
}
