//! The T5 network as transformers 5's `modeling_t5.py` and `modeling_mt5.py` compute it: RMS
//! norms without mean subtraction (`T5LayerNorm`, the variance in fp32), attention with no score
//! scaling and a learned relative-position bias (bucketed distances, both ways in the encoder,
//! backwards only in the decoder; computed by the first block, shared by the others), the padding
//! mask added as the dtype's minimum, cross-attention without position bias, a feed-forward layer
//! plain (`wi`) or gated (`wi_0`, `wi_1`), and the head over the decoder's last norm (T5's output
//! scaled by d_model^-0.5 when the config says so). Weights keep their HF names.
use super::config::{FeedForwardAct, Seq2SeqConfig};
use crate::error::Result;
use crate::model::decoder::load::{as_compute, Weights};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// A linear layer without bias, `{name}.weight` [out, in], computed in the input's dtype.
#[derive(Debug)]
struct Dense {
    weight: Tensor,
}

impl Dense {
    /// `{name}.weight` [out, inp] from the checkpoint.
    fn take(w: &mut Weights, vs: &VarStore, name: &str, inp: i64, out: i64) -> Result<Self> {
        Ok(Dense { weight: w.take(vs, &format!("{name}.weight"), &[out, inp])? })
    }

    /// x · weightᵀ in x's dtype.
    fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&as_compute(&self.weight, x.kind()), None::<&Tensor>)
    }
}

/// `T5LayerNorm`: x · rsqrt(mean(x²) + eps) with the mean in fp32, cast to a half-precision
/// weight's dtype, times the weight.
#[derive(Debug)]
struct T5LayerNorm {
    weight: Tensor,
    eps: f64,
}

impl T5LayerNorm {
    /// `{name}.weight` [d_model] from the checkpoint.
    fn take(w: &mut Weights, vs: &VarStore, name: &str, c: &Seq2SeqConfig) -> Result<Self> {
        Ok(T5LayerNorm { weight: w.take(vs, &format!("{name}.weight"), &[c.d_model])?, eps: c.layer_norm_epsilon })
    }

    /// The normalised `x`, in its dtype.
    fn forward(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let variance = x.to_kind(Kind::Float).square().mean_dim(-1, true, Kind::Float);
        let normed = x * (variance + self.eps).rsqrt();
        // The run's dtype: half precision on CUDA (transformers casts to the weight's), fp32 here.
        as_compute(&self.weight, kind) * normed.to_kind(kind)
    }
}

/// The relative-position bias of one stack: a learned value per bucket and head.
#[derive(Debug)]
struct RelativeBias {
    /// [buckets, heads].
    table: Tensor,
    bidirectional: bool,
    buckets: i64,
    max_distance: i64,
}

impl RelativeBias {
    /// The bucket of every (query, key) pair [q, k], on the CPU: transformers'
    /// `_relative_position_bucket`, op for op (the logarithmic buckets' boundaries depend on
    /// fp32 rounding).
    fn buckets(&self, q_len: i64, k_len: i64) -> Tensor {
        let context = Tensor::arange(q_len, (Kind::Int64, Device::Cpu)).unsqueeze(1);
        let memory = Tensor::arange(k_len, (Kind::Int64, Device::Cpu)).unsqueeze(0);
        let relative = memory - context;
        let (mut buckets, mut num_buckets) = (relative.zeros_like(), self.buckets);
        let relative = if self.bidirectional {
            num_buckets /= 2;
            buckets += relative.gt(0).to_kind(Kind::Int64) * num_buckets;
            relative.abs()
        } else {
            -relative.clamp_max(0)
        };
        let max_exact = num_buckets / 2;
        let is_small = relative.lt(max_exact);
        let ratio = (self.max_distance as f64 / max_exact as f64).ln();
        let large = ((relative.to_kind(Kind::Float) / max_exact as f64).log() / ratio
            * (num_buckets - max_exact) as f64)
            .to_kind(Kind::Int64)
            + max_exact;
        let large = large.clamp_max(num_buckets - 1);
        buckets + relative.where_self(&is_small, &large)
    }

