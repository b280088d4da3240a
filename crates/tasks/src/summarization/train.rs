//! `indolm finetune summarize` on the training engine: the three summarizers as one task (task
//! `ext`: BertExt, binary cross-entropy on the oracle labels, one optimizer; `abs`: BertAbs,
//! label-smoothed loss on the reference, one optimizer for the encoder and one for the rest, as
//! PreSumm's `sep_optim`; `extabs`: BertAbs started from a fine-tuned BertExt), trained with the
//! recipe's schedules (PreSumm's Noam), dev ROUGE before training, every `[eval] every` updates
//! and at the last on every dev split a test split selects on (the best weights on the primary
//! dev split kept in `<run>/best/` by the engine, which stops early on it alone; those on each
//! other dev split in `<run>/best-<split>/`, kept here), then ROUGE on each test split with the
//! weights best on its dev split, beside Lead-N and Oracle (official ROUGE-1.5.5 with the
//! paper's options and its 95% intervals; BERTScore too with `[eval] bertscore_model`), with
//! the predictions written one summary a line. The models themselves, and ROUGE of their
//! summaries, are in `inference`.
use super::abs::BertAbs;
use super::data::{load_split, Article};
use super::encoded::{encode_split, EncodedSplit};
use super::ext::{label_tensor, BertExt};
use super::inference::{evaluate, Summarizer};
use super::input::{staged_batch_of, targets_of, ArticleBatch, EncodedArticle};
use super::prepared::{prepare_split, PreparedSplit};
use super::recipe::{best_dir_name, split_stem};
pub use super::recipe::{SummarizeRecipe, Task};
use super::salt;
use super::{baselines_scored, markdown, Row, RowBertScore};
use indolm_core::files::{read_to_string, remove_stale_temps, write_atomic, write_json, Staging};
use indolm_core::logger::Logger;
use indolm_core::run::checkpoints::BEST_FILE;
use indolm_core::run::{BestState, Run, RunLayout, TrainerState};
use indolm_core::seeds::stream_rng;
use indolm_eval::bertscore::{Scorer as BertScorer, Settings as BertScoreSettings};
use indolm_torch::device::seed_torch;
use indolm_torch::device::upload;
use indolm_torch::distributed::ProcessGroup;
use indolm_torch::error::{Error, IoContext, Result};
use indolm_torch::model::model_dir::copy_into;
use indolm_torch::model::{weights, LoadNote, Precision};
use indolm_train::data_parallel::DataParallel;
use indolm_train::engine::{Engine, EngineSettings, TaskRun, TrainOptions};
use indolm_train::task::{
    self as engine_task, BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task as _,
};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tch::{Device, Tensor};

/// What the checkpoints are selected by: the mean of dev ROUGE-1, -2 and -L F1 (×100).
const SELECTION_METRIC: &str = "dev ROUGE (mean of 1/2/L)";

/// The key of the task's state holding the evaluations and bests of the dev splits other than
/// the primary one.
const DEV_SPLITS_STATE: &str = "dev_splits";

/// What `finetune summarize` measured; written as `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SummarizeResults {
    /// The system's name in the tables: BertExt, BertAbs or BertExtAbs.
    pub system: String,
    /// The step with the best ROUGE on the primary dev split (`[data] dev_split`), whose weights
    /// are in `best/` (0: none beat the start).
    pub best_step: u64,
    /// ROUGE of the model before training, on the primary dev split.
    pub dev_before: Row,
    /// ROUGE at `best_step`, on the primary dev split.
    pub dev_best: Row,
    /// Per test split: Lead-1, Lead-2, Lead-3, Oracle and the system.
    pub test: Vec<(String, Vec<Row>)>,
    /// Per test split, in the same order: the dev split that selected the weights it was scored
    /// with, their step and their dev score.
    pub selection: Vec<Selection>,
    /// Every dev evaluation of the run, per dev split (the primary one first): the run's dev log.
    pub dev: Vec<DevLog>,
    /// How BERTScore was computed, when `[eval] bertscore_model` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bertscore: Option<BertScoreSettings>,
}

