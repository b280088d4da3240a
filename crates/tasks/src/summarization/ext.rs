//! BertExt (PreSumm, as the Liputan6 paper uses it): every sentence wrapped in `[CLS] … [SEP]`
//! with alternating segment ids (truncated at the model's positions), the `[CLS]` vectors plus
//! sinusoidal sentence positions into a randomly initialised inter-sentence transformer
//! (pre-LayerNorm layers as PreSumm's `ExtTransformerEncoder`), a sigmoid scorer and binary
//! cross-entropy; Adam with the Noam schedule; at test time sentences are taken by score,
//! skipping any that shares a word trigram with one already taken, until at least
//! `min_sentences` and `min_words` are reached.
use super::input::{encode_articles, ArticleBatch};
use super::transformer::{positional, FeedForward, MultiHeadAttention, NORM_EPS};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::Precision;
use indolm_torch::error::Result;
use indolm_torch::model::layers::{dropout, LayerNorm, Linear};
use indolm_torch::model::model_dir::{copy_into, read_model_files, save_model_files_as};
use indolm_torch::model::{BertConfig, BertModel, Component, LoadNote};
use std::collections::HashSet;
use std::path::Path;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// BertExt's inter-sentence encoder and selection settings (a recipe's `[ext]`, stored in the
/// model's `config.json` as `indolm_ext`); defaults in brackets.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExtConfig {
    /// Inter-sentence transformer layers (2).
    #[serde(default = "d_layers")]
    pub layers: i64,
    /// Their attention heads (8).
    #[serde(default = "d_heads")]
    pub heads: i64,
    /// Inner width of their feed-forward blocks (2048).
    #[serde(default = "d_ff")]
    pub ff: i64,
    /// Their dropout (0.1).
    #[serde(default = "d_dropout")]
    pub dropout: f64,
    /// Sentences selected at least (2).
    #[serde(default = "d_min_sentences")]
    pub min_sentences: usize,
    /// Words selected at least (15).
    #[serde(default = "d_min_words")]
    pub min_words: usize,
}

fn d_layers() -> i64 {
    2
}
fn d_heads() -> i64 {
    8
}
fn d_ff() -> i64 {
    2048
}
fn d_dropout() -> f64 {
    0.1
}
fn d_min_sentences() -> usize {
    2
}
fn d_min_words() -> usize {
    15
}

impl Default for ExtConfig {
    fn default() -> Self {
        ExtConfig { layers: 2, heads: 8, ff: 2048, dropout: 0.1, min_sentences: 2, min_words: 15 }
    }
}

/// One layer of PreSumm's `ExtTransformerEncoder` (pre-LayerNorm; the first layer skips the
/// norm on its input).
struct InterLayer {
    norm: LayerNorm,
    self_attn: MultiHeadAttention,
    feed_forward: FeedForward,
    dropout: f64,
}

impl InterLayer {
    fn new(p: tch::nn::Path, h: i64, heads: i64, ff: i64, dropout: f64) -> Self {
        InterLayer {
            norm: LayerNorm::new(&p / "layer_norm", h, NORM_EPS),
            self_attn: MultiHeadAttention::new(&p / "self_attn", h, heads, dropout),
            feed_forward: FeedForward::new(&p / "feed_forward", h, ff, dropout),
            dropout,
        }
    }

    fn forward(&self, x: &Tensor, mask: &Tensor, first: bool, train: bool) -> Tensor {
        let input = if first { x.shallow_clone() } else { self.norm.forward(x) };
        let out = dropout(&self.self_attn.forward(&input, &input, Some(mask), false, train), self.dropout, train) + x;
        self.feed_forward.forward(&out, train)
    }
}

