//! `indolm finetune summarize`: the recipe and the BertExt training loop (Adam with the Noam
//! schedule, binary cross-entropy on the oracle labels, dev ROUGE every `eval_every` steps, the
//! best checkpoint kept), then ROUGE on the test splits beside Lead-N and Oracle.
use super::data::{join, load_split, Article};
use super::ext::{label_tensor, select, BertExt, ExtConfig};
use super::oracle::oracle_liputan6;
use super::{baselines, markdown, Row};
use crate::data::mixture::{derive_seed, stream_rng};
use crate::error::{write_atomic, Error, Result};
use crate::eval::rouge::mean_f1;
use crate::train::logger::Logger;
use crate::train::optim::AdamW;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::{Device, Tensor};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    Ext,
    Abs,
    Extabs,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeRecipe {
    pub name: String,
    #[serde(default = "crate::tasks::default_seed")]
    pub seed: u64,
    #[serde(default = "crate::tasks::default_output_dir")]
    pub output_dir: PathBuf,
    #[serde(default)]
    pub init: Option<PathBuf>,
    pub task: Task,
    #[serde(default = "crate::tasks::default_tensorboard")]
    pub tensorboard: PathBuf,
    pub data: SummarizeData,
    pub optimizer: SummarizeOptimizer,
    #[serde(default)]
    pub ext: ExtConfig,
}


#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeData {
    /// The Liputan6 folder holding the split folders.
    pub root: PathBuf,
    #[serde(default = "d_train")]
    pub train_split: String,
    #[serde(default = "d_dev")]
    pub dev_split: String,
    #[serde(default = "d_test")]
    pub test_splits: Vec<String>,
}

fn d_train() -> String { "train".into() }
fn d_dev() -> String { "dev".into() }
fn d_test() -> Vec<String> { vec!["test".into()] }

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeOptimizer {
    /// Noam: lr · min(step^-0.5, step · warmup^-1.5).
    pub lr: f64,
    pub warmup_steps: u64,
    pub max_steps: u64,
    /// Articles per step.
    pub batch_size: usize,
    pub eval_every: u64,
    #[serde(default)]
    pub grad_clip: f64,
}

impl SummarizeRecipe {
    pub fn load(path: &Path) -> Result<Self> {
        let recipe: SummarizeRecipe = crate::train::recipe::parse_toml(path)?;
        if recipe.task != Task::Ext {
            return Err(Error::field(path, "task", format!("{:?} (BertAbs/BertExtAbs) is not built yet; only \"ext\" trains today", recipe.task)));
        }
        let o = &recipe.optimizer;
        if o.lr <= 0.0 || o.max_steps == 0 || o.batch_size == 0 || o.eval_every == 0 || o.warmup_steps == 0 {
            return Err(Error::field(path, "optimizer", "lr, warmup_steps, max_steps, batch_size and eval_every must be positive"));
        }
        Ok(recipe)
    }
}

/// PreSumm's Noam schedule (step from 1).
pub fn noam(lr: f64, warmup: u64, step: u64) -> f64 {
    let s = step.max(1) as f64;
    lr * (s.powf(-0.5)).min(s * (warmup as f64).powf(-1.5))
}

fn oracle_of(a: &Article) -> Vec<usize> {
    a.extractive.clone().unwrap_or_else(|| oracle_liputan6(&a.article, &a.summary))
}

/// Mean ROUGE-1/2/L of BertExt's selections on `articles`.
pub fn evaluate(model: &BertExt, articles: &[Article]) -> Result<Row> {
    let mut pairs = Vec::new();
    for chunk in articles.chunks(8) {
        let refs: Vec<&[Vec<String>]> = chunk.iter().map(|a| a.article.as_slice()).collect();
        let batch = model.encode(&refs)?;
        let scores = tch::no_grad(|| model.scores(&batch, false)).to_device(Device::Cpu).to_kind(tch::Kind::Double);
        for (r, a) in chunk.iter().enumerate() {
            let n = batch.sentences[r];
            let row: Vec<f64> = (0..n).map(|k| scores.double_value(&[r as i64, k as i64])).collect();
            let chosen = select(&a.article[..n], &row, model.ext.min_sentences, model.ext.min_words);
            let text: Vec<Vec<String>> = chosen.into_iter().map(|i| a.article[i].clone()).collect();
            pairs.push((join(&text), join(&a.summary)));
        }
    }
    let (rouge1, rouge2, rouge_l) = mean_f1(&pairs);
    Ok(Row { system: "BertExt".into(), rouge1, rouge2, rouge_l })
}

#[derive(Debug, Clone, Serialize)]
pub struct SummarizeResults {
    pub best_step: u64,
    pub dev_before: Row,
    pub dev_best: Row,
    pub test: Vec<(String, Vec<Row>)>,
}