/// Which weights a test split was scored with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The test split.
    pub test_split: String,
    /// The dev split whose best weights they are.
    pub dev_split: String,
    /// The run's folder holding them (`best`, `best-xtreme_dev`).
    pub weights: String,
    /// The step they are of.
    pub step: u64,
    /// What selected them (the mean of dev ROUGE-1, -2 and -L F1).
    pub metric: String,
    /// Their score on the dev split.
    pub dev_score: f64,
}

/// The evaluations of one dev split, in step order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevLog {
    /// The dev split.
    pub split: String,
    /// Its articles scored at each evaluation (`[eval] articles`, or all).
    pub articles: usize,
    /// Each evaluation.
    pub evaluations: Vec<DevEvaluation>,
}

/// One evaluation of a dev split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevEvaluation {
    /// The step evaluated (0: before training).
    pub step: u64,
    /// The selection score ([`Selection::metric`]).
    pub score: f64,
    /// ROUGE-1/2/L with their intervals.
    pub row: Row,
}

/// Trains the recipe's summarizer from `init` (every rank of a data-parallel launch calls this)
/// and tests the best weights of each test split's dev split. Under `<output_dir>/<name>/` it
/// writes checkpoints, the best model on the primary dev split (`best/`) and on each other dev
/// split a test split selects on (`best-<split>/`), each test split's summaries and references
/// one a line (`<split>.candidate`, `<split>.gold`), `results.json` and `results.md`. `None`
/// when a stop signal (or `--stop-after`) ended the training first: run it again with
/// `--resume auto`.
pub fn run(
    recipe: &SummarizeRecipe,
    init: &Path,
    opts: &TrainOptions,
    group: Option<ProcessGroup>,
) -> Result<Option<SummarizeResults>> {
    let precision = recipe.compute_precision(opts.device)?;
    // The dev splits and the model to start from are checked before the run's folder is touched.
    recipe.check_dev_folders()?;
    seed_torch(recipe.seed, salt::SUMMARIZATION_INIT);
    let (mut model, notes) = start_model(recipe, init, opts.device)?;
    model.set_precision(precision);
    let mut parallel = group.map(DataParallel::new).transpose()?;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    if leader {
        // The BERTScore model too (loaded on the CPU and let go: it scores after training).
        recipe.bertscore_scorer(Device::Cpu)?;
    }
    let options = indolm_core::run::RunOptions {
        inputs: vec![init.to_path_buf()],
        ..opts.run_options(leader, &recipe.checkpoint, recipe.tensorboard_dir(), recipe.max_steps())
    };
    let (run, resume) = Run::open(RunLayout::new(recipe.run_dir()), &options)?;
    if leader && resume.is_none() {
        for n in notes {
            run.logger.println(&format!("note: {n}"));
        }
    }
    let splits = match Splits::load(recipe, &model, &run.logger, parallel.as_mut()) {
        Ok(splits) => splits,
        Err(e) => {
            run.abandon(); // refused before training: nothing of this run is left behind
            return Err(e);
        }
    };
    let system = system_name(recipe.task);
    let tests = splits.tests;
    let task = SummarizationTask {
        model,
        precision,
        device: opts.device,
        system,
        train: Arc::new(splits.train),
        oracles: Arc::new(splits.oracles),
        dev: splits.dev,
        dev_rows: Vec::new(),
        selecting: splits.selecting,
        recipe: recipe.clone(),
    };
    // The model it starts from, by content: resuming from another base model is another run.
    let fingerprint = recipe.fingerprint(&indolm_torch::model::model_dir::content_sha256(init)?);
    let run_spec = TaskRun {
        torch_salt: salt::SUMMARIZATION_TORCH,
        max_steps: recipe.max_steps(),
        patience: recipe.eval.patience,
        fingerprint,
    };
    let settings = EngineSettings::for_recipe(&recipe.shared(), run_spec);
    let finished = Engine::new(task, settings, opts, run, resume, parallel)?.run()?;
    let (summary, mut task) = (finished.summary, finished.task);
    if !summary.complete || !leader {
        return Ok(None);
    }
    let out_dir = recipe.run_dir();
    let layout = RunLayout::new(&out_dir);
    let best = summary
        .best
        .ok_or_else(|| Error::invalid(layout.best_dir(), "the run kept no best weights on its dev split"))?;
    let selections = select_weights(&task, &best, &out_dir)?;
    let scorer = recipe.bertscore_scorer(opts.device)?;
    if let Some(scorer) = &scorer {
        for note in scorer.notes() {
            indolm_core::outln!("note: BERTScore: {note}");
        }
    }
    let tested = evaluate_tests(&mut task, &tests, &selections, scorer.as_ref(), &out_dir)?;
    let row_at = |step: u64| task.dev_rows.iter().find(|(s, _)| *s == step).map(|(_, r)| r.clone());
    let results = SummarizeResults {
        system: system.into(),
        best_step: best.step,
        dev_before: row_at(0).unwrap_or_default(),
        dev_best: row_at(best.step).unwrap_or_default(),
        test: tested.rows,
        selection: selections,
        dev: task.dev_log(),
        bertscore: scorer.map(|s| s.settings().clone()),
    };
    write_json(&out_dir.join(crate::RESULTS_JSON), &results)?;
    write_atomic(&out_dir.join(crate::RESULTS_MD), tested.markdown.as_bytes())?;
    Ok(Some(results))
}

