//! NusaX sentiment fine-tuning: the data (`<root>/<language>/{train,valid,test}.csv`, columns
//! `text` and `label` in negative/neutral/positive), the fine-tuning loop (cross-entropy, the
//! recipe's optimizer, early stopping on validation macro-F1, the best weights kept), and the
//! NusaX paper's settings: monolingual, multilingual, leave-one-language-out and zero-shot
//! cross-lingual, with an optional grid over learning rate and batch size.
use super::classifier::SequenceClassifier;
use crate::error::{Error, IoContext, Result};
use crate::eval::metrics::argmax;
use crate::eval::metrics::{accuracy, confusion_matrix, macro_f1};
use crate::files::{write_atomic, write_json};
use crate::logger::Logger;
use crate::model::weights::Snapshot;
use crate::model::Precision;
use crate::optim::{constant_or_linear, AdamW};
use crate::recipe::{resolve_precision, PrecisionSetting};
use crate::seeds::{per_step, salt, seed_torch, stream_rng};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// The three NusaX labels, in the order of the classifier's outputs.
pub const LABELS: [&str; 3] = ["negative", "neutral", "positive"];
/// The 12 NusaX languages (folder names), used when a recipe names none.
pub const NUSAX_LANGUAGES: [&str; 12] = crate::data::download::NUSAX_LANGUAGES;

/// The NusaX paper's training and testing arrangements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// One model per language, trained and tested on that language.
    Monolingual,
    /// One model trained on every language, tested on each.
    Multilingual,
    /// Per language, a model trained on all the other languages and tested on it.
    LeaveOneOut,
    /// Per language, a model trained on it and tested on every language (zero-shot on the others).
    CrossLingual,
}

