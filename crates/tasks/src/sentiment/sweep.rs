//! `indolm finetune sentiment RECIPE --from-run RUN`: utility beside bias. The recipe's NusaX
//! setting is fine-tuned from each kept checkpoint of a pretraining run (those with weights: all,
//! or every k-th from the first, the last always), each into its own sub-run of the recipe's run
//! folder, `<run>/from-step-<N>/` (a whole `finetune sentiment` run: its units, `results.json`),
//! all with the recipe's seed, so that the steps differ only by the checkpoint. Each step's test
//! macro-F1 then goes into the pretraining run's TensorBoard beside its bias curves: a
//! TensorBoard run of its own, `<tensorboard>/utility-<name>/`, whose one event file is replaced
//! whole at every write, so no file of the bias curves is ever rewritten.
//!
//! The sweep is a resumable grid. `sweep.json` records what makes it one sweep (the recipe's
//! fingerprint without `init`, `--every`, the pretraining run and its TensorBoard folder) and the
//! steps it fine-tunes from. Run again with `--resume auto`, a step whose `results.json` is
//! complete is skipped, an interrupted one continues through its sub-run's own `--resume auto`,
//! and the new checkpoints of a run that trained on are added; other settings, and a checkpoint
//! fine-tuned from that is gone from the pretraining run or changed since, are refused.
//! `--overwrite` removes the sweep's folder, its TensorBoard folder and its utility curves (only
//! what indolm wrote there), never anything else of the pretraining run.
use super::recipe::{SentimentRecipe, Setting};
use super::run::{run, SentimentResults};
use crate::RESULTS_JSON;
use indolm_core::files::{read_to_string, write_json, DirLock, Staging};
use indolm_core::logger::Logger;
use indolm_core::outln;
use indolm_core::outputs::RunFile;
use indolm_core::recipe::Fingerprint;
use indolm_core::run::layout::step_dir_name;
use indolm_core::run::ownership::written_by_indolm;
use indolm_eval::checkpoints::RunCheckpoints;
use indolm_torch::error::{Error, IoContext, Result};
use indolm_torch::model::model_dir::content_sha256;
use indolm_train::engine::TrainOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The sweep's manifest, in its folder.
pub(crate) const SWEEP_FILE: &str = "sweep.json";
/// The `kind` of a sweep's manifest.
const SWEEP_KIND: &str = "sentiment-sweep";
/// The TensorBoard tag of a step's test macro-F1, the mean over the recipe's test sets; the tag
/// of one language's is `<this>/<language>`.
pub(crate) const MACRO_F1_TAG: &str = "utility/sentiment/macro_f1";

indolm_core::declare_run_files!(SWEEP_FILES: RunFile::Named(SWEEP_FILE));

/// The sub-run fine-tuned from the checkpoint of `step`: `from-step-<N>`.
pub(crate) fn sub_run_name(step: u64) -> String {
    format!("from-{}", step_dir_name(step))
}

/// The TensorBoard run of a sweep's utility curves, under the pretraining run's TensorBoard
/// folder: `utility-<sweep name>`.
pub(crate) fn board_dir(tensorboard: &Path, sweep_name: &str) -> PathBuf {
    tensorboard.join(format!("utility-{sweep_name}"))
}

/// What `sweep.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SweepManifest {
    /// `sentiment-sweep`.
    pub kind: String,
    /// The pretraining run, as it was given.
    pub run: String,
    /// The pretraining run's canonical path: the run this sweep is of.
    pub run_canonical: PathBuf,
    /// The pretraining run's TensorBoard folder, which holds the utility curves.
    pub tensorboard: PathBuf,
    /// `--every`: every this many kept checkpoints, from the first.
    pub every: usize,
    /// The recipe's setting.
    pub setting: Setting,
    /// The recipe's languages: with the setting, what a finished sub-run's results hold.
    pub languages: Vec<String>,
    /// The steps fine-tuned from, in order.
    pub steps: Vec<u64>,
    /// What a continued sweep must share: the recipe's fingerprint without `init` (each step has
    /// its own), with `sweep.every`, `sweep.run` and `sweep.tensorboard`.
    pub fingerprint: Fingerprint,
}