/// Which weights each test split is scored with: the best on its dev split, as the folder
/// holding them records it (`best.json`). Where that is not the best the run's state records
/// (a run resumed from before a best it then did not reproduce), the folder's weights are what
/// is tested, and a note says so.
fn select_weights(task: &SummarizationTask, primary: &BestState, run_dir: &Path) -> Result<Vec<Selection>> {
    let data = &task.recipe.data;
    let mut out = Vec::new();
    for (test, dev) in data.selection() {
        let recorded = match task.selecting.iter().find(|s| s.name == dev) {
            Some(split) => split.state.best.clone().ok_or_else(|| {
                let why = "resumed with --force from a run that did not score it?";
                let message = format!("no evaluation of `{dev}` in the run's state ({why}): `{test}` has no weights");
                Error::invalid(run_dir, message)
            })?,
            None => primary.clone(),
        };
        let weights = best_dir_name(&data.dev_split, dev);
        let folder = run_dir.join(&weights);
        let file = folder.join(BEST_FILE);
        let kept: BestState = serde_json::from_str(&read_to_string(&file)?).map_err(|e| Error::json(&file, &e))?;
        if kept.step != recorded.step {
            let (held, state) = (kept.step, recorded.step);
            indolm_core::outln!(
                "note: {} holds the weights of step {held}, not of step {state}, the best on {dev} in the run's state: {test} is scored with those of step {held}",
                folder.display()
            );
        }
        out.push(Selection {
            test_split: test.into(),
            dev_split: dev.into(),
            weights,
            step: kept.step,
            metric: kept.metric,
            dev_score: kept.score,
        });
    }
    Ok(out)
}

/// The articles a run reads: the training split as the model's token ids with each article's
/// oracle labels (BertExt's targets), the dev articles scored at each evaluation (the primary
/// dev split's, and each other dev split's), the test splits.
struct Splits {
    train: EncodedSplit,
    oracles: Vec<Vec<usize>>,
    dev: Vec<Article>,
    selecting: Vec<SelectingSplit>,
    tests: Vec<(String, Vec<Article>)>,
}

