//! Falcon (`transformer.word_embeddings`, `transformer.h.N.{input_layernorm | ln_attn and ln_mlp,
//! self_attention.query_key_value, self_attention.dense, post_attention_layernorm (sequential
//! blocks), mlp.dense_h_to_4h, mlp.dense_4h_to_h}`, `transformer.ln_f`, `lm_head`), as
//! transformers' `FalconForCausalLM` computes it:
//!
//! * positions: rotary embeddings (`rope_theta`), or ALiBi (`alibi`) — BLOOM's slopes and
//!   positions, but rounded to bf16 and divided by √head_dim as Falcon's scores are, and added
//!   once, as transformers' SDPA path and the original Falcon code add them (its eager path adds
//!   them twice, see `tests/reference`);
//! * the fused projection laid out per head (falcon-rw), multi-query (falcon-7b) or in key/value
//!   groups (`new_decoder_architecture`, falcon-40b), see [`FalconQkv`];
//! * attention and MLP in parallel from one or two norms, or in sequence, see [`FalconNorms`];
//! * `FalconLinear`'s product and bias as two steps (rounded between in half precision).
use super::bloom::alibi_slopes;
use super::cache::{KvCache, Step};
use super::config::{DecoderConfig, FalconNorms, FalconOptions, FalconQkv, FamilyOptions};
use super::layers::{activate, apply_rope, attend, inv_freq_tensor, Attention, LayerNorm, Linear};
use super::load::{as_compute, Weights};
use crate::error::{Error, Result};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

/// One decoder block.
#[derive(Debug)]
struct Block {
    /// `input_layernorm`, or `ln_attn` with two norms.
    ln_attn: LayerNorm,
    /// `post_attention_layernorm` (sequential) or `ln_mlp` (two norms); `None` where the MLP reads
    /// the attention norm's output.
    ln_mlp: Option<LayerNorm>,
    query_key_value: Linear,
    dense: Linear,
    dense_h_to_4h: Linear,
    dense_4h_to_h: Linear,
}

/// Falcon with its LM head.
#[derive(Debug)]
pub(crate) struct Falcon {
    config: DecoderConfig,
    options: FalconOptions,
    /// The dtype it computes in (the weights may be stored in half precision on the CPU).
    kind: Kind,
    word_embeddings: Tensor,
    h: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
    /// The rotary inverse frequencies on the device and the cos/sin multiplier (none with ALiBi).
    rope: Option<(Tensor, f64)>,
    /// ALiBi's head slopes [heads] on the device, rounded to bf16 as transformers rounds them
    /// (none with rotary embeddings).
    slopes: Option<Tensor>,
}

/// transformers' `FalconLinear`: x · weightᵀ, then the bias added as a separate step.
fn falcon_linear(l: &Linear, x: &Tensor) -> Tensor {
    let kind = x.kind();
    let y = x.matmul(&as_compute(&l.weight, kind).tr());
    match &l.bias {
        Some(b) => y + as_compute(b, kind),
        None => y,
    }
}

impl Falcon {
    /// Takes Falcon's tensors from `w` (adding the `transformer.` prefix bare checkpoints lack).
    pub fn take(w: &mut Weights, vs: &VarStore, c: &DecoderConfig) -> Result<Self> {
        let FamilyOptions::Falcon(options) = c.options else {
            return Err(Error::field(&c.path, "model_type", "not read as a Falcon configuration"));
        };
        w.add_prefix_if_bare("transformer.", "word_embeddings.weight");
        let (hd, ffn, eps, bias) = (c.hidden_size, c.intermediate_size, c.norm_eps, c.qkv_bias);
        let qkv_out = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
        let word_embeddings = w.take(vs, "transformer.word_embeddings.weight", &[c.vocab_size, hd])?;
        let mut h = Vec::with_capacity(c.layers.len());
        for i in 0..c.layers.len() {
            let p = format!("transformer.h.{i}");
            let norm = |w: &mut Weights, name: &str| LayerNorm::take(w, vs, &format!("{p}.{name}"), hd, eps);
            let (ln_attn, ln_mlp) = match options.norms {
                FalconNorms::Sequential => (norm(w, "input_layernorm")?, Some(norm(w, "post_attention_layernorm")?)),
                FalconNorms::Shared => (norm(w, "input_layernorm")?, None),
                FalconNorms::Two => (norm(w, "ln_attn")?, Some(norm(w, "ln_mlp")?)),
            };
            let a = format!("{p}.self_attention");
            h.push(Block {
                ln_attn,
                ln_mlp,
                query_key_value: Linear::take(w, vs, &format!("{a}.query_key_value"), hd, qkv_out, bias)?,
                dense: Linear::take(w, vs, &format!("{a}.dense"), hd, hd, c.o_bias)?,
                dense_h_to_4h: Linear::take(w, vs, &format!("{p}.mlp.dense_h_to_4h"), hd, ffn, c.mlp_bias)?,
                dense_4h_to_h: Linear::take(w, vs, &format!("{p}.mlp.dense_4h_to_h"), ffn, hd, c.mlp_bias)?,
            });
        }
        let ln_f = LayerNorm::take(w, vs, "transformer.ln_f", hd, eps)?;
        let lm_head = Linear::lm_head(w, vs, &word_embeddings, c.tie_word_embeddings, hd, c.vocab_size)?;
        let rope = match (options.alibi, c.layers.first().and_then(|l| l.rope.as_ref())) {
            (false, Some(rope)) => Some(inv_freq_tensor(rope, c.head_dim, w.device())),
            (false, None) if !c.layers.is_empty() => {
                return Err(Error::field(&c.path, "alibi", "false, but the layers have no rotary embedding"));
            }
            _ => None,
        };
        let slopes = options
            .alibi
            .then(|| Tensor::from_slice(&alibi_slopes(c.num_heads)).to_kind(Kind::BFloat16).to_device(w.device()));
        Ok(Falcon {
            config: c.clone(),
            options,
            kind: w.compute_kind(),
            word_embeddings,
            h,
            ln_f,
            lm_head,
            rope,
            slopes,
        })
    }

