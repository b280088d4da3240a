//! XGLM (`model.embed_tokens`, `model.layers.N.{self_attn_layer_norm, self_attn.{q,k,v,out}_proj,
//! final_layer_norm, fc1, fc2}`, `model.layer_norm`, `lm_head` tied to the embeddings unless the
//! checkpoint has its own): fairseq's pre-LayerNorm decoder, biases on every projection, token
//! embeddings times √d_model (`scale_embedding`) plus sinusoidal position embeddings with no
//! weights, as transformers' `XGLMSinusoidalPositionalEmbedding` makes them: position p reads
//! row p + 2 of a table whose row `pad_token_id` is zeros. Positions count from 0 at each row's
//! first column, so a right-padded sentence has the positions it has alone; a left-padded batch
//! and the steps after a cache take each row's own (from its first real token).
use super::cache::{KvCache, Step};
use super::config::{DecoderConfig, FamilyOptions, XglmOptions};
use super::layers::{activate, attend, Attention, LayerNorm, Linear};
use super::load::{as_compute, Weights};
use crate::error::{Error, Result};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

/// Position p is row p + 2 of XGLM's sinusoidal table (fairseq's offset past the padding row).
const POSITION_OFFSET: i64 = 2;

/// One decoder layer.
#[derive(Debug)]
struct Layer {
    self_attn_layer_norm: LayerNorm,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    out_proj: Linear,
    final_layer_norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

/// XGLM with its LM head.
#[derive(Debug)]
pub(crate) struct Xglm {
    config: DecoderConfig,
    options: XglmOptions,
    /// The dtype it computes in (the weights may be stored in half precision on the CPU).
    kind: Kind,
    embed_tokens: Tensor,
    /// The sinusoids' frequencies [d_model / 2] on the device (fp32).
    frequencies: Tensor,
    layers: Vec<Layer>,
    layer_norm: LayerNorm,
    lm_head: Linear,
}

impl Xglm {
    /// Takes XGLM's tensors from `w` (adding the `model.` prefix bare checkpoints lack).
    pub fn take(w: &mut Weights, vs: &VarStore, c: &DecoderConfig) -> Result<Self> {
        let FamilyOptions::Xglm(options) = &c.options else {
            return Err(Error::field(&c.path, "model_type", "not read as an XGLM configuration"));
        };
        w.add_prefix_if_bare("model.", "embed_tokens.weight");
        let (h, ffn, eps) = (c.hidden_size, c.intermediate_size, c.norm_eps);
        let embed_tokens = w.take(vs, "model.embed_tokens.weight", &[c.vocab_size, h])?;
        let mut layers = Vec::with_capacity(c.layers.len());
        for i in 0..c.layers.len() {
            let p = format!("model.layers.{i}");
            let a = format!("{p}.self_attn");
            layers.push(Layer {
                self_attn_layer_norm: LayerNorm::take(w, vs, &format!("{p}.self_attn_layer_norm"), h, eps)?,
                q_proj: Linear::take(w, vs, &format!("{a}.q_proj"), h, h, true)?,
                k_proj: Linear::take(w, vs, &format!("{a}.k_proj"), h, h, true)?,
                v_proj: Linear::take(w, vs, &format!("{a}.v_proj"), h, h, true)?,
                out_proj: Linear::take(w, vs, &format!("{a}.out_proj"), h, h, true)?,
                final_layer_norm: LayerNorm::take(w, vs, &format!("{p}.final_layer_norm"), h, eps)?,
                fc1: Linear::take(w, vs, &format!("{p}.fc1"), h, ffn, true)?,
                fc2: Linear::take(w, vs, &format!("{p}.fc2"), ffn, h, true)?,
            });
        }
        let layer_norm = LayerNorm::take(w, vs, "model.layer_norm", h, eps)?;
        let lm_head = Linear::lm_head(w, vs, &embed_tokens, c.tie_word_embeddings, h, c.vocab_size)?;
        // transformers: exp(arange(half) · -ln(10000) / (half - 1)), in fp32.
        let half = h / 2;
        let step = 10_000f64.ln() / (half - 1) as f64;
        let frequencies = (Tensor::arange(half, (Kind::Float, w.device())) * -step).exp();
        Ok(Xglm {
            config: c.clone(),
            options: options.clone(),
            kind: w.compute_kind(),
            embed_tokens,
            frequencies,
            layers,
            layer_norm,
            lm_head,
        })
    }

    /// The position embeddings of the new tokens of `step` in `kind`: [s, d_model] for positions
    /// 0..s, [batch, s, d_model] at each row's positions; position p is row p + 2 of
    /// transformers' table (sines, then cosines, a zero column for an odd width), computed in
    /// fp32, the row `pad_token_id` zeros.
    fn positions(&self, step: &Step, s: i64, kind: Kind) -> Tensor {
        let device = self.frequencies.device();
        let rows = match &step.positions {
            None => Tensor::arange_start(POSITION_OFFSET, s + POSITION_OFFSET, (Kind::Float, device)),
            Some(positions) => (positions + POSITION_OFFSET).to_kind(Kind::Float),
        };
        let angles = rows.unsqueeze(-1) * &self.frequencies;
        let mut table = Tensor::cat(&[angles.sin(), angles.cos()], -1);
        if self.config.hidden_size % 2 == 1 {
            let mut shape = rows.size();
            shape.push(1);
            table = Tensor::cat(&[table, Tensor::zeros(shape.as_slice(), (Kind::Float, device))], -1);
        }
        if let Some(pad) = self.options.padding_idx {
            table = table.masked_fill(&rows.eq(pad as f64).unsqueeze(-1), 0.0);
        }
        table.to_kind(kind)
    }

    /// Final hidden states [batch, s, hidden] of the new tokens `ids` [batch, s] of `step`, their
    /// keys and values written to `cache` when there is one, with `attention`.
    pub fn forward(&self, ids: &Tensor, step: &Step, mut cache: Option<&mut KvCache>, attention: Attention) -> Tensor {
        let c = &self.config;
        let (b, s) = ids.size2().expect("[batch, seq] ids");
        let (heads, d) = (c.num_heads, c.head_dim);
        let embedded = as_compute(&Tensor::embedding(&self.embed_tokens, ids, -1, false, false), self.kind);
        let kind = embedded.kind();
        let mut x = embedded * self.options.embed_scale + self.positions(step, s, kind);
        let mask = step.mask(attention, None, None, None);
        let split = |t: Tensor| t.view([b, s, heads, d]).transpose(1, 2);
        for (i, layer) in self.layers.iter().enumerate() {
            let h = layer.self_attn_layer_norm.forward_in_input_kind(&x);
            // transformers scales the queries before the product, so the scores' scale is 1.
            let q = split(layer.q_proj.forward_in_input_kind(&h) * c.attn_scale);
            let k = split(layer.k_proj.forward_in_input_kind(&h));
            let v = split(layer.v_proj.forward_in_input_kind(&h));
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => cache.store(i, step.past, &k, &v),
                None => (k, v),
            };
            let att = attend(&q, &k, &v, 1.0, &mask);
            x += layer.out_proj.forward_in_input_kind(&att);
            let h = layer.final_layer_norm.forward_in_input_kind(&x);
            x += layer.fc2.forward_in_input_kind(&activate(&layer.fc1.forward_in_input_kind(&h), c.activation));
        }
        self.layer_norm.forward_in_input_kind(&x)
    }

    /// Logits (fp32) of hidden states.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        self.lm_head.forward_in_input_kind(hidden).to_kind(Kind::Float)
    }
}