impl Splits {
    /// Reads the splits; the training split is read and labelled (on every core, once: it is
    /// cached beside the data), then tokenized for `model` (likewise once), and its text dropped.
    /// Under several ranks rank 0 does that while the others wait for it in the store; they then
    /// read the caches, or, where the data folder could not hold them, label and tokenize the
    /// split themselves, each on its share of the node's cores ([`preparation_threads`]).
    fn load(
        recipe: &SummarizeRecipe,
        model: &Summarizer,
        logger: &Logger,
        parallel: Option<&mut DataParallel>,
    ) -> Result<Self> {
        let d = &recipe.data;
        let note = |n: &str| logger.println(n);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let prepare = |threads: usize| {
            indolm_torch::data::parallel::with_thread_limit(threads, || -> Result<(PreparedSplit, EncodedSplit)> {
                let prepared = prepare_split(&d.root, &d.train_split, &note)?;
                let (tokenizer, positions) = (model.tokenizer(), model.max_positions());
                let train = encode_split(&d.root, &d.train_split, &prepared, tokenizer, positions, &note)?;
                Ok((prepared, train))
            })
        };
        let what = "rank 0's labelling and tokenizing of the training split";
        let (prepared, train) = match parallel {
            Some(p) if p.rank() == 0 => {
                let done = prepare(preparation_threads(cores, 1));
                p.wait_for_rank0(what)?;
                done?
            }
            Some(p) => {
                p.wait_for_rank0(what)?;
                let local = indolm_torch::distributed::Launch::from_env()?.map_or(1, |l| l.local_world_size);
                prepare(preparation_threads(cores, local))?
            }
            None => prepare(cores)?,
        };
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
        // The first `[eval] articles` of each dev split.
        let dev_articles = |split: &str| -> Result<Vec<Article>> {
            let mut dev = load_split(&d.root, split)?;
            let scored = recipe.eval.articles.unwrap_or(usize::MAX).min(dev.len()).max(1);
            dev.truncate(scored);
            Ok(dev)
        };
        let dev = dev_articles(&d.dev_split)?;
        let selecting: Vec<SelectingSplit> = d.dev_splits()[1..]
            .iter()
            .map(|&name| {
                let articles = dev_articles(name)?;
                Ok(SelectingSplit { name: name.into(), articles, state: SplitState::default() })
            })
            .collect::<Result<_>>()?;
        let tests: Vec<(String, Vec<Article>)> =
            d.test_splits.iter().map(|s| Ok((s.clone(), load_split(&d.root, s)?))).collect::<Result<_>>()?;
        Ok(Splits { train, oracles, dev, selecting, tests })
    }
}

/// The threads one rank labels and tokenizes a split with: the node's `cores` shared by the
/// `preparing` ranks of the node that do it at once (rank 0 alone while the others wait: all of
/// them; every rank of a node whose data folder cannot hold the caches: its share), at least one.
fn preparation_threads(cores: usize, preparing: usize) -> usize {
    (cores / preparing.max(1)).max(1)
}

/// A dev split other than the primary one that a test split selects on: its articles, scored at
/// every evaluation, and what the run found on it.
struct SelectingSplit {
    /// The split folder.
    name: String,
    /// Its articles scored at each evaluation.
    articles: Vec<Article>,
    /// Its evaluations and its best so far (kept in checkpoints).
    state: SplitState,
}

/// What a checkpoint keeps of a dev split other than the primary one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct SplitState {
    /// ROUGE at every evaluation so far.
    rows: Vec<(u64, Row)>,
    /// The best evaluation so far, whose weights are in the split's `best-<split>/`.
    best: Option<BestState>,
}

/// Where the article order stands: micro-batches drawn, the draw that shuffled the order in
/// use, and the articles of it already drawn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ArticleCursor {
    /// Micro-batches drawn.
    pub draws: u64,
    /// The draw (from 1) whose stream shuffled the order in use; none before the first.
    pub shuffled_at: Option<u64>,
    /// Articles of that order drawn so far.
    pub position: usize,
}

/// One micro-batch: this rank's articles as encoder inputs (on the host), with BertExt's
/// oracle labels or BertAbs's targets.
pub(crate) struct SummaryBatch {
    inputs: ArticleBatch,
    /// Ext: labels [articles, sentences]; abs: targets [articles, tokens].
    targets: Tensor,
}

/// What a batch's targets are.
#[derive(Clone, Copy)]
enum Targets {
    /// BertExt's 0/1 labels of the oracle sentences.
    Oracle,
    /// BertAbs's targets cut to `max_tokens`.
    Summary { max_tokens: usize, eos: i64 },
}

/// The training articles in batches of a seeded order, drawn on the loader's thread.
pub(crate) struct ArticleSource {
    train: Arc<EncodedSplit>,
    oracles: Arc<Vec<Vec<usize>>>,
    targets: Targets,
    batch_size: usize,
    seed: u64,
    slice: Slice,
    device: Device,
    pad: i64,
    order: Option<(u64, Vec<usize>)>,
}

impl BatchSource for ArticleSource {
    type Batch = SummaryBatch;
    type Cursor = ArticleCursor;

