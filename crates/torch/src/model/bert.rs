//! BERT in tch, mirroring HF transformers' `modeling_bert` module by module. The variable
//! paths in the `VarStore` *are* HF's tensor names (`bert.encoder.layer.0.attention.self.query.weight`
//! …, `cls.predictions.transform.dense.weight`, `cls.predictions.bias`), so loading and saving
//! HF checkpoints needs no renaming table: this file is the one place the names live.
use super::config::{Activation, BertConfig};
use super::layers::{dropout, embedding, LayerNorm, Linear};
use crate::device::Precision;
use tch::nn::Path;
use tch::{Kind, Tensor};

/// Label value of positions that are not predicted (as in HF).
pub const IGNORE_INDEX: i64 = -100;

/// Which tokens of a padded batch are real, found on the host when the batch is built: the
/// encoder then runs its matrix products, LayerNorms and dropouts on those tokens only (packed
/// into [tokens, hidden]) and spreads them back into the padded layout only for attention.
/// On fine-tuning data whose texts vary in length that skips most of the work (NusaX batches
/// are 2.4 times their real tokens when padded to their longest text). The results at real
/// positions are those of the padded computation, up to float summation order.
#[derive(Debug)]
pub struct Packing {
    /// Flat positions (`row * seq + column`) of the real tokens, row by row.
    pub indices: Tensor,
    /// Each real token's column: its position id.
    pub columns: Tensor,
    /// Each row's real tokens (on the CPU, attention runs row by row on these alone).
    pub lengths: Vec<i64>,
}

impl Packing {
    /// The flat positions and columns of rows whose first `lengths[r]` tokens of `seq` are real.
    pub fn host_of_lengths(lengths: &[usize], seq: usize) -> (Vec<i64>, Vec<i64>) {
        let total: usize = lengths.iter().sum();
        let (mut indices, mut columns) = (Vec::with_capacity(total), Vec::with_capacity(total));
        for (row, &len) in lengths.iter().enumerate() {
            for col in 0..len.min(seq) {
                indices.push((row * seq + col) as i64);
                columns.push(col as i64);
            }
        }
        (indices, columns)
    }

    /// A packing of rows with `lengths` real tokens of `seq`, on `device` (copied without the
    /// host waiting).
    pub fn of_lengths(lengths: &[usize], seq: usize, device: tch::Device) -> Self {
        let (indices, columns) = Self::host_of_lengths(lengths, seq);
        let n = [indices.len() as i64];
        Packing {
            indices: crate::device::to_device_queued(&indices, &n, device),
            columns: crate::device::to_device_queued(&columns, &n, device),
            lengths: lengths.iter().map(|&l| l.min(seq) as i64).collect(),
        }
    }
}

/// How a batch's hidden states are laid out through the encoder: padded [batch, seq, hidden],
/// or the real tokens packed [tokens, hidden] (with the padded shape and the attention mask
/// that attention still needs).
#[derive(Clone, Copy)]
struct Layout<'a> {
    batch: i64,
    seq: i64,
    mask: Option<&'a Tensor>,
    packing: Option<&'a Packing>,
}

impl Layout<'_> {
    /// `y` ([tokens, width] packed, or already [batch, seq, width]) in the padded layout, zeros
    /// at padding.
    fn padded(&self, y: &Tensor) -> Tensor {
        match self.packing {
            None => y.shallow_clone(),
            Some(p) => {
                let width = *y.size().last().expect("a matrix");
                Tensor::zeros([self.batch * self.seq, width], (y.kind(), y.device()))
                    .index_copy(0, &p.indices, y)
                    .view([self.batch, self.seq, width])
            }
        }
    }

    /// `y` [batch, seq, width] in this layout (packed: its real tokens only).
    fn in_layout(&self, y: &Tensor) -> Tensor {
        match self.packing {
            None => y.shallow_clone(),
            Some(p) => {
                let width = *y.size().last().expect("a matrix");
                y.reshape([-1, width]).index_select(0, &p.indices)
            }
        }
    }
}

/// `bert.embeddings`: word + position + token type, LayerNorm, dropout.
#[derive(Debug)]
pub struct BertEmbeddings {
    /// `word_embeddings.weight` [vocab, hidden]; the MLM decoder is tied to it.
    pub word_embeddings: Tensor,
    position_embeddings: Tensor,
    token_type_embeddings: Tensor,
    layer_norm: LayerNorm,
    dropout: f64,
    /// RoBERTa's padding id, when positions are counted from it (see
    /// [`BertConfig::position_offset`]).
    position_offset: Option<i64>,
}

