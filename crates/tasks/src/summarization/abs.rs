//! BertAbs (PreSumm, as the Liputan6 paper uses it): the BERT encoder over the article
//! (encoded as for BertExt) and a randomly initialised 6-layer transformer decoder (PreSumm's
//! `TransformerDecoder`: pre-LayerNorm self-attention, context attention over the encoder
//! states, feed-forward; embeddings scaled by √hidden plus sinusoidal positions). The decoder's
//! word embeddings start as a copy of BERT's and the generator's output projection is tied to
//! them. Training minimises PreSumm's label-smoothed KL divergence (smoothing mass spread over
//! V − 2 entries, padding zeroed) per target token; generation is `beam::beam_search_batch`
//! over `DecodeState`, which decodes a batch of articles and caches each layer's
//! self-attention keys and values as PreSumm does.
//! BertExtAbs is this model with its encoder loaded from a fine-tuned BertExt.
//!
//! Targets are `bos s1 split s2 … eos` with PreSumm's markers `[unused0]`, `[unused2]`,
//! `[unused1]`; a vocabulary without them uses `[CLS]`, `[MASK]` and `[SEP]` (with a note).
use super::beam::{beam_search_batch, words, BeamConfig};
use super::input::TargetMarkers;
use super::input::{encode_articles, encode_target, targets_of, ArticleBatch};
use super::transformer::{positional, FeedForward, MultiHeadAttention, NORM_EPS};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::{to_device_queued, Precision};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::layers::{dropout, LayerNorm};
use indolm_torch::model::model_dir::{copy_into, read_model_files, save_model_files_as};
use indolm_torch::model::{BertConfig, BertModel, Component, LoadNote};
use std::path::Path;
use tch::nn::{Init, VarStore};
use tch::{Device, Kind, Tensor};

/// BertAbs's decoder, training and decoding settings (a recipe's `[abs]`, stored in the model's
/// `config.json` as `indolm_abs`); defaults (in brackets) are PreSumm's and the Liputan6 paper's.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AbsConfig {
    /// Decoder layers (6).
    pub layers: i64,
    /// Decoder attention heads (8); must divide the encoder's hidden size.
    pub heads: i64,
    /// Inner width of the decoder's feed-forward blocks (2048).
    pub ff: i64,
    /// Decoder dropout (PreSumm: 0.2).
    pub dropout: f64,
    /// Label smoothing ε of the training loss (0.1).
    pub label_smoothing: f64,
    /// Target tokens kept for training (PreSumm's `max_tgt_len`), markers included.
    pub max_target_tokens: usize,
    /// Beam size (5).
    pub beam: usize,
    /// GNMT length-penalty exponent α (0.6).
    pub alpha: f64,
    /// Words before the summary may end.
    pub min_length: usize,
    /// Tokens generated at most.
    pub max_length: usize,
    /// Sentences before the summary may end (2).
    pub min_sentences: usize,
    /// Drop beam candidates that repeat a word trigram (on).
    pub block_trigrams: bool,
    /// Articles decoded together by one batched beam search (16).
    pub decode_batch: usize,
}

impl Default for AbsConfig {
    /// PreSumm's BertAbs and the Liputan6 paper's decoding.
    fn default() -> Self {
        AbsConfig {
            layers: 6,
            heads: 8,
            ff: 2048,
            dropout: 0.2,
            label_smoothing: 0.1,
            max_target_tokens: 140,
            beam: 5,
            alpha: 0.6,
            min_length: 15,
            max_length: 150,
            min_sentences: 2,
            block_trigrams: true,
            decode_batch: 16,
        }
    }
}

/// PreSumm's `TransformerDecoderLayer`.
struct DecoderLayer {
    norm_1: LayerNorm,
    self_attn: MultiHeadAttention,
    norm_2: LayerNorm,
    context_attn: MultiHeadAttention,
    feed_forward: FeedForward,
    dropout: f64,
}

impl DecoderLayer {
    fn new(p: tch::nn::Path, h: i64, heads: i64, ff: i64, dropout: f64) -> Self {
        DecoderLayer {
            norm_1: LayerNorm::new(&p / "layer_norm_1", h, NORM_EPS),
            self_attn: MultiHeadAttention::new(&p / "self_attn", h, heads, dropout),
            norm_2: LayerNorm::new(&p / "layer_norm_2", h, NORM_EPS),
            context_attn: MultiHeadAttention::new(&p / "context_attn", h, heads, dropout),
            feed_forward: FeedForward::new(&p / "feed_forward", h, ff, dropout),
            dropout,
        }
    }