    /// The next `batch_size` articles: consecutive slices of a shuffled order, shuffled anew
    /// (with the stream of the draw that needs it) when the next batch would run past its end.
    fn next(&mut self, cursor: &mut ArticleCursor) -> Drawn<SummaryBatch> {
        let n = self.train.len();
        cursor.draws += 1;
        if cursor.shuffled_at.is_none() || cursor.position + self.batch_size > n {
            cursor.shuffled_at = Some(cursor.draws);
            cursor.position = 0;
        }
        let shuffle = cursor.shuffled_at.expect("set above");
        if self.order.as_ref().is_none_or(|(s, _)| *s != shuffle) {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut stream_rng(self.seed, salt::SUMMARIZATION_SHUFFLE, shuffle));
            self.order = Some((shuffle, order));
        }
        let order = &self.order.as_ref().expect("set above").1;
        let chunk: Vec<usize> = order[cursor.position..(cursor.position + self.batch_size).min(n)].to_vec();
        cursor.position += self.batch_size;
        let rows = self.slice.rows(chunk.len());
        let has_rows = !rows.is_empty();
        // A rank with no article of this batch trains on the first, its loss weighted by 0.
        let mine: Vec<usize> = if has_rows { chunk[rows].to_vec() } else { chunk[..1].to_vec() };
        let units_of = |picked: &[usize]| -> usize {
            match self.targets {
                Targets::Oracle => picked.iter().map(|&i| self.train.article(i).sentences()).sum(),
                Targets::Summary { max_tokens, .. } => {
                    picked.iter().map(|&i| self.train.target(i).len().min(max_tokens.max(2)) - 1).sum()
                }
            }
        };
        let global_units = units_of(&chunk);
        let units = if has_rows { units_of(&mine) } else { 0 };
        let articles: Vec<EncodedArticle> = mine.iter().map(|&i| self.train.article(i)).collect();
        let refs: Vec<&EncodedArticle> = articles.iter().collect();
        let inputs = staged_batch_of(self.pad, &refs, self.device);
        let targets = match self.targets {
            Targets::Oracle => {
                let oracles: Vec<Vec<usize>> = mine.iter().map(|&i| self.oracles[i].clone()).collect();
                label_tensor(&oracles, &inputs)
            }
            Targets::Summary { max_tokens, eos } => {
                let whole: Vec<Vec<i64>> = mine.iter().map(|&i| self.train.target(i)).collect();
                let refs: Vec<&[i64]> = whole.iter().map(Vec::as_slice).collect();
                targets_of(&refs, max_tokens, eos, self.pad, Device::Cpu)
            }
        };
        Drawn { batch: SummaryBatch { inputs, targets }, units, global_units, rows: chunk.len() }
    }
}

/// Fine-tuning a summarizer, selected on dev ROUGE (the engine keeps the best on the primary dev
/// split; the task, those on the others).
pub(crate) struct SummarizationTask {
    /// The summarizer in training.
    pub model: Summarizer,
    precision: Precision,
    device: Device,
    system: &'static str,
    train: Arc<EncodedSplit>,
    oracles: Arc<Vec<Vec<usize>>>,
    dev: Vec<Article>,
    /// Dev ROUGE at every evaluation so far (kept in checkpoints).
    dev_rows: Vec<(u64, Row)>,
    /// The other dev splits a test split selects on, with their evaluations and bests.
    selecting: Vec<SelectingSplit>,
    recipe: SummarizeRecipe,
}

impl SummarizationTask {
    /// ROUGE of the model on `split`'s `articles` after `step`, logged (`tag`: the TensorBoard
    /// prefix, `eval/dev` for the primary dev split), with its selection score.
    fn score_dev(
        &self,
        step: u64,
        split: &str,
        tag: &str,
        articles: &[Article],
        logger: &mut Logger,
    ) -> Result<(Row, f64)> {
        let (row, _) = evaluate(&self.model, self.system, articles)?;
        logger.scalar(&format!("{tag}_rouge1"), row.rouge1, step);
        logger.scalar(&format!("{tag}_rouge2"), row.rouge2, step);
        logger.scalar(&format!("{tag}_rougeL"), row.rouge_l, step);
        logger.println(&format!(
            "step {step}: {split} ROUGE-1/2/L {:.2}/{:.2}/{:.2} on {} articles",
            row.rouge1,
            row.rouge2,
            row.rouge_l,
            articles.len()
        ));
        let score = mean_rouge(&row);
        Ok((row, score))
    }