impl BertEmbeddings {
    /// The variables under `p` with HF's initialisation, the `pad_token_id` row zeroed.
    pub fn new(p: Path, c: &BertConfig) -> Self {
        let std = c.initializer_range;
        BertEmbeddings {
            word_embeddings: embedding(&p / "word_embeddings", c.vocab_size, c.hidden_size, std, Some(c.pad_token_id)),
            position_embeddings: embedding(
                &p / "position_embeddings",
                c.max_position_embeddings,
                c.hidden_size,
                std,
                None,
            ),
            token_type_embeddings: embedding(&p / "token_type_embeddings", c.type_vocab_size, c.hidden_size, std, None),
            layer_norm: LayerNorm::new(&p / "LayerNorm", c.hidden_size, c.layer_norm_eps),
            dropout: c.hidden_dropout_prob,
            position_offset: c.position_offset(),
        }
    }

    /// The longest input: the rows of the position table (`max_position_embeddings`), less
    /// RoBERTa's `pad + 1` rows before its first position.
    pub fn max_positions(&self) -> usize {
        (self.position_embeddings.size()[0] - self.position_offset.map_or(0, |pad| pad + 1)) as usize
    }

    /// Position ids [batch, seq] (or [seq], broadcast) of `input_ids` [batch, seq]: BERT's
    /// `0..seq`; RoBERTa's as transformers' `create_position_ids_from_input_ids` (non-padding
    /// tokens numbered from `pad + 1`, padding tokens at `pad`).
    fn position_ids(&self, input_ids: &Tensor) -> Tensor {
        match self.position_offset {
            None => Tensor::arange(input_ids.size()[1], (Kind::Int64, input_ids.device())),
            Some(pad) => {
                let real = input_ids.ne(pad).to_kind(Kind::Int64);
                real.cumsum(1, Kind::Int64) * &real + pad
            }
        }
    }

    /// Embeddings [batch, seq, hidden] (fp32) of `input_ids` and `token_type_ids` [batch, seq] at
    /// their positions (see `position_ids`), normalised, with dropout when `train`.
    pub fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor, train: bool) -> Tensor {
        let positions = self.position_ids(input_ids);
        let x = Tensor::embedding(&self.word_embeddings, input_ids, -1, false, false)
            + Tensor::embedding(&self.position_embeddings, &positions, -1, false, false)
            + Tensor::embedding(&self.token_type_embeddings, token_type_ids, -1, false, false);
        dropout(&self.layer_norm.forward(&x), self.dropout, train)
    }

    /// Embeddings [tokens, hidden] of the real tokens of a batch packed by `packing`.
    fn forward_packed(&self, input_ids: &Tensor, token_type_ids: &Tensor, packing: &Packing, train: bool) -> Tensor {
        let pick = |t: &Tensor| t.reshape([-1]).index_select(0, &packing.indices);
        let positions = match self.position_offset {
            None => packing.columns.shallow_clone(),
            Some(_) => pick(&self.position_ids(input_ids)),
        };
        let x = Tensor::embedding(&self.word_embeddings, &pick(input_ids), -1, false, false)
            + Tensor::embedding(&self.position_embeddings, &positions, -1, false, false)
            + Tensor::embedding(&self.token_type_embeddings, &pick(token_type_ids), -1, false, false);
        dropout(&self.layer_norm.forward(&x), self.dropout, train)
    }
}

/// `attention.self` + `attention.output`: multi-head self-attention through
/// `scaled_dot_product_attention`, then dense, dropout, residual and LayerNorm.
#[derive(Debug)]
struct BertAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    output_dense: Linear,
    output_norm: LayerNorm,
    heads: i64,
    attention_dropout: f64,
    hidden_dropout: f64,
}

impl BertAttention {
    fn new(p: Path, c: &BertConfig) -> Self {
        let (h, std) = (c.hidden_size, c.initializer_range);
        let s = &p / "self";
        let o = &p / "output";
        BertAttention {
            query: Linear::new(&s / "query", h, h, std),
            key: Linear::new(&s / "key", h, h, std),
            value: Linear::new(&s / "value", h, h, std),
            output_dense: Linear::new(&o / "dense", h, h, std),
            output_norm: LayerNorm::new(&o / "LayerNorm", h, c.layer_norm_eps),
            heads: c.num_attention_heads,
            attention_dropout: c.attention_probs_dropout_prob,
            hidden_dropout: c.hidden_dropout_prob,
        }
    }