    fn forward(&self, x: &Tensor, memory: &(Tensor, Tensor), source_mask: Option<&Tensor>, train: bool) -> Tensor {
        let normed = self.norm_1.forward(x);
        let query = dropout(&self.self_attn.forward(&normed, &normed, None, true, train), self.dropout, train) + x;
        let context = self.context_attn.attend(&self.norm_2.forward(&query), memory, source_mask, false, train);
        self.feed_forward.forward(&(dropout(&context, self.dropout, train) + query), train)
    }
}

/// Which article each hypothesis of a decoding step reads, laid out for the context attention:
/// the hypotheses of each article searching are gathered into one row of queries
/// [articles, width] (padded by repeating a row), so that the encoder states are attended per
/// article instead of being copied once per hypothesis.
struct ContextLayout {
    /// Per layer, the keys and values of the searching articles' encoder states.
    memory: Vec<(Tensor, Tensor)>,
    /// [articles, 1, 1, source]: true at the articles' real (unpadded) tokens.
    mask: Tensor,
    /// [articles · width]: the hypothesis in each query slot.
    slots: Tensor,
    /// [hypotheses]: the query slot of each hypothesis.
    slot_of: Tensor,
    /// Query slots per article.
    width: i64,
}

impl DecoderLayer {
    /// One decoding step for new tokens [hypotheses, 1, hidden]: their self-attention keys and
    /// values are appended to `cache` (the earlier tokens'), so only the new position is
    /// computed; the context attention reads each hypothesis's own article (`layout`).
    fn step(
        &self,
        x: &Tensor,
        cache: &mut Option<(Tensor, Tensor)>,
        memory: &(Tensor, Tensor),
        layout: &ContextLayout,
    ) -> Tensor {
        let normed = self.norm_1.forward(x);
        let (k, v) = self.self_attn.keys_values(&normed);
        let kv = match cache.take() {
            Some((past_k, past_v)) => (Tensor::cat(&[past_k, k], 2), Tensor::cat(&[past_v, v], 2)),
            None => (k, v),
        };
        let query = self.self_attn.attend(&normed, &kv, None, false, false) + x;
        *cache = Some(kv);
        let hidden = query.size()[2];
        let articles = layout.mask.size()[0];
        let grouped = self.norm_2.forward(&query).squeeze_dim(1).index_select(0, &layout.slots).view([
            articles,
            layout.width,
            hidden,
        ]);
        let context = self.context_attn.attend(&grouped, memory, Some(&layout.mask), false, false);
        let context = context.view([articles * layout.width, hidden]).index_select(0, &layout.slot_of).unsqueeze(1);
        self.feed_forward.forward(&(context + query), false)
    }
}

/// PreSumm's `TransformerDecoder` (`decoder.*`).
struct Decoder {
    embeddings: Tensor,
    layers: Vec<DecoderLayer>,
    norm: LayerNorm,
    hidden: i64,
    pad: i64,
    dropout: f64,
}

impl Decoder {
    /// Keys and values of the encoder states for every layer's context attention.
    fn memory(&self, encoder_states: &Tensor) -> Vec<(Tensor, Tensor)> {
        self.layers.iter().map(|l| l.context_attn.keys_values(encoder_states)).collect()
    }

    /// Final hidden states [batch, len, hidden] of target prefixes [batch, len].
    fn forward(
        &self,
        targets: &Tensor,
        memory: &[(Tensor, Tensor)],
        source_mask: Option<&Tensor>,
        train: bool,
    ) -> Tensor {
        let len = targets.size()[1];
        let embedded =
            Tensor::embedding(&self.embeddings, targets, self.pad, false, false) * (self.hidden as f64).sqrt();
        let mut x =
            dropout(&(embedded + positional(0, len, self.hidden, targets.device()).unsqueeze(0)), self.dropout, train);
        for (layer, kv) in self.layers.iter().zip(memory) {
            x = layer.forward(&x, kv, source_mask, train);
        }
        self.norm.forward(&x)
    }