    /// The bias [1, heads, q, k] in `kind` on the table's device.
    fn bias(&self, q_len: i64, k_len: i64, kind: Kind) -> Tensor {
        let buckets = self.buckets(q_len, k_len).to_device(self.table.device());
        let values = self.table.index_select(0, &buckets.reshape([-1])).to_kind(kind);
        values.view([q_len, k_len, -1]).permute([2, 0, 1]).unsqueeze(0)
    }
}

/// One attention layer (`SelfAttention` or `EncDecAttention`).
#[derive(Debug)]
struct Attention {
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    heads: i64,
    d_kv: i64,
}

/// The lowest finite value of `kind`: what transformers' masks add where a key is hidden.
fn lowest(kind: Kind) -> f64 {
    match kind {
        Kind::BFloat16 => -3.389_531_389_251_535_5e38,
        Kind::Half => -65504.0,
        _ => f32::MIN as f64,
    }
}

impl Attention {
    /// `{name}.q`, `.k`, `.v` and `.o` from the checkpoint.
    fn take(w: &mut Weights, vs: &VarStore, name: &str, c: &Seq2SeqConfig) -> Result<Self> {
        let inner = c.num_heads * c.d_kv;
        Ok(Attention {
            q: Dense::take(w, vs, &format!("{name}.q"), c.d_model, inner)?,
            k: Dense::take(w, vs, &format!("{name}.k"), c.d_model, inner)?,
            v: Dense::take(w, vs, &format!("{name}.v"), c.d_model, inner)?,
            o: Dense::take(w, vs, &format!("{name}.o"), inner, c.d_model)?,
            heads: c.num_heads,
            d_kv: c.d_kv,
        })
    }

    /// `x` [b, s, d_model] through `lin`, as heads [b, heads, s, d_kv].
    fn heads_of(&self, lin: &Dense, x: &Tensor) -> Tensor {
        let (b, s) = (x.size()[0], x.size()[1]);
        lin.forward(x).view([b, s, self.heads, self.d_kv]).transpose(1, 2)
    }

    /// Keys and values [b, heads, s, d_kv] of `states`.
    fn keys_values(&self, states: &Tensor) -> (Tensor, Tensor) {
        (self.heads_of(&self.k, states), self.heads_of(&self.v, states))
    }

    /// Attention of `x` [b, q, d_model] over `keys` and `values` [b, heads, k, d_kv]: scores
    /// unscaled, plus `bias` [1, heads, q, k], plus `mask` (0 or the dtype's minimum,
    /// broadcastable to [b, heads, q, k]), softmax, the output projection.
    fn attend(&self, x: &Tensor, keys: &Tensor, values: &Tensor, bias: Option<&Tensor>, mask: &Tensor) -> Tensor {
        let (b, q_len) = (x.size()[0], x.size()[1]);
        let query = self.heads_of(&self.q, x);
        let mut scores = query.matmul(&keys.transpose(2, 3));
        if let Some(bias) = bias {
            scores += bias;
        }
        // In fp32 (transformers' eager softmax runs in the scores' dtype: the same in fp32).
        let probs = (scores + mask).softmax(-1, Kind::Float).to_kind(x.kind());
        let out = probs.matmul(values).transpose(1, 2).contiguous().reshape([b, q_len, self.heads * self.d_kv]);
        self.o.forward(&out)
    }
}

/// `DenseReluDense`: plain (`wi`, act, `wo`) or gated (act(`wi_0`) · `wi_1`, `wo`).
#[derive(Debug)]
struct FeedForward {
    wi: Dense,
    gate: Option<Dense>,
    wo: Dense,
    act: FeedForwardAct,
}

impl FeedForward {
    /// `{name}.wi` (or `.wi_0` and `.wi_1`) and `.wo` from the checkpoint.
    fn take(w: &mut Weights, vs: &VarStore, name: &str, c: &Seq2SeqConfig) -> Result<Self> {
        let (wi, gate) = if c.gated {
            (
                Dense::take(w, vs, &format!("{name}.wi_0"), c.d_model, c.d_ff)?,
                Some(Dense::take(w, vs, &format!("{name}.wi_1"), c.d_model, c.d_ff)?),
            )
        } else {
            (Dense::take(w, vs, &format!("{name}.wi"), c.d_model, c.d_ff)?, None)
        };
        Ok(FeedForward { wi, gate, wo: Dense::take(w, vs, &format!("{name}.wo"), c.d_ff, c.d_model)?, act: c.act })
    }

