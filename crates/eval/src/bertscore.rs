//! BERTScore (Zhang et al., 2020) as the `bert-score` package (0.3.13) computes it with
//! `model_type=DIR, num_layers=N` on a BERT or XLM-R folder: each text stripped and encoded with
//! its special tokens (`[CLS] … [SEP]`, XLM-R's `<s> … </s>`), cut to the model's length (the
//! tokenizer's `model_max_length`, at most the positions); the hidden states after the first N
//! encoder layers (transformers' `hidden_states[N]`, 0 the embeddings' output), each token's
//! vector normalised; every candidate token matched to its most similar reference token (the
//! special tokens among them) for precision, every reference token to its most similar candidate
//! token for recall, each averaged with token weights, and F1 their harmonic mean. The weights are
//! 1 for every token but `[CLS]` and `[SEP]` (0), or with idf ln((M + 1) / (m + 1)) for a token m
//! of the M references hold (ln(M + 1) for one none holds), as bert-score computes them on the
//! references it is given. An empty candidate or reference (two tokens) scores 0, as in
//! bert-score; a baseline file rescales each score as (s − b) / (1 − b).
//!
//! One difference by design: bert-score pads its similarity matrices with zeros to the longest
//! text of its batch (64 pairs), so a token whose every similarity is negative would count 0 in
//! some batches and its own best in others; here the best is over the text's own tokens, so a
//! pair's score never depends on the pairs scored with it. The two agree whenever a token's best
//! similarity is positive, as it is for the hidden states of BERT and XLM-R (the parity tests
//! compare them).
//!
//! Only what the model reads is tokenized ([`Scorer::token_ids`]): a long text's prefixes, cut
//! before a space and doubled until they give the model's length in tokens, which gives the same
//! first tokens as the whole text (a space ends a word for WordPiece's and SentencePiece's
//! pre-tokenizers alike). A text of more than [`MAX_TEXT_BYTES`] is refused, with its line.
//!
//! Everything runs in fp32, on the CPU or CUDA (bert-score's precision): a forward pass per
//! text is cheap beside generating the summaries. bf16 is not used: on a random model of mBERT's
//! size it moved a pair's F1 by up to 7e-5 (CPU autocast, layer 9), but neither trained weights,
//! whose outlier activations bf16 rounds worse, nor CUDA's kernels were measured.
use indolm_core::files::read_to_string;
use indolm_torch::data::batching::{by_length, token_budget};
use indolm_torch::data::tokenizer::pad_rows;
use indolm_torch::device::Precision;
use indolm_torch::error::{Error, Result, TorchContext};
use indolm_torch::model::config::BertConfig;
use indolm_torch::model::model_dir::{load_masked_lm, LoadedModel};
use indolm_torch::model::notes::Component;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

/// The longest text (a prediction or reference line) scored, in bytes: 1 MiB, far more than the
/// 512 tokens a model reads, and what the tokenizer may have to read whole when a text has no
/// space to cut it at.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The first prefix of a long text tokenized, in bytes per token the model reads (a word piece
/// is a few bytes): doubled until it gives enough tokens.
const PREFIX_BYTES_PER_TOKEN: usize = 16;

/// Per pair of a batch: each candidate token's best similarity to its reference, and each
/// reference token's to its candidate (one vector a pair).
type BestSimilarities = (Vec<Vec<f64>>, Vec<Vec<f64>>);

/// BERTScore of one candidate against its reference: similarities in [-1, 1] (about 0.6 to 1 for
/// BERT's hidden states) unless rescaled.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct BertScore {
    /// The candidate tokens' best similarities to the reference's, weighted.
    pub precision: f64,
    /// The reference tokens' best similarities to the candidate's, weighted.
    pub recall: f64,
    /// The harmonic mean of precision and recall; 0 where it is undefined (bert-score's rule).
    pub f1: f64,
}

/// The mean of each score over pairs (NaN when a score is, as bert-score's mean would be;
/// zeros for no pairs).
pub fn mean(scores: &[BertScore]) -> BertScore {
    let n = scores.len().max(1) as f64;
    let sum = |f: fn(&BertScore) -> f64| scores.iter().map(f).sum::<f64>() / n;
    BertScore { precision: sum(|s| s.precision), recall: sum(|s| s.recall), f1: sum(|s| s.f1) }
}