    /// Final hidden states [hypotheses, hidden] of `tokens` [hypotheses] at `position`, every
    /// hypothesis's earlier tokens being in `caches` (one per layer).
    fn step(
        &self,
        tokens: &Tensor,
        position: i64,
        caches: &mut [Option<(Tensor, Tensor)>],
        layout: &ContextLayout,
    ) -> Tensor {
        let embedded =
            Tensor::embedding(&self.embeddings, tokens, self.pad, false, false) * (self.hidden as f64).sqrt();
        let mut x = (embedded + positional(position, 1, self.hidden, tokens.device())).unsqueeze(1);
        for ((layer, cache), kv) in self.layers.iter().zip(caches.iter_mut()).zip(&layout.memory) {
            x = layer.step(&x, cache, kv, layout);
        }
        self.norm.forward(&x).squeeze_dim(1)
    }
}

/// Incremental decoding of a batch of articles: the encoder states' keys and values computed
/// once, and for every layer the self-attention keys and values of each hypothesis's tokens so
/// far, so that a step runs the decoder on one new token per hypothesis (PreSumm's layer
/// cache). Hypotheses come article after article; an article whose search is over simply has
/// none, and the encoder states of the articles still searching are selected when that set
/// changes.
pub struct DecodeState<'a> {
    model: &'a BertAbs,
    /// Per layer, keys and values of every article's encoder states [articles, heads, source, d].
    memory: Vec<(Tensor, Tensor)>,
    /// [articles, 1, 1, source]: true at real tokens.
    mask: Tensor,
    caches: Vec<Option<(Tensor, Tensor)>>,
    length: i64,
    /// The article of each hypothesis of the previous step (before the first: the articles).
    article_of: Vec<i64>,
    /// The articles searching at the previous step, with their memory and mask selected.
    searching: Option<SearchingArticles>,
}

/// The articles still searching at a step, with their encoder states' keys and values (per
/// layer) and source mask selected from the whole batch's.
struct SearchingArticles {
    articles: Vec<i64>,
    memory: Vec<(Tensor, Tensor)>,
    mask: Tensor,
}

impl<'a> DecodeState<'a> {
    /// Encodes `articles` (padded to the longest) and computes every layer's context keys and
    /// values; no token decoded yet.
    pub fn new(model: &'a BertAbs, articles: &[&[Vec<String>]]) -> Result<Self> {
        let batch = model.encode(articles)?;
        let states = tch::no_grad(|| batch.encode(&model.bert, false));
        let memory = tch::no_grad(|| model.decoder.memory(&states));
        let (n, source) = batch.attention.size2().expect("[articles, tokens]");
        let mask = batch.attention.to_kind(Kind::Bool).view([n, 1, 1, source]);
        Ok(DecodeState {
            model,
            caches: model.decoder.layers.iter().map(|_| None).collect(),
            memory,
            mask,
            length: 0,
            article_of: (0..n).collect(),
            searching: None,
        })
    }

    /// Next-token log-probabilities [hypotheses, vocab] after each hypothesis appends its
    /// token; hypothesis `i` continues row `parents[i]` of the previous step (in the first step,
    /// article `parents[i]`). Each article's hypotheses must be contiguous.
    pub fn step(&mut self, parents: &[i64], tokens: &[i64]) -> Tensor {
        tch::no_grad(|| {
            let device = self.model.vs.device();
            // Host values go to the device queued (pinned, non-blocking on CUDA): a decoding step
            // makes the host wait only where the beam search reads its candidates.
            let parent_rows = to_device_queued(parents, &[parents.len() as i64], device);
            for cache in self.caches.iter_mut() {
                if let Some((k, v)) = cache.take() {
                    *cache = Some((k.index_select(0, &parent_rows), v.index_select(0, &parent_rows)));
                }
            }
            self.article_of = parents.iter().map(|&p| self.article_of[p as usize]).collect();
            let layout = self.layout(device);
            let hidden = self.model.decoder.step(
                &to_device_queued(tokens, &[tokens.len() as i64], device),
                self.length,
                &mut self.caches,
                &layout,
            );
            self.searching = Some(SearchingArticles {
                articles: self.articles_searching(),
                memory: layout.memory,
                mask: layout.mask,
            });
            self.length += 1;
            self.model.log_probs(&hidden)
        })
    }

