//! `indolm finetune summarize`: the recipe and one training loop for the three summarizers
//! (task `ext`: BertExt, binary cross-entropy on the oracle labels, one Adam; `abs`: BertAbs,
//! label-smoothed loss on the reference, one Adam for the encoder and one for the rest;
//! `extabs`: BertAbs started from a fine-tuned BertExt), each with PreSumm's Noam schedule,
//! dev ROUGE every `eval_every` steps keeping the best weights, then ROUGE on the test splits
//! beside Lead-N and Oracle, with the predictions written one summary a line. The models
//! themselves, and ROUGE of their summaries, are in `inference`.
use super::abs::{AbsConfig, BertAbs};
use super::data::{join, load_split, Article};
use super::encoded::{encode_split, EncodedSplit};
use super::ext::{label_tensor, BertExt, ExtConfig};
use super::inference::{evaluate, Summarizer};
use super::input::{batch_of, EncodedArticle};
use super::prepared::prepare_split;
use super::{baselines, markdown, Row};
use crate::error::{Error, Result};
use crate::files::{read_to_string, write_atomic, write_json};
use crate::logger::Logger;
use crate::model::model_dir::save_model_dir;
use crate::model::weights::Snapshot;
use crate::model::{LoadNote, Precision};
use crate::optim::{noam, AdamW};
use crate::recipe::{resolve_precision, PrecisionSetting};
use crate::seeds::{per_step, salt, seed_torch, stream_rng};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::{Device, Tensor};

/// Which summarizer a recipe trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// BertExt: scores the article's sentences, trained on the oracle labels.
    Ext,
    /// BertAbs: writes the summary, its encoder started from a BERT model.
    Abs,
    /// BertExtAbs: BertAbs whose encoder starts from a fine-tuned BertExt.
    Extabs,
}

/// A `finetune summarize` recipe (TOML).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeRecipe {
    /// The run's name: its folder under `output_dir` and under `tensorboard`.
    pub name: String,
    /// The seed every random draw of the run derives from.
    #[serde(default = "crate::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (best model, predictions, results) goes.
    #[serde(default = "crate::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// The model to start from (a BERT model; for `extabs`, a fine-tuned BertExt); `--init`
    /// overrides.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// The summarizer to train.
    pub task: Task,
    /// Where the TensorBoard logs go (in a folder named after the run).
    #[serde(default = "crate::recipe::default_tensorboard")]
    pub tensorboard: PathBuf,
    /// The Liputan6 folder and the splits to train, select and test on.
    pub data: SummarizeData,
    /// Schedules, batch size, steps and evaluation frequency.
    pub optimizer: SummarizeOptimizer,
    /// BertExt's settings (task `ext`).
    #[serde(default)]
    pub ext: ExtConfig,
    /// BertAbs's settings (tasks `abs` and `extabs`).
    #[serde(default)]
    pub abs: AbsConfig,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` (CUDA only) or `fp32`, as in pretraining:
    /// the matrix products of the encoder, the PreSumm layers and the generator.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// The file it was read from (for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// The `[data]` table of a summarization recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeData {
    /// The Liputan6 folder holding the split folders.
    pub root: PathBuf,
    /// The split folder trained on.
    #[serde(default = "d_train")]
    pub train_split: String,
    /// The split folder scored every `eval_every` steps to pick the best weights.
    #[serde(default = "d_dev")]
    pub dev_split: String,
    /// The split folders scored at the end, each with its own table and prediction files.
    #[serde(default = "d_test")]
    pub test_splits: Vec<String>,
}

fn d_train() -> String {
    "train".into()
}
fn d_dev() -> String {
    "dev".into()
}
fn d_test() -> Vec<String> {
    vec!["test".into()]
}

/// The `[optimizer]` table of a summarization recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeOptimizer {
    /// Noam: lr · min(step^-0.5, step · warmup^-1.5); for abs/extabs, the BERT encoder's.
    pub lr: f64,
    /// The warmup of `lr`'s Noam schedule, in steps.
    pub warmup_steps: u64,
    /// abs/extabs: the decoder's (and generator's) Noam peak factor and warmup.
    #[serde(default)]
    pub lr_dec: Option<f64>,
    /// abs/extabs: the warmup of `lr_dec`'s schedule, in steps.
    #[serde(default)]
    pub warmup_dec: Option<u64>,
    /// Dev articles scored at each evaluation (default: all; abstractive decoding is slow).
    #[serde(default)]
    pub eval_articles: Option<usize>,
    /// Training steps, one batch each.
    pub max_steps: u64,
    /// Articles per step.
    pub batch_size: usize,
    /// Dev ROUGE every this many steps (and after the last).
    pub eval_every: u64,
    /// The largest gradient norm of each optimizer's variables; 0 does not clip.
    #[serde(default)]
    pub grad_clip: f64,
}

impl SummarizeRecipe {
    /// Reads a recipe and checks what serde cannot: positive optimizer settings, and for
    /// abs/extabs the decoder's schedule and BertAbs's sizes.
    pub fn load(path: &Path) -> Result<Self> {
        let mut recipe: SummarizeRecipe = crate::recipe::parse_toml(path)?;
        recipe.path = path.to_path_buf();
        crate::recipe::check_name(path, "name", &recipe.name)?;
        let o = &recipe.optimizer;
        if o.lr <= 0.0 || o.max_steps == 0 || o.batch_size == 0 || o.eval_every == 0 || o.warmup_steps == 0 {
            return Err(Error::field(
                path,
                "optimizer",
                "lr, warmup_steps, max_steps, batch_size and eval_every must be positive",
            ));
        }
        if recipe.task != Task::Ext {
            match (o.lr_dec, o.warmup_dec) {
                (Some(lr), Some(w)) if lr > 0.0 && w > 0 => {}
                _ => return Err(Error::field(path, "optimizer.lr_dec", "task abs/extabs trains the decoder with its own Noam schedule: set lr_dec and warmup_dec (positive; the Liputan6 paper: 0.1 and 10000)")),
            }
            let a = &recipe.abs;
            if a.layers <= 0
                || a.heads <= 0
                || a.ff <= 0
                || a.beam == 0
                || a.max_length == 0
                || a.max_target_tokens < 2
                || !(0.0..1.0).contains(&a.label_smoothing)
            {
                return Err(Error::field(path, "abs", "layers, heads, ff, beam and max_length must be positive, max_target_tokens at least 2, label_smoothing in [0, 1)"));
            }
        }
        Ok(recipe)
    }
}

/// What `finetune summarize` measured; written as `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SummarizeResults {
    /// The system's name in the tables: BertExt, BertAbs or BertExtAbs.
    pub system: String,
    /// The step with the best dev ROUGE, whose weights were kept (0: none beat the start).
    pub best_step: u64,
    /// Dev ROUGE of the model before training.
    pub dev_before: Row,
    /// Dev ROUGE at `best_step`.
    pub dev_best: Row,
    /// Per test split: Lead-1, Lead-2, Lead-3, Oracle and the system.
    pub test: Vec<(String, Vec<Row>)>,
}