/// A model whose default layer bert-score knows (its `model2layers`), told apart by its
/// configuration, since a folder does not carry the model's hub name.
struct KnownModel {
    /// Its name on the hub, as bert-score keys it.
    name: &'static str,
    /// `config.json`'s `model_type`.
    model_type: &'static str,
    /// `config.json`'s `vocab_size`.
    vocab_size: i64,
    /// `config.json`'s `hidden_size`.
    hidden_size: i64,
    /// `config.json`'s `num_hidden_layers`.
    layers: i64,
    /// bert-score's default layer for it.
    layer: usize,
}

/// The multilingual models of bert-score's table indolm loads (the paper's mBERT among them).
const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "bert-base-multilingual-cased",
        model_type: "bert",
        vocab_size: 119_547,
        hidden_size: 768,
        layers: 12,
        layer: 9,
    },
    KnownModel {
        name: "xlm-roberta-base",
        model_type: "xlm-roberta",
        vocab_size: 250_002,
        hidden_size: 768,
        layers: 12,
        layer: 9,
    },
    KnownModel {
        name: "xlm-roberta-large",
        model_type: "xlm-roberta",
        vocab_size: 250_002,
        hidden_size: 1024,
        layers: 24,
        layer: 17,
    },
];

/// bert-score's default layer for the model `config` describes, with the model's name; `None`
/// when its configuration is none of the multilingual models bert-score knows
/// (bert-base-multilingual-cased, xlm-roberta-base, xlm-roberta-large).
pub(crate) fn default_layer(config: &BertConfig) -> Option<(&'static str, usize)> {
    KNOWN_MODELS
        .iter()
        .find(|m| {
            m.model_type == config.model_type
                && m.vocab_size == config.vocab_size
                && m.hidden_size == config.hidden_size
                && m.layers == config.num_hidden_layers
        })
        .map(|m| (m.name, m.layer))
}

/// The baselines of one layer from a bert-score `rescale_baseline` file, which rescale each
/// score `s` as `(s − b) / (1 − b)`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Baseline {
    /// The file they were read from.
    pub file: PathBuf,
    /// The precision, recall and F1 baselines, in that order.
    pub values: [f64; 3],
}

impl Baseline {
    /// Row `layer` of a bert-score `rescale_baseline` file: CSV with the header `LAYER,P,R,F`
    /// and a row per layer from 0 (bert-score takes the row at the layer's position; a row whose
    /// `LAYER` is another number is refused here).
    pub fn read(path: &Path, layer: usize) -> Result<Baseline> {
        let text = read_to_string(path)?;
        let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let header = reader.headers().map_err(|e| Error::invalid(path, format!("not a CSV file: {e}")))?.clone();
        if header.len() != 4 {
            return Err(Error::invalid(
                path,
                format!("expected bert-score's baseline columns LAYER,P,R,F, found {} column(s)", header.len()),
            ));
        }
        let mut rows = Vec::new();
        for (i, row) in reader.records().enumerate() {
            rows.push(row.map_err(|e| Error::invalid(path, format!("row {}: {e}", i + 1)))?);
        }
        let Some(row) = rows.get(layer) else {
            let found = match rows.len() {
                0 => "no rows".to_string(),
                n => format!("rows for layers 0 to {}", n - 1),
            };
            return Err(Error::invalid(path, format!("no baseline for layer {layer}: the file has {found}")));
        };
        let number = |i: usize| -> Result<f64> {
            row.get(i).and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite()).ok_or_else(|| {
                Error::invalid(path, format!("row for layer {layer}: column {} is not a number", &header[i]))
            })
        };
        if row[0].trim().parse::<usize>().ok() != Some(layer) {
            return Err(Error::invalid(
                path,
                format!("the row at layer {layer}'s place is LAYER {}: rows must be layers 0, 1, 2, …", &row[0]),
            ));
        }
        let values = [number(1)?, number(2)?, number(3)?];
        if values.iter().any(|&b| b >= 1.0) {
            return Err(Error::invalid(path, format!("row for layer {layer}: a baseline of 1 or more cannot rescale")));
        }
        Ok(Baseline { file: path.to_path_buf(), values })
    }

    /// `score` rescaled by these baselines.
    pub(crate) fn rescale(&self, score: BertScore) -> BertScore {
        let [p, r, f] = self.values;
        BertScore {
            precision: (score.precision - p) / (1.0 - p),
            recall: (score.recall - r) / (1.0 - r),
            f1: (score.f1 - f) / (1.0 - f),
        }
    }
}

