//! The RoPE decoders — Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3 — as one network with
//! per-family switches: their checkpoints share the names `model.embed_tokens`,
//! `model.layers.N.self_attn.{q,k,v,o}_proj`, `model.layers.N.mlp.{gate,up,down}_proj`,
//! `model.norm` and `lm_head`, and differ in which norms exist and where they sit:
//!
//! * pre-norm (Llama, Mistral, Qwen): `input_layernorm` before attention,
//!   `post_attention_layernorm` before the MLP;
//! * sandwich (Gemma): `input_layernorm`/`post_attention_layernorm` around attention,
//!   `pre_feedforward_layernorm`/`post_feedforward_layernorm` around the MLP, `(1 + w)` scales,
//!   embeddings times √hidden;
//! * post-norm (OLMo 2/3): `post_attention_layernorm` and `post_feedforward_layernorm` on the
//!   branch outputs only.
//!
//! q/k norms: per head (`self_attn.q_norm` [head_dim], Qwen3 and Gemma 3) or over the whole
//! projection (OLMo, [heads · head_dim]).
use super::cache::{KvCache, Step};
use super::config::{DecoderConfig, Family};
use super::layers::{activate, apply_rope, attend, inv_freq_tensor, Attention, Linear, Mask, RmsNorm};
use super::load::{as_compute, Weights};
use crate::error::Result;
use tch::nn::VarStore;
use tch::{Kind, Tensor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Norms {
    Pre,
    Sandwich,
    Post,
}

#[derive(Debug)]
enum QkNorm {
    None,
    PerHead(RmsNorm, RmsNorm),
    Full(RmsNorm, RmsNorm),
}

#[derive(Debug)]
struct Layer {
    input_layernorm: Option<RmsNorm>,
    post_attention_layernorm: RmsNorm,
    pre_feedforward_layernorm: Option<RmsNorm>,
    post_feedforward_layernorm: Option<RmsNorm>,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    qk_norm: QkNorm,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
    /// Index into the network's rope tables.
    rope: usize,
    window: Option<i64>,
}

/// A RoPE decoder with its LM head.
#[derive(Debug)]
pub(crate) struct RopeDecoder {
    config: DecoderConfig,
    /// The dtype it computes in (the weights may be stored in half precision on the CPU).
    kind: Kind,
    norms: Norms,
    embed_tokens: Tensor,
    /// Gemma's √hidden, rounded to the compute dtype as transformers rounds it.
    embed_scale: Option<f64>,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Linear,
    /// Each distinct RoPE's inverse frequencies, on the device.
    ropes: Vec<(Tensor, f64)>,
}

impl RopeDecoder {
    /// Takes the family's tensors from `w`, registering them in `vs`.
    pub fn take(w: &mut Weights, vs: &VarStore, c: &DecoderConfig) -> Result<Self> {
        let gemma = matches!(c.family, Family::Gemma2 | Family::Gemma3);
        let olmo = matches!(c.family, Family::Olmo2 | Family::Olmo3);
        let norms = if gemma {
            Norms::Sandwich
        } else if olmo {
            Norms::Post
        } else {
            Norms::Pre
        };
        let (h, eps) = (c.hidden_size, c.norm_eps);
        let q_dim = c.num_heads * c.head_dim;
        let kv_dim = c.num_kv_heads * c.head_dim;
        let norm = |w: &mut Weights, name: &str, dim: i64| -> Result<RmsNorm> {
            let n = RmsNorm::take(w, vs, name, dim, eps, gemma)?;
            Ok(if olmo { n.scaled_in_fp32() } else { n })
        };
        let embed_tokens = w.take(vs, "model.embed_tokens.weight", &[c.vocab_size, h])?;
        let mut ropes: Vec<super::config::Rope> = Vec::new();
        let mut layers = Vec::with_capacity(c.layers.len());
        for (i, kind) in c.layers.iter().enumerate() {
            let p = format!("model.layers.{i}");
            let rope = kind.rope.clone().expect("RoPE families have a rope per layer");
            let rope_index = match ropes.iter().position(|r| *r == rope) {
                Some(j) => j,
                None => {
                    ropes.push(rope);
                    ropes.len() - 1
                }
            };
            let a = format!("{p}.self_attn");
            let qk_norm = match c.family {
                Family::Qwen3 | Family::Gemma3 => QkNorm::PerHead(
                    norm(w, &format!("{a}.q_norm"), c.head_dim)?,
                    norm(w, &format!("{a}.k_norm"), c.head_dim)?,
                ),
                Family::Olmo2 | Family::Olmo3 => {
                    QkNorm::Full(norm(w, &format!("{a}.q_norm"), q_dim)?, norm(w, &format!("{a}.k_norm"), kv_dim)?)
                }
                _ => QkNorm::None,
            };
            layers.push(Layer {
                input_layernorm: if olmo { None } else { Some(norm(w, &format!("{p}.input_layernorm"), h)?) },
                post_attention_layernorm: norm(w, &format!("{p}.post_attention_layernorm"), h)?,
                pre_feedforward_layernorm: if gemma {
                    Some(norm(w, &format!("{p}.pre_feedforward_layernorm"), h)?)
                } else {
                    None
                },
                post_feedforward_layernorm: if gemma || olmo {
                    Some(norm(w, &format!("{p}.post_feedforward_layernorm"), h)?)
                } else {
                    None
                },
                q_proj: Linear::take(w, vs, &format!("{a}.q_proj"), h, q_dim, c.qkv_bias)?,
                k_proj: Linear::take(w, vs, &format!("{a}.k_proj"), h, kv_dim, c.qkv_bias)?,
                v_proj: Linear::take(w, vs, &format!("{a}.v_proj"), h, kv_dim, c.qkv_bias)?,
                o_proj: Linear::take(w, vs, &format!("{a}.o_proj"), q_dim, h, c.o_bias)?,
                qk_norm,
                gate_proj: Linear::take(w, vs, &format!("{p}.mlp.gate_proj"), h, c.intermediate_size, c.mlp_bias)?,
                up_proj: Linear::take(w, vs, &format!("{p}.mlp.up_proj"), h, c.intermediate_size, c.mlp_bias)?,
                down_proj: Linear::take(w, vs, &format!("{p}.mlp.down_proj"), c.intermediate_size, h, c.mlp_bias)?,
                rope: rope_index,
                window: kind.window,
            });
        }
        let final_norm = norm(w, "model.norm", h)?;
        let lm_head = Linear::lm_head(w, vs, &embed_tokens, c.tie_word_embeddings, h, c.vocab_size)?;
        Ok(RopeDecoder {
            config: c.clone(),
            kind: w.compute_kind(),
            norms,
            embed_tokens,
            // transformers multiplies by √hidden rounded to the embeddings' dtype.
            embed_scale: gemma.then(|| Tensor::from((h as f64).sqrt()).to_kind(w.compute_kind()).double_value(&[])),
            layers,
            norm: final_norm,
            lm_head,
            ropes: ropes.iter().map(|r| inv_freq_tensor(r, c.head_dim, w.device())).collect(),
        })
    }

    /// Final hidden states [batch, s, hidden] of the new tokens `ids` [batch, s] of `step`, their
    /// keys and values written to `cache` when there is one (the scoring pass has none), with
    /// `attention` (eager where the family soft-caps its scores, Gemma 2).
    pub fn forward(&self, ids: &Tensor, step: &Step, mut cache: Option<&mut KvCache>, attention: Attention) -> Tensor {
        let c = &self.config;
        let (b, s) = ids.size2().expect("[batch, seq] ids");
        let mut x = as_compute(&Tensor::embedding(&self.embed_tokens, ids, -1, false, false), self.kind);
        let kind = x.kind();
        if let Some(scale) = self.embed_scale {
            x *= scale;
        }
        let tables: Vec<(Tensor, Tensor)> =
            self.ropes.iter().map(|(inv, scaling)| step.rope_tables(inv, *scaling, s, kind)).collect();
        // One mask for every layer of a window (none: full causal attention), made at its first.
        let mut masks: Vec<(Option<i64>, Mask)> = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            let at = match masks.iter().position(|(w, _)| *w == layer.window) {
                Some(at) => at,
                None => {
                    masks.push((layer.window, step.mask(attention, layer.window, None, c.attn_softcap)));
                    masks.len() - 1
                }
            };
            let (cos, sin) = &tables[layer.rope];
            // Attention branch.
            let h = match &layer.input_layernorm {
                Some(n) => n.forward(&x),
                None => x.shallow_clone(),
            };
            let mut q = layer.q_proj.forward_in_input_kind(&h);
            let mut k = layer.k_proj.forward_in_input_kind(&h);
            let v = layer.v_proj.forward_in_input_kind(&h);
            if let QkNorm::Full(qn, kn) = &layer.qk_norm {
                q = qn.forward(&q);
                k = kn.forward(&k);
            }
            let mut q = q.view([b, s, c.num_heads, c.head_dim]);
            let mut k = k.view([b, s, c.num_kv_heads, c.head_dim]);
            if let QkNorm::PerHead(qn, kn) = &layer.qk_norm {
                q = qn.forward(&q);
                k = kn.forward(&k);
            }
            let q = apply_rope(&q.transpose(1, 2), cos, sin);
            let k = apply_rope(&k.transpose(1, 2), cos, sin);
            let v = v.view([b, s, c.num_kv_heads, c.head_dim]).transpose(1, 2);
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => cache.store(i, step.past, &k, &v),
                None => (k, v),
            };
            let att = attend(&q, &k, &v, c.attn_scale, &masks[at].1);
            let mut h = layer.o_proj.forward_in_input_kind(&att);
            if self.norms != Norms::Pre {
                h = layer.post_attention_layernorm.forward(&h);
            }
            x += h;
            // MLP branch.
            let h = match (self.norms, &layer.pre_feedforward_layernorm) {
                (Norms::Pre, _) => layer.post_attention_layernorm.forward(&x),
                (_, Some(n)) => n.forward(&x),
                (_, None) => x.shallow_clone(),
            };
            let h = layer.down_proj.forward_in_input_kind(
                &(activate(&layer.gate_proj.forward_in_input_kind(&h), c.activation)
                    * layer.up_proj.forward_in_input_kind(&h)),
            );
            let h = match &layer.post_feedforward_layernorm {
                Some(n) => n.forward(&h),
                None => h,
            };
            x += h;
        }
        self.norm.forward(&x)
    }

    /// Logits (fp32) of hidden states [.., hidden], soft-capped where the family caps them.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        let logits = self.lm_head.forward_in_input_kind(hidden).to_kind(Kind::Float);
        match self.config.final_softcap {
            Some(cap) => (logits / cap).tanh() * cap,
            None => logits,
        }
    }
}
