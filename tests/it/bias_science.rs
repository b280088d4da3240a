//! Bias measurements that survive review: pretraining seeds as a recipe axis, the
//! Multi-Bootstrap over groups of seeds against a numpy reference of google-research's
//! procedure, several metrics in one hook pass, the rank-1 token accuracy, and pair validity.
use crate::common::*;
use std::path::{Path, PathBuf};

/// The fixture pairs of `languages`, each row repeated `times` times (more pairs, so that a
/// percentile interval's Monte Carlo error at B = 2,000 is well below half a point).
fn tiled_pairs(work: &Path, languages: &[&str], times: usize) -> PathBuf {
    let dir = work.join("pairs/pair");
    std::fs::create_dir_all(&dir).unwrap();
    for l in languages {
        let text = std::fs::read_to_string(root().join(format!("tests/fixtures/indobias/pair/{l}.csv"))).unwrap();
        let mut lines = text.lines();
        let mut out = vec![lines.next().unwrap().to_string()];
        let rows: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
        for _ in 0..times {
            out.extend(rows.iter().map(|r| r.to_string()));
        }
        std::fs::write(dir.join(format!("{l}.csv")), out.join("\n") + "\n").unwrap();
    }
    work.join("pairs")
}

/// The tiny hook recipe with `seeds`, its tokenizer in `work/tokenizer`, and the bias hook
/// on `pairs` (main metric aul, aula beside it in the same pass).
fn seeds_recipe(work: &Path, name: &str, seeds: &str, pairs: &Path) -> PathBuf {
    let bias = format!(
        "pairs = \"{}\"\nlanguages = [\"id\", \"jv\"]\nmetric = \"aul\"\nextra_metrics = [\"aula\"]",
        pairs.display()
    );
    crate::bias_eval::tiny_bias_recipe(work, name, seeds, &work.join("tokenizer"), &bias, "")
}