/// Reads the `sweep.json` of the sweep in `sweep_dir`.
pub(crate) fn read_manifest(sweep_dir: &Path) -> Result<SweepManifest> {
    let path = sweep_dir.join(SWEEP_FILE);
    let text = read_to_string(&path)?;
    let manifest: SweepManifest = serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
    if manifest.kind != SWEEP_KIND {
        return Err(Error::field(&path, "kind", format!("expected {SWEEP_KIND:?}, found {:?}", manifest.kind)));
    }
    Ok(manifest)
}

/// One step's utility: the test macro-F1 (0 to 1) of the model fine-tuned from its checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Utility {
    /// The pretraining step.
    pub step: u64,
    /// The mean over the recipe's test sets: every (trained set, test language) of the results.
    pub macro_f1: f64,
    /// Per test language, in the results' language order: the mean over the trained sets tested
    /// on it (one set; for cross-lingual every language's model, the zero-shot ones included).
    pub per_language: Vec<(String, f64)>,
}

impl Utility {
    /// The utility of the results fine-tuned from the checkpoint of `step`.
    pub fn of(step: u64, results: &SentimentResults) -> Utility {
        let cells: Vec<f64> = results.runs.iter().flat_map(|r| r.test.values().map(|s| s.macro_f1)).collect();
        let per_language = results
            .languages
            .iter()
            .filter_map(|l| {
                let scores: Vec<f64> = results.runs.iter().filter_map(|r| r.test.get(l)).map(|s| s.macro_f1).collect();
                (!scores.is_empty()).then(|| (l.clone(), mean(&scores)))
            })
            .collect();
        Utility { step, macro_f1: mean(&cells), per_language }
    }
}

/// The mean of `values` (0 for none).
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Whether `results` are those of a finished `finetune sentiment` run of `setting` over
/// `languages`: every trained set there, each language tested.
fn is_complete(results: &SentimentResults, setting: Setting, languages: &[String]) -> bool {
    let sets = match setting {
        Setting::Multilingual => 1,
        Setting::Monolingual | Setting::LeaveOneOut | Setting::CrossLingual => languages.len(),
    };
    results.setting == setting
        && results.languages == languages
        && results.runs.len() == sets
        && languages.iter().all(|l| results.runs.iter().any(|r| r.test.contains_key(l)))
}

/// The results of the sub-run in `dir` when they are there and complete for `setting` and
/// `languages`; `None` when it has not finished (not started, or interrupted).
pub(crate) fn finished_results(dir: &Path, setting: Setting, languages: &[String]) -> Result<Option<SentimentResults>> {
    let path = dir.join(RESULTS_JSON);
    if !path.is_file() {
        return Ok(None);
    }
    let results: SentimentResults =
        serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    Ok(is_complete(&results, setting, languages).then_some(results))
}

/// Every `every`-th of the steps `kept` (ascending), from the first, and the last.
pub(crate) fn select_steps(kept: &[u64], every: usize) -> Vec<u64> {
    let mut steps: Vec<u64> = kept.iter().step_by(every.max(1)).copied().collect();
    if let Some(&last) = kept.last() {
        if steps.last() != Some(&last) {
            steps.push(last);
        }
    }
    steps
}

/// What `finetune sentiment --from-run` is asked, besides the recipe and the run flags.
#[derive(Debug, Clone)]
pub(crate) struct SweepRequest {
    /// The pretraining run folder (`checkpoints/<run>`).
    pub run: PathBuf,
    /// Every this many kept checkpoints, from the first (1: all); the last is always swept.
    pub every: usize,
    /// The pretraining run's TensorBoard folder; `None`: `runs/<run name>`, where `train` writes
    /// it by default.
    pub tensorboard: Option<PathBuf>,
}

