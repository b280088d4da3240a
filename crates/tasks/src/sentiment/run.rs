//! `finetune sentiment`: the NusaX paper's settings (monolingual, multilingual, leave-one-out,
//! cross-lingual) as units of one run, each trained by the engine (checkpoints, resume, signals,
//! data parallelism): under `<output_dir>/<name>/`, one folder per trained set (`<set>/`, the
//! selected model's directory, with `result.json` once tested), and in it one run folder per grid
//! point (`lr<lr>-bs<batch>/`, with `unit.json` once trained). A killed run, run again with
//! `--resume auto`, redoes no finished unit. `results.json` and `results.md` sum up the sets.
//! A finished grid point keeps its checkpoints' states and logs but not their weights, and
//! once its set is tested, not its best weights either: only the set's selected model stays.
use super::data::{concat, load_split, score, Example, Scores, LABELS};
use super::recipe::{SentimentRecipe, Setting};
use super::salt;
use super::task::{Hyper, SentimentTask};
use crate::classifier::SequenceClassifier;
use indolm_core::files::{write_atomic, write_json};
use indolm_core::outln;
use indolm_core::recipe::Fingerprint;
use indolm_core::run::units::{BaseModel, Rerun, UnitRun};
use indolm_core::run::{Run, RunLayout, RunOptions};
use indolm_torch::device::seed_torch;
use indolm_torch::distributed::ProcessGroup;
use indolm_torch::error::{IoContext, Result};
use indolm_torch::model::model_dir::content_sha256;
use indolm_train::data_parallel::DataParallel;
use indolm_train::engine::{Engine, EngineSettings, TaskRun, TrainOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One trained model's test results per language.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    /// What it was trained on (a language, `all`, or `all-but-<language>`).
    pub trained_on: String,
    /// The learning rate selected (from the grid, if any).
    pub lr: f64,
    /// The batch size selected (from the grid, if any).
    pub batch_size: usize,
    /// The epoch whose weights were kept, from 1.
    pub best_epoch: u64,
    /// The epochs run before stopping.
    pub epochs: u64,
    /// The kept model's validation macro-F1.
    pub valid_macro_f1: f64,
    /// Test scores per language.
    pub test: BTreeMap<String, Scores>,
    /// The content SHA-256 of the model its selected grid point started from (results of
    /// earlier versions did not record it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_model_sha256: Option<String>,
}

/// What `finetune sentiment` measured; written as `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SentimentResults {
    /// The recipe's setting.
    pub setting: Setting,
    /// The languages of the run.
    pub languages: Vec<String>,
    /// One entry per trained model, in training order.
    pub runs: Vec<RunResult>,
}

/// How one grid point's fine-tuning ended (`unit.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct UnitOutcome {
    lr: f64,
    batch_size: usize,
    /// The step whose weights are in the unit's `best/`.
    best_step: u64,
    /// Their validation macro-F1.
    valid_macro_f1: f64,
    /// Updates run.
    steps: u64,
    /// Updates per epoch.
    updates_per_epoch: u64,
    /// The unit's folder name.
    unit: String,
    /// The content SHA-256 of the model it started from.
    #[serde(default)]
    base_model_sha256: Option<String>,
}

/// A trained set: its name, the languages it trains on and those it is tested on.
struct Plan {
    name: String,
    train: Vec<String>,
    test: Vec<String>,
}

/// The sets the recipe's setting trains.
fn plans(setting: Setting, langs: &[String]) -> Vec<Plan> {
    let plan = |name: String, train: Vec<String>, test: Vec<String>| Plan { name, train, test };
    match setting {
        Setting::Monolingual => langs.iter().map(|l| plan(l.clone(), vec![l.clone()], vec![l.clone()])).collect(),
        Setting::Multilingual => vec![plan("all".into(), langs.to_vec(), langs.to_vec())],
        Setting::LeaveOneOut => langs
            .iter()
            .map(|l| plan(format!("all-but-{l}"), langs.iter().filter(|x| *x != l).cloned().collect(), vec![l.clone()]))
            .collect(),
        Setting::CrossLingual => langs.iter().map(|l| plan(l.clone(), vec![l.clone()], langs.to_vec())).collect(),
    }
}