/// BertExt: the BERT encoder, the inter-sentence transformer and the sentence scorer (`bert.*`,
/// `ext_layer.*`).
pub struct BertExt {
    /// Its variables.
    pub vs: VarStore,
    /// The encoder (`bert.*`, no pooler).
    pub bert: BertModel,
    layers: Vec<InterLayer>,
    final_norm: LayerNorm,
    scorer: Linear,
    /// The encoder's configuration.
    pub config: BertConfig,
    /// Inter-sentence encoder and selection settings.
    pub ext: ExtConfig,
    /// The model directory's tokenizer.
    pub tokenizer: TextTokenizer,
}

impl BertExt {
    /// Sets the dtype of every matrix product: the encoder's and the inter-sentence layers'
    /// (the sentence scorer stays fp32).
    pub fn set_precision(&mut self, precision: Precision) {
        self.bert.precision = precision;
        for layer in self.layers.iter_mut() {
            layer.self_attn.precision = precision;
            layer.feed_forward.precision = precision;
        }
    }

    /// Builds BertExt on a model directory: a BertExt directory, or a BERT one whose missing
    /// sentence scorer starts random (with a note).
    pub fn load(dir: &Path, ext: ExtConfig, device: Device) -> Result<(Self, Vec<LoadNote>)> {
        let files = read_model_files(dir)?;
        indolm_torch::model::model_dir::require_two_token_types(&files.config, dir, "BertExt")?;
        let vs = VarStore::new(device);
        let root = vs.root();
        let h = files.config.hidden_size;
        let bert = BertModel::new(&root / "bert", &files.config, false);
        let e = &root / "ext_layer";
        let layers = (0..ext.layers)
            .map(|i| InterLayer::new(&e / "transformer_inter" / i, h, ext.heads, ext.ff, ext.dropout))
            .collect();
        let final_norm = LayerNorm::new(&e / "layer_norm", h, NORM_EPS);
        let scorer = Linear::new(&e / "wo", h, 1, 0.02);
        let mut notes = files.notes;
        notes.extend(copy_into(&vs, files.tensors, &files.weights_path, &[Component::SentenceScorer])?);
        Ok((
            BertExt { vs, bert, layers, final_norm, scorer, config: files.config, ext, tokenizer: files.tokenizer },
            notes,
        ))
    }

    /// Encodes articles for the encoder (see `input`).
    pub fn encode(&self, articles: &[&[Vec<String>]]) -> Result<ArticleBatch> {
        encode_articles(&self.tokenizer, self.bert.embeddings.max_positions(), articles, self.vs.device())
    }

    /// Sentence scores in (0, 1) [articles, sentences] (0 at padding).
    pub fn scores(&self, batch: &ArticleBatch, train: bool) -> Tensor {
        let hidden = batch.encode(&self.bert, train);
        let h = self.config.hidden_size;
        let (b, s) = batch.cls_positions.size2().unwrap();
        let vectors = hidden.reshape([-1, h]).index_select(0, &batch.cls_positions.reshape([-1])).view([b, s, h]);
        let mask_f = batch.sentence_mask.to_kind(Kind::Float);
        let device = vectors.device();
        let mut x = vectors * mask_f.unsqueeze(-1) + positional(0, s, h, device).unsqueeze(0);
        let attn_mask = batch.sentence_mask.ne(0).view([b, 1, 1, s]);
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(&x, &attn_mask, i == 0, train);
        }
        let x = self.final_norm.forward(&x);
        self.scorer.forward(&x, Precision::Fp32).squeeze_dim(-1).sigmoid() * mask_f
    }

    /// Binary cross-entropy over real sentences against 0/1 labels [articles, sentences].
    pub fn loss(&self, batch: &ArticleBatch, labels: &Tensor, train: bool) -> Tensor {
        let scores = self.scores(batch, train).clamp(1e-7, 1.0 - 1e-7);
        let mask = batch.sentence_mask.to_kind(Kind::Float);
        let log_p = scores.log();
        let log_not_p = scores.neg().log1p();
        let bce = -(labels * log_p + labels.neg().g_add_scalar(1.0) * log_not_p);
        (bce * &mask).sum(Kind::Float) / mask.sum(Kind::Float)
    }

    /// Writes a model directory: `config.json` (architecture `BertExt`, settings under
    /// `indolm_ext`), the weights and the tokenizer.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let extra = serde_json::Map::from_iter([(
            "indolm_ext".to_string(),
            serde_json::to_value(&self.ext).expect("serializes"),
        )]);
        save_model_files_as(dir, &self.config.to_hf_json_as("BertExt", extra), &self.vs, &self.tokenizer)
    }
}