/// How a sweep ended.
#[derive(Debug, Clone)]
pub(crate) struct SweepOutcome {
    /// Each finished step's utility, by step.
    pub utilities: Vec<Utility>,
    /// Steps whose fine-tuning this command ran (or finished).
    pub trained: usize,
    /// Steps skipped: finished by an earlier command.
    pub skipped: usize,
    /// Every step is finished; false when a stop signal or `--stop-after` ended a fine-tuning
    /// first (run it again with `--resume auto`).
    pub complete: bool,
    /// The TensorBoard run of the utility curves.
    pub board: PathBuf,
}

/// Fine-tunes the recipe's setting from the kept checkpoints of `request.run` (see the module's
/// documentation), each into its own sub-run, skipping those finished earlier, and writes each
/// step's macro-F1 into the pretraining run's TensorBoard. One process: every fine-tuning of the
/// sweep runs on `opts.device`.
pub(crate) fn sweep(recipe: &SentimentRecipe, request: &SweepRequest, opts: &TrainOptions) -> Result<SweepOutcome> {
    if request.every == 0 {
        return Err(Error::argument("--every", "must be at least 1 (1: every kept checkpoint)"));
    }
    let resume = match opts.resume.as_deref() {
        None => None,
        Some(r @ ("auto" | "latest")) => Some(r),
        Some(other) => {
            return Err(Error::argument(
                "--resume",
                format!(
                    "{}: a sweep (--from-run) continues with `auto` or `latest`, each checkpoint's fine-tuning from where it stopped",
                    indolm_core::files::quoted(other)
                ),
            ))
        }
    };
    let run_dir = request.run.as_path();
    // Held for reading until the sweep ends: the pretraining run's trainer prunes no weights.
    let checkpoints = RunCheckpoints::open(run_dir)?;
    let run_canonical = run_dir.canonicalize().with_path(run_dir)?;
    let run_name = run_canonical.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tensorboard = request.tensorboard.clone().unwrap_or_else(|| PathBuf::from("runs").join(&run_name));
    if !tensorboard.is_dir() {
        return Err(Error::MissingFile {
            path: tensorboard,
            hint: "the pretraining run's TensorBoard folder, where its bias curves are (its recipe's `[logging] tensorboard`/<run>): name it with --logdir".into(),
        });
    }
    let tensorboard_canonical = tensorboard.canonicalize().with_path(&tensorboard)?;
    let dir = recipe.run_dir();
    let sweep_tensorboard = recipe.tensorboard_dir();
    refuse_overlap(&dir, &run_canonical, "the pretraining run")?;
    refuse_overlap(&dir, &tensorboard_canonical, "the pretraining run's TensorBoard folder")?;
    refuse_overlap(&sweep_tensorboard, &run_canonical, "the pretraining run")?;
    refuse_overlap(&sweep_tensorboard, &tensorboard_canonical, "the pretraining run's TensorBoard folder")?;
    let board = board_dir(&tensorboard, &recipe.name);
    let fingerprint = sweep_fingerprint(recipe, request.every, &run_canonical, &tensorboard_canonical);

    let _lock = DirLock::acquire(&dir)?;
    indolm_core::files::sweep_dead_temps_under(&dir);
    let exists = dir.is_dir() && std::fs::read_dir(&dir).with_path(&dir)?.next().is_some();
    let recorded = if opts.overwrite {
        start_over(&dir, &sweep_tensorboard, &board, &[run_dir, tensorboard.as_path()])?;
        None
    } else if exists {
        if resume.is_none() {
            return Err(Error::invalid(
                &dir,
                "this sweep already exists: pass --resume auto to continue it (finished checkpoints are skipped, an interrupted one resumes), or --overwrite to start over",
            ));
        }
        if !dir.join(SWEEP_FILE).is_file() {
            return Err(Error::invalid(
                &dir,
                format!(
                    "has files but no {SWEEP_FILE}: not a sweep (a `finetune sentiment` run without --from-run?); give the recipe another `name`, or pass --overwrite to start over"
                ),
            ));
        }
        let recorded = read_manifest(&dir)?;
        let differing = recorded.fingerprint.differences_to(&fingerprint).unwrap_or_default();
        if !differing.is_empty() && !opts.force {
            return Err(Error::invalid(
                dir.join(SWEEP_FILE),
                format!(
                    "this sweep was started with other settings: {} (pass --overwrite to start over, or --force to continue anyway, mixing the two)",
                    differing.join(", ")
                ),
            ));
        }
        Some(recorded)
    } else if resume == Some("latest") {
        return Err(Error::MissingFile {
            path: dir.join(SWEEP_FILE),
            hint: "no sweep to resume (`--resume auto` starts it when there is none)".into(),
        });
    } else {
        None
    };

    let kept: Vec<u64> = checkpoints.steps.iter().map(|(s, _)| *s).collect();
    let mut steps = select_steps(&kept, request.every);
    if let Some(recorded) = &recorded {
        for &step in &recorded.steps {
            if !kept.contains(&step) {
                return Err(Error::invalid(
                    run_dir.join(step_dir_name(step)),
                    format!(
                        "this sweep fine-tunes from step {step} ({}), and the pretraining run no longer has that checkpoint with its weights (removed or pruned since): pass --overwrite to sweep the run's checkpoints as they are now",
                        dir.join(SWEEP_FILE).display()
                    ),
                ));
            }
            if !steps.contains(&step) {
                steps.push(step);
            }
        }
        steps.sort_unstable();
    }
    std::fs::create_dir_all(&dir).with_path(&dir)?;
    let manifest = SweepManifest {
        kind: SWEEP_KIND.into(),
        run: run_dir.display().to_string(),
        run_canonical,
        tensorboard: tensorboard.clone(),
        every: request.every,
        setting: recipe.data.setting,
        languages: recipe.languages(),
        steps: steps.clone(),
        fingerprint,
    };
    write_json(&dir.join(SWEEP_FILE), &manifest)?;
    let listed: Vec<String> = steps.iter().map(u64::to_string).collect();
    outln!(
        "sweep of {}: {} of its {} checkpoint(s) with weights (steps {}), each fine-tuned into {}/from-step-<N>/",
        run_dir.display(),
        steps.len(),
        kept.len(),
        listed.join(", "),
        dir.display()
    );

    let sub_opts = TrainOptions { resume: Some("auto".into()), overwrite: false, ..opts.clone() };
    let mut outcome = SweepOutcome { utilities: Vec::new(), trained: 0, skipped: 0, complete: true, board };
    for &step in &steps {
        // By its canonical path: a sub-run records the model it starts from by path and content,
        // and the run named another way is still the same run.
        let checkpoint = manifest.run_canonical.join(step_dir_name(step));
        let sub_dir = dir.join(sub_run_name(step));
        if let Some(results) = finished_results(&sub_dir, manifest.setting, &manifest.languages)? {
            same_checkpoint(&results, &checkpoint, &sub_dir)?;
            let utility = Utility::of(step, &results);
            outln!("step {step}: fine-tuned earlier (test macro-F1 {:.4}), skipped", utility.macro_f1);
            outcome.skipped += 1;
            outcome.utilities.push(utility);
            continue;
        }
        let how = if sub_dir.exists() { "resuming the fine-tuning" } else { "fine-tuning" };
        outln!("step {step}: {how} from {} into {}", checkpoint.display(), sub_dir.display());
        let Some(results) = run(&sub_recipe(recipe, step, &checkpoint), &checkpoint, &sub_opts, None)? else {
            outcome.complete = false;
            break;
        };
        let utility = Utility::of(step, &results);
        outln!("step {step}: test macro-F1 {:.4}", utility.macro_f1);
        outcome.trained += 1;
        outcome.utilities.push(utility);
        write_board(&outcome.board, &outcome.utilities, recipe)?;
    }
    write_board(&outcome.board, &outcome.utilities, recipe)?;
    Ok(outcome)
}