    /// The articles of the current hypotheses, in order, each once.
    fn articles_searching(&self) -> Vec<i64> {
        let mut out: Vec<i64> = Vec::new();
        for &a in &self.article_of {
            if out.last() != Some(&a) {
                out.push(a);
            }
        }
        out
    }

    /// The context-attention layout of the current hypotheses.
    fn layout(&mut self, device: Device) -> ContextLayout {
        let articles = self.articles_searching();
        let (memory, mask) = match self.searching.take() {
            Some(previous) if previous.articles == articles => (previous.memory, previous.mask),
            _ if articles.len() as i64 == self.mask.size()[0] => (
                self.memory.iter().map(|(k, v)| (k.shallow_clone(), v.shallow_clone())).collect(),
                self.mask.shallow_clone(),
            ),
            _ => {
                let index = to_device_queued(&articles, &[articles.len() as i64], device);
                let memory =
                    self.memory.iter().map(|(k, v)| (k.index_select(0, &index), v.index_select(0, &index))).collect();
                (memory, self.mask.index_select(0, &index))
            }
        };
        // Each article's hypotheses into one row of `width` query slots.
        let mut groups: Vec<Vec<i64>> = Vec::new();
        for (row, &a) in self.article_of.iter().enumerate() {
            match groups.last_mut() {
                Some(g) if self.article_of[g[0] as usize] == a => g.push(row as i64),
                _ => groups.push(vec![row as i64]),
            }
        }
        let width = groups.iter().map(Vec::len).max().unwrap_or(1);
        let mut slots = Vec::with_capacity(groups.len() * width);
        let mut slot_of = vec![0i64; self.article_of.len()];
        for (g, rows) in groups.iter().enumerate() {
            for k in 0..width {
                let row = rows[k.min(rows.len() - 1)];
                if k < rows.len() {
                    slot_of[row as usize] = (g * width + k) as i64;
                }
                slots.push(row);
            }
        }
        ContextLayout {
            memory,
            mask,
            slots: to_device_queued(&slots, &[slots.len() as i64], device),
            slot_of: to_device_queued(&slot_of, &[slot_of.len() as i64], device),
            width: width as i64,
        }
    }
}

/// BertAbs (and BertExtAbs): the BERT encoder, PreSumm's transformer decoder and the generator
/// (`bert.*`, `decoder.*`, `generator.bias`).
pub struct BertAbs {
    /// Its variables.
    pub vs: VarStore,
    /// The encoder (`bert.*`, no pooler).
    pub bert: BertModel,
    decoder: Decoder,
    generator_bias: Tensor,
    /// The encoder's configuration.
    pub config: BertConfig,
    /// Decoder and decoding settings.
    pub abs: AbsConfig,
    /// The model directory's tokenizer.
    pub tokenizer: TextTokenizer,
    /// Ids of the target markers.
    pub markers: TargetMarkers,
    /// Every vocabulary entry's text, for trigram blocking and decoding.
    pieces: Vec<String>,
}

/// Label-smoothed KL divergence summed over targets (PreSumm's `LabelSmoothingLoss`):
/// the gold token gets 1 − ε, every other entry but padding ε / (V − 2).
pub fn label_smoothed_loss(log_probs: &Tensor, gold: &Tensor, smoothing: f64, pad: i64) -> Tensor {
    label_smoothed_losses(log_probs, gold, smoothing, pad).sum(Kind::Float)
}

/// [`label_smoothed_loss`] of each row of `log_probs` [rows, vocab] against `gold` [rows].
fn label_smoothed_losses(log_probs: &Tensor, gold: &Tensor, smoothing: f64, pad: i64) -> Tensor {
    let vocab = log_probs.size()[1];
    let gold_lp = log_probs.gather(1, &gold.unsqueeze(1), false).squeeze_dim(1);
    if smoothing <= 0.0 {
        return -gold_lp;
    }
    let confidence = 1.0 - smoothing;
    let spread = smoothing / (vocab - 2) as f64;
    let entropy = confidence * confidence.ln() + smoothing * spread.ln();
    let others = log_probs.sum_dim_intlist(1, false, Kind::Float) - &gold_lp - log_probs.select(1, pad);
    -(gold_lp * confidence) - others * spread + entropy
}