/// Trains the recipe's summarizer from `init` and tests the best weights. Under
/// `<output_dir>/<name>/` it writes the model (`best/`), each test split's summaries and
/// references one a line (`<split>.candidate`, `<split>.gold`), `results.json` and `results.md`.
pub fn run(recipe: &SummarizeRecipe, init: &Path, device: Device) -> Result<SummarizeResults> {
    let precision = resolve_precision(recipe.precision, device, &recipe.path)?;
    let out_dir = recipe.output_dir.join(&recipe.name);
    let _run_lock = crate::files::DirLock::acquire(&out_dir)?;
    let mut trainer = Trainer::start(recipe, init, device, precision)?;
    let splits = Splits::load(recipe, &trainer.model, &trainer.logger)?;
    let dev_before = trainer.evaluate_dev_before(&splits.dev)?;
    let mut best = Best::new(dev_before.clone(), &trainer.model);
    let o = &recipe.optimizer;
    let mut order = ArticleOrder::new(splits.train.len(), o.batch_size, recipe.seed);
    let (mut trained, mut train_seconds) = (0usize, 0.0);
    for step in 1..=o.max_steps {
        let picked = order.batch(step);
        seed_torch(recipe.seed, per_step(salt::SUMMARIZATION_TORCH, step));
        let batch = splits.training_batch(&picked);
        let started = std::time::Instant::now();
        let loss = trainer.train_step(step, &batch);
        train_seconds += started.elapsed().as_secs_f64();
        trained += picked.len();
        if step % o.eval_every == 0 || step == o.max_steps {
            let row = trainer.evaluate_dev(step, &loss, &splits.dev)?;
            best.offer(step, row, &trainer.model);
        }
    }
    trainer.logger.println(&format!(
        "trained on {trained} articles in {train_seconds:.1}s of optimizer steps ({:.2} articles/s)",
        trained as f64 / train_seconds.max(1e-9)
    ));
    best.weights.restore(trainer.model.vs());
    save_model_dir(&out_dir.join("best"), true, |dir| trainer.model.save(dir))?;
    let tested = evaluate_tests(&trainer.model, trainer.system, best.step, &splits.tests, &out_dir)?;
    trainer.logger.finish();
    let results = SummarizeResults {
        system: trainer.system.into(),
        best_step: best.step,
        dev_before,
        dev_best: best.row,
        test: tested.rows,
    };
    write_json(&out_dir.join("results.json"), &results)?;
    write_atomic(&out_dir.join("results.md"), tested.markdown.as_bytes())?;
    Ok(results)
}