/// The file a finished set writes.
const SET_RESULT: &str = crate::units::RESULT_FILE;
/// The file a finished grid point writes.
const UNIT_RESULT: &str = "unit.json";

indolm_core::declare_run_files!(SENTIMENT_FILES: indolm_core::outputs::RunFile::Named(UNIT_RESULT));

/// Runs the recipe's setting from `init` (every rank of a data-parallel launch calls this);
/// `None` when a stop signal (or `--stop-after`) ended it before every set was tested: run it
/// again with `--resume auto`.
pub fn run(
    recipe: &SentimentRecipe,
    init: &Path,
    opts: &TrainOptions,
    group: Option<ProcessGroup>,
) -> Result<Option<SentimentResults>> {
    let precision = recipe.compute_precision(opts.device)?;
    let root = &recipe.data.root;
    let langs = recipe.languages();
    // Every language folder and file is checked before anything is trained.
    let mut tests = BTreeMap::new();
    for l in &langs {
        load_split(root, l, "train")?;
        load_split(root, l, "valid")?;
        tests.insert(l.clone(), load_split(root, l, "test")?);
    }
    // The model to start from is checked before the run's folder is touched, and identified by
    // its content: a resumed run must start its remaining units from the same model.
    let labels: Vec<String> = LABELS.iter().map(|s| s.to_string()).collect();
    SequenceClassifier::load(init, &labels, tch::Device::Cpu)?;
    let base = BaseModel { path: init.display().to_string(), sha256: content_sha256(init)? };
    let mut parallel = group.map(DataParallel::new).transpose()?;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let rerun =
        Rerun { resume: opts.resume.clone(), overwrite: opts.overwrite, force: opts.force, inputs: vec![init.into()] };
    let fingerprint = recipe.fingerprint(&base.sha256);
    let layout = RunLayout::new(recipe.run_dir());
    let resume_at = checkpoint_to_resume(opts.resume.as_deref(), &layout, recipe, &langs)?;
    let units = UnitRun::open(layout, "sentiment", &fingerprint, &base, &rerun, &recipe.tensorboard_dir(), leader)?;
    let mut results = Vec::new();
    for plan in plans(recipe.data.setting, &langs) {
        let set = units.layout().unit(&plan.name);
        if let Some(done) = units.done::<RunResult>(&set, SET_RESULT)? {
            results.push(done);
            continue;
        }
        let train = concat(root, &plan.train, "train")?;
        let valid = concat(root, &plan.train, "valid")?;
        let mut outcomes: Vec<UnitOutcome> = Vec::new();
        for (lr, batch_size) in recipe.grid_points() {
            let name = point_name(lr, batch_size);
            let unit = set.unit(&name);
            if let Some(mut done) = units.done::<UnitOutcome>(&unit, UNIT_RESULT)? {
                // The unit's folder is the grid point's; `unit.json` never names another.
                done.unit = name.clone();
                outcomes.push(done);
                continue;
            }
            let resume = match &resume_at {
                Some((dir, at)) if at.dir() == unit.dir() => Some(dir.display().to_string()),
                // `--resume DIR` names one unit's checkpoint; the others continue strictly.
                Some(_) => Some("latest".to_string()),
                None => opts.resume.clone(),
            };
            let point = GridPoint { plan: &plan, name: &name, lr, batch_size, unit: &unit, resume, base: &base };
            let (outcome, back) = train_point(recipe, init, opts, precision, &point, &train, &valid, parallel)?;
            parallel = back;
            let Some(outcome) = outcome else { return Ok(None) };
            if leader {
                units.finish(&unit, UNIT_RESULT, &outcome)?;
                // A finished grid point needs only its best weights: its checkpoints' weights
                // and optimizer states go (BERT-base: 1.3 GB each), but the weights the recipe
                // keeps for good (`keep_weights_every`).
                let retention = indolm_train::engine::retention(&recipe.checkpoint);
                indolm_core::run::checkpoints::release_checkpoint_weights(&unit, &retention)?;
            }
            if let Some(p) = parallel.as_mut() {
                p.barrier()?;
            }
            outcomes.push(outcome);
        }
        if leader {
            let result = test_set(recipe, opts, &plan, &set, &outcomes, &tests)?;
            units.finish(&set, SET_RESULT, &result)?;
            // The selected weights are the set's model now; the grid points' best weights go.
            for o in &outcomes {
                let best = set.unit(&o.unit).best_dir();
                if best.exists() {
                    std::fs::remove_dir_all(&best).with_path(&best)?;
                }
            }
            results.push(result);
        }
        if let Some(p) = parallel.as_mut() {
            p.barrier()?;
        }
    }
    if !leader {
        return Ok(None);
    }
    let results = SentimentResults { setting: recipe.data.setting, languages: langs, runs: results };
    let dir = recipe.run_dir();
    write_json(&dir.join(crate::RESULTS_JSON), &results)?;
    write_atomic(&dir.join(crate::RESULTS_MD), results.markdown().as_bytes())?;
    Ok(Some(results))
}