/// `eval bias` of the reference model on the fixture pairs of `languages` under `metrics`,
/// written to `out`.
fn evaluate_fixture(out: &Path, languages: &[&str], metrics: &[&str]) {
    let mut args = vec!["eval", "bias", "--model", s(reference_model()), "--pairs"];
    let pairs = root().join("tests/fixtures/indobias");
    args.push(s(&pairs));
    args.push("--languages");
    args.extend(languages);
    args.push("--metric");
    args.extend(metrics);
    args.extend(["--out", s(out)]);
    indolm_ok(&args);
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn seeds_train_as_runs_and_the_multibootstrap_matches_numpy() {
    let work = scratch("bias-seeds");
    let pairs = tiled_pairs(&work, &["indonesian", "javanese"], 8);
    let recipe = seeds_recipe(&work, "comp", "seeds = [1, 2, 3]", &pairs);
    // indolm's own WordPiece (deterministic), so that the runs, and the numbers below, are the
    // same at every test run.
    indolm_ok(&["tokenizer", "train", "--recipe", s(&recipe), "--vocab-size", "1000"]);
    let (stdout, _) = indolm_ok(&["recipe", "check", s(&recipe)]);
    assert!(stdout.contains("# seed 2: run directory") && stdout.contains("comp-seed2"), "{stdout}");
    let twice = seeds_recipe(&work, "twice", "seeds = [1, 2, 1]", &pairs);
    let err = indolm_fails(&["recipe", "check", s(&twice)]);
    assert!(err.contains("seed 1 is listed twice"), "{err}");
    // `train` on a recipe listing seeds trains each in turn, as `<name>-seed<N>`.
    let (stdout, _) = indolm_ok(&["train", s(&recipe)]);
    assert!(stdout.contains("seed 1 (1 of 3): run comp-seed1") && stdout.contains("seed 3 (3 of 3)"), "{stdout}");
    // Other seeds of the same recipe, one per command, as a job array's tasks run them.
    for seed in ["4", "5", "6"] {
        indolm_ok(&["train", s(&recipe), "--seed", seed]);
    }
    let err = indolm_fails(&["train", s(&recipe), "--seed-index", "3"]);
    assert!(err.contains("--seed-index 3 is past the 3 seeds listed (indices 0 to 2)"), "{err}");
    let run = |n: u32| work.join(format!("ck/comp-seed{n}"));
    // The seed is the run's: the runs differ, and each records its seed.
    let (w1, w4) = (
        std::fs::read(run(1).join("step-6/model.safetensors")).unwrap(),
        std::fs::read(run(4).join("step-6/model.safetensors")).unwrap(),
    );
    assert_ne!(w1, w4, "two seeds train two different models");
    // The hook scored both metrics in one pass: aul as the main evaluation, aula beside it.
    for n in 1..=6 {
        let main = indolm_eval::bias::records::read_evaluation(&run(n).join("step-6")).unwrap().0;
        let aula = indolm_eval::bias::records::read_evaluation(&run(n).join("step-6/bias-aula")).unwrap().0;
        assert_eq!((main.metric.to_string(), aula.metric.to_string()), ("aul".into(), "aula".into()));
        assert!(main.languages.iter().all(|l| l.token_accuracy.is_some() && l.overall.tally.pairs == 320));
    }
    let (a, b): (Vec<String>, Vec<String>) =
        ((1..=3).map(|n| s(&run(n)).to_string()).collect(), (4..=6).map(|n| s(&run(n)).to_string()).collect());
    let (json, png) = (work.join("groups.json"), work.join("groups.png"));
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-compare",
        "--group",
        &format!("a={}", a.join(",")),
        "--group",
        &format!("b={}", b.join(",")),
        "--replicates",
        "2000",
        "--seed",
        "7",
        "--json",
        s(&json),
        "--plot",
        s(&png),
    ]);
    assert!(stdout.contains("pretraining seeds as replicates (Multi-Bootstrap)"), "{stdout}");
    assert!(!stdout.contains("has a single run"), "{stdout}");
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    let ours: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    // The reference: numpy's RandomState on the same bias_pairs.csv files.
    let csvs = |runs: &[String]| -> Vec<String> { runs.iter().map(|r| format!("{r}/step-6/bias_pairs.csv")).collect() };
    // The Monte Carlo error of a 2.5% percentile from B replicates is about 0.06 σ at
    // B = 2,000 (σ: the replicates' spread, 3 to 6 points here, most of it from three seeds),
    // so two independent streams agree to half a point typically (the median end), not at
    // every end of 18; at B = 20,000 the error is a third of that.
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    for (replicates, overall_only) in [(2000, false), (20000, true)] {
        let spec = serde_json::json!({"groups": [["a", csvs(&a)], ["b", csvs(&b)]], "replicates": replicates, "seed": 0, "overall_only": overall_only});
        std::fs::write(work.join("spec.json"), spec.to_string()).unwrap();
        reference(&["multibootstrap", s(&work.join("spec.json")), s(&work.join("ref.json"))]);
        let theirs: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap();
        let ours: serde_json::Value = if replicates == 2000 {
            ours.clone()
        } else {
            let json = work.join("groups-20000.json");
            indolm_ok(&[
                "report",
                "bias-compare",
                "--group",
                &format!("a={}", a.join(",")),
                "--group",
                &format!("b={}", b.join(",")),
                "--replicates",
                "20000",
                "--seed",
                "7",
                "--json",
                s(&json),
            ]);
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
        };
        let (mut large, mut domains) = (Vec::new(), Vec::new());
        for e in theirs["estimates"].as_array().unwrap() {
            let mine = ours["estimates"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["group"] == e["group"] && m["language"] == e["language"] && m["category"] == e["category"])
                .unwrap_or_else(|| panic!("no estimate for {e}"));
            assert_eq!(f(&mine["estimate"]["estimate"]), f(&e["estimate"]), "estimates equal exactly: {e}");
            for (x, y) in [
                (f(&mine["estimate"]["interval"]["low"]), f(&e["interval"][0])),
                (f(&mine["estimate"]["interval"]["high"]), f(&e["interval"][1])),
            ] {
                if e["category"] == "overall" {
                    large.push((x - y).abs())
                } else {
                    domains.push((x - y).abs())
                }
            }
        }
        for c in theirs["comparisons"].as_array().unwrap() {
            let mine = ours["comparisons"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["language"] == c["language"] && m["category"] == c["category"])
                .unwrap();
            let k = &mine["comparison"];
            assert_eq!(f(&k["base"]["estimate"]), f(&c["base_estimate"]));
            assert_eq!(f(&k["expt"]["estimate"]), f(&c["expt_estimate"]));
            for (x, y) in [
                (f(&k["difference_interval"]["low"]), f(&c["difference"][0])),
                (f(&k["difference_interval"]["high"]), f(&c["difference"][1])),
            ] {
                if c["category"] == "overall" {
                    large.push((x - y).abs())
                } else {
                    domains.push((x - y).abs())
                }
            }
            assert!((f(&k["p"]) - f(&c["p"])).abs() < 0.05, "p {} against {}", k["p"], c["p"]);
            // Groups that differ only by seed: not different at 95%.
            if c["category"] == "overall" {
                let (low, high) = (f(&k["difference_interval"]["low"]), f(&k["difference_interval"]["high"]));
                assert!(low < 0.0 && high > 0.0, "{} overall: [{low}, {high}] excludes 0", c["language"]);
            }
        }
        large.sort_by(f64::total_cmp);
        let (median, max) = (large[large.len() / 2], *large.last().unwrap());
        let max_domains = domains.iter().copied().fold(0.0, f64::max);
        println!(
            "B = {replicates}: estimates equal numpy's exactly; interval ends of the overall categories {median:.2} points from numpy's (median), {max:.2} (max){}",
            if domains.is_empty() { String::new() } else { format!("; domains (64 pairs) {max_domains:.2} (max)") }
        );
        if replicates == 2000 {
            // The domains' 64 pairs are 8 fixture pairs repeated: their replicates take few
            // values, and a percentile falls on either side of a gap between them; their
            // estimates (exact) and p (above) are checked, their ends only printed.
            assert!(median <= 0.5 && max <= 1.5, "{large:?}");
        } else {
            assert!(median <= 0.2 && max <= 0.75, "at B = 20,000: {large:?}");
        }
    }
    let overall_lines: Vec<&str> = stdout.lines().filter(|l| l.contains("| overall | a | b |")).collect();
    assert_eq!(overall_lines.len(), 3, "id, jv, all: {stdout}");
    assert!(overall_lines.iter().all(|l| !l.ends_with("* |")), "{overall_lines:?}");

    // One run per group: said plainly.
    let (stdout, _) =
        indolm_ok(&["report", "bias-compare", "--group", &format!("a={}", a[0]), "--group", &format!("b={}", b[0])]);
    assert!(stdout.contains("a, b has a single run") || stdout.contains("has a single run"), "{stdout}");
    // Two steps of the same runs: paired, under the extra metric.
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-compare",
        "--group",
        &format!("a={}", a.join(",")),
        "--against-step",
        "3",
        "--metric",
        "aula",
    ]);
    assert!(stdout.contains("paired: two steps of the same runs") && stdout.contains("metric aula"), "{stdout}");
    assert!(stdout.contains("| id | overall | a @ step 3 | a @ step 6 |"), "{stdout}");
    // Mistakes are named.
    let err = indolm_fails(&["report", "bias-compare", "--group", &format!("a={}", a.join(","))]);
    assert!(err.contains("at least two groups"), "{err}");
    let err =
        indolm_fails(&["report", "bias-compare", "--group", &format!("a={}", a[0]), "--group", &format!("b={}", a[0])]);
    assert!(err.contains("are the same run"), "{err}");
    let out = indolm(&["report", "bias-compare", "--group", "a"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("expected NAME=RUN,RUN"), "{err}");
}