/// How scores were computed, for reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Settings {
    /// The model folder.
    pub model: PathBuf,
    /// The hidden states used: those after this many encoder layers.
    pub layer: usize,
    /// Whose default the layer is, when it was not chosen (`bert-base-multilingual-cased` …).
    pub default_layer_of: Option<String>,
    /// Whether tokens were weighted by idf (computed on the references scored together).
    pub idf: bool,
    /// The baselines the scores were rescaled by, if any.
    pub baseline: Option<Baseline>,
    /// The longest text in tokens, special tokens included; longer ones are cut.
    pub max_tokens: usize,
}

/// A model folder loaded for BERTScore, with its layer and options.
pub struct Scorer {
    /// The model (fp32), its tokenizer and its loading notes.
    loaded: LoadedModel,
    /// The layer and the options.
    settings: Settings,
    /// Where the model runs.
    device: Device,
    /// Padded tokens per forward pass, candidates and references together.
    token_budget: usize,
}

impl Scorer {
    /// Loads the BERT or XLM-R folder `dir` onto `device` to score with the hidden states after
    /// `layer` encoder layers (0 to the model's count), or bert-score's default layer for the
    /// model when `None` (an error when bert-score has none for it). No idf, no rescaling, the
    /// device's token budget per forward pass, until set.
    pub fn new(dir: &Path, layer: Option<usize>, device: Device) -> Result<Scorer> {
        let mut loaded = load_masked_lm(dir, device)?;
        let config = &loaded.config;
        if config.model_type == "roberta" {
            return Err(Error::invalid(
                dir,
                "a RoBERTa model: bert-score encodes RoBERTa's byte-level BPE with a prefix space, which indolm does not reproduce; BERTScore here takes BERT and XLM-R folders",
            ));
        }
        let layers = config.num_hidden_layers as usize;
        let (layer, default_layer_of) = match layer {
            Some(l) => (l, None),
            None => match default_layer(config) {
                Some((name, l)) => (l, Some(name.to_string())),
                None => {
                    return Err(Error::argument(
                        "--layer",
                        format!(
                            "bert-score has no default layer for this model (by its configuration, not one of {}): choose one from 0 (the embeddings) to {layers}",
                            KNOWN_MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
                        ),
                    ))
                }
            },
        };
        if layer > layers {
            return Err(Error::argument(
                "--layer",
                format!(
                    "layer {layer} is beyond the model's {layers} layers ({}): choose 0 (the embeddings) to {layers}",
                    dir.display()
                ),
            ));
        }
        loaded.model.set_precision(Precision::Fp32);
        let max_tokens = max_tokens(dir, loaded.model.max_positions())?;
        let settings =
            Settings { model: dir.to_path_buf(), layer, default_layer_of, idf: false, baseline: None, max_tokens };
        Ok(Scorer { loaded, settings, device, token_budget: token_budget(device) })
    }

    /// With idf weights (computed on the references of each [`Scorer::score`] call) or without.
    pub fn with_idf(mut self, idf: bool) -> Scorer {
        self.settings.idf = idf;
        self
    }

    /// Rescaled by row `layer` of a bert-score `rescale_baseline` file ([`Baseline::read`]).
    pub fn with_baseline(mut self, path: &Path) -> Result<Scorer> {
        self.settings.baseline = Some(Baseline::read(path, self.settings.layer)?);
        Ok(self)
    }

    /// At most `tokens` padded tokens per forward pass (candidates and references together;
    /// a pair longer than that still goes through, alone). Batching never changes a score.
    pub fn with_token_budget(mut self, tokens: usize) -> Scorer {
        self.token_budget = tokens.max(1);
        self
    }