/// A grid point's folder name: `lr<lr>-bs<batch>`.
fn point_name(lr: f64, batch_size: usize) -> String {
    format!("lr{lr:e}-bs{batch_size}")
}

/// What `--resume DIR` names in a fine-tuning run: one unfinished grid point's checkpoint
/// (`<run>/<set>/<grid point>/step-<N>`), with that unit's layout (see
/// [`crate::units::checkpoint_to_resume`]).
fn checkpoint_to_resume(
    resume: Option<&str>,
    layout: &RunLayout,
    recipe: &SentimentRecipe,
    langs: &[String],
) -> Result<Option<(std::path::PathBuf, RunLayout)>> {
    let units: Vec<RunLayout> = plans(recipe.data.setting, langs)
        .iter()
        .flat_map(|plan| {
            recipe.grid_points().into_iter().map(|(lr, b)| layout.unit(&plan.name).unit(&point_name(lr, b)))
        })
        .collect();
    let pattern = "<run>/<set>/<grid point>/step-<N>";
    crate::units::checkpoint_to_resume(resume, layout, &units, UNIT_RESULT, "unit", pattern)
}

/// One grid point of one set.
struct GridPoint<'a> {
    plan: &'a Plan,
    name: &'a str,
    lr: f64,
    batch_size: usize,
    unit: &'a RunLayout,
    /// How its run folder is resumed when the run is continued: `latest` (strict: a corrupt
    /// pointer is an error naming the newest valid checkpoint), `auto`, or a checkpoint folder.
    resume: Option<String>,
    /// The model it starts from.
    base: &'a BaseModel,
}