impl BertAbs {
    /// Loads a BertAbs directory, or starts one from a BERT (task abs) or BertExt (task
    /// extabs) directory: the decoder is then initialised, its word embeddings copied from the
    /// encoder's.
    pub fn load(dir: &Path, abs: AbsConfig, device: Device) -> Result<(Self, Vec<LoadNote>)> {
        let mut files = read_model_files(dir)?;
        indolm_torch::model::model_dir::require_two_token_types(&files.config, dir, "BertAbs")?;
        let mut notes = std::mem::take(&mut files.notes);
        let ext_layers: Vec<String> = files.tensors.keys().filter(|n| n.starts_with("ext_layer.")).cloned().collect();
        if !ext_layers.is_empty() {
            for name in &ext_layers {
                files.tensors.remove(name);
            }
            notes.push(LoadNote::SentenceScorerUnused { tensors: ext_layers.len() });
        }
        let has_decoder = files.tensors.contains_key("decoder.embeddings.weight");
        let vs = VarStore::new(device);
        let root = vs.root();
        let c = &files.config;
        let h = c.hidden_size;
        if h % abs.heads != 0 {
            return Err(Error::invalid(
                dir,
                format!("hidden size {h} is not divisible by the decoder's {} heads", abs.heads),
            ));
        }
        let bert = BertModel::new(&root / "bert", c, false);
        let d = &root / "decoder";
        let decoder = Decoder {
            embeddings: (&d / "embeddings").var("weight", &[c.vocab_size, h], Init::Randn { mean: 0.0, stdev: 0.02 }),
            layers: (0..abs.layers)
                .map(|i| DecoderLayer::new(&d / "transformer_layers" / i, h, abs.heads, abs.ff, abs.dropout))
                .collect(),
            norm: LayerNorm::new(&d / "layer_norm", h, NORM_EPS),
            hidden: h,
            pad: files.tokenizer.special.pad,
            dropout: abs.dropout,
        };
        let generator_bias = (&root / "generator").var("bias", &[c.vocab_size], Init::Const(0.0));
        notes.extend(copy_into(&vs, files.tensors, &files.weights_path, &[Component::Decoder, Component::Generator])?);
        if !has_decoder {
            tch::no_grad(|| decoder.embeddings.shallow_clone().copy_(&bert.embeddings.word_embeddings));
        }
        let (markers, note) = TargetMarkers::of(&files.tokenizer);
        notes.extend(note);
        let pieces = (0..files.tokenizer.vocab_size() as u32)
            .map(|i| files.tokenizer.id_to_token(i).unwrap_or_default())
            .collect();
        Ok((
            BertAbs {
                vs,
                bert,
                decoder,
                generator_bias,
                config: files.config,
                abs,
                tokenizer: files.tokenizer,
                markers,
                pieces,
            },
            notes,
        ))
    }

    /// Encoder inputs of `articles` (see `input`), cut at the encoder's positions.
    pub fn encode(&self, articles: &[&[Vec<String>]]) -> Result<ArticleBatch> {
        encode_articles(&self.tokenizer, self.bert.embeddings.max_positions(), articles, self.vs.device())
    }

    /// Targets `bos s1 split s2 … eos`, cut to `max_target_tokens` (the last kept token
    /// replaced by `eos`, as PreSumm does), padded [summaries, longest].
    pub fn encode_targets(&self, summaries: &[&[Vec<String>]]) -> Result<Tensor> {
        let whole: Vec<Vec<i64>> =
            summaries.iter().map(|s| encode_target(&self.tokenizer, self.markers, s)).collect::<Result<_>>()?;
        Ok(self.targets(&whole.iter().map(Vec::as_slice).collect::<Vec<_>>()))
    }

    /// Whole targets (see [`encode_target`]) cut to `max_target_tokens` and padded.
    pub(crate) fn targets(&self, whole: &[&[i64]]) -> Tensor {
        let pad = self.tokenizer.special.pad;
        targets_of(whole, self.abs.max_target_tokens, self.markers.eos, pad, self.vs.device())
    }

    fn source_mask(batch: &ArticleBatch) -> Tensor {
        let (b, s) = batch.attention.size2().unwrap();
        batch.attention.ne(0).view([b, 1, 1, s])
    }