    /// wo(act(wi · x)), gated by wi_1 · x.
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.act.apply(&self.wi.forward(x));
        let h = match &self.gate {
            Some(gate) => h * gate.forward(x),
            None => h,
        };
        self.wo.forward(&h)
    }
}

/// One encoder block: self-attention and feed-forward, each after its norm, added back.
#[derive(Debug)]
struct EncoderBlock {
    attention_norm: T5LayerNorm,
    attention: Attention,
    ff_norm: T5LayerNorm,
    ff: FeedForward,
}

/// One decoder block: causal self-attention, cross-attention over the encoder's output and
/// feed-forward, each after its norm, added back.
#[derive(Debug)]
struct DecoderBlock {
    self_norm: T5LayerNorm,
    self_attention: Attention,
    cross_norm: T5LayerNorm,
    cross_attention: Attention,
    ff_norm: T5LayerNorm,
    ff: FeedForward,
}

/// The encoder-decoder with its head.
#[derive(Debug)]
pub(crate) struct T5 {
    encoder_embeddings: Tensor,
    decoder_embeddings: Tensor,
    encoder_bias: RelativeBias,
    decoder_bias: RelativeBias,
    encoder: Vec<EncoderBlock>,
    decoder: Vec<DecoderBlock>,
    encoder_norm: T5LayerNorm,
    decoder_norm: T5LayerNorm,
    /// [vocab, d_model].
    head: Tensor,
    /// d_model^-0.5 when the decoder's output is scaled before the head.
    output_scale: Option<f64>,
}

/// The checkpoint's names for the shared embedding table, in the order transformers falls back
/// on them when tying (`shared.weight` first).
const TIED: [&str; 4] =
    ["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"];