/// Fine-tunes one grid point in its own run folder (resuming its checkpoint when the run is
/// continued); `None` when it stopped before its end. Hands the process group back.
#[allow(clippy::too_many_arguments)]
fn train_point(
    recipe: &SentimentRecipe,
    init: &Path,
    opts: &TrainOptions,
    precision: indolm_torch::model::Precision,
    point: &GridPoint,
    train: &[Example],
    valid: &[Example],
    parallel: Option<DataParallel>,
) -> Result<(Option<UnitOutcome>, Option<DataParallel>)> {
    let o = &recipe.optimizer;
    let micro_per_epoch = train.len().div_ceil(point.batch_size) as u64;
    let updates_per_epoch = micro_per_epoch.div_ceil(o.grad_accumulation as u64).max(1);
    let max_steps = o.max_epochs.unwrap_or(1) * updates_per_epoch;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let tensorboard = recipe.tensorboard_dir().join(&point.plan.name).join(point.name);
    // A continued run resumes each unfinished grid point as asked; one that has not started yet
    // (no checkpoint) starts.
    let resume = match point.resume.as_deref() {
        Some("latest" | "auto") if !point.unit.has_checkpoints()? => None,
        other => other.map(String::from),
    };
    let options =
        RunOptions { resume, overwrite: false, ..opts.run_options(leader, &recipe.checkpoint, tensorboard, max_steps) };
    let (run, resume) = Run::open(point.unit.clone(), &options)?;
    // The model this unit started from: the base given now, or, resumed, the one its
    // checkpoint recorded (which `--force` may have let differ).
    let started_from = match &resume {
        Some(p) => match &p.state.recipe_fingerprint {
            Fingerprint::Values(v) => v.get("init").and_then(|i| i["model_sha256"].as_str()).map(String::from),
            Fingerprint::Legacy(_) => None,
        },
        None => Some(point.base.sha256.clone()),
    };
    // The new classification head is drawn from libtorch's generator.
    seed_torch(recipe.seed, salt::SENTIMENT_TORCH);
    let labels: Vec<String> = LABELS.iter().map(|s| s.to_string()).collect();
    let (mut model, notes) = SequenceClassifier::load(init, &labels, opts.device)?;
    if leader && resume.is_none() {
        for note in notes {
            run.logger.println(&format!("note: {note}"));
        }
    }
    model.set_precision(precision);
    let tag = format!("{}/{}", point.plan.name, point.name);
    let hyper = Hyper { lr: point.lr, batch_size: point.batch_size, max_steps, updates_per_epoch };
    let task = SentimentTask::new(
        model,
        precision,
        train,
        valid.to_vec(),
        recipe.data.max_len,
        recipe.seed,
        hyper,
        o.clone(),
        tag.clone(),
    )?;
    let run_of_unit = TaskRun {
        torch_salt: salt::SENTIMENT_TORCH,
        max_steps,
        patience: Some(recipe.eval.patience),
        fingerprint: unit_fingerprint(recipe, point, &point.base.sha256),
    };
    let settings = EngineSettings {
        name: format!("{}/{tag}", recipe.name),
        ..EngineSettings::for_recipe(&recipe.shared(), run_of_unit)
    };
    let finished = Engine::new(task, settings, opts, run, resume, parallel)?.run()?;
    let (summary, parallel) = (finished.summary, finished.parallel);
    if !summary.complete {
        return Ok((None, parallel));
    }
    // Rank 0 evaluates and keeps the best; the other ranks of a data-parallel launch only train.
    let (best_step, valid_macro_f1) = match (summary.best, leader) {
        (Some(best), _) => (best.step, best.score),
        (None, false) => (0, 0.0),
        (None, true) => unreachable!("a finished fine-tuning evaluated at least once"),
    };
    let outcome = UnitOutcome {
        lr: point.lr,
        batch_size: point.batch_size,
        best_step,
        valid_macro_f1,
        steps: summary.final_step,
        updates_per_epoch,
        unit: point.name.to_string(),
        base_model_sha256: started_from,
    };
    Ok((Some(outcome), parallel))
}

/// What a grid point's checkpoints record of the recipe: the run's fingerprint with the point's
/// learning rate, batch size and languages.
fn unit_fingerprint(recipe: &SentimentRecipe, point: &GridPoint, base_model_sha256: &str) -> Fingerprint {
    let mut fingerprint = recipe.fingerprint(base_model_sha256);
    if let Fingerprint::Values(sections) = &mut fingerprint {
        sections.insert(
            "unit".into(),
            serde_json::json!({"lr": point.lr, "batch_size": point.batch_size, "train": point.plan.train}),
        );
    }
    fingerprint
}

/// Selects the set's grid point with the best validation macro-F1 (the first on ties), makes its
/// best weights the set's model directory, and tests it on the set's test languages.
fn test_set(
    recipe: &SentimentRecipe,
    opts: &TrainOptions,
    plan: &Plan,
    set: &RunLayout,
    outcomes: &[UnitOutcome],
    tests: &BTreeMap<String, Vec<Example>>,
) -> Result<RunResult> {
    let chosen = outcomes
        .iter()
        .fold(None::<&UnitOutcome>, |best, o| match best {
            Some(b) if o.valid_macro_f1 <= b.valid_macro_f1 => Some(b),
            _ => Some(o),
        })
        .expect("a set trains at least one grid point");
    let best_dir = set.unit(&chosen.unit).best_dir();
    copy_model(&best_dir, set.dir())?;
    let labels: Vec<String> = LABELS.iter().map(|s| s.to_string()).collect();
    let (mut model, _) = SequenceClassifier::load(set.dir(), &labels, opts.device)?;
    model.set_precision(recipe.compute_precision(opts.device)?);
    let mut test = BTreeMap::new();
    for l in &plan.test {
        let (scores, _) = score(&model, &tests[l], recipe.data.max_len)?;
        test.insert(l.clone(), scores);
    }
    let summary: Vec<String> = test.iter().map(|(l, s)| format!("{l} {:.4}", s.macro_f1)).collect();
    let per_epoch = chosen.updates_per_epoch.max(1);
    let result = RunResult {
        trained_on: plan.name.clone(),
        lr: chosen.lr,
        batch_size: chosen.batch_size,
        best_epoch: chosen.best_step.div_ceil(per_epoch),
        epochs: chosen.steps.div_ceil(per_epoch),
        valid_macro_f1: chosen.valid_macro_f1,
        test,
        base_model_sha256: chosen.base_model_sha256.clone(),
    };
    outln!(
        "{}: lr {:e}, batch {}, best epoch {} of {}, valid macro-F1 {:.4}; test macro-F1 {}",
        plan.name,
        result.lr,
        result.batch_size,
        result.best_epoch,
        result.epochs,
        result.valid_macro_f1,
        summary.join(", ")
    );
    Ok(result)
}