/// What makes a sweep one sweep: the recipe's fingerprint without `init` (each step starts from
/// its own checkpoint), with `--every`, the pretraining run and its TensorBoard folder.
fn sweep_fingerprint(recipe: &SentimentRecipe, every: usize, run: &Path, tensorboard: &Path) -> Fingerprint {
    let mut fingerprint = recipe.fingerprint("");
    if let Fingerprint::Values(sections) = &mut fingerprint {
        sections.remove("init");
        sections.insert(
            "sweep".into(),
            serde_json::json!({
                "every": every,
                "run": run.display().to_string(),
                "tensorboard": tensorboard.display().to_string(),
            }),
        );
    }
    fingerprint
}

/// The recipe of the sub-run fine-tuned from `checkpoint` (the step `step`): the same settings
/// and seed, its folder `<run>/from-step-<N>/` and TensorBoard `<tensorboard>/<name>/from-step-<N>/`.
fn sub_recipe(recipe: &SentimentRecipe, step: u64, checkpoint: &Path) -> SentimentRecipe {
    let mut sub = recipe.clone();
    sub.output_dir = recipe.run_dir();
    sub.logging.tensorboard = recipe.tensorboard_dir();
    sub.name = sub_run_name(step);
    sub.init = Some(checkpoint.to_path_buf());
    sub
}