impl T5 {
    /// Takes every tensor of the network from `w`, registered in `vs` under its HF name. The
    /// embeddings and the head are `shared.weight` unless the checkpoint has its own that
    /// differs (mT5's `lm_head.weight`), as transformers ties them; copies of the shared table
    /// (a `pytorch_model.bin` repeats it as `encoder.embed_tokens.weight`) are not kept.
    pub fn take(w: &mut Weights, vs: &VarStore, c: &Seq2SeqConfig) -> Result<Self> {
        let shape = [c.vocab_size, c.d_model];
        let shared_name = TIED.iter().copied().find(|n| w.has(n)).unwrap_or(TIED[0]);
        let shared = w.take(vs, shared_name, &shape)?;
        // Its own tensor where the checkpoint has one that differs from the shared table (an
        // embedding table that equals it is read into a store dropped here, not kept).
        let own = |w: &mut Weights, name: &str, store: &VarStore| -> Result<Tensor> {
            if name == shared_name || !w.has(name) {
                return Ok(shared.shallow_clone());
            }
            let t = w.take(store, name, &shape)?;
            Ok(if t.equal(&shared) { shared.shallow_clone() } else { t })
        };
        let scratch = VarStore::new(w.device());
        let encoder_embeddings = own(w, "encoder.embed_tokens.weight", &scratch)?;
        let decoder_embeddings = own(w, "decoder.embed_tokens.weight", &scratch)?;
        let head = own(w, "lm_head.weight", vs)?;
        let bias = |w: &mut Weights, stack: &str, bidirectional: bool| -> Result<RelativeBias> {
            let name = format!("{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
            Ok(RelativeBias {
                table: w.take(vs, &name, &[c.relative_attention_num_buckets, c.num_heads])?,
                bidirectional,
                buckets: c.relative_attention_num_buckets,
                max_distance: c.relative_attention_max_distance,
            })
        };
        let encoder_bias = bias(w, "encoder", true)?;
        let decoder_bias = bias(w, "decoder", false)?;
        let mut encoder = Vec::with_capacity(c.num_layers as usize);
        for i in 0..c.num_layers {
            let p = format!("encoder.block.{i}.layer");
            encoder.push(EncoderBlock {
                attention_norm: T5LayerNorm::take(w, vs, &format!("{p}.0.layer_norm"), c)?,
                attention: Attention::take(w, vs, &format!("{p}.0.SelfAttention"), c)?,
                ff_norm: T5LayerNorm::take(w, vs, &format!("{p}.1.layer_norm"), c)?,
                ff: FeedForward::take(w, vs, &format!("{p}.1.DenseReluDense"), c)?,
            });
        }
        let mut decoder = Vec::with_capacity(c.num_decoder_layers as usize);
        for i in 0..c.num_decoder_layers {
            let p = format!("decoder.block.{i}.layer");
            decoder.push(DecoderBlock {
                self_norm: T5LayerNorm::take(w, vs, &format!("{p}.0.layer_norm"), c)?,
                self_attention: Attention::take(w, vs, &format!("{p}.0.SelfAttention"), c)?,
                cross_norm: T5LayerNorm::take(w, vs, &format!("{p}.1.layer_norm"), c)?,
                cross_attention: Attention::take(w, vs, &format!("{p}.1.EncDecAttention"), c)?,
                ff_norm: T5LayerNorm::take(w, vs, &format!("{p}.2.layer_norm"), c)?,
                ff: FeedForward::take(w, vs, &format!("{p}.2.DenseReluDense"), c)?,
            });
        }
        // transformers ignores a cross-attention bias some checkpoints carry.
        let ignored = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
        if w.has(ignored) {
            let _ignored = w.take(&scratch, ignored, &[c.relative_attention_num_buckets, c.num_heads])?;
        }
        Ok(T5 {
            encoder_embeddings,
            decoder_embeddings,
            encoder_bias,
            decoder_bias,
            encoder,
            decoder,
            encoder_norm: T5LayerNorm::take(w, vs, "encoder.final_layer_norm", c)?,
            decoder_norm: T5LayerNorm::take(w, vs, "decoder.final_layer_norm", c)?,
            head,
            output_scale: c.scale_decoder_outputs.then_some((c.d_model as f64).powf(-0.5)),
        })
    }

    /// The rows of `table` at `ids` [b, s], in `kind` (only the rows looked up are cast).
    fn embed(table: &Tensor, ids: &Tensor, kind: Kind) -> Tensor {
        let (b, s) = (ids.size()[0], ids.size()[1]);
        table.index_select(0, &ids.reshape([-1])).to_kind(kind).view([b, s, -1])
    }

    /// The encoder's output [b, s, d_model] for right-padded `ids` [b, s] whose real tokens are
    /// marked 1 in `mask`, in `kind`.
    pub fn encode(&self, ids: &Tensor, mask: &Tensor, kind: Kind) -> Tensor {
        let s = ids.size()[1];
        let mut h = Self::embed(&self.encoder_embeddings, ids, kind);
        let bias = self.encoder_bias.bias(s, s, kind);
        let mask = key_mask(mask, kind);
        for block in &self.encoder {
            let n = block.attention_norm.forward(&h);
            let (k, v) = block.attention.keys_values(&n);
            h = &h + block.attention.attend(&n, &k, &v, Some(&bias), &mask);
            let n = block.ff_norm.forward(&h);
            h = &h + block.ff.forward(&n);
        }
        self.encoder_norm.forward(&h)
    }

    /// The decoder's final hidden states [r, t, d_model] (scaled where the config says) for
    /// decoder inputs `ids` [r, t], each row attending causally to itself and to encoder row
    /// `rows[i]` of `encoded` [b, s, d_model] (its real tokens marked 1 in `encoder_mask`
    /// [b, s]); `rows` [r] (int64, on the device) maps decoder rows to encoder rows.
    pub fn decode(&self, ids: &Tensor, encoded: &Tensor, encoder_mask: &Tensor, rows: &Tensor) -> Tensor {
        let kind = encoded.kind();
        let t = ids.size()[1];
        let mut h = Self::embed(&self.decoder_embeddings, ids, kind);
        let bias = self.decoder_bias.bias(t, t, kind);
        let causal = causal_mask(t, kind, ids.device());
        let cross_mask = key_mask(&encoder_mask.index_select(0, rows), kind);
        for block in &self.decoder {
            let n = block.self_norm.forward(&h);
            let (k, v) = block.self_attention.keys_values(&n);
            h = &h + block.self_attention.attend(&n, &k, &v, Some(&bias), &causal);
            let n = block.cross_norm.forward(&h);
            // Each question's keys and values once, then one copy per decoder row.
            let (k, v) = block.cross_attention.keys_values(encoded);
            let (k, v) = (k.index_select(0, rows), v.index_select(0, rows));
            h = &h + block.cross_attention.attend(&n, &k, &v, None, &cross_mask);
            let n = block.ff_norm.forward(&h);
            h = &h + block.ff.forward(&n);
        }
        let h = self.decoder_norm.forward(&h);
        match self.output_scale {
            Some(scale) => h * scale,
            None => h,
        }
    }

    /// The head's logits (fp32) of decoder states [.., d_model].
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        hidden.linear(&as_compute(&self.head, hidden.kind()), None::<&Tensor>).to_kind(Kind::Float)
    }
}