/// A `finetune sentiment` recipe (TOML).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentimentRecipe {
    /// The run's name: its folder under `output_dir` and under `tensorboard`.
    pub name: String,
    /// The seed every shuffle and libtorch reseed of the run derives from.
    #[serde(default = "crate::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (one model per trained set, results) goes.
    #[serde(default = "crate::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// The model to start from (an indolm checkpoint or an HF BERT directory); `--init` overrides.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// The NusaX folder, the languages and the setting.
    pub data: SentimentData,
    /// The optimizer, its schedule and early stopping.
    pub optimizer: FinetuneOptimizer,
    /// Learning rates × batch sizes to search (instead of the optimizer's own).
    #[serde(default)]
    pub grid: Option<Grid>,
    /// Where the TensorBoard logs go (in a folder named after the run).
    #[serde(default = "crate::recipe::default_tensorboard")]
    pub tensorboard: PathBuf,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` (CUDA only) or `fp32`, as in pretraining.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// The file it was read from (for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// The `[data]` table of a sentiment recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentimentData {
    /// The folder with one sub-folder per language.
    pub root: PathBuf,
    /// Languages (folder names); all 12 NusaX languages when omitted.
    #[serde(default)]
    pub languages: Vec<String>,
    /// Which models are trained on which languages, and tested on which.
    pub setting: Setting,
    /// Texts are cut to this many tokens (with `[CLS]` and `[SEP]`).
    #[serde(default = "d_max_len")]
    pub max_len: usize,
}

fn d_max_len() -> usize {
    128
}

/// The `[optimizer]` table of a sentiment recipe: AdamW with a constant learning rate (or a
/// linear warmup and decay), gradient clipping, early stopping.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FinetuneOptimizer {
    /// The peak learning rate.
    pub lr: f64,
    /// Examples per step.
    pub batch_size: usize,
    /// Adam's β1 and β2.
    #[serde(default = "d_betas")]
    pub betas: [f64; 2],
    /// Adam's ε.
    #[serde(default = "d_eps")]
    pub eps: f64,
    /// Decoupled weight decay (AdamW).
    #[serde(default)]
    pub weight_decay: f64,
    /// The largest gradient norm.
    #[serde(default = "d_clip")]
    pub grad_clip: f64,
    /// 0: a constant learning rate; else a linear warmup over this many steps, then a linear
    /// decay to 0 at the last step.
    #[serde(default)]
    pub warmup_steps: u64,
    /// The most epochs one fine-tuning runs.
    pub max_epochs: usize,
    /// Stop after this many epochs without a better validation macro-F1.
    #[serde(default = "d_patience")]
    pub patience: usize,
}

fn d_betas() -> [f64; 2] {
    [0.9, 0.999]
}
fn d_eps() -> f64 {
    1e-8
}
fn d_clip() -> f64 {
    10.0
}
fn d_patience() -> usize {
    3
}

/// A hyper-parameter grid: every learning rate with every batch size, the best on validation
/// macro-F1 kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// The learning rates tried.
    pub lr: Vec<f64>,
    /// The batch sizes tried.
    pub batch_size: Vec<usize>,
}

impl SentimentRecipe {
    /// The precision of its matrix products on `device` (bf16 on CPU is refused).
    pub fn compute_precision(&self, device: Device) -> Result<Precision> {
        resolve_precision(self.precision, device, &self.path)
    }

    /// Reads a recipe and checks that lr, batch_size and max_epochs are positive.
    pub fn load(path: &Path) -> Result<Self> {
        let mut recipe: SentimentRecipe = crate::recipe::parse_toml(path)?;
        recipe.path = path.to_path_buf();
        crate::recipe::check_name(path, "name", &recipe.name)?;
        let o = &recipe.optimizer;
        if o.lr <= 0.0 || o.batch_size == 0 || o.max_epochs == 0 {
            return Err(Error::field(path, "optimizer", "lr, batch_size and max_epochs must be positive"));
        }
        Ok(recipe)
    }

    /// The recipe's languages, or all 12 NusaX languages when it names none.
    pub fn languages(&self) -> Vec<String> {
        if self.data.languages.is_empty() {
            NUSAX_LANGUAGES.iter().map(|s| s.to_string()).collect()
        } else {
            self.data.languages.clone()
        }
    }
}

/// One labelled text.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// The text, trimmed.
    pub text: String,
    /// The index of its label in [`LABELS`].
    pub label: usize,
}

/// One split of one language, checked: the folder, the columns, every label and text.
pub fn load_split(root: &Path, language: &str, split: &str) -> Result<Vec<Example>> {
    let dir = root.join(language);
    if !dir.is_dir() {
        let available: Vec<String> = std::fs::read_dir(root)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().to_string()).collect())
            .unwrap_or_default();
        return Err(Error::MissingFile {
            path: dir,
            hint: format!("no folder for language `{language}` (found: {})", available.join(", ")),
        });
    }
    let path = dir.join(format!("{split}.csv"));
    let mut reader = csv::Reader::from_path(&path).map_err(|e| match e.kind() {
        csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            Error::MissingFile { path: path.clone(), hint: String::new() }
        }
        _ => Error::invalid(&path, e.to_string()),
    })?;
    let header: Vec<String> =
        reader.headers().map_err(|e| Error::invalid(&path, e.to_string()))?.iter().map(String::from).collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| Error::field(&path, name, format!("missing column; the header has {header:?}")))
    };
    let (text_col, label_col) = (col("text")?, col("label")?);
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let row = i + 2;
        let rec = rec.map_err(|e| Error::invalid(&path, format!("row {row}: {e}")))?;
        let text = rec.get(text_col).unwrap_or("").trim();
        if text.is_empty() {
            return Err(Error::invalid(&path, format!("row {row}: empty text")));
        }
        let raw = rec.get(label_col).unwrap_or("").trim();
        let label = LABELS.iter().position(|l| *l == raw.to_lowercase()).ok_or_else(|| {
            Error::invalid(&path, format!("row {row}: unknown label {raw:?}, expected one of {LABELS:?}"))
        })?;
        out.push(Example { text: text.to_string(), label });
    }
    Ok(out)
}

/// Scores of one evaluation: macro-F1, accuracy, confusion matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Scores {
    /// The mean of the three labels' F1 (0 to 1).
    pub macro_f1: f64,
    /// The share of texts labelled right (0 to 1).
    pub accuracy: f64,
    /// Counts by gold label (rows) and predicted label (columns), in [`LABELS`] order.
    pub confusion: Vec<Vec<usize>>,
    /// The number of texts scored.
    pub n: usize,
}

/// Classifies `data` (texts cut to `max_len` tokens) and scores the predictions, which it also
/// returns.
pub fn score(model: &SequenceClassifier, data: &[Example], max_len: usize) -> Result<(Scores, Vec<usize>)> {
    let texts: Vec<&str> = data.iter().map(|e| e.text.as_str()).collect();
    let probs = model.predict(&texts, max_len)?;
    let pred: Vec<usize> = probs.iter().map(|p| argmax(p)).collect();
    let gold: Vec<usize> = data.iter().map(|e| e.label).collect();
    Ok((
        Scores {
            macro_f1: macro_f1(&gold, &pred, LABELS.len()),
            accuracy: accuracy(&gold, &pred),
            confusion: confusion_matrix(&gold, &pred, LABELS.len()),
            n: data.len(),
        },
        pred,
    ))
}

/// What one fine-tuning produced.
pub struct Finetuned {
    /// The classifier with the best epoch's weights.
    pub model: SequenceClassifier,
    /// Its validation scores.
    pub best_valid: Scores,
    /// The best epoch, from 1.
    pub best_epoch: usize,
    /// The epochs run before stopping.
    pub epochs: usize,
    /// The learning rate used.
    pub lr: f64,
    /// The batch size used.
    pub batch_size: usize,
}

/// Fine-tunes `init` on `train`, selecting the epoch with the best validation macro-F1 and
/// stopping after `patience` epochs without improvement. Deterministic given `seed`.
// Twelve plain arguments: the grid search and the tests vary lr, batch size, data and seed
// independently, and a struct holding them would be built only to be taken apart here.
#[allow(clippy::too_many_arguments)]
pub fn finetune(
    init: &Path,
    train: &[Example],
    valid: &[Example],
    o: &FinetuneOptimizer,
    lr: f64,
    batch_size: usize,
    max_len: usize,
    seed: u64,
    device: Device,
    precision: Precision,
    logger: &mut Logger,
    tag: &str,
) -> Result<Finetuned> {
    seed_torch(seed, salt::SENTIMENT_TORCH);
    let model = load_classifier(init, device, precision, logger)?;
    let mut optimizer = AdamW::new(model.vs.variables().into_iter().collect(), o.betas, o.eps, o.weight_decay);
    let steps_per_epoch = train.len().div_ceil(batch_size) as u64;
    let run =
        Epochs { train, o, lr, batch_size, max_len, seed, device, total_steps: steps_per_epoch * o.max_epochs as u64 };
    let mut stopping = EarlyStopping { patience: o.patience, best: None };
    let mut step = 0u64;
    let mut epochs = 0;
    let (mut trained, mut train_seconds) = (0usize, 0.0);
    for epoch in 0..o.max_epochs {
        epochs = epoch + 1;
        let order = run.order(epoch);
        let started = Instant::now();
        let train_loss = run.train_epoch(&model, &mut optimizer, &order, &mut step)? / steps_per_epoch as f64;
        train_seconds += started.elapsed().as_secs_f64();
        trained += order.len();
        let (valid_scores, _) = score(&model, valid, max_len)?;
        log_epoch(logger, tag, epoch, train_loss, &valid_scores, started);
        if stopping.stop_after(epoch, valid_scores, &model) {
            break;
        }
    }
    logger.println(&format!(
        "{tag}: trained on {trained} examples in {train_seconds:.1}s of optimizer steps ({:.1} examples/s)",
        trained as f64 / train_seconds.max(1e-9)
    ));
    let best = stopping.best.expect("at least one epoch ran");
    best.weights.restore(&model.vs);
    Ok(Finetuned { model, best_valid: best.scores, best_epoch: best.epoch, epochs, lr, batch_size })
}

/// The model `finetune` starts from: `init` with a new three-label head (drawn from libtorch's
/// generator), in `precision`; the loading notes go to the log.
fn load_classifier(init: &Path, device: Device, precision: Precision, logger: &Logger) -> Result<SequenceClassifier> {
    let labels: Vec<String> = LABELS.iter().map(|s| s.to_string()).collect();
    let (mut model, notes) = SequenceClassifier::load(init, &labels, device)?;
    for note in notes {
        logger.println(&format!("note: {note}"));
    }
    model.set_precision(precision);
    Ok(model)
}

/// The training side of one `finetune` call: the examples, the optimizer settings with the
/// grid point's learning rate and batch size, and the schedule's length in steps.
struct Epochs<'a> {
    train: &'a [Example],
    o: &'a FinetuneOptimizer,
    lr: f64,
    batch_size: usize,
    max_len: usize,
    seed: u64,
    device: Device,
    total_steps: u64,
}

impl Epochs<'_> {
    /// The order of the training examples in `epoch`.
    fn order(&self, epoch: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.train.len()).collect();
        order.shuffle(&mut stream_rng(self.seed, salt::SENTIMENT_SHUFFLE, epoch as u64));
        order
    }

    /// One pass over `order` in batches, libtorch reseeded before each; `step` counts on across
    /// epochs. Returns the sum of the batches' losses.
    fn train_epoch(
        &self,
        model: &SequenceClassifier,
        optimizer: &mut AdamW,
        order: &[usize],
        step: &mut u64,
    ) -> Result<f64> {
        let mut loss_sum = 0.0;
        for chunk in order.chunks(self.batch_size) {
            seed_torch(self.seed, per_step(salt::SENTIMENT_TORCH, *step));
            loss_sum += self.train_batch(model, optimizer, chunk, *step)?;
            *step += 1;
        }
        Ok(loss_sum)
    }

    /// One optimizer step on the examples at `chunk` (cross-entropy, clipped gradients, the
    /// learning rate of `step`); returns the loss.
    fn train_batch(
        &self,
        model: &SequenceClassifier,
        optimizer: &mut AdamW,
        chunk: &[usize],
        step: u64,
    ) -> Result<f64> {
        let texts: Vec<&str> = chunk.iter().map(|&i| self.train[i].text.as_str()).collect();
        let targets = Tensor::from_slice(&chunk.iter().map(|&i| self.train[i].label as i64).collect::<Vec<_>>())
            .to_device(self.device);
        let batch = model.tokenizer.batch(&texts, None, self.max_len)?;
        optimizer.zero_grad();
        let logits =
            model.logits(&batch.input_ids.to_device(self.device), &batch.attention_mask.to_device(self.device), true);
        let loss = logits.log_softmax(-1, Kind::Float).nll_loss(&targets);
        loss.backward();
        let _ = optimizer.clip_grad_norm(self.o.grad_clip);
        optimizer.step(constant_or_linear(self.lr, self.o.warmup_steps, self.total_steps, step));
        Ok(loss.double_value(&[]))
    }
}

/// The epoch's training loss and validation macro-F1 as TensorBoard scalars and a progress line
/// (epochs counted from 1).
fn log_epoch(logger: &mut Logger, tag: &str, epoch: usize, train_loss: f64, valid: &Scores, started: Instant) {
    logger.scalar(&format!("{tag}/train_loss"), train_loss, epoch as u64 + 1);
    logger.scalar(&format!("{tag}/valid_macro_f1"), valid.macro_f1, epoch as u64 + 1);
    logger.progress(
        epoch as u64 + 1,
        &format!(
            "{tag}: loss {train_loss:.4}, valid macro-F1 {:.4} ({:.1}s)",
            valid.macro_f1,
            started.elapsed().as_secs_f64()
        ),
    );
}

/// Model selection on validation macro-F1: the best epoch so far with its weights, and the
/// number of epochs without improvement after which training stops.
struct EarlyStopping {
    patience: usize,
    best: Option<BestEpoch>,
}

/// An epoch's validation scores, its number (from 1) and the model's weights after it.
struct BestEpoch {
    scores: Scores,
    epoch: usize,
    weights: Snapshot,
}

impl EarlyStopping {
    /// Keeps the model's weights if epoch `epoch` (from 0) is the best so far; true when
    /// `patience` epochs have passed since the best one.
    fn stop_after(&mut self, epoch: usize, scores: Scores, model: &SequenceClassifier) -> bool {
        let improved = self.best.as_ref().is_none_or(|b| scores.macro_f1 > b.scores.macro_f1);
        if improved {
            self.best = Some(BestEpoch { scores, epoch: epoch + 1, weights: Snapshot::take(&model.vs) });
            false
        } else {
            epoch + 1 - self.best.as_ref().map_or(0, |b| b.epoch) >= self.patience
        }
    }
}

/// The grid (or the single setting) searched on validation macro-F1.
pub fn finetune_selected(
    recipe: &SentimentRecipe,
    init: &Path,
    train: &[Example],
    valid: &[Example],
    device: Device,
    logger: &mut Logger,
    tag: &str,
) -> Result<Finetuned> {
    let o = &recipe.optimizer;
    let grid: Vec<(f64, usize)> = match &recipe.grid {
        Some(g) => g.lr.iter().flat_map(|&lr| g.batch_size.iter().map(move |&b| (lr, b))).collect(),
        None => vec![(o.lr, o.batch_size)],
    };
    let mut best: Option<Finetuned> = None;
    for (lr, bs) in grid {
        let tag = if recipe.grid.is_some() { format!("{tag}/lr{lr:e}-bs{bs}") } else { tag.to_string() };
        let precision = recipe.compute_precision(device)?;
        let run =
            finetune(init, train, valid, o, lr, bs, recipe.data.max_len, recipe.seed, device, precision, logger, &tag)?;
        if best.as_ref().is_none_or(|b| run.best_valid.macro_f1 > b.best_valid.macro_f1) {
            best = Some(run);
        }
    }
    Ok(best.expect("the grid is not empty"))
}

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
    pub best_epoch: usize,
    /// The epochs run before stopping.
    pub epochs: usize,
    /// The kept model's validation macro-F1.
    pub valid_macro_f1: f64,
    /// Test scores per language.
    pub test: BTreeMap<String, Scores>,
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

fn concat(root: &Path, langs: &[String], split: &str) -> Result<Vec<Example>> {
    let mut out = Vec::new();
    for l in langs {
        out.extend(load_split(root, l, split)?);
    }
    Ok(out)
}

/// Runs the recipe's setting; models and results under `<output_dir>/<name>/`.
pub fn run(recipe: &SentimentRecipe, init: &Path, device: Device) -> Result<SentimentResults> {
    recipe.compute_precision(device)?;
    let root = &recipe.data.root;
    let langs = recipe.languages();
    // Check every language folder and file before training anything.
    let mut tests = BTreeMap::new();
    for l in &langs {
        load_split(root, l, "train")?;
        load_split(root, l, "valid")?;
        tests.insert(l.clone(), load_split(root, l, "test")?);
    }
    let out_dir = recipe.output_dir.join(&recipe.name);
    let _run_lock = crate::files::DirLock::acquire(&out_dir)?;
    let mut logger =
        Logger::with_unit(&recipe.tensorboard.join(&recipe.name), recipe.optimizer.max_epochs as u64, 0, "epoch")?;
    // (name of the training set, its languages, the languages it is tested on)
    let plans: Vec<(String, Vec<String>, Vec<String>)> = match recipe.data.setting {
        Setting::Monolingual => langs.iter().map(|l| (l.clone(), vec![l.clone()], vec![l.clone()])).collect(),
        Setting::Multilingual => vec![("all".into(), langs.clone(), langs.clone())],
        Setting::LeaveOneOut => langs
            .iter()
            .map(|l| (format!("all-but-{l}"), langs.iter().filter(|x| *x != l).cloned().collect(), vec![l.clone()]))
            .collect(),
        Setting::CrossLingual => langs.iter().map(|l| (l.clone(), vec![l.clone()], langs.clone())).collect(),
    };
    let mut runs = Vec::new();
    for (name, train_langs, test_langs) in plans {
        let train = concat(root, &train_langs, "train")?;
        let valid = concat(root, &train_langs, "valid")?;
        let tuned = finetune_selected(recipe, init, &train, &valid, device, &mut logger, &name)?;
        let mut test = BTreeMap::new();
        for l in &test_langs {
            let (scores, _) = score(&tuned.model, &tests[l], recipe.data.max_len)?;
            test.insert(l.clone(), scores);
        }
        let model_dir = out_dir.join(&name);
        crate::model::model_dir::save_model_dir(&model_dir, true, |d| tuned.model.save(d))?;
        let summary: Vec<String> = test.iter().map(|(l, s)| format!("{l} {:.4}", s.macro_f1)).collect();
        logger.println(&format!(
            "{name}: best epoch {} of {}, valid macro-F1 {:.4}; test macro-F1 {}",
            tuned.best_epoch,
            tuned.epochs,
            tuned.best_valid.macro_f1,
            summary.join(", ")
        ));
        runs.push(RunResult {
            trained_on: name,
            lr: tuned.lr,
            batch_size: tuned.batch_size,
            best_epoch: tuned.best_epoch,
            epochs: tuned.epochs,
            valid_macro_f1: tuned.best_valid.macro_f1,
            test,
        });
    }
    logger.finish();
    let results = SentimentResults { setting: recipe.data.setting, languages: langs, runs };
    std::fs::create_dir_all(&out_dir).with_path(&out_dir)?;
    write_json(&out_dir.join("results.json"), &results)?;
    write_atomic(&out_dir.join("results.md"), results.markdown().as_bytes())?;
    Ok(results)
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
        out.push_str("\nConfusion matrices (rows gold, columns predicted: negative, neutral, positive)\n");
        for r in &self.runs {
            for (l, s) in &r.test {
                out.push_str(&format!("\n{} → {l}: {:?}\n", r.trained_on, s.confusion));
            }
        }
        out
    }
}