    /// `x`: the hidden states in `layout` ([batch, seq, hidden], or packed [tokens, hidden]);
    /// the layout's mask: bool [batch, 1, 1, seq], true where a key may be attended (`None`: no
    /// padding, which lets libtorch pick its fused kernels).
    fn forward(&self, x: &Tensor, layout: Layout, precision: Precision, train: bool) -> Tensor {
        let (b, s, mask) = (layout.batch, layout.seq, layout.mask);
        let h = *x.size().last().expect("hidden states");
        // Query, key and value as HF computes them: three products of the same input, each
        // viewed as heads. Nothing is concatenated or cut: a fused product would need the three
        // weights copied into one matrix every forward, and cutting its output with `narrow`
        // makes backward zero-fill a full [batch, seq, 3 hidden] buffer for each of the three.
        let x_in = x.to_kind(precision.compute_kind());
        let p_drop = if train { self.attention_dropout } else { 0.0 };
        if let (Some(packing), tch::Device::Cpu) = (layout.packing, x.device()) {
            let context = self.attend_row_by_row(&x_in, packing, p_drop, precision);
            let out = dropout(&self.output_dense.forward(&context, precision), self.hidden_dropout, train);
            return self.output_norm.forward(&(out + x));
        }
        let heads = |l: &Linear| {
            layout.padded(&l.forward(&x_in, precision)).view([b, s, self.heads, h / self.heads]).transpose(1, 2)
        };
        let (q, k, v) = (heads(&self.query), heads(&self.key), heads(&self.value));
        let context = if p_drop > 0.0 && x.device() == tch::Device::Cpu {
            // libtorch's CPU attention with dropout is this same arithmetic (its "math" path),
            // with the slow dropout; written out, it takes the fast one.
            let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / ((h / self.heads) as f64).sqrt());
            let scores = match mask {
                Some(m) => scores.masked_fill(&m.logical_not(), f64::NEG_INFINITY),
                None => scores,
            };
            dropout(&scores.softmax(-1, scores.kind()), p_drop, true).matmul(&v)
        } else {
            Tensor::scaled_dot_product_attention(&q, &k, &v, mask, p_drop, false, None, false)
        };
        let context = layout.in_layout(&context.transpose(1, 2).contiguous().view([b, s, h]));
        let out = dropout(&self.output_dense.forward(&context, precision), self.hidden_dropout, train);
        self.output_norm.forward(&(out + x))
    }

    /// Inference in the padded layout with the attention probabilities returned: the output
    /// and the probabilities [batch, heads, query, key] in fp32 (as transformers' eager
    /// attention computes them for `output_attentions`; masked keys get 0).
    fn forward_with_probs(&self, x: &Tensor, mask: Option<&Tensor>, precision: Precision) -> (Tensor, Tensor) {
        let (b, s, h) = x.size3().expect("hidden states are [batch, seq, hidden]");
        let x_in = x.to_kind(precision.compute_kind());
        let heads = |l: &Linear| l.forward(&x_in, precision).view([b, s, self.heads, h / self.heads]).transpose(1, 2);
        let (q, k, v) = (heads(&self.query), heads(&self.key), heads(&self.value));
        let scores = q.matmul(&k.transpose(-2, -1)).to_kind(Kind::Float) * (1.0 / ((h / self.heads) as f64).sqrt());
        let scores = match mask {
            Some(m) => scores.masked_fill(&m.logical_not(), f64::NEG_INFINITY),
            None => scores,
        };
        let probs = scores.softmax(-1, Kind::Float);
        let context = probs.to_kind(v.kind()).matmul(&v).transpose(1, 2).contiguous().view([b, s, h]);
        let out = self.output_dense.forward(&context, precision);
        (self.output_norm.forward(&(out + x)), probs)
    }

    /// Attention on packed tokens [tokens, hidden], each row on its own real tokens (the CPU's
    /// way: no padded key is scored, so nothing needs masking, and short rows cost their own
    /// length squared, not the longest's). The rows are cut with one `split` (its backward is
    /// one `cat`); with dropout the arithmetic is written out, as in the padded CPU path.
    fn attend_row_by_row(&self, x: &Tensor, packing: &Packing, p_drop: f64, precision: Precision) -> Tensor {
        let h = *x.size().last().expect("hidden states");
        let d = h / self.heads;
        let rows = |l: &Linear| l.forward(x, precision).split_with_sizes(&packing.lengths, 0);
        let (q, k, v) = (rows(&self.query), rows(&self.key), rows(&self.value));
        let heads = |t: &Tensor, len: i64| t.view([len, self.heads, d]).transpose(0, 1);
        let contexts: Vec<Tensor> = q
            .iter()
            .zip(&k)
            .zip(&v)
            .zip(&packing.lengths)
            .map(|(((q, k), v), &len)| {
                let (q, k, v) = (heads(q, len), heads(k, len), heads(v, len));
                let context = if p_drop > 0.0 {
                    let scores = q.matmul(&k.transpose(-2, -1)) * (1.0 / (d as f64).sqrt());
                    dropout(&scores.softmax(-1, scores.kind()), p_drop, true).matmul(&v)
                } else {
                    Tensor::scaled_dot_product_attention(&q, &k, &v, None::<&Tensor>, 0.0, false, None, false)
                };
                context.transpose(0, 1).reshape([len, h])
            })
            .collect();
        Tensor::cat(&contexts, 0)
    }
}