    /// How scores are computed.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// What the user should know about the model and the layer, one line each: loading notes
    /// (a missing MLM head is none: BERTScore does not use it) and where a default layer came from.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> =
            self.loaded.notes.iter().filter(|n| !n.initialises(Component::MlmHead)).map(|n| n.to_string()).collect();
        if let Some(name) = &self.settings.default_layer_of {
            notes.push(format!(
                "layer {}: bert-score's default for {name}, whose configuration this model has (--layer for another)",
                self.settings.layer
            ));
        }
        notes
    }

    /// The tokens `text` is scored as: stripped, with its special tokens, cut to the model's
    /// length (bert-score's `sent_encode`). Only a prefix is tokenized when it gives the model's
    /// length: cut before a space (after a character that is not one), from
    /// [`PREFIX_BYTES_PER_TOKEN`] bytes a token, doubled until it gives enough tokens or is the
    /// whole text. A word ends at a space for every tokenizer BERTScore takes, so the prefix's
    /// tokens are the first tokens of the whole text.
    pub fn token_ids(&self, text: &str) -> Result<Vec<i64>> {
        let (text, max) = (strip(text), self.settings.max_tokens);
        let wanted = max.saturating_sub(2);
        let mut end = wanted.max(1).saturating_mul(PREFIX_BYTES_PER_TOKEN);
        while end < text.len() {
            if let Some(prefix) = prefix_before_space(text, end) {
                let (ids, _) = self.loaded.tokenizer.single_row(prefix, max)?;
                if ids.len() >= wanted + 2 {
                    return Ok(ids);
                }
            }
            end = end.saturating_mul(2);
        }
        Ok(self.loaded.tokenizer.single_row(text, max)?.0)
    }

    /// The BERTScore of each `(candidate, reference)` pair of the lines of `predictions` and
    /// `references`, in order: a text past [`MAX_TEXT_BYTES`] is an error naming its file and
    /// line.
    pub fn score_files<C: AsRef<str>, R: AsRef<str>>(
        &self,
        predictions: &Path,
        references: &Path,
        pairs: &[(C, R)],
    ) -> Result<Vec<BertScore>> {
        if let Some((i, in_reference, bytes)) = first_too_long(pairs) {
            return Err(Error::invalid(if in_reference { references } else { predictions }, too_long(i, bytes)));
        }
        self.score_within_bounds(pairs)
    }

    /// The BERTScore of each `(candidate, reference)` pair, in order; a text past
    /// [`MAX_TEXT_BYTES`] is an error naming its pair.
    pub fn score<C: AsRef<str>, R: AsRef<str>>(&self, pairs: &[(C, R)]) -> Result<Vec<BertScore>> {
        if let Some((i, _, bytes)) = first_too_long(pairs) {
            return Err(Error::data("BERTScore", too_long(i, bytes)));
        }
        self.score_within_bounds(pairs)
    }

    /// [`Scorer::score`] of pairs already checked against [`MAX_TEXT_BYTES`].
    fn score_within_bounds<C: AsRef<str>, R: AsRef<str>>(&self, pairs: &[(C, R)]) -> Result<Vec<BertScore>> {
        let cands = pairs.iter().map(|(c, _)| self.token_ids(c.as_ref())).collect::<Result<Vec<_>>>()?;
        let refs = pairs.iter().map(|(_, r)| self.token_ids(r.as_ref())).collect::<Result<Vec<_>>>()?;
        let special = &self.loaded.tokenizer.special;
        let weights = if self.settings.idf {
            Weights::idf(&refs)
        } else {
            Weights::Uniform { cls: special.cls, sep: special.sep }
        };
        let lengths: Vec<usize> = cands.iter().zip(&refs).map(|(c, r)| c.len().max(r.len())).collect();
        let mut scores = vec![BertScore::default(); pairs.len()];
        tch::no_grad(|| -> Result<()> {
            // Each pair is two rows of the batch: half the budget's worth of pairs.
            for batch in by_length(&lengths, (self.token_budget / 2).max(1)) {
                let (best_p, best_r) = self.best_similarities(&batch, &cands, &refs)?;
                for ((&i, p), r) in batch.iter().zip(&best_p).zip(&best_r) {
                    let score = pair_score(&cands[i], &refs[i], p, r, &weights);
                    scores[i] = match &self.settings.baseline {
                        Some(b) => b.rescale(score),
                        None => score,
                    };
                }
            }
            Ok(())
        })?;
        Ok(scores)
    }

    /// For the pairs `batch` (indices into `cands` and `refs`, token ids): each candidate token's
    /// best cosine similarity to its reference's tokens, and each reference token's to its
    /// candidate's, on the host, one vector a pair, as long as its text.
    fn best_similarities(&self, batch: &[usize], cands: &[Vec<i64>], refs: &[Vec<i64>]) -> Result<BestSimilarities> {
        let rows: Vec<(Vec<i64>, Vec<i64>)> = batch
            .iter()
            .map(|&i| &cands[i])
            .chain(batch.iter().map(|&i| &refs[i]))
            .map(|ids| (ids.clone(), vec![0; ids.len()]))
            .collect();
        let encoded = pad_rows(rows, self.loaded.tokenizer.special.pad);
        let ids = encoded.input_ids.to_device(self.device);
        let mask = encoded.attention_mask.to_device(self.device);
        let hidden = self.loaded.model.bert.hidden_states_after(&ids, Some(&mask), self.settings.layer);
        let unit = &hidden / hidden.norm_scalaropt_dim(2.0, -1, true);
        let n = batch.len() as i64;
        let real = mask.ne(0);
        let (cand_real, ref_real) = (real.narrow(0, 0, n), real.narrow(0, n, n));
        let similarity = unit.narrow(0, 0, n).bmm(&unit.narrow(0, n, n).transpose(1, 2));
        let both_real = cand_real.unsqueeze(2).logical_and(&ref_real.unsqueeze(1));
        let similarity = similarity.masked_fill(&both_real.logical_not(), f64::NEG_INFINITY);
        let best_p = similarity.amax(2, false).masked_fill(&cand_real.logical_not(), 0.0);
        let best_r = similarity.amax(1, false).masked_fill(&ref_real.logical_not(), 0.0);
        let seq = encoded.input_ids.size()[1] as usize;
        let host = |t: &Tensor, lengths: &[usize]| -> Result<Vec<Vec<f64>>> {
            let flat = Vec::<f64>::try_from(t.to_kind(Kind::Double).to_device(Device::Cpu).reshape([-1]))
                .torch_ctx("BERTScore similarities to the host")?;
            Ok(flat.chunks(seq.max(1)).zip(lengths).map(|(row, &len)| row[..len].to_vec()).collect())
        };
        let (cand_lengths, ref_lengths) = encoded.lengths.split_at(batch.len());
        Ok((host(&best_p, cand_lengths)?, host(&best_r, ref_lengths)?))
    }
}

