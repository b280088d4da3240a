//! PreSumm's transformer blocks, shared by BertExt's inter-sentence encoder and BertAbs's
//! decoder, with PreSumm's parameter names: multi-head attention (`linear_query`,
//! `linear_keys`, `linear_values`, `final_linear`), the position-wise feed-forward (its own
//! pre-LayerNorm `layer_norm`, `w_1`, tanh-GELU, `w_2`, residual) and the sinusoidal positions.
//! LayerNorms use PreSumm's eps 1e-6 and run in fp32; the matrix products run in the blocks'
//! `precision` (fp32, or bf16 with fp32 master weights on CUDA).
use indolm_torch::device::Precision;
use indolm_torch::model::layers::{dropout, LayerNorm, Linear};
use tch::nn::Path;
use tch::{Device, Kind, Tensor};

/// LayerNorm epsilon of PreSumm's blocks.
pub(crate) const NORM_EPS: f64 = 1e-6;
const INIT_STD: f64 = 0.02;

/// PreSumm's `MultiHeadedAttention`: queries from one input, keys and values from another.
pub(crate) struct MultiHeadAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    heads: i64,
    dropout: f64,
    /// The dtype of its matrix products.
    pub precision: Precision,
}

impl MultiHeadAttention {
    /// Four `hidden` → `hidden` projections under `p` (`linear_query`, `linear_keys`,
    /// `linear_values`, `final_linear`); `dropout` on the attention probabilities in training.
    pub fn new(p: Path, hidden: i64, heads: i64, dropout: f64) -> Self {
        MultiHeadAttention {
            query: Linear::new(&p / "linear_query", hidden, hidden, INIT_STD),
            key: Linear::new(&p / "linear_keys", hidden, hidden, INIT_STD),
            value: Linear::new(&p / "linear_values", hidden, hidden, INIT_STD),
            out: Linear::new(&p / "final_linear", hidden, hidden, INIT_STD),
            heads,
            dropout,
            precision: Precision::Fp32,
        }
    }

    /// [batch, len, hidden] → [batch, heads, len, head_dim].
    fn split(&self, t: Tensor) -> Tensor {
        let (b, n, h) = t.size3().expect("[batch, len, hidden]");
        t.view([b, n, self.heads, h / self.heads]).transpose(1, 2)
    }

    /// Keys and values of `memory`, computed once when many queries attend to it (decoding).
    pub(crate) fn keys_values(&self, memory: &Tensor) -> (Tensor, Tensor) {
        (self.split(self.key.forward(memory, self.precision)), self.split(self.value.forward(memory, self.precision)))
    }

    /// Attention of `queries` [batch, len, hidden] over keys/values from `keys_values`;
    /// `mask` (true = may attend) broadcasts to [batch, heads, len, keys]; `causal` adds the
    /// decoder's no-peeking-ahead mask.
    pub(crate) fn attend(
        &self,
        queries: &Tensor,
        kv: &(Tensor, Tensor),
        mask: Option<&Tensor>,
        causal: bool,
        train: bool,
    ) -> Tensor {
        let (b, n, h) = queries.size3().expect("[batch, len, hidden]");
        let q = self.split(self.query.forward(queries, self.precision));
        let drop = if train { self.dropout } else { 0.0 };
        let ctx = Tensor::scaled_dot_product_attention(&q, &kv.0, &kv.1, mask, drop, causal, None, false);
        self.out.forward(&ctx.transpose(1, 2).contiguous().view([b, n, h]), self.precision).to_kind(Kind::Float)
    }

    /// Attention of `queries` [batch, len, hidden] over `memory` [batch, keys, hidden] (see
    /// `attend`); [batch, len, hidden].
    pub fn forward(
        &self,
        queries: &Tensor,
        memory: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
        train: bool,
    ) -> Tensor {
        self.attend(queries, &self.keys_values(memory), mask, causal, train)
    }
}

/// PreSumm's `PositionwiseFeedForward`: x + dropout(w_2(dropout(gelu(w_1(layer_norm(x)))))).
pub(crate) struct FeedForward {
    norm: LayerNorm,
    w1: Linear,
    w2: Linear,
    dropout: f64,
    /// The dtype of its matrix products.
    pub precision: Precision,
}

impl FeedForward {
    /// `layer_norm`, `w_1` (`hidden` → `ff`) and `w_2` (`ff` → `hidden`) under `p`.
    pub fn new(p: Path, hidden: i64, ff: i64, dropout: f64) -> Self {
        FeedForward {
            norm: LayerNorm::new(&p / "layer_norm", hidden, NORM_EPS),
            w1: Linear::new(&p / "w_1", hidden, ff, INIT_STD),
            w2: Linear::new(&p / "w_2", ff, hidden, INIT_STD),
            dropout,
            precision: Precision::Fp32,
        }
    }

    /// The block on `x` [..., hidden], residual included; dropout when `train`.
    pub fn forward(&self, x: &Tensor, train: bool) -> Tensor {
        let inter = dropout(&self.w1.forward(&self.norm.forward(x), self.precision).gelu("tanh"), self.dropout, train);
        dropout(&self.w2.forward(&inter, self.precision).to_kind(Kind::Float), self.dropout, train) + x
    }
}

/// Sinusoidal positions [n, dim] for positions `start .. start + n`, sine and cosine
/// interleaved (PreSumm's `PositionalEncoding`).
pub(crate) fn positional(start: i64, n: i64, dim: i64, device: Device) -> Tensor {
    let pos = Tensor::arange_start(start, start + n, (Kind::Float, device)).unsqueeze(1);
    let div = (Tensor::arange_start_step(0, dim, 2, (Kind::Float, device)) * (-(10000f64.ln()) / dim as f64)).exp();
    let angles = pos * div.unsqueeze(0);
    Tensor::stack(&[angles.sin(), angles.cos()], 2).view([n, -1]).narrow(1, 0, dim)
}