#[test]
fn token_accuracy_is_the_share_of_scored_tokens_ranked_first() {
    let work = scratch("bias-accuracy");
    let out = work.join("eval");
    evaluate_fixture(&out, &["id"], &["aula", "pppl-word-l2r"]);
    for dir in [out.clone(), out.join("bias-pppl-word-l2r")] {
        let (report, records) = indolm_eval::bias::records::read_evaluation(&dir).unwrap();
        let correct: usize = records.iter().map(|r| r.pro_correct.unwrap() + r.anti_correct.unwrap()).sum();
        let tokens: usize = records.iter().map(|r| r.pro_tokens + r.anti_tokens).sum();
        assert_eq!(report.languages[0].token_accuracy, Some(100.0 * correct as f64 / tokens as f64));
    }
    // `eval pll` scores single sentences under the same metrics.
    let records = indolm_eval::bias::records::read_records(&out.join("bias_pairs.csv")).unwrap();
    std::fs::write(work.join("s.txt"), format!("{}\n{}\n", records[0].protrope, records[0].antitrope)).unwrap();
    let (stdout, _) = indolm_ok(&[
        "eval",
        "pll",
        "--model",
        s(reference_model()),
        "--text",
        s(&work.join("s.txt")),
        "--metric",
        "aula",
        "--json",
    ]);
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (line, (pll, correct)) in
        lines.iter().zip([(records[0].pro_pll, records[0].pro_correct), (records[0].anti_pll, records[0].anti_correct)])
    {
        assert!((line["pll"].as_f64().unwrap() - pll).abs() <= 1e-6 * pll.abs(), "{line} against {pll}");
        assert_eq!(line["correct"].as_u64().map(|c| c as usize), correct);
    }
    // A count above the tokens scored is refused by the strict reader.
    let csv = std::fs::read_to_string(out.join("bias_pairs.csv")).unwrap();
    let mut lines: Vec<String> = csv.lines().map(String::from).collect();
    let fields: Vec<&str> = lines[1].rsplitn(3, ',').collect();
    lines[1] = format!("{},999,{}", fields[2], fields[0]);
    let bad = work.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("bias_pairs.csv"), lines.join("\n") + "\n").unwrap();
    let err = indolm_eval::bias::records::read_records(&bad.join("bias_pairs.csv")).unwrap_err().to_string();
    assert!(err.contains("pro_correct is 999, more than the"), "{err}");
}