/// Copies a model directory's files (not the best weights' `best.json`) into `to`, each written
/// to a temporary name and renamed.
fn copy_model(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_path(to)?;
    for entry in std::fs::read_dir(from).with_path(from)?.filter_map(|e| e.ok()) {
        let name = entry.file_name();
        if entry.path().is_file() && name != indolm_core::run::checkpoints::BEST_FILE {
            let path = entry.path();
            let bytes = std::fs::read(&path).with_path(&path)?;
            write_atomic(&to.join(&name), &bytes)?;
        }
    }
    Ok(())
}

impl SentimentResults {
    /// The NusaX paper's layout: a row of per-language test macro-F1 (×100) with the average;
    /// a language × language matrix for cross-lingual; then confusion matrices.
    pub fn markdown(&self) -> String {
        let short = |l: &str| l.chars().take(3).collect::<String>();
        let mut out = String::new();
        let header = |out: &mut String, first: &str| {
            out.push_str(&format!("| {first} |"));
            for l in &self.languages {
                out.push_str(&format!(" {} |", short(l)));
            }
            out.push_str(" avg |\n|---|");
            out.push_str(&"---:|".repeat(self.languages.len() + 1));
            out.push('\n');
        };
        let row = |out: &mut String, name: &str, f1: &dyn Fn(&str) -> Option<f64>| {
            out.push_str(&format!("| {name} |"));
            let mut vals = Vec::new();
            for l in &self.languages {
                match f1(l) {
                    Some(v) => {
                        vals.push(v);
                        out.push_str(&format!(" {:.1} |", 100.0 * v));
                    }
                    None => out.push_str(" – |"),
                }
            }
            out.push_str(&format!(" {:.1} |\n", 100.0 * vals.iter().sum::<f64>() / vals.len().max(1) as f64));
        };
        out.push_str(&format!("Test macro-F1 (×100), setting {:?}\n\n", self.setting));
        match self.setting {
            Setting::CrossLingual => {
                header(&mut out, "train \\ test");
                for r in &self.runs {
                    row(&mut out, &short(&r.trained_on), &|l| r.test.get(l).map(|s| s.macro_f1));
                }
            }
            _ => {
                header(&mut out, "model");
                let find = |l: &str| self.runs.iter().find_map(|r| r.test.get(l).map(|s| s.macro_f1));
                row(&mut out, &format!("{:?}", self.setting), &find);
            }
        }
        let mut bases: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in &self.runs {
            bases.entry(r.base_model_sha256.as_deref().unwrap_or("not recorded")).or_default().push(&r.trained_on);
        }
        if bases.len() > 1 {
            out.push_str("\n**Warning:** these results start from different base models (resumed with --force), by content SHA-256:\n");
            for (sha, sets) in &bases {
                out.push_str(&format!("- {sha}: {}\n", sets.join(", ")));
            }
        }
        out.push_str("\nConfusion matrices (rows gold, columns predicted: negative, neutral, positive)\n");
        for r in &self.runs {
            for (l, s) in &r.test {
                out.push_str(&format!("\n{} → {l}: {:?}\n", r.trained_on, s.confusion));
            }
        }
        out
    }
}