    /// Every dev evaluation, per dev split, the primary one first.
    fn dev_log(&self) -> Vec<DevLog> {
        let log = |split: &str, articles: usize, rows: &[(u64, Row)]| {
            let evaluation =
                |(step, row): &(u64, Row)| DevEvaluation { step: *step, score: mean_rouge(row), row: row.clone() };
            let mut evaluations: Vec<DevEvaluation> = rows.iter().map(evaluation).collect();
            evaluations.sort_by_key(|e| e.step);
            DevLog { split: split.into(), articles, evaluations }
        };
        let mut out = vec![log(&self.recipe.data.dev_split, self.dev.len(), &self.dev_rows)];
        out.extend(self.selecting.iter().map(|s| log(&s.name, s.articles.len(), &s.state.rows)));
        out
    }
}

/// Writes the model with `best.json` into `dir` as one unit, replacing the previous best there
/// (as the engine keeps `best/`: written under a temporary name, the old copy moved aside, then
/// renamed in place).
fn save_best(dir: &Path, best: &BestState, model: &Summarizer) -> Result<()> {
    remove_stale_temps(dir)?;
    let staging = Staging::new(dir);
    model.save(staging.path())?;
    write_json(&staging.path().join(BEST_FILE), best)?;
    std::fs::File::open(staging.path()).and_then(|d| d.sync_all()).with_path(staging.path())?;
    let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let old = dir.with_file_name(format!(".{name}.old"));
    if old.exists() {
        std::fs::remove_dir_all(&old).with_path(&old)?;
    }
    if dir.exists() {
        std::fs::rename(dir, &old).with_path(dir)?;
    }
    staging.commit()?;
    if old.exists() {
        std::fs::remove_dir_all(&old).with_path(&old)?;
    }
    Ok(())
}

impl Evaluations for SummarizationTask {
    fn plan(&self) -> EvaluationPlan {
        EvaluationPlan { every: self.recipe.eval.every, at_last: true, at_start: true, ..EvaluationPlan::default() }
    }

    /// Scores the primary dev split (its score goes to the engine, which keeps `best/` and
    /// stops early on it), then each other dev split a test split selects on, whose best
    /// weights are kept here in `best-<split>/`.
    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        let (row, score) = self.score_dev(step, "dev", "eval/dev", &self.dev, logger)?;
        self.dev_rows.retain(|(s, _)| *s != step);
        self.dev_rows.push((step, row));
        // Each other dev split: scored, and its weights kept when they beat its best so far.
        let run_dir = self.recipe.run_dir();
        let mut found = Vec::with_capacity(self.selecting.len());
        for split in &self.selecting {
            let tag = format!("eval/{}", split_stem(&split.name));
            let (row, split_score) = self.score_dev(step, &split.name, &tag, &split.articles, logger)?;
            let best = BestState { step, score: split_score, metric: SELECTION_METRIC.into(), since: 0 };
            let better = split.state.best.as_ref().is_none_or(|kept| split_score > kept.score);
            if better {
                save_best(&run_dir.join(best_dir_name(&self.recipe.data.dev_split, &split.name)), &best, &self.model)?;
            }
            found.push((row, best, better));
        }
        for (split, (row, best, better)) in self.selecting.iter_mut().zip(found) {
            let state = &mut split.state;
            state.rows.retain(|(s, _)| *s != step);
            state.rows.push((step, row));
            if better {
                state.best = Some(best);
            } else if let Some(kept) = state.best.as_mut() {
                kept.since += 1;
            }
        }
        Ok(Evaluation { score: Some((SELECTION_METRIC.into(), score)) })
    }
}

impl engine_task::Task for SummarizationTask {
    type Source = ArticleSource;