pub fn run(recipe: &SummarizeRecipe, init: &Path, device: Device) -> Result<SummarizeResults> {
    let d = &recipe.data;
    let train = load_split(&d.root, &d.train_split)?;
    let dev = load_split(&d.root, &d.dev_split)?;
    let tests: Vec<(String, Vec<Article>)> = d.test_splits.iter().map(|s| Ok((s.clone(), load_split(&d.root, s)?))).collect::<Result<_>>()?;
    let oracles: Vec<Vec<usize>> = train.iter().map(oracle_of).collect();
    tch::manual_seed(derive_seed(recipe.seed, 10) as i64);
    let (model, notes) = BertExt::load(init, recipe.ext.clone(), device)?;
    let out_dir = recipe.output_dir.join(&recipe.name);
    let o = &recipe.optimizer;
    let mut logger = Logger::new(&recipe.tensorboard.join(&recipe.name), o.max_steps, 0)?;
    for n in notes {
        logger.println(&format!("note: {n}"));
    }
    let mut adam = AdamW::new(model.vs.variables().into_iter().collect(), [0.9, 0.999], 1e-9, 0.0);
    let dev_before = evaluate(&model, &dev)?;
    logger.println(&format!("step 0: dev ROUGE-1/2/L {:.2}/{:.2}/{:.2}", dev_before.rouge1, dev_before.rouge2, dev_before.rouge_l));
    let mean = |r: &Row| (r.rouge1 + r.rouge2 + r.rouge_l) / 3.0;
    let mut best: (f64, u64, Row, Vec<(String, Tensor)>) = (mean(&dev_before), 0, dev_before.clone(), model.vs.variables().into_iter().map(|(n, t)| (n, t.detach().copy())).collect());
    let mut order: Vec<usize> = Vec::new();
    let mut cursor = 0;
    for step in 1..=o.max_steps {
        if cursor + o.batch_size > order.len() {
            order = (0..train.len()).collect();
            order.shuffle(&mut stream_rng(recipe.seed, 11, step));
            cursor = 0;
        }
        let picked: Vec<usize> = order[cursor..(cursor + o.batch_size).min(order.len())].to_vec();
        cursor += o.batch_size;
        tch::manual_seed(derive_seed(recipe.seed, 12 ^ (step << 8)) as i64);
        let articles: Vec<&Article> = picked.iter().map(|&i| &train[i]).collect();
        let refs: Vec<&[Vec<String>]> = articles.iter().map(|a| a.article.as_slice()).collect();
        let batch = model.encode(&refs)?;
        let labels = label_tensor(&picked.iter().map(|&i| oracles[i].clone()).collect::<Vec<_>>(), &batch);
        adam.zero_grad();
        let loss = model.loss(&batch, &labels, true);
        loss.backward();
        if o.grad_clip > 0.0 {
            adam.clip_grad_norm(o.grad_clip);
        }
        let lr = noam(o.lr, o.warmup_steps, step);
        adam.step(lr);
        if step % 10 == 0 {
            logger.scalar("ext/train_loss", loss.double_value(&[]), step);
            logger.scalar("ext/lr", lr, step);
        }
        if step % o.eval_every == 0 || step == o.max_steps {
            let row = evaluate(&model, &dev)?;
            logger.scalar("ext/dev_rouge1", row.rouge1, step);
            logger.scalar("ext/dev_rouge2", row.rouge2, step);
            logger.scalar("ext/dev_rougeL", row.rouge_l, step);
            logger.progress(step, &format!("loss {:.4}, dev ROUGE-1/2/L {:.2}/{:.2}/{:.2}", loss.double_value(&[]), row.rouge1, row.rouge2, row.rouge_l));
            if mean(&row) > best.0 {
                best = (mean(&row), step, row, model.vs.variables().into_iter().map(|(n, t)| (n, t.detach().copy())).collect());
            }
        }
    }
    let (_, best_step, dev_best, weights) = best;
    tch::no_grad(|| {
        let vars = model.vs.variables();
        for (name, t) in &weights {
            vars[name].shallow_clone().copy_(t);
        }
    });
    crate::model::model_dir::save_model_dir(&out_dir.join("best"), true, |dir| model.save(dir))?;
    let mut test = Vec::new();
    let mut md = format!("BertExt, best dev step {best_step}\n\n");
    for (split, articles) in &tests {
        let mut rows = baselines(articles);
        rows.push(evaluate(&model, articles)?);
        md.push_str(&markdown(split, &rows));
        md.push('\n');
        test.push((split.clone(), rows));
    }
    logger.finish();
    let results = SummarizeResults { best_step, dev_before, dev_best, test };
    write_atomic(&out_dir.join("results.json"), (serde_json::to_string_pretty(&results).unwrap() + "\n").as_bytes())?;
    write_atomic(&out_dir.join("results.md"), md.as_bytes())?;
    Ok(results)
}