/// The first text past [`MAX_TEXT_BYTES`]: its pair's index, whether it is the reference, and its
/// size.
fn first_too_long<C: AsRef<str>, R: AsRef<str>>(pairs: &[(C, R)]) -> Option<(usize, bool, usize)> {
    pairs.iter().enumerate().find_map(|(i, (c, r))| {
        [(false, c.as_ref().len()), (true, r.as_ref().len())]
            .into_iter()
            .find(|&(_, bytes)| bytes > MAX_TEXT_BYTES)
            .map(|(in_reference, bytes)| (i, in_reference, bytes))
    })
}

/// The refusal of pair `index`'s text of `bytes`, past [`MAX_TEXT_BYTES`].
fn too_long(index: usize, bytes: usize) -> String {
    format!(
        "line {}: a text of {bytes} bytes, more than the {} MiB BERTScore reads of a line (the model reads its first \
         512 tokens or so)",
        index + 1,
        MAX_TEXT_BYTES >> 20
    )
}

/// `text` up to a space at or before byte `end`: the longest prefix that ends with a character
/// other than white space and is followed by a space; `None` when there is none.
fn prefix_before_space(text: &str, end: usize) -> Option<&str> {
    let mut end = end.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    loop {
        let space = text[..end].rfind(' ')?;
        let before = text[..space].trim_end_matches(' ');
        match before.chars().next_back() {
            Some(c) if !c.is_whitespace() => return Some(before),
            // Other white space before the spaces: a cut further back.
            Some(_) => end = before.len(),
            None => return None,
        }
    }
}