/// The articles a run reads: the training split as the model's token ids with each article's
/// oracle labels (BertExt's targets), the dev articles scored at each evaluation, the test splits.
struct Splits {
    train: EncodedSplit,
    oracles: Vec<Vec<usize>>,
    dev: Vec<Article>,
    tests: Vec<(String, Vec<Article>)>,
}

impl Splits {
    /// Reads the splits; the training split is read and labelled (on every core, once: it is
    /// cached beside the data), then tokenized for `model` (likewise once), and its text dropped.
    fn load(recipe: &SummarizeRecipe, model: &Summarizer, logger: &Logger) -> Result<Self> {
        let d = &recipe.data;
        let note = |n: &str| logger.println(n);
        let prepared = prepare_split(&d.root, &d.train_split, &note)?;
        let train = encode_split(&d.root, &d.train_split, &prepared, model.tokenizer(), model.max_positions(), &note)?;
        logger.println(&format!(
            "{}: {} articles ({}, {:.1}s), {} tokens ({}, {:.1}s)",
            d.train_split,
            train.len(),
            if prepared.from_cache { "read from the cache" } else { "read and oracle-labelled, then cached" },
            prepared.seconds,
            train.tokens(),
            if train.from_cache { "read from the cache" } else { "tokenized, then cached" },
            train.seconds,
        ));
        let oracles = prepared.oracles;
        let mut dev = load_split(&d.root, &d.dev_split)?;
        let scored = recipe.optimizer.eval_articles.unwrap_or(usize::MAX).min(dev.len()).max(1);
        dev.truncate(scored);
        let tests: Vec<(String, Vec<Article>)> =
            d.test_splits.iter().map(|s| Ok((s.clone(), load_split(&d.root, s)?))).collect::<Result<_>>()?;
        Ok(Splits { train, oracles, dev, tests })
    }

    /// The training articles at `picked`: their token ids, whole targets and oracle labels.
    fn training_batch(&self, picked: &[usize]) -> TrainingBatch {
        TrainingBatch {
            articles: picked.iter().map(|&i| self.train.article(i)).collect(),
            targets: picked.iter().map(|&i| self.train.target(i)).collect(),
            oracles: picked.iter().map(|&i| self.oracles[i].clone()).collect(),
        }
    }
}

/// One step's articles as token ids: the encoder's inputs, the whole targets (BertAbs) and the
/// oracle labels (BertExt).
struct TrainingBatch {
    articles: Vec<EncodedArticle>,
    targets: Vec<Vec<i64>>,
    oracles: Vec<Vec<usize>>,
}

/// Which training articles each step takes: consecutive slices of a shuffled order, shuffled
/// anew (with the stream of the step that needs it) when the next batch would run past its end.
struct ArticleOrder {
    order: Vec<usize>,
    cursor: usize,
    articles: usize,
    batch_size: usize,
    seed: u64,
}

impl ArticleOrder {
    fn new(articles: usize, batch_size: usize, seed: u64) -> Self {
        ArticleOrder { order: Vec::new(), cursor: 0, articles, batch_size, seed }
    }

    /// The indices of the articles of `step`'s batch.
    fn batch(&mut self, step: u64) -> Vec<usize> {
        if self.cursor + self.batch_size > self.order.len() {
            self.order = (0..self.articles).collect();
            self.order.shuffle(&mut stream_rng(self.seed, salt::SUMMARIZATION_SHUFFLE, step));
            self.cursor = 0;
        }
        let picked = self.order[self.cursor..(self.cursor + self.batch_size).min(self.order.len())].to_vec();
        self.cursor += self.batch_size;
        picked
    }
}

/// The model in training, its optimizers, and the run's log (tags under the system's name).
struct Trainer<'r> {
    recipe: &'r SummarizeRecipe,
    system: &'static str,
    model: Summarizer,
    optimizers: Vec<NoamAdam>,
    logger: Logger,
}

