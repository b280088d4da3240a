//! Using a summarizer once it exists: [`Summarizer`] (a BertExt or a BertAbs, loaded from a
//! directory `finetune summarize` wrote) turns articles into summaries, [`evaluate`] scores
//! those summaries with ROUGE against the references (official ROUGE-1.5.5 with the Liputan6
//! paper's options, with its 95% intervals: [`super::rouge_row`]), and [`sentences_of`] splits
//! plain text into the sentences of lowercased words the models read (for `indolm summarize`).
use super::abs::{AbsConfig, BertAbs};
use super::data::Article;
use super::ext::{select, BertExt, ExtConfig};
use super::input::{batch_of, encode_article, EncodedArticle};
use super::{rouge_row, Row};
use indolm_core::files::read_to_string;
use indolm_metrics::rouge::summary_line;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::LoadNote;
use std::path::Path;
use tch::Device;

/// A summarization model of either kind; training adds its loss in `train`.
pub enum Summarizer {
    /// Extractive: picks article sentences by their scores (BertExt).
    Ext(BertExt),
    /// Abstractive: writes the summary with beam search (BertAbs, also BertExtAbs).
    Abs(BertAbs),
}

impl Summarizer {
    /// The model's variables (every trainable tensor).
    pub(crate) fn vs(&self) -> &tch::nn::VarStore {
        match self {
            Summarizer::Ext(m) => &m.vs,
            Summarizer::Abs(m) => &m.vs,
        }
    }

    /// The encoder's configuration.
    pub(crate) fn bert_config(&self) -> &indolm_torch::model::BertConfig {
        match self {
            Summarizer::Ext(m) => &m.config,
            Summarizer::Abs(m) => &m.config,
        }
    }

    /// The model directory's tokenizer.
    pub fn tokenizer(&self) -> &indolm_torch::data::tokenizer::TextTokenizer {
        match self {
            Summarizer::Ext(m) => &m.tokenizer,
            Summarizer::Abs(m) => &m.tokenizer,
        }
    }

    /// The encoder's positions: where articles are cut.
    pub fn max_positions(&self) -> usize {
        match self {
            Summarizer::Ext(m) => m.bert.embeddings.max_positions(),
            Summarizer::Abs(m) => m.bert.embeddings.max_positions(),
        }
    }

    /// Sets the dtype of the model's matrix products (bf16 only on CUDA).
    pub fn set_precision(&mut self, precision: indolm_torch::model::Precision) {
        match self {
            Summarizer::Ext(m) => m.set_precision(precision),
            Summarizer::Abs(m) => m.set_precision(precision),
        }
    }

    /// The summary of every article, as sentences of words. BertAbs decodes `batch_size`
    /// articles at a time (of similar lengths: the articles are sorted by length first); BertExt
    /// scores articles batched by length under the device's token budget. A progress bar on a
    /// terminal counts the articles.
    pub fn summarize(&self, articles: &[&[Vec<String>]], batch_size: usize) -> Result<Vec<Vec<Vec<String>>>> {
        let batch_size = batch_size.max(1);
        let bar = indicatif::ProgressBar::new(articles.len() as u64).with_style(
            indicatif::ProgressStyle::default_bar()
                .template("{bar:30} {pos}/{len} articles [{elapsed_precise} < {eta_precise}]")
                .expect("valid template"),
        );
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) || articles.len() < 2 {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let mut out: Vec<Vec<Vec<String>>> = vec![Vec::new(); articles.len()];
        match self {
            Summarizer::Ext(m) => {
                // Tokenized once, then batched by length under the device's token budget.
                let max_len = self.max_positions();
                let encoded: Vec<EncodedArticle> =
                    articles.iter().map(|a| encode_article(&m.tokenizer, max_len, a)).collect::<Result<_>>()?;
                let lengths: Vec<usize> = encoded.iter().map(EncodedArticle::len).collect();
                let budget = indolm_torch::data::batching::token_budget(m.vs.device());
                for items in indolm_torch::data::batching::by_length(&lengths, budget) {
                    let chunk: Vec<&EncodedArticle> = items.iter().map(|&i| &encoded[i]).collect();
                    let batch = batch_of(m.tokenizer.special.pad, &chunk, m.vs.device());
                    let scores =
                        tch::no_grad(|| m.scores(&batch, false)).to_device(Device::Cpu).to_kind(tch::Kind::Double);
                    for (r, &i) in items.iter().enumerate() {
                        let n = batch.sentences[r];
                        let row: Vec<f64> = (0..n).map(|k| scores.double_value(&[r as i64, k as i64])).collect();
                        let chosen = select(&articles[i][..n], &row, m.ext.min_sentences, m.ext.min_words);
                        out[i] = chosen.into_iter().map(|k| articles[i][k].clone()).collect();
                    }
                    bar.inc(items.len() as u64);
                }
            }
            Summarizer::Abs(m) => {
                let beam = m.beam_config();
                // Similar lengths share a batch, so little of it is padding.
                let mut order: Vec<usize> = (0..articles.len()).collect();
                order.sort_by_key(|&i| std::cmp::Reverse(articles[i].iter().map(Vec::len).sum::<usize>()));
                for chunk in order.chunks(batch_size) {
                    let batch: Vec<&[Vec<String>]> = chunk.iter().map(|&i| articles[i]).collect();
                    for (&i, summary) in chunk.iter().zip(m.generate_batch(&batch, &beam)?) {
                        out[i] = summary;
                    }
                    bar.inc(chunk.len() as u64);
                }
            }
        }
        bar.finish_and_clear();
        Ok(out)
    }