/// `--overwrite`: removes the sweep's folder and TensorBoard folder and its utility curves in
/// the pretraining run's TensorBoard, each when it holds only what indolm writes (checked for
/// all before anything is removed); neither may hold one of `inputs` (the pretraining run).
fn start_over(dir: &Path, sweep_tensorboard: &Path, board: &Path, inputs: &[&Path]) -> Result<()> {
    indolm_core::outputs::refuse_foreign(board, &written_by_indolm)?;
    indolm_core::run::ownership::remove_run(dir, sweep_tensorboard, inputs)?;
    indolm_core::outputs::remove_owned(board, &written_by_indolm)
}

/// Refuses a finished step whose checkpoint changed since its fine-tuning started from it (the
/// pretraining run trained again): its results would not be the checkpoint's.
fn same_checkpoint(results: &SentimentResults, checkpoint: &Path, sub_dir: &Path) -> Result<()> {
    let now = content_sha256(checkpoint)?;
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    for r in &results.runs {
        if let Some(then) = r.base_model_sha256.as_deref().filter(|sha| *sha != now.as_str()) {
            return Err(Error::invalid(
                checkpoint,
                format!(
                    "changed since this sweep fine-tuned from it (content SHA-256 {}… in {}, {}… now: the pretraining run was trained again): pass --overwrite to sweep it as it is now",
                    short(then),
                    sub_dir.join(RESULTS_JSON).display(),
                    short(&now)
                ),
            ));
        }
    }
    Ok(())
}

/// `path` made absolute and free of `..` and links as far as it exists (a folder to be created
/// resolves through its nearest existing parent).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(canonical) = path.canonicalize() {
        return canonical;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            resolved(parent).join(name)
        }
        _ => std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// Refuses `ours` (a folder the sweep writes, and its `--overwrite` removes) when it is `theirs`
/// (`what`, canonical), inside it or above it.
fn refuse_overlap(ours: &Path, theirs: &Path, what: &str) -> Result<()> {
    let ours_resolved = resolved(ours);
    if ours_resolved.starts_with(theirs) || theirs.starts_with(&ours_resolved) {
        return Err(Error::invalid(
            ours,
            format!(
                "is {what} ({}), inside it or above it: a sweep writes folders of its own; give the sentiment recipe another `name` or `output_dir` (`[logging] tensorboard`)",
                theirs.display()
            ),
        ));
    }
    Ok(())
}

