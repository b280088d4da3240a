//! BLOOM (`transformer.word_embeddings`, `transformer.word_embeddings_layernorm`,
//! `transformer.h.N.{input_layernorm, self_attention.query_key_value, self_attention.dense,
//! post_attention_layernorm, mlp.dense_h_to_4h, mlp.dense_4h_to_h}`, `transformer.ln_f`): no
//! position embeddings but ALiBi, a per-head linear penalty on the key's position, and a fused
//! query/key/value projection laid out head by head ([heads, 3, head_dim]).
use super::cache::{KvCache, Step};
use super::config::DecoderConfig;
use super::layers::{activate, attend, Attention, LayerNorm, Linear};
use super::load::{as_compute, Weights};
use crate::error::Result;
use tch::nn::VarStore;
use tch::{Kind, Tensor};

#[derive(Debug)]
struct Block {
    input_layernorm: LayerNorm,
    query_key_value: Linear,
    dense: Linear,
    post_attention_layernorm: LayerNorm,
    dense_h_to_4h: Linear,
    dense_4h_to_h: Linear,
}

/// BLOOM with its (tied) LM head.
#[derive(Debug)]
pub(crate) struct Bloom {
    config: DecoderConfig,
    /// The dtype it computes in (the weights may be stored in half precision on the CPU).
    kind: Kind,
    word_embeddings: Tensor,
    word_embeddings_layernorm: LayerNorm,
    h: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
    /// ALiBi's head slopes [heads] on the device (fp32).
    slopes: Tensor,
}

/// ALiBi's head slopes, as transformers' `_get_alibi_slopes` computes them.
pub(crate) fn alibi_slopes(heads: i64) -> Vec<f32> {
    let closest = 1i64 << (63 - heads.leading_zeros() as i64);
    let base = 2f32.powf(-(2f32.powf(-((closest as f32).log2() - 3.0))));
    let mut slopes: Vec<f32> = (1..=closest).map(|p| base.powi(p as i32)).collect();
    if closest != heads {
        let extra = 2f32.powf(-(2f32.powf(-((2 * closest) as f32).log2() + 3.0)));
        let remaining = closest.min(heads - closest);
        slopes.extend((0..remaining).map(|i| extra.powi((1 + 2 * i) as i32)));
    }
    slopes
}

impl Bloom {
    /// Takes BLOOM's tensors from `w` (adding the `transformer.` prefix bare checkpoints lack).
    pub fn take(w: &mut Weights, vs: &VarStore, c: &DecoderConfig) -> Result<Self> {
        w.add_prefix_if_bare("transformer.", "word_embeddings.weight");
        let (hd, eps) = (c.hidden_size, c.norm_eps);
        let word_embeddings = w.take(vs, "transformer.word_embeddings.weight", &[c.vocab_size, hd])?;
        let word_embeddings_layernorm = LayerNorm::take(w, vs, "transformer.word_embeddings_layernorm", hd, eps)?;
        let mut h = Vec::with_capacity(c.layers.len());
        for i in 0..c.layers.len() {
            let p = format!("transformer.h.{i}");
            h.push(Block {
                input_layernorm: LayerNorm::take(w, vs, &format!("{p}.input_layernorm"), hd, eps)?,
                query_key_value: Linear::take(w, vs, &format!("{p}.self_attention.query_key_value"), hd, 3 * hd, true)?,
                dense: Linear::take(w, vs, &format!("{p}.self_attention.dense"), hd, hd, true)?,
                post_attention_layernorm: LayerNorm::take(w, vs, &format!("{p}.post_attention_layernorm"), hd, eps)?,
                dense_h_to_4h: Linear::take(w, vs, &format!("{p}.mlp.dense_h_to_4h"), hd, 4 * hd, true)?,
                dense_4h_to_h: Linear::take(w, vs, &format!("{p}.mlp.dense_4h_to_h"), 4 * hd, hd, true)?,
            });
        }
        let ln_f = LayerNorm::take(w, vs, "transformer.ln_f", hd, eps)?;
        let lm_head = Linear::lm_head(w, vs, &word_embeddings, c.tie_word_embeddings, hd, c.vocab_size)?;
        Ok(Bloom {
            config: c.clone(),
            kind: w.compute_kind(),
            word_embeddings,
            word_embeddings_layernorm,
            h,
            ln_f,
            lm_head,
            slopes: Tensor::from_slice(&alibi_slopes(c.num_heads)).to_device(w.device()),
        })
    }

    /// Final hidden states [batch, s, hidden] of the new tokens `ids` [batch, s] of `step`, their
    /// keys and values written to `cache` when there is one, with `attention` (fused: ALiBi
    /// folded into an additive mask).
    pub fn forward(&self, ids: &Tensor, step: &Step, mut cache: Option<&mut KvCache>, attention: Attention) -> Tensor {
        let c = &self.config;
        let (b, s) = ids.size2().expect("[batch, seq] ids");
        let (heads, d) = (c.num_heads, c.head_dim);
        let embedded = as_compute(&Tensor::embedding(&self.word_embeddings, ids, -1, false, false), self.kind);
        let mut x = self.word_embeddings_layernorm.forward_in_input_kind(&embedded);
        let kind = x.kind();
        // ALiBi [b, heads, 1, keys]: slope · (the key's position among the real tokens).
        let maskf = step.key_real.to_kind(Kind::Float);
        let keys = maskf.size()[1];
        let positions = (maskf.cumsum(-1, Kind::Float) - 1.0) * &maskf;
        let alibi = (self.slopes.view([1, heads, 1, 1]) * positions.view([b, 1, 1, keys])).to_kind(kind);
        let mask = step.mask(attention, None, Some(alibi), None);
        for (i, block) in self.h.iter().enumerate() {
            let h = block.input_layernorm.forward_in_input_kind(&x);
            let fused = block.query_key_value.forward_in_input_kind(&h).view([b, s, heads, 3, d]);
            let q = fused.select(3, 0).transpose(1, 2);
            let k = fused.select(3, 1).transpose(1, 2);
            let v = fused.select(3, 2).transpose(1, 2);
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => cache.store(i, step.past, &k, &v),
                None => (k, v),
            };
            let att = attend(&q, &k, &v, (d as f64).powf(-0.5), &mask);
            x += block.dense.forward_in_input_kind(&att);
            let h = block.post_attention_layernorm.forward_in_input_kind(&x);
            x += block
                .dense_4h_to_h
                .forward_in_input_kind(&activate(&block.dense_h_to_4h.forward_in_input_kind(&h), c.activation));
        }
        self.ln_f.forward_in_input_kind(&x)
    }

    /// Logits (fp32) of hidden states.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        self.lm_head.forward_in_input_kind(hidden).to_kind(Kind::Float)
    }
}