    fn log_probs(&self, hidden: &Tensor) -> Tensor {
        let kind = self.bert.precision.compute_kind();
        hidden
            .to_kind(kind)
            .linear(&self.decoder.embeddings.to_kind(kind), Some(&self.generator_bias.to_kind(kind)))
            .log_softmax(-1, Kind::Float)
    }

    /// Sets the dtype of every matrix product: the encoder's, the decoder's and the generator's
    /// (LayerNorms, softmaxes and the loss stay fp32).
    pub fn set_precision(&mut self, precision: Precision) {
        self.bert.precision = precision;
        for layer in self.decoder.layers.iter_mut() {
            layer.self_attn.precision = precision;
            layer.context_attn.precision = precision;
            layer.feed_forward.precision = precision;
        }
    }

    /// Decoder hidden states [batch, len − 1, hidden] predicting each next target token
    /// (teacher forcing: the decoder reads the targets shifted right).
    fn teacher_forced_hidden(&self, batch: &ArticleBatch, targets: &Tensor, train: bool) -> Tensor {
        let states = batch.encode(&self.bert, train);
        let len = targets.size()[1];
        self.decoder.forward(
            &targets.narrow(1, 0, len - 1),
            &self.decoder.memory(&states),
            Some(&Self::source_mask(batch)),
            train,
        )
    }

    /// Decoder log-probabilities [batch, len − 1, vocab] of each next target token (teacher
    /// forcing), for checking against a reference.
    pub fn target_log_probs(&self, batch: &ArticleBatch, targets: &Tensor, train: bool) -> Tensor {
        self.log_probs(&self.teacher_forced_hidden(batch, targets, train))
    }

    /// Label-smoothed loss per target token and the number of target tokens, read back (one
    /// wait for the device: for inspection; training takes [`BertAbs::token_loss`]).
    pub fn loss(&self, batch: &ArticleBatch, targets: &Tensor, train: bool) -> (Tensor, i64) {
        let (loss, tokens) = self.token_loss(batch, targets, train);
        (loss, tokens.int64_value(&[]))
    }

    /// Label-smoothed loss per target token and the number of target tokens (int64), both on the
    /// device: the loss at every position masked to the non-padding targets, so that nothing is
    /// read back and no size depends on the data (the host never waits for the device). The
    /// vocabulary projection runs at every position, padding included.
    pub(crate) fn token_loss(&self, batch: &ArticleBatch, targets: &Tensor, train: bool) -> (Tensor, Tensor) {
        let hidden = self.teacher_forced_hidden(batch, targets, train);
        let len = targets.size()[1];
        let gold = targets.narrow(1, 1, len - 1).reshape([-1]);
        let pad = self.tokenizer.special.pad;
        let padding = gold.eq(pad);
        let tokens = padding.logical_not().sum(Kind::Int64);
        let log_probs = self.log_probs(&hidden.reshape([-1, self.config.hidden_size]));
        let losses = label_smoothed_losses(&log_probs, &gold, self.abs.label_smoothing, pad);
        let total = losses.masked_fill(&padding, 0.0).sum(Kind::Float);
        (total / tokens.clamp_min(1).to_kind(Kind::Float), tokens)
    }

    /// The beam-search settings of this model.
    pub fn beam_config(&self) -> BeamConfig {
        let a = &self.abs;
        BeamConfig {
            beam: a.beam,
            min_length: a.min_length,
            max_length: a.max_length,
            alpha: a.alpha,
            block_trigrams: a.block_trigrams,
            bos: self.markers.bos,
            eos: self.markers.eos,
            sentence_split: Some(self.markers.split),
            min_sentences: a.min_sentences,
        }
    }

    /// Generates a summary of `article`: sentences of words.
    pub fn generate(&self, article: &[Vec<String>], beam: &BeamConfig) -> Result<Vec<Vec<String>>> {
        Ok(self.generate_batch(&[article], beam)?.pop().expect("one article"))
    }