/// `bert.encoder.layer.N`: attention, then `intermediate` (dense + activation) and `output`
/// (dense, dropout, residual, LayerNorm).
#[derive(Debug)]
struct BertLayer {
    attention: BertAttention,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    activation: Activation,
    hidden_dropout: f64,
}

impl BertLayer {
    fn new(p: Path, c: &BertConfig) -> Self {
        let std = c.initializer_range;
        BertLayer {
            attention: BertAttention::new(&p / "attention", c),
            intermediate: Linear::new(&p / "intermediate" / "dense", c.hidden_size, c.intermediate_size, std),
            output: Linear::new(&p / "output" / "dense", c.intermediate_size, c.hidden_size, std),
            output_norm: LayerNorm::new(&p / "output" / "LayerNorm", c.hidden_size, c.layer_norm_eps),
            activation: c.activation(),
            hidden_dropout: c.hidden_dropout_prob,
        }
    }

    fn forward(&self, x: &Tensor, layout: Layout, precision: Precision, train: bool) -> Tensor {
        let attended = self.attention.forward(x, layout, precision, train);
        let inner = self.activation.apply(&self.intermediate.forward(&attended, precision));
        let out = dropout(&self.output.forward(&inner, precision), self.hidden_dropout, train);
        self.output_norm.forward(&(out + attended))
    }
}

impl BertLayer {
    /// Inference with the layer's attention probabilities (see
    /// [`BertAttention::forward_with_probs`]).
    fn forward_with_probs(&self, x: &Tensor, mask: Option<&Tensor>, precision: Precision) -> (Tensor, Tensor) {
        let (attended, probs) = self.attention.forward_with_probs(x, mask, precision);
        let inner = self.activation.apply(&self.intermediate.forward(&attended, precision));
        let out = self.output.forward(&inner, precision);
        (self.output_norm.forward(&(out + attended)), probs)
    }
}

/// `bert`: embeddings, encoder layers and (optionally) the pooler.
#[derive(Debug)]
pub struct BertModel {
    /// `bert.embeddings`.
    pub embeddings: BertEmbeddings,
    layers: Vec<BertLayer>,
    pooler: Option<Linear>,
    /// The dtype of linear layers and attention (`Fp32` unless set).
    pub precision: Precision,
}

impl BertModel {
    /// The variables under `p` (`embeddings`, `encoder.layer.N`, and `pooler.dense` if `with_pooler`).
    pub fn new(p: Path, c: &BertConfig, with_pooler: bool) -> Self {
        let enc = &p / "encoder" / "layer";
        BertModel {
            embeddings: BertEmbeddings::new(&p / "embeddings", c),
            layers: (0..c.num_hidden_layers).map(|i| BertLayer::new(&enc / i, c)).collect(),
            pooler: with_pooler
                .then(|| Linear::new(&p / "pooler" / "dense", c.hidden_size, c.hidden_size, c.initializer_range)),
            precision: Precision::Fp32,
        }
    }