/// The longest text in tokens: the tokenizer's `model_max_length` (bert-score's truncation),
/// at most the model's `positions`. Without one (or transformers' "unset", 1e30), `positions`.
fn max_tokens(dir: &Path, positions: usize) -> Result<usize> {
    let path = dir.join("tokenizer_config.json");
    if !path.exists() {
        return Ok(positions);
    }
    let config: serde_json::Value =
        serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    Ok(match config.get("model_max_length").and_then(serde_json::Value::as_f64) {
        Some(n) if n >= 3.0 && n < positions as f64 => n as usize,
        _ => positions,
    })
}

/// `text` without what Python's `str.strip()` removes at either end (Unicode whitespace and the
/// separators U+001C to U+001F), as bert-score strips each text before encoding it.
fn strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// How tokens are weighted in the averages.
enum Weights {
    /// 1 for every token but `[CLS]` and `[SEP]`, 0 (bert-score without idf).
    Uniform {
        /// The `[CLS]` (`<s>`) id.
        cls: i64,
        /// The `[SEP]` (`</s>`) id.
        sep: i64,
    },
    /// ln((M + 1) / (m + 1)) for a token that `m` of `references` (M) hold.
    Idf {
        /// The references that hold each token.
        holding: HashMap<i64, usize>,
        /// M.
        references: usize,
    },
}

impl Weights {
    /// idf weights from the encoded references (special tokens included: they are in every
    /// reference, so their weight is 0).
    fn idf(refs: &[Vec<i64>]) -> Weights {
        let mut holding: HashMap<i64, usize> = HashMap::new();
        for ids in refs {
            for id in ids.iter().collect::<HashSet<_>>() {
                *holding.entry(*id).or_insert(0) += 1;
            }
        }
        Weights::Idf { holding, references: refs.len() }
    }

    /// The weight of token `id`.
    fn of(&self, id: i64) -> f64 {
        match self {
            Weights::Uniform { cls, sep } => {
                if id == *cls || id == *sep {
                    0.0
                } else {
                    1.0
                }
            }
            Weights::Idf { holding, references } => {
                let m = holding.get(&id).copied().unwrap_or(0);
                ((*references as f64 + 1.0) / (m as f64 + 1.0)).ln()
            }
        }
    }
}