    /// Generates the summaries of `articles` with one beam search over all of them (the
    /// decoder runs once a step for every live hypothesis of every article); each summary is the
    /// one the article would get alone.
    pub fn generate_batch(&self, articles: &[&[Vec<String>]], beam: &BeamConfig) -> Result<Vec<Vec<Vec<String>>>> {
        if articles.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = DecodeState::new(self, articles)?;
        // Only ids the tokenizer has can be written (the embedding table may be larger).
        let vocab = self.pieces.len().min(self.config.vocab_size as usize);
        let next = |seqs: &[Vec<i64>], parents: &[usize]| -> Tensor {
            let parents: Vec<i64> = parents.iter().map(|&p| p as i64).collect();
            let last: Vec<i64> = seqs.iter().map(|s| *s.last().expect("starts with bos")).collect();
            state.step(&parents, &last).narrow(1, 0, vocab as i64)
        };
        let piece = |t: i64| self.pieces.get(t as usize).cloned().unwrap_or_default();
        let found = beam_search_batch(beam, articles.len(), next, piece);
        Ok(found
            .into_iter()
            .map(|hypotheses| self.sentences_of(&hypotheses.into_iter().next().map(|h| h.tokens).unwrap_or_default()))
            .collect())
    }

    /// Generated tokens as sentences of words (split at the sentence marker, markers and
    /// special tokens dropped, word pieces joined).
    pub(crate) fn sentences_of(&self, tokens: &[i64]) -> Vec<Vec<String>> {
        let s = &self.tokenizer.special;
        let special = [s.pad, s.cls, s.sep, s.mask, self.markers.bos, self.markers.eos];
        tokens
            .split(|&t| t == self.markers.split)
            .map(|sentence| {
                words(
                    &sentence
                        .iter()
                        .filter(|t| !special.contains(t))
                        .filter_map(|&t| self.pieces.get(t as usize).cloned())
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|w| !w.is_empty())
            .collect()
    }

    /// Writes a model directory: `config.json` (architecture `BertAbs`, settings under
    /// `indolm_abs`), the weights and the tokenizer.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let extra = serde_json::Map::from_iter([(
            "indolm_abs".to_string(),
            serde_json::to_value(&self.abs).expect("serializes"),
        )]);
        save_model_files_as(dir, &self.config.to_hf_json_as("BertAbs", extra), &self.vs, &self.tokenizer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_torch::data::tokenizer::test_tokenizer;

    #[test]
    fn target_markers_are_presumms_unused_tokens_else_cls_sep_mask() {
        let t = test_tokenizer(&["[unused0]", "[unused1]", "[unused2]", "a"]);
        assert_eq!(TargetMarkers::of(&t), (TargetMarkers { bos: 5, eos: 6, split: 7 }, None));
        // One missing is enough to fall back, with a note.
        let t = test_tokenizer(&["[unused0]", "[unused1]", "a"]);
        assert_eq!(
            TargetMarkers::of(&t),
            (TargetMarkers { bos: 2, eos: 3, split: 4 }, Some(LoadNote::SubstituteTargetMarkers))
        );
    }

    #[test]
    fn label_smoothed_loss_is_the_kl_divergence_to_the_smoothed_target() {
        // Vocabulary of 4 with padding 0; ε 0.2 gives the gold token 0.8 and the two others
        // 0.1 each (spread over V − 2, padding none). The loss is Σ q ln(q / p) over rows.
        let probs = [[0.25, 0.25, 0.25, 0.25], [0.1, 0.6, 0.2, 0.1]];
        let gold = [2i64, 1];
        let log_probs = Tensor::from_slice(&probs.concat()).view([2, 4]).log();
        let mut expected = 0.0;
        for (p, &g) in probs.iter().zip(&gold) {
            for (j, &pj) in p.iter().enumerate().skip(1) {
                let q = if j as i64 == g { 0.8 } else { 0.1 };
                expected += q * f64::ln(q / pj);
            }
        }
        let found = label_smoothed_loss(&log_probs, &Tensor::from_slice(&gold), 0.2, 0).double_value(&[]);
        // By hand for the uniform row: 0.8 ln 3.2 + 2 · 0.1 ln 0.4 = 0.74726.
        assert!((expected - 0.747263 - 0.160830).abs() < 1e-5, "{expected}");
        assert!((found - expected).abs() < 1e-5, "{found} vs {expected}");
        // Without smoothing: the summed negative log-likelihood of the gold tokens.
        let plain = label_smoothed_loss(&log_probs, &Tensor::from_slice(&gold), 0.0, 0).double_value(&[]);
        assert!((plain - (-(0.25f64.ln()) - 0.6f64.ln())).abs() < 1e-5, "{plain}");
    }
}
