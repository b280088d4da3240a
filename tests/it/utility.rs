//! Utility beside bias (`finetune sentiment --from-run`, `report bias-utility`): a tiny
//! pretraining run with bias evaluations at four checkpoints, swept every second checkpoint
//! (interrupted once and resumed); its macro-F1 per step read back by TensorBoard's own reader
//! beside the bias curves and equal to each sub-run's results.json; the report's table and
//! Pearson r equal to numpy's and scipy's on the same numbers; the rerun skipping what is done;
//! changed settings and a removed checkpoint refused; and `--overwrite`, the pretraining run's
//! and the sweep's, each removing only what it should.
use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The bias hook's tiny pretraining recipe (`bias_eval::tiny_bias_recipe`, Indonesian and
/// Javanese pairs) run for 8 steps with a checkpoint every 2, all four keeping their weights.
fn pretraining_recipe(work: &Path) -> PathBuf {
    let bias = format!(
        "pairs = \"{}\"\nlanguages = [\"indonesian\", \"jv\"]",
        root().join("tests/fixtures/indobias").display()
    );
    let path = crate::bias_eval::tiny_bias_recipe(work, "pre", "seed = 3407", reference_model(), &bias, "");
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in [("max_steps = 6", "max_steps = 8"), ("every = 3\nkeep_last = 1", "every = 2\nkeep_last = 4")] {
        assert!(text.contains(from), "the fixture recipe changed: no {from:?} in\n{text}");
        text = text.replace(from, to);
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// A small multilingual NusaX recipe (Indonesian and Javanese: one model, tested on each), two
/// epochs, whose run folder is beside the pretraining run's.
fn sentiment_recipe(work: &Path) -> PathBuf {
    let text = format!(
        r#"kind = "sentiment"
name = "sweep"
seed = 3407
output_dir = "{out}"
[data]
root = "{root}"
languages = ["indonesian", "javanese"]
setting = "multilingual"
max_len = 32
[optimizer]
lr = 2e-3
batch_size = 32
max_epochs = 2
schedule = "constant"
eps = 1e-8
weight_decay = 0.0
grad_clip = 10.0
[eval]
patience = 2
[checkpoint]
every = 50
[logging]
tensorboard = "{runs}"
every = 10
"#,
        out = work.join("ck").display(),
        root = test_data().join("nusax/sentiment").display(),
        runs = work.join("runs").display(),
    );
    let path = work.join("sweep.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.map(|e| e.unwrap()) {
            let path = entry.path();
            if path.is_dir() {
                out.extend(snapshot(&path));
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The steps of the `prefix<N>` folders under `dir`, ascending.
fn steps_under(dir: &Path, prefix: &str, with: Option<&str>) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && with.is_none_or(|f| p.join(f).exists()))
        .filter_map(|p| p.file_name()?.to_str()?.strip_prefix(prefix)?.parse().ok())
        .collect();
    steps.sort_unstable();
    steps
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `base` and then `extra`, as the `&str` arguments `indolm` takes.
fn args<'a>(base: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().map(String::as_str).chain(extra.iter().copied()).collect()
}

#[test]
fn a_sweep_puts_macro_f1_beside_the_bias_curves_resumes_and_overwrites_only_its_own() {
    let work = scratch("utility");
    let pretraining = pretraining_recipe(&work);
    indolm_ok(&["train", pretraining.to_str().unwrap()]);
    let (run, logdir) = (work.join("ck/pre"), work.join("runs/pre"));
    assert_eq!(steps_under(&run, "step-", Some("model.safetensors")), vec![2, 4, 6, 8]);
    let bias_boards = |logdir: &Path| -> BTreeMap<PathBuf, Vec<u8>> {
        ["bias-all", "bias-id", "bias-jv"].iter().flat_map(|b| snapshot(&logdir.join(b))).collect()
    };
    let bias_files = bias_boards(&logdir);
    assert!(!bias_files.is_empty());

    let recipe = sentiment_recipe(&work);
    let sweep = work.join("ck/sweep");
    let base: Vec<String> = ["finetune", "sentiment", recipe.to_str().unwrap(), "--from-run", run.to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .chain(["--logdir".to_string(), logdir.display().to_string()])
        .collect();

    // Interrupted inside the first checkpoint's fine-tuning, then continued: that one resumes
    // from its own checkpoint, the others start.
    let (stdout, _) = indolm_ok(&args(&base, &["--every", "2", "--stop-after", "5"]));
    assert!(stdout.contains("stopped before every checkpoint was fine-tuned"), "{stdout}");
    assert!(sweep.join("from-step-2").is_dir() && !sweep.join("from-step-2/results.json").exists());
    let err = indolm_fails(&args(&base, &["--every", "2"]));
    assert!(err.contains("this sweep already exists") && err.contains("--resume auto"), "{err}");
    let (stdout, _) = indolm_ok(&args(&base, &["--every", "2", "--resume", "auto"]));
    assert!(stdout.contains("step 2: resuming the fine-tuning") && stdout.contains("step 6: fine-tuning"), "{stdout}");
    assert!(stdout.contains("swept 3 checkpoint(s): 3 fine-tuned now, 0 skipped"), "{stdout}");
    let swept = steps_under(&sweep, "from-step-", Some("results.json"));
    assert_eq!(swept, vec![2, 6, 8], "every second kept checkpoint from the first, and the last");

    // Each sub-run's test macro-F1 (indonesian, javanese) and the run's win rate there.
    let f1s: Vec<Vec<f64>> = swept
        .iter()
        .map(|step| {
            let results = json(&sweep.join(format!("from-step-{step}/results.json")));
            let f1 = |language: &str| results["runs"][0]["test"][language]["macro_f1"].as_f64().unwrap();
            vec![f1("indonesian"), f1("javanese")]
        })
        .collect();
    let bias: Vec<serde_json::Value> =
        swept.iter().map(|step| json(&run.join(format!("step-{step}/bias.json")))["all_languages"].clone()).collect();
    let win_rates: Vec<f64> = bias.iter().map(|b| b["win_rate"].as_f64().unwrap()).collect();
    let numbers_path = work.join("numbers.json");
    let inputs = serde_json::json!({"per_language": &f1s, "win_rate": &win_rates});
    std::fs::write(&numbers_path, inputs.to_string()).unwrap();
    let numpy: serde_json::Value =
        serde_json::from_str(reference(&["utility-stats", numbers_path.to_str().unwrap()]).trim()).unwrap();
    let means: Vec<f64> = numpy["mean"].as_array().unwrap().iter().map(|m| m.as_f64().unwrap()).collect();

    // TensorBoard's own reader: the utility run beside the bias runs, at the swept steps.
    let read_boards = || -> serde_json::Value {
        serde_json::from_str(reference(&["tb-bias", logdir.to_str().unwrap()]).trim()).unwrap()
    };
    let boards = read_boards();
    let runs: Vec<&String> = boards.as_object().unwrap().keys().collect();
    assert_eq!(runs, vec!["bias-all", "bias-id", "bias-jv", "utility-sweep"]);
    let bias_steps: Vec<u64> = boards["bias-all"]["scalars"]["bias/overall"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    assert_eq!(bias_steps, vec![2, 4, 6, 8]);
    let check_utility_board = |boards: &serde_json::Value| {
        let utility = &boards["utility-sweep"];
        let tags = [
            ("utility/sentiment/macro_f1", means.clone()),
            ("utility/sentiment/macro_f1/indonesian", f1s.iter().map(|f| f[0]).collect()),
            ("utility/sentiment/macro_f1/javanese", f1s.iter().map(|f| f[1]).collect()),
        ];
        for (tag, expected) in tags {
            let points = utility["scalars"][tag].as_array().unwrap_or_else(|| panic!("no {tag} in {utility}"));
            let steps: Vec<u64> = points.iter().map(|p| p[0].as_u64().unwrap()).collect();
            assert_eq!(steps, swept, "{tag}");
            for (p, e) in points.iter().zip(&expected) {
                let v = p[1].as_f64().unwrap();
                assert!((v - e).abs() < 1e-6, "{tag} at step {}: {v} in TensorBoard, {e} from results.json", p[0]);
            }
            assert!(utility["descriptions"][tag].as_str().unwrap().contains("macro-F1"), "{tag}");
        }
        let files: Vec<PathBuf> =
            std::fs::read_dir(logdir.join("utility-sweep")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "one event file of its own: {files:?}");
        assert!(files[0].file_name().unwrap().to_str().unwrap().starts_with("events.out.tfevents."));
    };
    check_utility_board(&boards);
    assert_eq!(bias_boards(&logdir), bias_files, "a bias curve's event file was rewritten");

    // The report (its sweep found beside the run): the table's numbers are bias.json's and
    // results.json's, the mean and Pearson r numpy's and scipy's.
    let (png, csv, report_json) = (work.join("bu.png"), work.join("bu.csv"), work.join("bu.json"));
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-utility",
        "--run",
        run.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        report_json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("| step | win rate % [95% interval] | macro-F1 | indonesian | javanese |"), "{stdout}");
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let table = std::fs::read_to_string(&csv).unwrap();
    let mut lines = table.lines();
    assert_eq!(
        lines.next(),
        Some("step,win_rate,win_rate_low,win_rate_high,macro_f1,macro_f1_indonesian,macro_f1_javanese")
    );
    let rows: Vec<Vec<f64>> = lines.map(|l| l.split(',').map(|c| c.parse().unwrap()).collect()).collect();
    assert_eq!(rows.len(), 3);
    for (i, row) in rows.iter().enumerate() {
        let interval = &bias[i]["interval"];
        let expected = [
            swept[i] as f64,
            win_rates[i],
            interval["low"].as_f64().unwrap(),
            interval["high"].as_f64().unwrap(),
            means[i],
            f1s[i][0],
            f1s[i][1],
        ];
        for (got, want) in row.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "row {i}: {row:?} vs {expected:?}");
        }
    }
    let numbers = json(&report_json);
    match numpy["pearson"].as_f64() {
        Some(r) => {
            let ours = numbers["correlation"]["pearson_r"].as_f64().unwrap();
            assert!((ours - r).abs() < 1e-12, "Pearson r {ours}, scipy {r}");
            assert_eq!(numbers["correlation"]["n"], 3);
            assert!(stdout.contains("Pearson r of the win rate and the macro-F1 across the 3 swept steps"), "{stdout}");
        }
        None => assert!(numbers["correlation"].is_null(), "scipy has no r here: {}", numbers["correlation"]),
    }
    println!("steps {swept:?}: win rate {win_rates:?}, macro-F1 {means:?}, Pearson r {}", numpy["pearson"]);

    // Run again: every checkpoint is finished, nothing is trained or rewritten; the utility
    // curves are written again, as the one file of their own.
    let before = snapshot(&sweep);
    let started = std::time::Instant::now();
    let (stdout, _) = indolm_ok(&args(&base, &["--every", "2", "--resume", "auto"]));
    println!("the rerun took {:.1}s", started.elapsed().as_secs_f64());
    assert!(stdout.contains("swept 3 checkpoint(s): 0 fine-tuned now, 3 skipped (finished earlier)"), "{stdout}");
    assert!(stdout.contains("step 6: fine-tuned earlier") && !stdout.contains("step 6: fine-tuning"), "{stdout}");
    assert_eq!(snapshot(&sweep), before, "a finished sub-run was touched");
    check_utility_board(&read_boards());
    assert_eq!(bias_boards(&logdir), bias_files);

    // Other settings, and a checkpoint gone from the pretraining run, are refused.
    let err = indolm_fails(&args(&base, &["--every", "1", "--resume", "auto"]));
    assert!(err.contains("other settings") && err.contains("sweep.every (2 -> 1)"), "{err}");
    std::fs::rename(run.join("step-6"), work.join("step-6-away")).unwrap();
    let err = indolm_fails(&args(&base, &["--every", "2", "--resume", "auto"]));
    assert!(err.contains("step-6") && err.contains("no longer has that checkpoint"), "{err}");
    std::fs::rename(work.join("step-6-away"), run.join("step-6")).unwrap();

    // The pretraining run resumes as before, and its --overwrite removes the utility curves (an
    // indolm file in its TensorBoard folder), not the sweep's folder.
    indolm_ok(&["train", pretraining.to_str().unwrap(), "--resume", "latest"]);
    assert!(logdir.join("utility-sweep").is_dir());
    assert_eq!(bias_boards(&logdir), bias_files);
    std::fs::write(sweep.join("notes.txt"), "mine").unwrap();
    let err = indolm_fails(&args(&base, &["--every", "2", "--overwrite"]));
    assert!(err.contains("notes.txt") && err.contains("removes only what indolm wrote"), "{err}");
    assert!(sweep.join("from-step-8/results.json").exists() && logdir.join("utility-sweep").is_dir());
    std::fs::remove_file(sweep.join("notes.txt")).unwrap();
    let before = snapshot(&sweep);
    indolm_ok(&["train", pretraining.to_str().unwrap(), "--overwrite", "--stop-after", "2"]);
    assert!(!logdir.join("utility-sweep").exists(), "train --overwrite left the utility curves");
    assert_eq!(snapshot(&sweep), before, "train --overwrite touched the sweep");

    // The sweep's --overwrite removes its own outputs and nothing of the pretraining run.
    std::fs::write(run.join("notes.txt"), "mine").unwrap();
    std::fs::write(logdir.join("notes.txt"), "mine").unwrap();
    let (pretraining_files, tensorboard_files) = (snapshot(&run), snapshot(&logdir));
    let (stdout, _) = indolm_ok(&args(&base, &["--every", "2", "--overwrite", "--stop-after", "1"]));
    assert!(stdout.contains("stopped before every checkpoint was fine-tuned"), "{stdout}");
    assert_eq!(steps_under(&sweep, "from-step-", None), vec![2], "the old sub-runs removed, step 2 started again");
    assert!(!work.join("runs/sweep/from-step-8").exists(), "the sweep's TensorBoard folder kept an old sub-run");
    let kept_files = |now: BTreeMap<PathBuf, Vec<u8>>, then: &BTreeMap<PathBuf, Vec<u8>>| {
        then.iter()
            .all(|(path, bytes)| now.get(path) == Some(bytes) || path.file_name().is_some_and(|n| n == ".readers.lock"))
    };
    assert!(kept_files(snapshot(&run), &pretraining_files), "the sweep's --overwrite changed the pretraining run");
    assert!(kept_files(snapshot(&logdir), &tensorboard_files), "the sweep's --overwrite changed its TensorBoard");
}

/// `make demo-utility`'s recipe reads and names the data in the repository.
#[test]
fn the_demo_utility_recipe_parses() {
    let path = root().join("recipes/finetune/nusax-utility-tiny.toml");
    let recipe = indolm_tasks::sentiment::SentimentRecipe::load(&path).unwrap();
    assert_eq!(recipe.languages(), vec!["indonesian"]);
    assert!(recipe.init.is_none(), "its models start from the pretraining run's checkpoints (--from-run)");
    assert!(root().join(&recipe.data.root).join("indonesian/test.csv").is_file());
}