    fn describe(&self) -> String {
        let c = self.model.bert_config();
        format!(
            "{} (BERT L{} H{} A{} FF{} V{})",
            self.system, c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size, c.vocab_size
        )
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    /// One Adam over everything (ext), or the BERT encoder and the rest with their own
    /// schedules (abs/extabs), as PreSumm's `sep_optim`.
    fn optimizers(&self) -> Vec<OptimizerSpec> {
        let o = &self.recipe.optimizer;
        let total = self.recipe.max_steps();
        let spec = |name: &str, vars: BTreeMap<String, Tensor>, lr: f64, warmup: u64| OptimizerSpec {
            name: name.into(),
            vars,
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            schedule: o.schedule_of(lr, warmup, total, None),
            grad_clip: o.grad_clip,
        };
        let vars = self.model.vs().variables();
        match self.recipe.task {
            Task::Ext => vec![spec("", vars.into_iter().collect(), o.lr, o.warmup_steps)],
            Task::Abs | Task::Extabs => {
                let (bert, rest): (BTreeMap<_, _>, BTreeMap<_, _>) =
                    vars.into_iter().partition(|(n, _)| n.starts_with("bert."));
                let (lr_dec, warmup_dec) = (o.lr_dec.unwrap_or(o.lr), o.warmup_dec.unwrap_or(o.warmup_steps));
                vec![spec("bert", bert, o.lr, o.warmup_steps), spec("dec", rest, lr_dec, warmup_dec)]
            }
        }
    }

    fn source(&mut self, slice: Slice) -> Result<ArticleSource> {
        let targets = match &self.model {
            Summarizer::Ext(_) => Targets::Oracle,
            Summarizer::Abs(m) => Targets::Summary { max_tokens: m.abs.max_target_tokens, eos: m.markers.eos },
        };
        Ok(ArticleSource {
            train: Arc::clone(&self.train),
            oracles: Arc::clone(&self.oracles),
            targets,
            batch_size: self.recipe.optimizer.batch_size,
            seed: self.recipe.seed,
            slice,
            device: self.device,
            pad: self.model.tokenizer().special.pad,
            order: None,
        })
    }

    fn start_cursor(&self) -> ArticleCursor {
        ArticleCursor::default()
    }

    fn loss(&self, batch: &SummaryBatch) -> Tensor {
        let inputs = batch.inputs.upload(self.device);
        let targets = upload(&batch.targets, self.device);
        match &self.model {
            Summarizer::Ext(m) => m.loss(&inputs, &targets, true),
            Summarizer::Abs(m) => m.token_loss(&inputs, &targets, true).0,
        }
    }

    fn save_model(&self, dir: &Path) -> Result<()> {
        self.model.save(dir)
    }

    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(indolm_torch::model::model_dir::WEIGHTS_FILE);
        copy_into(self.model.vs(), weights::read_file(&path)?, &path, &[]).map(|_| ())
    }

    fn state(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut state = serde_json::Map::new();
        state.insert("dev".into(), serde_json::to_value(&self.dev_rows).expect("rows serialize"));
        if !self.selecting.is_empty() {
            let splits: BTreeMap<&str, &SplitState> =
                self.selecting.iter().map(|s| (s.name.as_str(), &s.state)).collect();
            state.insert(DEV_SPLITS_STATE.into(), serde_json::to_value(splits).expect("rows serialize"));
        }
        state
    }

    /// The primary dev split's evaluations, and each other dev split's with its best (a split
    /// the checkpoint does not know starts with none: only a recipe changed under `--force`).
    fn restore_state(&mut self, state: &TrainerState, dir: &Path, _force: bool) -> Result<()> {
        self.dev_rows = state.value("dev", dir)?.unwrap_or_default();
        let mut saved: BTreeMap<String, SplitState> = state.value(DEV_SPLITS_STATE, dir)?.unwrap_or_default();
        for split in &mut self.selecting {
            split.state = saved.remove(&split.name).unwrap_or_default();
        }
        Ok(())
    }

    fn throughput(&self) -> engine_task::Throughput {
        engine_task::Throughput {
            per_update: (self.recipe.optimizer.batch_size * self.recipe.optimizer.grad_accumulation) as f64,
            per_row: 1.0,
            unit: "articles",
            short: "art",
            flops_per_unit: None,
        }
    }
}

