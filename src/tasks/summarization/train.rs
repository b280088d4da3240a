//! `indolm finetune summarize` on the training engine: the three summarizers as one task (task
//! `ext`: BertExt, binary cross-entropy on the oracle labels, one optimizer; `abs`: BertAbs,
//! label-smoothed loss on the reference, one optimizer for the encoder and one for the rest, as
//! PreSumm's `sep_optim`; `extabs`: BertAbs started from a fine-tuned BertExt), trained with the
//! recipe's schedules (PreSumm's Noam), dev ROUGE before training, every `[eval] every` updates
//! and at the last (the best weights kept in `<run>/best/`), then ROUGE on the test splits beside
//! Lead-N and Oracle (official ROUGE-1.5.5 with the paper's options and its 95% intervals), with
//! the predictions written one summary a line. The models themselves, and ROUGE of their
//! summaries, are in `inference`.
use super::abs::BertAbs;
use super::data::{load_split, Article};
use super::encoded::{encode_split, EncodedSplit};
use super::ext::{label_tensor, BertExt};
use super::inference::{evaluate, Summarizer};
use super::input::{staged_batch_of, targets_of, ArticleBatch, EncodedArticle};
use super::prepared::prepare_split;
pub use super::recipe::{SummarizeRecipe, Task};
use super::{baselines, markdown, Row};
use crate::device::upload;
use crate::distributed::ProcessGroup;
use crate::error::{Error, Result};
use crate::files::{read_to_string, write_atomic, write_json};
use crate::logger::Logger;
use crate::model::model_dir::copy_into;
use crate::model::{weights, LoadNote, Precision};
use crate::run::{Run, RunLayout, TrainerState};
use crate::seeds::{salt, seed_torch, stream_rng};
use crate::train::data_parallel::DataParallel;
use crate::train::engine::{Engine, EngineSettings, TaskRun, TrainOptions};
use crate::train::task::{
    self as engine_task, BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task as _,
};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tch::{Device, Tensor};

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

/// Trains the recipe's summarizer from `init` (every rank of a data-parallel launch calls this)
/// and tests the best weights. Under `<output_dir>/<name>/` it writes checkpoints, the best model
/// (`best/`), each test split's summaries and references one a line (`<split>.candidate`,
/// `<split>.gold`), `results.json` and `results.md`. `None` when a stop signal (or
/// `--stop-after`) ended the training first: run it again with `--resume auto`.
pub fn run(
    recipe: &SummarizeRecipe,
    init: &Path,
    opts: &TrainOptions,
    group: Option<ProcessGroup>,
) -> Result<Option<SummarizeResults>> {
    let precision = recipe.compute_precision(opts.device)?;
    // The model to start from is checked before the run's folder is touched.
    seed_torch(recipe.seed, salt::SUMMARIZATION_INIT);
    let (mut model, notes) = start_model(recipe, init, opts.device)?;
    model.set_precision(precision);
    let parallel = group.map(DataParallel::new).transpose()?;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let options = crate::run::RunOptions {
        inputs: vec![init.to_path_buf()],
        ..opts.run_options(leader, &recipe.checkpoint, recipe.tensorboard_dir(), recipe.max_steps())
    };
    let (run, resume) = Run::open(RunLayout::new(recipe.run_dir()), &options)?;
    if leader && resume.is_none() {
        for n in notes {
            run.logger.println(&format!("note: {n}"));
        }
    }
    let splits = match Splits::load(recipe, &model, &run.logger) {
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
        recipe: recipe.clone(),
    };
    // The model it starts from, by content: resuming from another base model is another run.
    let fingerprint = recipe.fingerprint(&crate::model::model_dir::content_sha256(init)?);
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
    let best = summary.best.expect("dev ROUGE is measured before training");
    let layout = RunLayout::new(recipe.run_dir());
    task.load_weights(&layout.best_dir())?;
    let out_dir = recipe.run_dir();
    let tested = evaluate_tests(&task.model, system, best.step, &tests, &out_dir)?;
    let row_at = |step: u64| task.dev_rows.iter().find(|(s, _)| *s == step).map(|(_, r)| r.clone());
    let results = SummarizeResults {
        system: system.into(),
        best_step: best.step,
        dev_before: row_at(0).unwrap_or_default(),
        dev_best: row_at(best.step).unwrap_or_default(),
        test: tested.rows,
    };
    write_json(&out_dir.join(crate::tasks::RESULTS_JSON), &results)?;
    write_atomic(&out_dir.join(crate::tasks::RESULTS_MD), tested.markdown.as_bytes())?;
    Ok(Some(results))
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
        let scored = recipe.eval.articles.unwrap_or(usize::MAX).min(dev.len()).max(1);
        dev.truncate(scored);
        let tests: Vec<(String, Vec<Article>)> =
            d.test_splits.iter().map(|s| Ok((s.clone(), load_split(&d.root, s)?))).collect::<Result<_>>()?;
        Ok(Splits { train, oracles, dev, tests })
    }
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

/// Fine-tuning a summarizer, selected on dev ROUGE.
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
    recipe: SummarizeRecipe,
}

impl Evaluations for SummarizationTask {
    fn plan(&self) -> EvaluationPlan {
        EvaluationPlan { every: self.recipe.eval.every, at_last: true, at_start: true, ..EvaluationPlan::default() }
    }

    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        let (row, _) = evaluate(&self.model, self.system, &self.dev)?;
        logger.scalar("eval/dev_rouge1", row.rouge1, step);
        logger.scalar("eval/dev_rouge2", row.rouge2, step);
        logger.scalar("eval/dev_rougeL", row.rouge_l, step);
        logger.println(&format!(
            "step {step}: dev ROUGE-1/2/L {:.2}/{:.2}/{:.2} on {} articles",
            row.rouge1,
            row.rouge2,
            row.rouge_l,
            self.dev.len()
        ));
        let score = mean_rouge(&row);
        self.dev_rows.retain(|(s, _)| *s != step);
        self.dev_rows.push((step, row));
        Ok(Evaluation { score: Some(("dev ROUGE (mean of 1/2/L)".into(), score)) })
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
            schedule: o.schedule_of(lr, warmup, total),
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
            Summarizer::Abs(m) => m.loss(&inputs, &targets, true).0,
        }
    }

    fn save_model(&self, dir: &Path) -> Result<()> {
        self.model.save(dir)
    }

    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(crate::model::model_dir::WEIGHTS_FILE);
        copy_into(self.model.vs(), weights::read_file(&path)?, &path, &[]).map(|_| ())
    }

    fn state(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut state = serde_json::Map::new();
        state.insert("dev".into(), serde_json::to_value(&self.dev_rows).expect("rows serialize"));
        state
    }

    fn restore_state(&mut self, state: &TrainerState, dir: &Path, _force: bool) -> Result<()> {
        self.dev_rows = state.value("dev", dir)?.unwrap_or_default();
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

/// The extension of a split's predicted summaries.
const CANDIDATE: &str = ".candidate";
/// The extension of a split's reference summaries.
const GOLD: &str = ".gold";

crate::declare_run_files!(
    PREDICTION_FILES: crate::outputs::RunFile::Pattern("", CANDIDATE),
    crate::outputs::RunFile::Pattern("", GOLD),
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
        &articles.iter().map(|a| crate::eval::rouge::summary_line(&a.summary)).collect::<Vec<_>>(),
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