impl<'r> Trainer<'r> {
    /// Reseeds libtorch (the new layers are drawn from it), builds the model from `init`, opens
    /// the log with the loading notes, and makes the optimizers.
    fn start(recipe: &'r SummarizeRecipe, init: &Path, device: Device, precision: Precision) -> Result<Self> {
        seed_torch(recipe.seed, salt::SUMMARIZATION_INIT);
        let (mut model, notes) = start_model(recipe, init, device)?;
        model.set_precision(precision);
        let logger = Logger::new(&recipe.tensorboard.join(&recipe.name), recipe.optimizer.max_steps, 0)?;
        for n in notes {
            logger.println(&format!("note: {n}"));
        }
        let optimizers = optimizers(recipe, &model);
        Ok(Trainer { recipe, system: system_name(recipe.task), model, optimizers, logger })
    }

    /// One optimizer step on `batch`; logs the learning rates and the loss every 10 steps.
    fn train_step(&mut self, step: u64, batch: &TrainingBatch) -> Tensor {
        for o in self.optimizers.iter_mut() {
            o.adam.zero_grad();
        }
        let loss = self.model.loss(batch);
        loss.backward();
        let grad_clip = self.recipe.optimizer.grad_clip;
        for o in self.optimizers.iter_mut() {
            if grad_clip > 0.0 {
                let _ = o.adam.clip_grad_norm(grad_clip);
            }
            let lr = noam(o.lr, o.warmup, step);
            o.adam.step(lr);
            if step.is_multiple_of(10) {
                self.logger.scalar(&tag(self.system, o.tag), lr, step);
            }
        }
        if step.is_multiple_of(10) {
            self.logger.scalar(&tag(self.system, "train_loss"), loss.double_value(&[]), step);
        }
        loss
    }

    /// Dev ROUGE of the starting model, printed as step 0.
    fn evaluate_dev_before(&self, dev: &[Article]) -> Result<Row> {
        let (row, _) = evaluate(&self.model, self.system, dev)?;
        self.logger.println(&format!(
            "step 0: dev ROUGE-1/2/L {:.2}/{:.2}/{:.2} on {} articles",
            row.rouge1,
            row.rouge2,
            row.rouge_l,
            dev.len()
        ));
        Ok(row)
    }

    /// Dev ROUGE after `step`, logged with the step's training loss.
    fn evaluate_dev(&mut self, step: u64, loss: &Tensor, dev: &[Article]) -> Result<Row> {
        let (row, _) = evaluate(&self.model, self.system, dev)?;
        self.logger.scalar(&tag(self.system, "dev_rouge1"), row.rouge1, step);
        self.logger.scalar(&tag(self.system, "dev_rouge2"), row.rouge2, step);
        self.logger.scalar(&tag(self.system, "dev_rougeL"), row.rouge_l, step);
        self.logger.progress(
            step,
            &format!(
                "loss {:.4}, dev ROUGE-1/2/L {:.2}/{:.2}/{:.2}",
                loss.double_value(&[]),
                row.rouge1,
                row.rouge2,
                row.rouge_l
            ),
        );
        Ok(row)
    }
}

/// The system's name in the tables and (lowercased) in the log tags.
fn system_name(task: Task) -> &'static str {
    match task {
        Task::Ext => "BertExt",
        Task::Abs => "BertAbs",
        Task::Extabs => "BertExtAbs",
    }
}

/// A TensorBoard tag of the run, e.g. `bertext/train_loss`.
fn tag(system: &str, name: &str) -> String {
    format!("{}/{name}", system.to_lowercase())
}

/// The best dev result so far: its mean of ROUGE-1, -2 and -L, its step, row and weights.
struct Best {
    score: f64,
    step: u64,
    row: Row,
    weights: Snapshot,
}

impl Best {
    /// The starting model, as step 0.
    fn new(row: Row, model: &Summarizer) -> Self {
        Best { score: mean_rouge(&row), step: 0, row, weights: Snapshot::take(model.vs()) }
    }

    /// Keeps `row` (and the model's weights) if it beats the best so far.
    fn offer(&mut self, step: u64, row: Row, model: &Summarizer) {
        if mean_rouge(&row) > self.score {
            *self = Best { score: mean_rouge(&row), step, row, weights: Snapshot::take(model.vs()) };
        }
    }
}

fn mean_rouge(r: &Row) -> f64 {
    (r.rouge1 + r.rouge2 + r.rouge_l) / 3.0
}

/// The test splits' scores: the rows of each split, and `results.md`'s text.
struct Tested {
    rows: Vec<(String, Vec<Row>)>,
    markdown: String,
}

