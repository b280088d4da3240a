//! `indolm finetune summarize`: the recipe and one training loop for the three summarizers
//! (task `ext`: BertExt, binary cross-entropy on the oracle labels, one Adam; `abs`: BertAbs,
//! label-smoothed loss on the reference, one Adam for the encoder and one for the rest;
//! `extabs`: BertAbs started from a fine-tuned BertExt), each with PreSumm's Noam schedule,
//! dev ROUGE every `eval_every` steps keeping the best weights, then ROUGE on the test splits
//! beside Lead-N and Oracle, with the predictions written one summary a line. The models
//! themselves, and ROUGE of their summaries, are in `inference`.
use super::abs::{AbsConfig, BertAbs};
use super::data::{join, load_split, Article};
use super::ext::{label_tensor, BertExt, ExtConfig};
use super::inference::{evaluate, Summarizer};
use super::oracle::oracle_liputan6;
use super::{baselines, markdown, Row};
use crate::error::{Error, Result};
use crate::files::{write_atomic, write_json};
use crate::logger::Logger;
use crate::model::LoadNote;
use crate::optim::{noam, AdamW};
use crate::seeds::{derive_seed, per_step, salt, stream_rng};
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
    #[serde(default = "crate::recipe::default_seed")]
    pub seed: u64,
    #[serde(default = "crate::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    #[serde(default)]
    pub init: Option<PathBuf>,
    pub task: Task,
    #[serde(default = "crate::recipe::default_tensorboard")]
    pub tensorboard: PathBuf,
    pub data: SummarizeData,
    pub optimizer: SummarizeOptimizer,
    #[serde(default)]
    pub ext: ExtConfig,
    #[serde(default)]
    pub abs: AbsConfig,
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