    /// Queries [b, heads, s, d], keys and values [b, kv_heads, s, d] of the fused projection
    /// `fused` [b, s, ·] in the config's layout.
    fn split(&self, fused: &Tensor, b: i64, s: i64) -> (Tensor, Tensor, Tensor) {
        let (heads, kv, d) = (self.config.num_heads, self.config.num_kv_heads, self.config.head_dim);
        let (q, k, v) = match self.options.qkv {
            FalconQkv::PerHead => {
                let f = fused.view([b, s, heads, 3, d]);
                (f.select(3, 0), f.select(3, 1), f.select(3, 2))
            }
            FalconQkv::MultiQuery => {
                let f = fused.view([b, s, heads + 2, d]);
                (f.narrow(2, 0, heads), f.narrow(2, heads, 1), f.narrow(2, heads + 1, 1))
            }
            FalconQkv::Grouped => {
                // Group g's queries are heads g·q..(g + 1)·q, all reading its key and value.
                let per_group = heads / kv;
                let f = fused.view([b, s, kv, per_group + 2, d]);
                (
                    f.narrow(3, 0, per_group).reshape([b, s, heads, d]),
                    f.select(3, per_group),
                    f.select(3, per_group + 1),
                )
            }
        };
        (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    }

    /// Final hidden states [batch, s, hidden] of the new tokens `ids` [batch, s] of `step`, their
    /// keys and values written to `cache` when there is one, with `attention` (fused: ALiBi
    /// folded into an additive mask).
    pub fn forward(&self, ids: &Tensor, step: &Step, mut cache: Option<&mut KvCache>, attention: Attention) -> Tensor {
        let c = &self.config;
        let (b, s) = ids.size2().expect("[batch, seq] ids");
        let (heads, d) = (c.num_heads, c.head_dim);
        let mut x = as_compute(&Tensor::embedding(&self.word_embeddings, ids, -1, false, false), self.kind);
        let kind = x.kind();
        let tables = self.rope.as_ref().map(|(inv, scaling)| step.rope_tables(inv, *scaling, s, kind));
        // ALiBi [b, heads, 1, keys]: bf16(slope) · bf16(the key's position among the real tokens),
        // rounded to bf16, in the compute dtype, divided by √head_dim.
        let alibi = self.slopes.as_ref().map(|slopes| {
            let real = step.key_real.to_kind(Kind::Int64);
            let keys = real.size()[1];
            let positions = (real.cumsum(-1, Kind::Int64) - 1) * &real;
            let bias = slopes.view([1, heads, 1, 1]) * positions.to_kind(Kind::BFloat16).view([b, 1, 1, keys]);
            bias.to_kind(kind) / (d as f64).sqrt()
        });
        let mask = step.mask(attention, None, alibi, None);
        let parallel = self.options.norms != FalconNorms::Sequential;
        for (i, block) in self.h.iter().enumerate() {
            let h_attn = block.ln_attn.forward_in_input_kind(&x);
            let (mut q, mut k, v) = self.split(&falcon_linear(&block.query_key_value, &h_attn), b, s);
            if let Some((cos, sin)) = &tables {
                q = apply_rope(&q, cos, sin);
                k = apply_rope(&k, cos, sin);
            }
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => cache.store(i, step.past, &k, &v),
                None => (k, v),
            };
            let att = attend(&q, &k, &v, c.attn_scale, &mask);
            let att = falcon_linear(&block.dense, &att);
            if !parallel {
                x += &att;
            }
            // Sequential: post_attention_layernorm of the residual with attention added;
            // parallel: ln_mlp of the block's input, or the attention norm's output.
            let h_mlp = match &block.ln_mlp {
                Some(norm) => norm.forward_in_input_kind(&x),
                None => h_attn,
            };
            let h4 = activate(&falcon_linear(&block.dense_h_to_4h, &h_mlp), c.activation);
            let mut out = falcon_linear(&block.dense_4h_to_h, &h4);
            if parallel {
                out += att;
            }
            x += out;
        }
        self.ln_f.forward_in_input_kind(&x)
    }

    /// Logits (fp32) of hidden states.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        self.lm_head.forward_in_input_kind(hidden).to_kind(Kind::Float)
    }
}