    /// Last hidden states [batch, seq, hidden] in fp32. `attention_mask` is 1 for real tokens,
    /// 0 for padding; `token_type_ids` default to zeros.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
        train: bool,
    ) -> Tensor {
        let zeros;
        let token_type_ids = match token_type_ids {
            Some(t) => t,
            None => {
                zeros = input_ids.zeros_like();
                &zeros
            }
        };
        let (b, s) = input_ids.size2().expect("input_ids are [batch, seq]");
        let mask = attention_mask.map(|m| m.ne(0).view([b, 1, 1, s]));
        let layout = Layout { batch: b, seq: s, mask: mask.as_ref(), packing: None };
        let mut x = self.embeddings.forward(input_ids, token_type_ids, train);
        for layer in &self.layers {
            x = layer.forward(&x, layout, self.precision, train);
        }
        x
    }

    /// Inference (no dropout, token types 0) through the embeddings and the first `layers`
    /// encoder layers only, the later ones not run: the hidden states [batch, seq, hidden] in
    /// fp32 that transformers returns as `hidden_states[layers]` (0: the embeddings' output;
    /// `layers` past the model's count runs them all). For scores read from an inner layer
    /// (BERTScore). `attention_mask` is 1 for real tokens, 0 for padding.
    pub fn hidden_states_after(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>, layers: usize) -> Tensor {
        let (b, s) = input_ids.size2().expect("input_ids are [batch, seq]");
        let mask = attention_mask.map(|m| m.ne(0).view([b, 1, 1, s]));
        let layout = Layout { batch: b, seq: s, mask: mask.as_ref(), packing: None };
        let mut x = self.embeddings.forward(input_ids, &input_ids.zeros_like(), false);
        for layer in self.layers.iter().take(layers) {
            x = layer.forward(&x, layout, self.precision, false);
        }
        x
    }

    /// [`BertModel::forward`] on the real tokens only (see [`Packing`]): the last hidden states
    /// [batch, seq, hidden] (fp32), zeros at padding. `packing` must name exactly the tokens
    /// `attention_mask` marks as real, each row's first.
    pub fn forward_packed(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: &Tensor,
        packing: &Packing,
        train: bool,
    ) -> Tensor {
        let zeros;
        let token_type_ids = match token_type_ids {
            Some(t) => t,
            None => {
                zeros = input_ids.zeros_like();
                &zeros
            }
        };
        let (b, s) = input_ids.size2().expect("input_ids are [batch, seq]");
        let mask = attention_mask.ne(0).view([b, 1, 1, s]);
        let layout = Layout { batch: b, seq: s, mask: Some(&mask), packing: Some(packing) };
        let mut x = self.embeddings.forward_packed(input_ids, token_type_ids, packing, train);
        for layer in &self.layers {
            x = layer.forward(&x, layout, self.precision, train);
        }
        layout.padded(&x)
    }

    /// Inference in the padded layout (nothing packed, no dropout) returning, with the last
    /// hidden states, every layer's attention probabilities [batch, heads, query, key] in fp32:
    /// transformers' `output_attentions=True`. For scores that weigh tokens by the attention
    /// they receive (AULA); the fused attention kernels do not return probabilities.
    pub fn forward_with_attentions(&self, input_ids: &Tensor, attention_mask: &Tensor) -> (Tensor, Vec<Tensor>) {
        let (b, s) = input_ids.size2().expect("input_ids are [batch, seq]");
        let mask = attention_mask.ne(0).view([b, 1, 1, s]);
        let mut x = self.embeddings.forward(input_ids, &input_ids.zeros_like(), false);
        let mut attentions = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let (y, probs) = layer.forward_with_probs(&x, Some(&mask), self.precision);
            x = y;
            attentions.push(probs);
        }
        (x, attentions)
    }

    /// `bert.pooler`: tanh(dense(hidden of [CLS])); `None` for checkpoints without a pooler.
    pub fn pool(&self, hidden: &Tensor) -> Option<Tensor> {
        self.pooler.as_ref().map(|d| d.forward(&hidden.select(1, 0), self.precision).to_kind(Kind::Float).tanh())
    }
}

/// `cls.predictions`: transform (dense, activation, LayerNorm) and the decoder tied to the
/// word embeddings, with its own output `bias`.
#[derive(Debug)]
pub struct MlmHead {
    transform_dense: Linear,
    transform_norm: LayerNorm,
    activation: Activation,
    bias: Tensor,
    /// The training loss's vocabulary projection is padded to a multiple of this (1: not
    /// padded); see [`MlmHead::set_vocab_padding`].
    pad_vocab_to: i64,
}

/// The multiple the vocabulary projection is padded to when training on CUDA: 64 keeps the
/// product's output rows aligned for the tensor cores (IndoBERT's 31,923 becomes 31,936).
pub const CUDA_VOCAB_MULTIPLE: i64 = 64;

/// The logit of a padding column: far enough below any real logit that its probability is
/// exactly 0 in fp32 (exp underflows below about -104), yet finite in bf16 and fp16.
const PADDING_LOGIT: f64 = -1e4;

impl MlmHead {
    /// The variables under `p` (`transform.dense`, `transform.LayerNorm`, `bias`); the decoder weight is
    /// the word embeddings, passed to `forward`.
    pub fn new(p: Path, c: &BertConfig) -> Self {
        let t = &p / "transform";
        MlmHead {
            transform_dense: Linear::new(&t / "dense", c.hidden_size, c.hidden_size, c.initializer_range),
            transform_norm: LayerNorm::new(&t / "LayerNorm", c.hidden_size, c.layer_norm_eps),
            activation: c.activation(),
            bias: p.var("bias", &[c.vocab_size], tch::nn::Init::Const(0.0)),
            pad_vocab_to: 1,
        }
    }