    /// How much of `article` the encoder reads: its tokens and sentences, and those within the
    /// model's positions (the rest is cut, as in training).
    pub fn reading(&self, article: &[Vec<String>]) -> Result<Reading> {
        let all = encode_article(self.tokenizer(), usize::MAX, article)?;
        let kept = encode_article(self.tokenizer(), self.max_positions(), article)?;
        Ok(Reading {
            tokens: all.len(),
            sentences: all.cls().len(),
            kept_tokens: kept.len(),
            kept_sentences: kept.cls().len(),
        })
    }

    /// Articles decoded together by default: BertAbs's `decode_batch` (BertExt batches by tokens).
    pub fn default_batch_size(&self) -> usize {
        match self {
            Summarizer::Ext(_) => 8,
            Summarizer::Abs(m) => m.abs.decode_batch,
        }
    }

    /// Loads a model written by `finetune summarize` (BertExt or BertAbs, from `config.json`).
    pub fn load_trained(dir: &Path, device: Device) -> Result<Self> {
        let config_path = dir.join("config.json");
        let config: serde_json::Value =
            serde_json::from_str(&read_to_string(&config_path)?).map_err(|e| Error::json(&config_path, &e))?;
        let untrained = |notes: Vec<LoadNote>, what: &str| -> Result<()> {
            match notes.iter().find(|n| n.leaves_untrained()) {
                Some(n) => Err(Error::invalid(dir, format!("not a trained {what} model: {n}"))),
                None => Ok(()),
            }
        };
        let setting = |key: &str| config.get(key).cloned();
        // A BertExtAbs also carries the `indolm_ext` of the BertExt it started from: a decoder decides.
        if let Some(abs) = setting("indolm_abs") {
            let abs: AbsConfig =
                serde_json::from_value(abs).map_err(|e| Error::field(&config_path, "indolm_abs", e.to_string()))?;
            let (m, notes) = BertAbs::load(dir, abs, device)?;
            untrained(notes, "BertAbs")?;
            Ok(Summarizer::Abs(m))
        } else if let Some(ext) = setting("indolm_ext") {
            let ext: ExtConfig =
                serde_json::from_value(ext).map_err(|e| Error::field(&config_path, "indolm_ext", e.to_string()))?;
            let (m, notes) = BertExt::load(dir, ext, device)?;
            untrained(notes, "BertExt")?;
            Ok(Summarizer::Ext(m))
        } else {
            Err(Error::field(
                &config_path,
                "indolm_ext",
                "missing (and no indolm_abs): is this a model from `indolm finetune summarize`?",
            ))
        }
    }

    /// Writes the model directory (weights, `config.json` with the summarizer's settings, the
    /// tokenizer) that [`Summarizer::load_trained`] reads back.
    pub fn save(&self, dir: &Path) -> Result<()> {
        match self {
            Summarizer::Ext(m) => m.save(dir),
            Summarizer::Abs(m) => m.save(dir),
        }
    }
}

/// How much of an article an encoder reads ([`Summarizer::reading`]), with `[CLS]`/`[SEP]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Tokens of the whole article.
    pub tokens: usize,
    /// Its sentences.
    pub sentences: usize,
    /// Tokens within the model's positions.
    pub kept_tokens: usize,
    /// Sentences begun within them.
    pub kept_sentences: usize,
}

/// ROUGE-1/2/L of `model`'s summaries of `articles` with their intervals, and the summaries,
/// one line each in PreSumm's form (sentences separated by `<q>`: what the row was scored on).
pub fn evaluate(model: &Summarizer, system: &str, articles: &[Article]) -> Result<(Row, Vec<String>)> {
    let texts: Vec<&[Vec<String>]> = articles.iter().map(|a| a.article.as_slice()).collect();
    let predicted: Vec<String> =
        model.summarize(&texts, model.default_batch_size())?.iter().map(|s| summary_line(s)).collect();
    let pairs: Vec<(String, String)> =
        predicted.iter().zip(articles).map(|(p, a)| (p.clone(), summary_line(&a.summary))).collect();
    Ok((rouge_row(system, &pairs), predicted))
}

/// Splits plain text into sentences of lowercased words (after `.`, `!` or `?`).
pub fn sentences_of(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        current.push(word.to_lowercase());
        if word.ends_with(['.', '!', '?']) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