/// 0 where `mask` [b, k] marks a real key, the dtype's minimum elsewhere, as [b, 1, 1, k].
fn key_mask(mask: &Tensor, kind: Kind) -> Tensor {
    let (b, k) = (mask.size()[0], mask.size()[1]);
    let hidden = mask.eq(0).view([b, 1, 1, k]);
    Tensor::zeros([b, 1, 1, k], (kind, mask.device())).masked_fill(&hidden, lowest(kind))
}

/// 0 where a query may see a key (at or before it), the dtype's minimum after it: [1, 1, t, t].
fn causal_mask(t: i64, kind: Kind, device: Device) -> Tensor {
    let q = Tensor::arange(t, (Kind::Int64, device)).unsqueeze(1);
    let k = Tensor::arange(t, (Kind::Int64, device)).unsqueeze(0);
    let later = k.gt_tensor(&q).view([1, 1, t, t]);
    Tensor::zeros([1, 1, t, t], (kind, device)).masked_fill(&later, lowest(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets of queries 0..q against keys 0..k, flattened (one of them is 1).
    fn buckets(bidirectional: bool, q: i64, k: i64) -> Vec<i64> {
        let bias = RelativeBias {
            table: Tensor::zeros([32, 1], (Kind::Float, Device::Cpu)),
            bidirectional,
            buckets: 32,
            max_distance: 128,
        };
        Vec::<i64>::try_from(bias.buckets(q, k).view([-1])).unwrap()
    }

    #[test]
    fn relative_positions_fall_into_t5s_buckets() {
        // transformers' `_relative_position_bucket` values. Both ways (the encoder): keys after
        // the query from bucket 16, exact up to 7 positions, logarithmic up to 128, the last
        // bucket beyond.
        let at = |b: &[i64], i: &[usize]| i.iter().map(|&i| b[i]).collect::<Vec<_>>();
        let after = buckets(true, 1, 200);
        assert_eq!(&after[..9], &[0, 17, 18, 19, 20, 21, 22, 23, 24]);
        assert_eq!(at(&after, &[12, 16, 32, 64, 127, 128, 199]), [25, 26, 28, 30, 31, 31, 31]);
        // Keys before the query: the first half's buckets, both ways; 32 of them backwards only.
        let before = buckets(true, 200, 1);
        assert_eq!(at(&before, &[0, 1, 7, 8, 12, 16, 32, 64, 127, 128, 199]), [0, 1, 7, 8, 9, 10, 12, 14, 15, 15, 15]);
        let causal = buckets(false, 200, 1);
        assert_eq!(at(&causal, &[0, 1, 15, 16, 20, 32, 64, 127, 128, 199]), [0, 1, 15, 16, 17, 21, 26, 31, 31, 31]);
        // Backwards only: keys after the query are bucket 0 (the causal mask hides them).
        assert_eq!(buckets(false, 1, 5), vec![0; 5]);
    }
}