fn d_train() -> String {
    "train".into()
}
fn d_dev() -> String {
    "dev".into()
}
fn d_test() -> Vec<String> {
    vec!["test".into()]
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeOptimizer {
    /// Noam: lr · min(step^-0.5, step · warmup^-1.5); for abs/extabs, the BERT encoder's.
    pub lr: f64,
    pub warmup_steps: u64,
    /// abs/extabs: the decoder's (and generator's) Noam peak factor and warmup.
    #[serde(default)]
    pub lr_dec: Option<f64>,
    #[serde(default)]
    pub warmup_dec: Option<u64>,
    /// Dev articles scored at each evaluation (default: all; abstractive decoding is slow).
    #[serde(default)]
    pub eval_articles: Option<usize>,
    pub max_steps: u64,
    /// Articles per step.
    pub batch_size: usize,
    pub eval_every: u64,
    #[serde(default)]
    pub grad_clip: f64,
}

impl SummarizeRecipe {
    pub fn load(path: &Path) -> Result<Self> {
        let recipe: SummarizeRecipe = crate::recipe::parse_toml(path)?;
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

fn oracle_of(a: &Article) -> Vec<usize> {
    a.extractive.clone().unwrap_or_else(|| oracle_liputan6(&a.article, &a.summary))
}

impl Summarizer {
    /// Training loss of a batch (`oracles` are the articles' oracle labels, used by BertExt).
    fn loss(&self, articles: &[&Article], oracles: &[Vec<usize>]) -> Result<Tensor> {
        let texts: Vec<&[Vec<String>]> = articles.iter().map(|a| a.article.as_slice()).collect();
        Ok(match self {
            Summarizer::Ext(m) => {
                let batch = m.encode(&texts)?;
                m.loss(&batch, &label_tensor(oracles, &batch), true)
            }
            Summarizer::Abs(m) => {
                let batch = m.encode(&texts)?;
                let summaries: Vec<&[Vec<String>]> = articles.iter().map(|a| a.summary.as_slice()).collect();
                m.loss(&batch, &m.encode_targets(&summaries)?, true).0
            }
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SummarizeResults {
    pub system: String,
    pub best_step: u64,
    pub dev_before: Row,
    pub dev_best: Row,
    pub test: Vec<(String, Vec<Row>)>,
}

/// Builds the model the task trains from `init`, with the notes from loading it.
fn start_model(recipe: &SummarizeRecipe, init: &Path, device: Device) -> Result<(Summarizer, Vec<LoadNote>)> {
    if recipe.task == Task::Extabs {
        let config_path = init.join("config.json");
        let config: serde_json::Value = serde_json::from_str(&crate::files::read_to_string(&config_path)?)
            .map_err(|e| Error::json(&config_path, &e))?;
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

/// Adam optimizers with their Noam settings: one over everything (ext), or the BERT encoder
/// and the rest (abs/extabs), as PreSumm's `sep_optim`.
fn optimizers(recipe: &SummarizeRecipe, model: &Summarizer) -> Vec<(AdamW, f64, u64, &'static str)> {
    let vars = model.vs().variables();
    let o = &recipe.optimizer;
    let adam = |vars: std::collections::BTreeMap<String, Tensor>| AdamW::new(vars, [0.9, 0.999], 1e-9, 0.0);
    match recipe.task {
        Task::Ext => vec![(adam(vars.into_iter().collect()), o.lr, o.warmup_steps, "lr")],
        Task::Abs | Task::Extabs => {
            let (bert, rest): (std::collections::BTreeMap<_, _>, std::collections::BTreeMap<_, _>) =
                vars.into_iter().partition(|(n, _)| n.starts_with("bert."));
            vec![
                (adam(bert), o.lr, o.warmup_steps, "lr_bert"),
                (
                    adam(rest),
                    o.lr_dec.expect("checked when loading"),
                    o.warmup_dec.expect("checked when loading"),
                    "lr_dec",
                ),
            ]
        }
    }
}

fn write_lines(path: &Path, lines: &[String]) -> Result<()> {
    let text: String = lines.iter().map(|l| format!("{}\n", l.replace('\n', " "))).collect();
    write_atomic(path, text.as_bytes())
}

pub fn run(recipe: &SummarizeRecipe, init: &Path, device: Device) -> Result<SummarizeResults> {
    let d = &recipe.data;
    let train = load_split(&d.root, &d.train_split)?;
    let dev_all = load_split(&d.root, &d.dev_split)?;
    let dev = &dev_all[..recipe.optimizer.eval_articles.unwrap_or(usize::MAX).min(dev_all.len()).max(1)];
    let tests: Vec<(String, Vec<Article>)> =
        d.test_splits.iter().map(|s| Ok((s.clone(), load_split(&d.root, s)?))).collect::<Result<_>>()?;
    let oracles: Vec<Vec<usize>> = match recipe.task {
        Task::Ext => train.iter().map(oracle_of).collect(),
        Task::Abs | Task::Extabs => vec![Vec::new(); train.len()],
    };
    let system = match recipe.task {
        Task::Ext => "BertExt",
        Task::Abs => "BertAbs",
        Task::Extabs => "BertExtAbs",
    };
    tch::manual_seed(derive_seed(recipe.seed, salt::SUMMARIZATION_INIT) as i64);
    let (model, notes) = start_model(recipe, init, device)?;
    let out_dir = recipe.output_dir.join(&recipe.name);
    let o = &recipe.optimizer;
    let mut logger = Logger::new(&recipe.tensorboard.join(&recipe.name), o.max_steps, 0)?;
    for n in notes {
        logger.println(&format!("note: {n}"));
    }
    let mut optimizers = optimizers(recipe, &model);
    let tag = |name: &str| format!("{}/{name}", system.to_lowercase());
    let (dev_before, _) = evaluate(&model, system, dev)?;
    logger.println(&format!(
        "step 0: dev ROUGE-1/2/L {:.2}/{:.2}/{:.2} on {} articles",
        dev_before.rouge1,
        dev_before.rouge2,
        dev_before.rouge_l,
        dev.len()
    ));
    let mean = |r: &Row| (r.rouge1 + r.rouge2 + r.rouge_l) / 3.0;
    let snapshot = || -> Vec<(String, Tensor)> {
        model.vs().variables().into_iter().map(|(n, t)| (n, t.detach().copy())).collect()
    };
    let mut best: (f64, u64, Row, Vec<(String, Tensor)>) = (mean(&dev_before), 0, dev_before.clone(), snapshot());
    let mut order: Vec<usize> = Vec::new();
    let mut cursor = 0;
    for step in 1..=o.max_steps {
        if cursor + o.batch_size > order.len() {
            order = (0..train.len()).collect();
            order.shuffle(&mut stream_rng(recipe.seed, salt::SUMMARIZATION_SHUFFLE, step));
            cursor = 0;
        }
        let picked: Vec<usize> = order[cursor..(cursor + o.batch_size).min(order.len())].to_vec();
        cursor += o.batch_size;
        tch::manual_seed(derive_seed(recipe.seed, per_step(salt::SUMMARIZATION_TORCH, step)) as i64);
        let articles: Vec<&Article> = picked.iter().map(|&i| &train[i]).collect();
        let labels: Vec<Vec<usize>> = picked.iter().map(|&i| oracles[i].clone()).collect();
        for (adam, ..) in optimizers.iter_mut() {
            adam.zero_grad();
        }
        let loss = model.loss(&articles, &labels)?;
        loss.backward();
        for (adam, lr, warmup, name) in optimizers.iter_mut() {
            if o.grad_clip > 0.0 {
                adam.clip_grad_norm(o.grad_clip);
            }
            let lr = noam(*lr, *warmup, step);
            adam.step(lr);
            if step % 10 == 0 {
                logger.scalar(&tag(name), lr, step);
            }
        }
        if step % 10 == 0 {
            logger.scalar(&tag("train_loss"), loss.double_value(&[]), step);
        }
        if step % o.eval_every == 0 || step == o.max_steps {
            let (row, _) = evaluate(&model, system, dev)?;
            logger.scalar(&tag("dev_rouge1"), row.rouge1, step);
            logger.scalar(&tag("dev_rouge2"), row.rouge2, step);
            logger.scalar(&tag("dev_rougeL"), row.rouge_l, step);
            logger.progress(
                step,
                &format!(
                    "loss {:.4}, dev ROUGE-1/2/L {:.2}/{:.2}/{:.2}",
                    loss.double_value(&[]),
                    row.rouge1,
                    row.rouge2,
                    row.rouge_l
                ),
            );
            if mean(&row) > best.0 {
                best = (mean(&row), step, row, snapshot());
            }
        }
    }
    let (_, best_step, dev_best, weights) = best;
    tch::no_grad(|| {
        let vars = model.vs().variables();
        for (name, t) in &weights {
            vars[name].shallow_clone().copy_(t);
        }
    });
    crate::model::model_dir::save_model_dir(&out_dir.join("best"), true, |dir| model.save(dir))?;
    let mut test = Vec::new();
    let mut md = format!("{system}, best dev step {best_step}\n\n");
    for (split, articles) in &tests {
        let mut rows = baselines(articles);
        let (row, predicted) = evaluate(&model, system, articles)?;
        rows.push(row);
        let file_stem = split.replace(['/', '\\'], "_");
        write_lines(&out_dir.join(format!("{file_stem}.candidate")), &predicted)?;
        write_lines(
            &out_dir.join(format!("{file_stem}.gold")),
            &articles.iter().map(|a| join(&a.summary)).collect::<Vec<_>>(),
        )?;
        md.push_str(&markdown(split, &rows));
        md.push('\n');
        test.push((split.clone(), rows));
    }
    logger.finish();
    let results = SummarizeResults { system: system.into(), best_step, dev_before, dev_best, test };
    write_json(&out_dir.join("results.json"), &results)?;
    write_atomic(&out_dir.join("results.md"), md.as_bytes())?;
    Ok(results)
}
