//! Every `make bench-*` target at a tiny size. The targets are read from the Makefile, and each
//! one's script runs as its recipe runs it (`$(BENCH_PYTHON) tests/bench/bench_<x>.py` from the
//! repository root; not `setup`, whose build the suite has done), with the environment variables
//! its docstring names set small enough for seconds of work. It must exit 0 and print its
//! comparison: ratios of indolm's figure to the reference's, finite and positive only when both
//! sides ran. `make bench-*` runs the same scripts at full size (docs/benchmarks.md).
use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A target's tiny run.
struct Tiny {
    target: &'static str,
    /// The sizes, set through the variables the script's docstring names.
    env: &'static [(&'static str, &'static str)],
    /// Text of the script's result lines, each followed by a ratio of indolm's figure to the
    /// reference's.
    ratios: &'static [&'static str],
}

/// Every `bench-*` target of the Makefile, tiny.
const TINY: &[Tiny] = &[
    Tiny { target: "bench-bias", env: &[("BENCH_SENTENCES", "4")], ratios: &["ratio: "] },
    Tiny {
        target: "bench-train",
        env: &[
            ("BENCH_ROUNDS", "1"),
            ("BENCH_STEPS", "10"),
            ("BENCH_SEQ", "32"),
            ("BENCH_BATCH", "4"),
            ("BENCH_GEMM", "512"),
        ],
        ratios: &["ratio: "],
    },
    Tiny {
        target: "bench-ddp",
        env: &[("BENCH_ROUNDS", "1"), ("BENCH_STEPS", "10"), ("BENCH_SEQ", "32"), ("BENCH_BATCH", "4")],
        ratios: &["ratio: ", "overlap gain "],
    },
    Tiny {
        target: "bench-data",
        env: &[("BENCH_REPEAT", "1"), ("BENCH_STEPS", "20")],
        ratios: &["ratio: ", "batches/s; ratio "],
    },
    Tiny {
        target: "bench-finetune",
        env: &[
            ("BENCH_ROUNDS", "1"),
            ("BENCH_TEXTS", "32"),
            ("BENCH_EPOCHS", "1"),
            ("BENCH_ARTICLES", "8"),
            ("BENCH_STEPS", "1"),
        ],
        ratios: &["examples/s, ", "articles/s, "],
    },
    Tiny {
        target: "bench-translation",
        env: &[("BENCH_ROUNDS", "1"), ("BENCH_PAIRS", "32"), ("BENCH_EPOCHS", "1")],
        ratios: &["pairs/s, ratio "],
    },
    Tiny {
        target: "bench-liputan6-data",
        env: &[("BENCH_ARTICLES", "64"), ("REF_ARTICLES", "64")],
        ratios: &["; ratios ", "; ratio "],
    },
    Tiny { target: "bench-ops", env: &[("BENCH_SEQ", "32"), ("BENCH_BATCH", "4")], ratios: &["ratio (HF / indolm): "] },
    Tiny { target: "bench-causal", env: &[("BENCH_SENTENCES", "8"), ("BENCH_ROUNDS", "1")], ratios: &["ratio: "] },
    Tiny {
        target: "bench-generate",
        env: &[("BENCH_ARTICLES", "4"), ("BENCH_BATCH", "4"), ("BENCH_STEPS", "2"), ("BENCH_MAX_LENGTH", "20")],
        ratios: &["ratio: "],
    },
    Tiny {
        target: "bench-generate-causal",
        env: &[("BENCH_PROMPTS", "4"), ("BENCH_NEW_TOKENS", "4"), ("BENCH_BATCH", "4"), ("BENCH_ROUNDS", "1")],
        ratios: &["ratio: "],
    },
];

/// A tiny run that takes longer than this is stuck.
const PATIENCE: Duration = Duration::from_secs(600);

/// What the Makefile's `BENCH_PYTHON` is, as this test reproduces it.
const BENCH_PYTHON: &str = "PYTHONPATH=$(CURDIR)/tests/reference $(PYTHON)";

/// The Makefile's `bench-*` targets, each with its one recipe line.
fn bench_recipes(makefile: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = makefile.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((target, _)) = line.split_once(':') else { continue };
        if !target.starts_with("bench-") {
            continue;
        }
        let recipe: Vec<&str> = lines[i + 1..].iter().map_while(|l| l.strip_prefix('\t')).collect();
        assert_eq!(recipe.len(), 1, "make {target}: expected one recipe line, found {recipe:?}");
        out.push((target.to_string(), recipe[0].to_string()));
    }
    out
}