/// Scores each test split (Lead-N, Oracle and the model) and writes the model's summaries and
/// the references.
fn evaluate_tests(
    model: &Summarizer,
    system: &str,
    best_step: u64,
    tests: &[(String, Vec<Article>)],
    out_dir: &Path,
) -> Result<Tested> {
    let mut test = Vec::new();
    let mut md = format!("{system}, best dev step {best_step}\n\n");
    for (split, articles) in tests {
        let mut rows = baselines(articles);
        let (row, predicted) = evaluate(model, system, articles)?;
        rows.push(row);
        write_predictions(out_dir, split, &predicted, articles)?;
        md.push_str(&markdown(split, &rows));
        md.push('\n');
        test.push((split.clone(), rows));
    }
    Ok(Tested { rows: test, markdown: md })
}

/// `<split>.candidate` (the model's summaries) and `<split>.gold` (the references), one a line;
/// a `/` or `\` in the split's name becomes `_`.
fn write_predictions(out_dir: &Path, split: &str, predicted: &[String], articles: &[Article]) -> Result<()> {
    let file_stem = split.replace(['/', '\\'], "_");
    write_lines(&out_dir.join(format!("{file_stem}.candidate")), predicted)?;
    write_lines(
        &out_dir.join(format!("{file_stem}.gold")),
        &articles.iter().map(|a| join(&a.summary)).collect::<Vec<_>>(),
    )
}

fn write_lines(path: &Path, lines: &[String]) -> Result<()> {
    let text: String = lines.iter().map(|l| format!("{}\n", l.replace('\n', " "))).collect();
    write_atomic(path, text.as_bytes())
}

impl Summarizer {
    /// Training loss of a batch (with dropout).
    fn loss(&self, batch: &TrainingBatch) -> Tensor {
        let encoded: Vec<&EncodedArticle> = batch.articles.iter().collect();
        let inputs = batch_of(self.tokenizer().special.pad, &encoded, self.vs().device());
        match self {
            Summarizer::Ext(m) => m.loss(&inputs, &label_tensor(&batch.oracles, &inputs), true),
            Summarizer::Abs(m) => {
                let whole: Vec<&[i64]> = batch.targets.iter().map(Vec::as_slice).collect();
                m.loss(&inputs, &m.targets(&whole), true).0
            }
        }
    }
}

/// Builds the model the task trains from `init`, with the notes from loading it.
fn start_model(recipe: &SummarizeRecipe, init: &Path, device: Device) -> Result<(Summarizer, Vec<LoadNote>)> {
    if recipe.task == Task::Extabs {
        let config_path = init.join("config.json");
        let config: serde_json::Value =
            serde_json::from_str(&read_to_string(&config_path)?).map_err(|e| Error::json(&config_path, &e))?;
        if config["architectures"][0] != "BertExt" {
            return Err(Error::field(
                &config_path,
                "architectures",
                format!(
                    "task extabs starts from a fine-tuned BertExt (found {}); train one with task = \"ext\" first",
                    config["architectures"]
                ),
            ));
        }
    }
    Ok(match recipe.task {
        Task::Ext => {
            let (m, notes) = BertExt::load(init, recipe.ext.clone(), device)?;
            (Summarizer::Ext(m), notes)
        }
        Task::Abs | Task::Extabs => {
            let (m, notes) = BertAbs::load(init, recipe.abs.clone(), device)?;
            (Summarizer::Abs(m), notes)
        }
    })
}

/// One Adam optimizer with its Noam schedule (peak factor, warmup) and the tag its learning
/// rate is logged under.
struct NoamAdam {
    adam: AdamW,
    lr: f64,
    warmup: u64,
    tag: &'static str,
}

/// Adam optimizers with their Noam settings: one over everything (ext), or the BERT encoder
/// and the rest (abs/extabs), as PreSumm's `sep_optim`.
fn optimizers(recipe: &SummarizeRecipe, model: &Summarizer) -> Vec<NoamAdam> {
    let vars = model.vs().variables();
    let o = &recipe.optimizer;
    let adam = |vars: BTreeMap<String, Tensor>| AdamW::new(vars, [0.9, 0.999], 1e-9, 0.0);
    match recipe.task {
        Task::Ext => {
            vec![NoamAdam { adam: adam(vars.into_iter().collect()), lr: o.lr, warmup: o.warmup_steps, tag: "lr" }]
        }
        Task::Abs | Task::Extabs => {
            let (bert, rest): (BTreeMap<_, _>, BTreeMap<_, _>) =
                vars.into_iter().partition(|(n, _)| n.starts_with("bert."));
            vec![
                NoamAdam { adam: adam(bert), lr: o.lr, warmup: o.warmup_steps, tag: "lr_bert" },
                NoamAdam {
                    adam: adam(rest),
                    lr: o.lr_dec.expect("checked when loading"),
                    warmup: o.warmup_dec.expect("checked when loading"),
                    tag: "lr_dec",
                },
            ]
        }
    }
}