/// Writes `utilities` as the sweep's TensorBoard run `board`: one new event file, written beside
/// it and then put in place of the one an earlier write left (a folder holding anything else is
/// refused, naming the file). Nothing to write: nothing changes.
fn write_board(board: &Path, utilities: &[Utility], recipe: &SentimentRecipe) -> Result<()> {
    if utilities.is_empty() {
        return Ok(());
    }
    let staging = Staging::new(board);
    let mut logger = Logger::with_unit(staging.path(), 0, 0, "step")?;
    let what = format!("the recipe `{}` (setting {:?}, seed {})", recipe.name, recipe.data.setting, recipe.seed);
    let mean_description = format!(
        "NusaX sentiment test macro-F1 (0 to 1) of {what} fine-tuned from this checkpoint, averaged over its test \
         sets: the model's utility, to read beside the bias curves (bias rising with macro-F1 comes with \
         capability; rising without it, it does not)."
    );
    for u in utilities {
        logger.scalar_described(MACRO_F1_TAG, u.macro_f1, u.step, &mean_description);
        for (language, f1) in &u.per_language {
            let description = format!(
                "NusaX sentiment test macro-F1 (0 to 1) on `{language}` of {what} fine-tuned from this checkpoint."
            );
            logger.scalar_described(&format!("{MACRO_F1_TAG}/{language}"), *f1, u.step, &description);
        }
    }
    logger.finish();
    drop(logger); // the event file closed before its folder is renamed
    indolm_core::outputs::refuse_foreign(board, &written_by_indolm)?;
    indolm_core::outputs::remove_owned(board, &written_by_indolm)?;
    staging.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Results of `setting` (as `results.json` spells it) over Indonesian and Javanese: each run
    /// trained on a set, with its test macro-F1 per language.
    fn results(setting: &str, runs: &[(&str, &[(&str, f64)])]) -> SentimentResults {
        let runs: Vec<serde_json::Value> = runs
            .iter()
            .map(|(trained_on, tests)| {
                let test: serde_json::Map<String, serde_json::Value> = tests
                    .iter()
                    .map(|(l, f)| {
                        let confusion = [[0usize; 3]; 3];
                        let scores = json!({"macro_f1": f, "accuracy": 0.5, "confusion": confusion, "n": 10});
                        (l.to_string(), scores)
                    })
                    .collect();
                json!({"trained_on": trained_on, "lr": 1e-3, "batch_size": 8, "best_epoch": 1, "epochs": 1,
                    "valid_macro_f1": 0.5, "test": test})
            })
            .collect();
        let languages = ["indonesian", "javanese"];
        serde_json::from_value(json!({"setting": setting, "languages": languages, "runs": runs})).unwrap()
    }

    #[test]
    fn every_kth_kept_checkpoint_from_the_first_and_the_last() {
        assert_eq!(select_steps(&[2, 4, 6, 8], 2), vec![2, 6, 8]);
        assert_eq!(select_steps(&[2, 4, 6], 2), vec![2, 6]);
        assert_eq!(select_steps(&[2, 4, 6], 1), vec![2, 4, 6]);
        assert_eq!(select_steps(&[250], 3), vec![250]);
        assert_eq!(select_steps(&[], 2), Vec::<u64>::new());
        assert_eq!(sub_run_name(250), "from-step-250");
    }

    #[test]
    fn utility_is_the_mean_over_test_sets_and_per_language() {
        let multi = results("multilingual", &[("all", &[("indonesian", 0.6), ("javanese", 0.4)])]);
        let u = Utility::of(7, &multi);
        assert_eq!(u.step, 7);
        assert!((u.macro_f1 - 0.5).abs() < 1e-15);
        assert_eq!(u.per_language, vec![("indonesian".to_string(), 0.6), ("javanese".to_string(), 0.4)]);
        let langs = multi.languages.clone();
        assert!(is_complete(&multi, Setting::Multilingual, &langs));
        assert!(!is_complete(&multi, Setting::Monolingual, &langs));
        // Cross-lingual: each language's column over both models, zero-shot included.
        let cross = results(
            "cross-lingual",
            &[
                ("indonesian", &[("indonesian", 0.8), ("javanese", 0.2)]),
                ("javanese", &[("indonesian", 0.4), ("javanese", 0.6)]),
            ],
        );
        let u = Utility::of(1, &cross);
        assert!((u.macro_f1 - 0.5).abs() < 1e-15);
        assert!((u.per_language[0].1 - 0.6).abs() < 1e-15 && (u.per_language[1].1 - 0.4).abs() < 1e-15);
        assert!(is_complete(&cross, Setting::CrossLingual, &langs));
        let half = results("monolingual", &[("indonesian", &[("indonesian", 0.8)])]);
        assert!(!is_complete(&half, Setting::Monolingual, &langs), "one of two languages trained");
    }
}