#[test]
fn bias_validity_lists_failing_pairs_and_recomputes_win_rates() {
    let work = scratch("bias-validity");
    let out = work.join("eval");
    evaluate_fixture(&out, &["id", "su"], &["aul", "crows"]);
    let json = work.join("validity.json");
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-validity",
        s(&out),
        "--max-words-changed",
        "1",
        "--max-token-difference",
        "1",
        "--json",
        s(&json),
    ]);
    assert!(
        stdout.contains("Rules for a valid pair: at most 1 word(s) changed, token lengths differing by at most 1"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let records = indolm_eval::bias::records::read_records(&out.join("bias_pairs.csv")).unwrap();
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), records.len());
    // Hand-checked: "Ibu memasak di dapur setiap pagi." / "Ayah …": one word.
    assert_eq!(
        (pairs[0]["words_changed"].as_u64(), pairs[0]["fails"].as_array().map(Vec::len)),
        (Some(1), Some((records[0].pro_tokens.abs_diff(records[0].anti_tokens) > 1) as usize))
    );
    // Sundanese row 3: "Rumaja" → "Jalma sepuh": two words of the longer sentence.
    let su3 = pairs.iter().find(|p| p["language"] == "su" && p["pair"] == 3).unwrap();
    assert_eq!(su3["words_changed"], 2);
    assert!(su3["fails"][0].as_str().unwrap().contains("2 words changed > 1"), "{su3}");
    // The valid win rate, recomputed here from the records and the listed failures.
    let mut failing = 0;
    for (p, r) in pairs.iter().zip(&records) {
        assert_eq!(p["token_difference"].as_u64().unwrap() as usize, r.pro_tokens.abs_diff(r.anti_tokens));
        failing += !p["fails"].as_array().unwrap().is_empty() as usize;
    }
    assert!(failing > 0 && failing < records.len(), "the rules cut some pairs: {failing}");
    for row in v["rates"].as_array().unwrap().iter().filter(|r| r["category"] == "overall") {
        let lang = row["language"].as_str().unwrap();
        let (n, wins) = pairs
            .iter()
            .zip(&records)
            .filter(|(p, r)| r.language == lang && p["fails"].as_array().unwrap().is_empty())
            .fold((0, 0), |(n, w), (_, r)| (n + 1, w + r.is_win() as u64));
        assert_eq!((row["valid"][0].as_u64().unwrap(), row["valid"][1].as_u64().unwrap()), (n, wins), "{row}");
        assert_eq!(row["all"][0].as_u64().unwrap(), 40);
    }
    // CrowS scores the shared tokens only: the sentences' lengths come from the tokenizer.
    let err = indolm_fails(&["report", "bias-validity", s(&out.join("bias-crows"))]);
    assert!(err.contains("--tokenizer"), "{err}");
    let (stdout, _) =
        indolm_ok(&["report", "bias-validity", s(&out.join("bias-crows")), "--tokenizer", s(reference_model())]);
    assert!(stdout.contains("metric crows") && stdout.contains("| su |"), "{stdout}");
}