/// The system's name in the tables.
fn system_name(task: Task) -> &'static str {
    match task {
        Task::Ext => "BertExt",
        Task::Abs => "BertAbs",
        Task::Extabs => "BertExtAbs",
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

/// Scores each test split (Lead-N, Oracle and the model, with BERTScore when `bertscore` is
/// given) with the weights its selection names (loaded when they change), and writes the
/// model's summaries and the references.
fn evaluate_tests(
    task: &mut SummarizationTask,
    tests: &[(String, Vec<Article>)],
    selections: &[Selection],
    bertscore: Option<&BertScorer>,
    out_dir: &Path,
) -> Result<Tested> {
    let system = task.system;
    let primary = selections.iter().find(|s| s.dev_split == task.recipe.data.dev_split);
    let mut md = match primary {
        Some(p) => format!("{system}, best dev step {}\n\n", p.step),
        None => format!("{system}\n\n"),
    };
    let mut test = Vec::new();
    let mut loaded: Option<&str> = None;
    for ((split, articles), chosen) in tests.iter().zip(selections) {
        if loaded != Some(chosen.weights.as_str()) {
            task.load_weights(&out_dir.join(&chosen.weights))?;
            loaded = Some(&chosen.weights);
        }
        let mut rows = baselines_scored(articles, bertscore)?;
        let (mut row, predicted) = evaluate(&task.model, system, articles)?;
        if let Some(scorer) = bertscore {
            let pairs: Vec<(String, String)> = predicted
                .iter()
                .zip(articles)
                .map(|(p, a)| (p.clone(), indolm_metrics::rouge::summary_line(&a.summary)))
                .collect();
            row.bertscore = Some(RowBertScore::of(scorer, &pairs)?);
        }
        rows.push(row);
        write_predictions(out_dir, split, &predicted, articles)?;
        md.push_str(&format!(
            "{split}: the weights of step {}, the best on {} ({} {:.2}; `{}/`)\n\n",
            chosen.step, chosen.dev_split, chosen.metric, chosen.dev_score, chosen.weights
        ));
        md.push_str(&markdown(split, &rows));
        md.push('\n');
        test.push((split.clone(), rows));
    }
    Ok(Tested { rows: test, markdown: md })
}

/// The extension of a split's predicted summaries.
const CANDIDATE: &str = ".candidate";
/// The extension of a split's reference summaries.
const GOLD: &str = ".gold";

indolm_core::declare_run_files!(
    PREDICTION_FILES: indolm_core::outputs::RunFile::Pattern("", CANDIDATE),
    indolm_core::outputs::RunFile::Pattern("", GOLD),
);

/// `<split>.candidate` (the model's summaries) and `<split>.gold` (the references), one a line
/// with its sentences separated by `<q>`, as PreSumm writes them and as they were scored (so
/// `indolm eval rouge` on the two files gives the row's figures); a `/` or `\` in the split's
/// name becomes `_`.
fn write_predictions(out_dir: &Path, split: &str, predicted: &[String], articles: &[Article]) -> Result<()> {
    let file_stem = split.replace(['/', '\\'], "_");
    write_lines(&out_dir.join(format!("{file_stem}{CANDIDATE}")), predicted)?;
    write_lines(
        &out_dir.join(format!("{file_stem}{GOLD}")),
        &articles.iter().map(|a| indolm_metrics::rouge::summary_line(&a.summary)).collect::<Vec<_>>(),
    )
}

fn write_lines(path: &Path, lines: &[String]) -> Result<()> {
    let text: String = lines.iter().map(|l| format!("{}\n", l.replace('\n', " "))).collect();
    write_atomic(path, text.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::preparation_threads;

    #[test]
    fn preparing_ranks_share_the_node_s_cores() {
        // Rank 0 alone (the others wait): every core; 8 ranks of a 64-core node at once: 8 each.
        assert_eq!(preparation_threads(64, 1), 64);
        assert_eq!(preparation_threads(64, 8), 8);
        // Never more threads than cores among them, never none.
        assert_eq!(preparation_threads(6, 4), 1);
        assert_eq!(preparation_threads(2, 8), 1);
        assert_eq!(preparation_threads(16, 0), 16);
    }
}