/// The number right after `marker`'s first occurrence in `text` (thousands separators allowed).
fn figure_after(text: &str, marker: &str) -> Option<f64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')).unwrap_or(rest.len());
    rest[..end].replace(',', "").parse().ok()
}

/// Runs `script` as `$(BENCH_PYTHON) script` does from the repository root, with `tiny`'s sizes
/// and the binary this build made (in a child of the reference fork server, which has imported
/// torch and transformers once for every script); returns how it ended and its wall time.
fn run_tiny(tiny: &Tiny, script: &str) -> (ScriptRun, Duration) {
    let dir = scratch(tiny.target);
    let venv = root().join(".venv");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    // Sizes set where the suite runs are not this test's.
    let mut env: BTreeMap<String, String> =
        std::env::vars().filter(|(name, _)| !(name.starts_with("BENCH_") || name == "REF_ARTICLES")).collect();
    let text = |p: &std::path::Path| p.to_str().unwrap().to_string();
    // What the Makefile exports and BENCH_PYTHON sets.
    env.insert("PYTHONPATH".into(), text(&root().join("tests/reference")));
    env.insert("VIRTUAL_ENV".into(), text(&venv));
    env.insert("PATH".into(), std::env::join_paths(paths).unwrap().into_string().unwrap());
    env.insert("LIBTORCH_USE_PYTORCH".into(), "1".into());
    env.insert("HF_HUB_OFFLINE".into(), "1".into());
    env.insert("INDOLM_BIN".into(), env!("CARGO_BIN_EXE_indolm").into());
    // The scripts' work folders (tempfile.mkdtemp) go here, removed after a good run.
    env.insert("TMPDIR".into(), text(&dir));
    env.extend(tiny.env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let start = Instant::now();
    let run = python_script(&root().join(script), &env, &root(), PATIENCE);
    let took = start.elapsed();
    if run.timed_out {
        let target = tiny.target;
        panic!("make {target} at a tiny size took over {PATIENCE:?}:\n{}\n{}", run.stdout, run.stderr);
    }
    if run.success {
        let _ = std::fs::remove_dir_all(dir);
    }
    (run, took)
}

#[test]
fn every_make_bench_target_runs_at_a_tiny_size() {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    let bench_python = makefile.lines().find_map(|l| l.strip_prefix("BENCH_PYTHON := "));
    assert_eq!(bench_python, Some(BENCH_PYTHON), "the Makefile's BENCH_PYTHON changed: run the scripts as it does");
    let recipes = bench_recipes(&makefile);
    let targets: BTreeSet<&str> = recipes.iter().map(|(target, _)| target.as_str()).collect();
    let known: BTreeSet<&str> = TINY.iter().map(|tiny| tiny.target).collect();
    assert_eq!(targets, known, "the Makefile's bench-* targets are not those this test knows: give each a tiny size");
    assert_eq!(targets.len(), recipes.len(), "a bench-* target is defined twice: {recipes:?}");
    let mut total = Duration::ZERO;
    for (target, recipe) in &recipes {
        let tiny = TINY.iter().find(|tiny| tiny.target == target.as_str()).unwrap();
        let Some(script) = recipe.strip_prefix("$(BENCH_PYTHON) ") else {
            panic!("make {target}: expected `$(BENCH_PYTHON) SCRIPT`, found {recipe:?}")
        };
        let text = std::fs::read_to_string(root().join(script)).unwrap();
        let docstring = text.split("\"\"\"").nth(1).unwrap_or_default();
        for (name, _) in tiny.env {
            assert!(docstring.contains(name), "{script}'s docstring does not name {name}, which this test sets");
        }
        let (run, took) = run_tiny(tiny, script);
        let (stdout, stderr) = (&run.stdout, &run.stderr);
        assert!(run.success, "make {target} at a tiny size failed:\n{stdout}\n{stderr}");
        for marker in tiny.ratios {
            let ratio = figure_after(stdout, marker);
            assert!(
                ratio.is_some_and(|r| r.is_finite() && r > 0.0),
                "make {target} at a tiny size: no positive ratio after {marker:?} in its output:\n{stdout}\n{stderr}"
            );
        }
        let (seconds, sizes) = (took.as_secs_f64(), tiny.env);
        println!("make {target} at a tiny size {sizes:?}: {seconds:.1}s\n{stdout}");
        total += took;
    }
    let (count, seconds) = (recipes.len(), total.as_secs_f64());
    println!("{count} bench targets at a tiny size: {seconds:.1}s");
}