    /// Pads the training loss's vocabulary projection to a multiple of `multiple` (1: none).
    /// The parameters, checkpoints and exports keep the vocabulary's size: the padding rows
    /// are zeros appended to the (cast) decoder weight and the bias gets [`PADDING_LOGIT`]
    /// there, so the padding columns' probabilities and gradients are exactly 0 and the loss
    /// and gradients equal the unpadded ones up to float summation order.
    pub fn set_vocab_padding(&mut self, multiple: i64) {
        self.pad_vocab_to = multiple.max(1);
    }

    /// [`MlmHead::forward`] over the vocabulary padded as [`MlmHead::set_vocab_padding`] says:
    /// logits [..., padded vocabulary], for the training loss only.
    fn forward_padded(&self, hidden: &Tensor, word_embeddings: &Tensor, precision: Precision) -> Tensor {
        let vocab = self.bias.size()[0];
        let pad = (self.pad_vocab_to - vocab % self.pad_vocab_to) % self.pad_vocab_to;
        self.logits_padded_by(hidden, word_embeddings, precision, pad)
    }

    /// Vocabulary logits (fp32) for hidden states of any leading shape [..., hidden].
    pub fn forward(&self, hidden: &Tensor, word_embeddings: &Tensor, precision: Precision) -> Tensor {
        self.logits_padded_by(hidden, word_embeddings, precision, 0)
    }

    /// The logits over the vocabulary and `pad` padding columns (zero decoder rows, a bias of
    /// [`PADDING_LOGIT`]).
    fn logits_padded_by(&self, hidden: &Tensor, word_embeddings: &Tensor, precision: Precision, pad: i64) -> Tensor {
        let h = self.activation.apply(&self.transform_dense.forward(hidden, precision));
        let h = self.transform_norm.forward(&h);
        let kind = precision.compute_kind();
        let (mut weight, mut bias) = (word_embeddings.to_kind(kind), self.bias.to_kind(kind));
        if pad > 0 {
            weight = weight.constant_pad_nd([0, 0, 0, pad]);
            bias = Tensor::cat(&[bias, Tensor::full([pad], PADDING_LOGIT, (kind, self.bias.device()))], 0);
        }
        h.to_kind(kind).linear(&weight, Some(&bias)).to_kind(Kind::Float)
    }
}

/// HF `BertForMaskedLM`: `bert` and `cls.predictions`. Like HF it has no pooler unless the
/// checkpoint it is loaded from carries one (`bert.pooler.dense.*`, as BERT's original and
/// `BertForPreTraining` checkpoints do), which is then kept for classification heads.
#[derive(Debug)]
pub struct BertForMaskedLM {
    /// `bert`.
    pub bert: BertModel,
    /// `cls.predictions`.
    pub head: MlmHead,
}

/// Output of the masked-LM loss: mean cross-entropy over the predicted positions and their
/// count.
pub struct MlmLoss {
    /// Mean cross-entropy over the predicted positions (a scalar).
    pub loss: Tensor,
    /// Positions predicted (labels other than `IGNORE_INDEX`).
    pub predicted: i64,
}

impl BertForMaskedLM {
    /// The variables under `root` with HF's names (`bert.*`, `cls.predictions.*`).
    pub fn new(root: &Path, c: &BertConfig, with_pooler: bool) -> Self {
        BertForMaskedLM {
            bert: BertModel::new(root / "bert", c, with_pooler),
            head: MlmHead::new(root / "cls" / "predictions", c),
        }
    }

    /// The longest input the position embeddings allow.
    pub fn max_positions(&self) -> usize {
        self.bert.embeddings.max_positions()
    }

    /// Sets the dtype of the encoder's and the head's matrix products.
    pub fn set_precision(&mut self, precision: Precision) {
        self.bert.precision = precision;
    }

    /// Pads the training loss's vocabulary projection to a multiple of `multiple`
    /// ([`MlmHead::set_vocab_padding`]; pretraining on CUDA uses [`CUDA_VOCAB_MULTIPLE`]).
    pub fn set_vocab_padding(&mut self, multiple: i64) {
        self.head.set_vocab_padding(multiple);
    }

    /// Vocabulary logits at every position [batch, seq, vocab] (for parity checks and scoring).
    pub fn logits(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
    ) -> Tensor {
        let hidden = self.bert.forward(input_ids, token_type_ids, attention_mask, false);
        self.head.forward(&hidden, &self.bert.embeddings.word_embeddings, self.bert.precision)
    }

    /// Logits only at the selected flat positions of `hidden` ([batch, seq, hidden]):
    /// the vocabulary projection is the costliest matrix product, so never compute it for
    /// rows that are not scored.
    pub fn logits_at(&self, hidden: &Tensor, flat_positions: &Tensor) -> Tensor {
        self.head.forward(&rows_at(hidden, flat_positions), &self.bert.embeddings.word_embeddings, self.bert.precision)
    }