/// One pair's scores from its tokens' best similarities, as bert-score's `greedy_cos_idf`: the
/// weighted means (NaN when the weights sum to 0), F1 from them (0 when that is undefined), then
/// precision and recall 0 when either text is empty (its two special tokens only).
fn pair_score(cand: &[i64], reference: &[i64], best_p: &[f64], best_r: &[f64], weights: &Weights) -> BertScore {
    let weighted = |ids: &[i64], best: &[f64]| {
        let (sum, total) = ids.iter().zip(best).fold((0.0, 0.0), |(s, t), (&id, &b)| {
            let w = weights.of(id);
            (s + w * b, t + w)
        });
        sum / total
    };
    let (mut precision, mut recall) = (weighted(cand, best_p), weighted(reference, best_r));
    let f1 = 2.0 * precision * recall / (precision + recall);
    if cand.len() == 2 || reference.len() == 2 {
        (precision, recall) = (0.0, 0.0);
    }
    BertScore { precision, recall, f1: if f1.is_nan() { 0.0 } else { f1 } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_end_before_a_space_after_a_word() {
        assert_eq!(prefix_before_space("satu dua tiga", 9), Some("satu dua"));
        assert_eq!(prefix_before_space("satu dua tiga", 8), Some("satu"));
        assert_eq!(prefix_before_space("satu \t dua", 10), Some("satu"));
        assert_eq!(prefix_before_space("satu dua\u{a0} tiga", 15), Some("satu"));
        assert_eq!(prefix_before_space("satu  dua", 9), Some("satu"));
        assert_eq!(prefix_before_space("satudua", 5), None);
        assert_eq!(prefix_before_space(" satu", 5), None);
        // A cut inside a character moves back to its start.
        assert_eq!(prefix_before_space("é é", 4), Some("é"));
    }

    #[test]
    fn strip_removes_what_python_strips() {
        assert_eq!(strip(" \t\u{1c}Ibu kota\u{a0}\u{3000}\n"), "Ibu kota");
        assert_eq!(strip("\u{1f}\u{85} "), "");
        assert_eq!(strip("a\u{200b}"), "a\u{200b}", "U+200B is not whitespace to Python either");
    }

    #[test]
    fn weights_and_pair_scores_follow_bert_score() {
        let uniform = Weights::Uniform { cls: 2, sep: 3 };
        assert_eq!([uniform.of(2), uniform.of(3), uniform.of(7)], [0.0, 0.0, 1.0]);
        let refs = vec![vec![2, 7, 8, 3], vec![2, 7, 7, 3]];
        let idf = Weights::idf(&refs);
        assert_eq!(idf.of(2), 0.0, "in every reference");
        assert_eq!(idf.of(7), 0.0, "in both references");
        assert!((idf.of(8) - (3.0f64 / 2.0).ln()).abs() < 1e-15);
        assert!((idf.of(9) - 3.0f64.ln()).abs() < 1e-15, "in none");

        let s = pair_score(&[2, 7, 8, 3], &[2, 7, 3], &[0.5, 1.0, 0.5, 0.5], &[0.5, 1.0, 0.5], &uniform);
        assert_eq!(s, BertScore { precision: 0.75, recall: 1.0, f1: 2.0 * 0.75 / 1.75 });
        // An empty candidate: 0 everywhere (its weights sum to 0, so F1 is undefined).
        let s = pair_score(&[2, 3], &[2, 7, 3], &[0.9, 0.9], &[0.9, 0.9, 0.9], &uniform);
        assert_eq!(s, BertScore::default());
        // Weights that sum to 0 on a non-empty text: NaN, F1 0, as bert-score gives.
        let s = pair_score(&[2, 7, 3], &[2, 7, 3], &[1.0; 3], &[1.0; 3], &idf);
        assert!(s.precision.is_nan() && s.recall.is_nan() && s.f1 == 0.0, "{s:?}");
        let m = mean(&[BertScore { precision: 1.0, recall: 0.5, f1: 0.0 }, BertScore::default()]);
        assert_eq!(m, BertScore { precision: 0.5, recall: 0.25, f1: 0.0 });
    }

    #[test]
    fn default_layers_are_bert_scores_for_the_models_it_knows() {
        let mbert = BertConfig::new(119_547, 768, 12, 12, 3072);
        assert_eq!(default_layer(&mbert), Some(("bert-base-multilingual-cased", 9)));
        let mut xlmr = BertConfig::new(250_002, 1024, 24, 16, 4096);
        xlmr.model_type = "xlm-roberta".into();
        assert_eq!(default_layer(&xlmr), Some(("xlm-roberta-large", 17)));
        assert_eq!(
            default_layer(&BertConfig::new(32_000, 768, 12, 12, 3072)),
            None,
            "a BERT bert-score has no layer for"
        );
    }

    #[test]
    fn baselines_are_read_by_layer_and_refused_when_malformed() {
        let dir = std::env::temp_dir().join(format!("indolm-bertscore-baseline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("baseline.tsv");
        std::fs::write(&file, "LAYER,P,R,F\n0,0.25,0.5,0.4\n1,0.6,0.61,0.62\n").unwrap();
        let b = Baseline::read(&file, 1).unwrap();
        assert_eq!(b.values, [0.6, 0.61, 0.62]);
        let r = Baseline::read(&file, 0).unwrap().rescale(BertScore { precision: 0.625, recall: 0.75, f1: 0.4 });
        assert_eq!(r, BertScore { precision: 0.5, recall: 0.5, f1: 0.0 });
        let err = Baseline::read(&file, 2).unwrap_err().to_string();
        assert!(err.contains("no baseline for layer 2: the file has rows for layers 0 to 1"), "{err}");
        std::fs::write(&file, "LAYER,P,R,F\n1,0.25,0.5,0.4\n").unwrap();
        let err = Baseline::read(&file, 0).unwrap_err().to_string();
        assert!(err.contains("place is LAYER 1"), "{err}");
        std::fs::write(&file, "LAYER,P,R\n0,0.25,0.5\n").unwrap();
        assert!(Baseline::read(&file, 0).unwrap_err().to_string().contains("found 3 column(s)"));
        std::fs::write(&file, "LAYER,P,R,F\n0,x,0.5,0.4\n").unwrap();
        assert!(Baseline::read(&file, 0).unwrap_err().to_string().contains("column P is not a number"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