fn trigrams(words: &[String]) -> HashSet<(String, String, String)> {
    words.windows(3).map(|w| (w[0].clone(), w[1].clone(), w[2].clone())).collect()
}

/// Sentences by descending score, skipping any sharing a trigram with one taken, until at
/// least `min_sentences` and `min_words`; returned in article order.
pub fn select(article: &[Vec<String>], scores: &[f64], min_sentences: usize, min_words: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len().min(article.len())).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let (mut chosen, mut seen, mut words) = (Vec::new(), HashSet::new(), 0);
    for i in order {
        let tri = trigrams(&article[i]);
        if !tri.is_disjoint(&seen) {
            continue;
        }
        seen.extend(tri);
        words += article[i].len();
        chosen.push(i);
        if chosen.len() >= min_sentences && words >= min_words {
            break;
        }
    }
    chosen.sort_unstable();
    chosen
}

/// Oracle labels as 0/1 rows padded to the batch's sentence count.
pub fn label_tensor(oracles: &[Vec<usize>], batch: &ArticleBatch) -> Tensor {
    let (b, s) = batch.cls_positions.size2().unwrap();
    let mut labels = vec![0f32; (b * s) as usize];
    for (r, (oracle, &n)) in oracles.iter().zip(&batch.sentences).enumerate() {
        for &i in oracle.iter().filter(|&&i| i < n) {
            labels[r * s as usize + i] = 1.0;
        }
    }
    Tensor::from_slice(&labels).view([b, s]).to_device(batch.input_ids.device())
}

#[cfg(test)]
mod tests {
    use super::super::input::encode_articles;
    use super::*;
    use indolm_torch::data::tokenizer::test_tokenizer;

    fn sents(sentences: &[&str]) -> Vec<Vec<String>> {
        sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
    }

    #[test]
    fn selection_breaks_ties_by_position_and_stops_at_the_minimums() {
        let article = sents(&["a b c", "x", "a b c d", "y z"]);
        // By score: 2, then 0 and 1 (tied: the earlier first), then 3. 0 repeats "a b c" from
        // 2 and is skipped; 1 has no trigram and never clashes.
        let scores = [0.5, 0.5, 0.9, 0.1];
        assert_eq!(select(&article, &scores, 2, 5), vec![1, 2]);
        assert_eq!(select(&article, &scores, 2, 7), vec![1, 2, 3]);
        // Minimums out of reach: every sentence that does not clash.
        assert_eq!(select(&article, &scores, 9, 100), vec![1, 2, 3]);
        assert_eq!(select(&article, &scores, 1, 0), vec![2]);
        // Only scored sentences are candidates.
        assert_eq!(select(&article, &[0.1, 0.9], 3, 100), vec![0, 1]);
        assert_eq!(select(&article, &[], 1, 1), Vec::<usize>::new());
    }

    #[test]
    fn oracle_labels_are_ones_at_the_sentences_that_fit() {
        let t = test_tokenizer(&["a", "b"]);
        let (first, second) = (sents(&["a", "b", "a b"]), sents(&["b"]));
        let batch = encode_articles(&t, 512, &[&first, &second], Device::Cpu).unwrap();
        // The second article has one sentence: its oracle index 5 is dropped.
        let labels = label_tensor(&[vec![0, 2], vec![0, 5]], &batch);
        assert_eq!(Vec::<Vec<f32>>::try_from(&labels).unwrap(), vec![vec![1.0, 0.0, 1.0], vec![1.0, 0.0, 0.0]]);
    }
}