    /// Masked-LM loss. `labels` hold the original token at predicted positions and
    /// `IGNORE_INDEX` elsewhere; vocabulary logits are computed only at predicted positions.
    /// Finding those positions on the device (`nonzero`) makes the host wait for it: training
    /// updates use [`BertForMaskedLM::mlm_loss_at`] with positions found on the host.
    pub fn mlm_loss(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
        labels: &Tensor,
        train: bool,
    ) -> MlmLoss {
        let flat_labels = labels.reshape([-1]);
        let positions = flat_labels.ne(IGNORE_INDEX).nonzero().squeeze_dim(1);
        let targets = flat_labels.index_select(0, &positions);
        let loss = self.mlm_loss_at(input_ids, token_type_ids, attention_mask, &positions, &targets, train);
        MlmLoss { loss, predicted: targets.size()[0] }
    }

    /// Masked-LM loss at given flat positions of the batch (`row * seq + column`) with their
    /// `targets`: the mean cross-entropy there. Nothing here waits for the device. In training
    /// the loss carries its gradient directly (see `cross_entropy_for_backward`).
    pub fn mlm_loss_at(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
        positions: &Tensor,
        targets: &Tensor,
        train: bool,
    ) -> Tensor {
        let hidden = self.bert.forward(input_ids, token_type_ids, attention_mask, train);
        if train && hidden.requires_grad() {
            // The vocabulary padded (when asked): the padding columns' probabilities are 0.
            let rows = rows_at(&hidden, positions);
            let logits = self.head.forward_padded(&rows, &self.bert.embeddings.word_embeddings, self.bert.precision);
            cross_entropy_for_backward(&logits, targets)
        } else {
            let logits = self.logits_at(&hidden, positions);
            logits.log_softmax(-1, Kind::Float).nll_loss(targets)
        }
    }
}

/// The rows of `hidden` ([batch, seq, hidden]) at flat positions (`row * seq + column`).
fn rows_at(hidden: &Tensor, flat_positions: &Tensor) -> Tensor {
    let h = hidden.size().last().copied().unwrap();
    hidden.reshape([-1, h]).index_select(0, flat_positions)
}