/// The compositions job array gives task I the I-th recipe of the sorted glob, prepares its
/// corpus before training it on one GPU, and refuses a task past the last recipe.
#[test]
fn the_compositions_job_array_gives_each_task_its_recipe() {
    let work = scratch("compositions-sbatch");
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A stand-in for srun that prints the command it would run.
    std::fs::write(bin.join("srun"), "#!/bin/sh\necho \"$@\"\n").unwrap();
    std::process::Command::new("chmod").args(["+x", s(&bin.join("srun"))]).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let run = |task: &str| -> (bool, String) {
        let out = std::process::Command::new("bash")
            .arg(root().join("recipes/slurm/compositions.sbatch"))
            .current_dir(root())
            .env("PATH", &path)
            .env("SLURM_ARRAY_TASK_ID", task)
            .env("SLURM_CPUS_PER_TASK", "16")
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, text) = run("4");
    assert!(ok, "{text}");
    let prepare = text.find("corpus prepare recipes/indobias/5-cc100-id-jv-su.toml").expect(&text);
    let train = text.find("train recipes/indobias/5-cc100-id-jv-su.toml --resume auto").expect(&text);
    assert!(prepare < train, "{text}");
    let (ok, text) = run("6");
    assert!(!ok && text.contains("array task 6 has no recipe: recipes/indobias/*.toml matches 6 file(s)"), "{text}");
}

/// The job-array script picks each task's seed: the recipe's `seeds[I]`, else SEEDS' I-th.
#[test]
fn the_seeds_job_array_gives_each_task_its_seed() {
    let work = scratch("seeds-sbatch");
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A stand-in for srun that prints the command it would run.
    std::fs::write(bin.join("srun"), "#!/bin/sh\necho \"$@\"\n").unwrap();
    std::process::Command::new("chmod").args(["+x", s(&bin.join("srun"))]).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let run = |recipe: &Path, task: &str, seeds: Option<&str>| -> String {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(root().join("recipes/slurm/seeds.sbatch"))
            .arg(recipe)
            .env("PATH", &path)
            .env("SLURM_ARRAY_TASK_ID", task)
            .env("SLURM_CPUS_PER_TASK", "8")
            .env_remove("SEEDS");
        if let Some(seeds) = seeds {
            cmd.env("SEEDS", seeds);
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
    };
    let plain = root().join("recipes/indobias/1-cc100-id.toml");
    assert!(run(&plain, "1", None).contains("train ") && run(&plain, "1", None).contains("--seed 1 --resume auto"));
    assert!(run(&plain, "0", Some("11 12")).contains("--seed 11 --resume auto"));
    assert!(run(&plain, "2", Some("11 12")).contains("array task 2 has no seed"));
    let listed = work.join("listed.toml");
    std::fs::write(&listed, "name = \"x\"\nseeds = [5, 6]\n").unwrap();
    assert!(run(&listed, "1", None).contains("--seed-index 1 --resume auto"));
}