/// Mean cross-entropy of `logits` [rows, vocab] against `targets`, built so that its backward
/// pass hands the logits their known gradient (softmax − one-hot) / rows instead of running
/// libtorch's log-softmax and NLL backward kernels: on CPU those cost a dense zero fill and a
/// slow pass over rows × vocabulary (about 0.1 s a step for the bench-train model). The value
/// is the same cross-entropy; the gradient is the same formula, computed once here.
pub fn cross_entropy_for_backward(logits: &Tensor, targets: &Tensor) -> Tensor {
    let rows = logits.size()[0].max(1) as f64;
    let (value, gradient) = tch::no_grad(|| {
        let detached = logits.detach();
        let mut log_probs = detached.log_softmax(-1, Kind::Float);
        let value = -log_probs.gather(1, &targets.unsqueeze(1), false).mean(Kind::Float);
        let mut gradient = log_probs.exp_().g_mul_scalar_(1.0 / rows);
        let _ = gradient.scatter_add_(
            1,
            &targets.unsqueeze(1),
            &Tensor::full([targets.size()[0], 1], -1.0 / rows, (Kind::Float, logits.device())),
        );
        (value, gradient)
    });
    // d/dlogits of sum(logits · gradient) is `gradient`; its value is subtracted back out.
    let carrier = logits.reshape([-1]).dot(&gradient.reshape([-1]));
    &carrier - carrier.detach() + value
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn the_packed_encoder_equals_the_padded_one_at_real_tokens() {
        let config = BertConfig::new(50, 32, 2, 4, 64);
        tch::manual_seed(2);
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let model = BertModel::new(vs.root() / "bert", &config, false);
        let lengths = [10usize, 4, 7];
        let ids = Tensor::randint_low(5, 50, [3, 10], (Kind::Int64, Device::Cpu));
        let mask_rows: Vec<i64> = lengths.iter().flat_map(|&n| (0..10).map(move |c| (c < n) as i64)).collect();
        let mask = Tensor::from_slice(&mask_rows).view([3, 10]);
        let types = Tensor::from_slice(&(0..30).map(|i| (i % 3 == 0) as i64).collect::<Vec<_>>()).view([3, 10]);
        let padded = tch::no_grad(|| model.forward(&ids, Some(&types), Some(&mask), false));
        let packing = Packing::of_lengths(&lengths, 10, Device::Cpu);
        let packed = tch::no_grad(|| model.forward_packed(&ids, Some(&types), &mask, &packing, false));
        let real = mask.to_kind(Kind::Float).unsqueeze(-1);
        let diff = ((&padded - &packed) * &real).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "packed and padded differ by {diff} at real tokens");
        let at_padding = (&packed * (real.ones_like() - &real)).abs().max().double_value(&[]);
        assert_eq!(at_padding, 0.0, "the packed result is zero at padding");
        assert!(padded.abs().max().double_value(&[]) > 0.1, "a non-trivial encoder");

        // Training (dropout off, so both draw nothing): the same gradients.
        let mut quiet = config.clone();
        quiet.hidden_dropout_prob = 0.0;
        quiet.attention_probs_dropout_prob = 0.0;
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let model = BertModel::new(vs.root() / "bert", &quiet, false);
        let grads = |hidden: Tensor| {
            (hidden * &real).pow_tensor_scalar(2).sum(Kind::Float).backward();
            let g: std::collections::BTreeMap<String, Tensor> =
                vs.variables().into_iter().map(|(n, t)| (n, t.grad().copy())).collect();
            vs.variables().values().for_each(|t| {
                let _ = t.grad().zero_();
            });
            g
        };
        let a = grads(model.forward(&ids, Some(&types), Some(&mask), true));
        let b = grads(model.forward_packed(&ids, Some(&types), &mask, &packing, true));
        let worst = a.iter().map(|(n, x)| (x - &b[n]).abs().max().double_value(&[])).fold(0.0, f64::max);
        assert!(worst < 1e-4, "gradients differ by {worst}");
    }

    /// The vocabulary padded to a multiple of 64 in the training loss (50 → 64 here, as
    /// IndoBERT's 31,923 → 31,936 on CUDA) gives the unpadded loss and gradients up to float
    /// summation order, with the parameters' shapes unchanged (what a checkpoint and an HF
    /// export hold); the padding columns' probabilities are exactly 0, in fp32 and bf16.
    #[test]
    fn a_padded_vocabulary_trains_as_the_unpadded_one() {
        let mut config = BertConfig::new(50, 32, 2, 4, 64);
        config.hidden_dropout_prob = 0.0;
        config.attention_probs_dropout_prob = 0.0;
        tch::manual_seed(3);
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let mut model = BertForMaskedLM::new(&vs.root(), &config, false);
        let ids = Tensor::randint_low(5, 50, [2, 12], (Kind::Int64, Device::Cpu));
        let positions = Tensor::from_slice(&[1i64, 4, 7, 13, 20, 23]);
        let targets = Tensor::from_slice(&[6i64, 49, 17, 5, 33, 48]);
        let shapes_of = || -> std::collections::BTreeMap<String, Vec<i64>> {
            vs.variables().into_iter().map(|(n, t)| (n, t.size())).collect()
        };
        let shapes = shapes_of();
        for precision in [Precision::Fp32, Precision::Bf16] {
            model.set_precision(precision);
            let mut run = |multiple: i64| {
                model.set_vocab_padding(multiple);
                let loss = model.mlm_loss_at(&ids, None, None, &positions, &targets, true);
                loss.backward();
                let grads: std::collections::BTreeMap<String, Tensor> =
                    vs.variables().into_iter().map(|(n, t)| (n, t.grad().copy())).collect();
                vs.variables().values().for_each(|t| {
                    let _ = t.grad().zero_();
                });
                (loss.double_value(&[]), grads)
            };
            let (plain, plain_grads) = run(1);
            let (padded, padded_grads) = run(64);
            let tolerance = if precision == Precision::Fp32 { 1e-6 } else { 1e-3 };
            assert!((plain - padded).abs() < tolerance * plain.abs(), "{precision:?}: loss {plain} vs padded {padded}");
            for (name, g) in &plain_grads {
                let diff = (g - &padded_grads[name]).abs().max().double_value(&[]);
                let scale = g.abs().max().double_value(&[]).max(1e-12);
                assert!(
                    diff <= tolerance * scale,
                    "{precision:?}: gradient of {name} differs by {diff} (scale {scale})"
                );
            }
            // The padding columns: logits of -1e4, probabilities exactly 0.
            let rows = Tensor::randn([3, 32], (Kind::Float, Device::Cpu));
            let logits = model.head.forward_padded(&rows, &model.bert.embeddings.word_embeddings, precision);
            assert_eq!(logits.size(), vec![3, 64]);
            let probabilities = logits.softmax(-1, Kind::Float);
            assert_eq!(probabilities.narrow(1, 50, 14).abs().max().double_value(&[]), 0.0);
        }
        assert_eq!(shapes, shapes_of(), "the parameters keep the vocabulary's own size");
        assert_eq!(model.bert.embeddings.word_embeddings.size(), vec![50, 32]);
    }
}
