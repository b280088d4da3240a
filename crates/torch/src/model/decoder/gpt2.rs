//! GPT-2 (`transformer.wte`, `transformer.wpe`, `transformer.h.N.{ln_1, attn.c_attn,
//! attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}`, `transformer.ln_f`, `lm_head` tied to `wte` unless
//! the checkpoint has its own), as transformers' `GPT2LMHeadModel` computes it: IndoGPT's layout.
//! Learned absolute positions (`wpe`, `n_positions` rows) added to the token embeddings, counted
//! from 0 at each row's first column for a right-padded batch and from each row's first real
//! token for a left-padded batch and the steps after a cache (as `generate` counts them);
//! pre-LayerNorm blocks whose projections are HF's `Conv1D` (weight [in, out]: y = x·W + b, the
//! transpose of a linear layer's), one fused `c_attn` giving the queries, keys and values one
//! after another; scores divided by √head_dim (`scale_attn_weights`) and, with
//! `scale_attn_by_inverse_layer_idx`, by the layer's index + 1.
use super::cache::{KvCache, Step};
use super::config::{DecoderConfig, FamilyOptions, Gpt2Options};
use super::layers::{activate, attend, Attention, LayerNorm, Linear};
use super::load::{as_compute, Weights};
use crate::error::{Error, Result};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

/// HF's `Conv1D`: a linear layer whose weight is stored [in, out], computed as transformers
/// does (`addmm(bias, x, weight)`).
#[derive(Debug)]
struct Conv1D {
    /// [in, out].
    weight: Tensor,
    /// [out].
    bias: Tensor,
}

impl Conv1D {
    /// `{name}.weight` [inp, out] and `{name}.bias` [out] from the checkpoint.
    fn take(w: &mut Weights, vs: &VarStore, name: &str, inp: i64, out: i64) -> Result<Self> {
        let weight = w.take(vs, &format!("{name}.weight"), &[inp, out])?;
        let bias = w.take(vs, &format!("{name}.bias"), &[out])?;
        Ok(Conv1D { weight, bias })
    }

    /// x·W + b over the last dimension of x [.., in], in x's dtype.
    fn forward_in_input_kind(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let mut shape = x.size();
        let inp = shape.pop().unwrap_or(0);
        shape.push(self.weight.size()[1]);
        let flat = x.reshape([-1, inp]);
        as_compute(&self.bias, kind).addmm(&flat, &as_compute(&self.weight, kind)).view(shape.as_slice())
    }
}

/// One block.
#[derive(Debug)]
struct Block {
    ln_1: LayerNorm,
    c_attn: Conv1D,
    attn_c_proj: Conv1D,
    ln_2: LayerNorm,
    c_fc: Conv1D,
    mlp_c_proj: Conv1D,
    /// The scores' multiplier: 1/√head_dim (or 1), divided by the layer's index + 1 with
    /// `scale_attn_by_inverse_layer_idx`.
    scale: f64,
}

/// GPT-2 with its LM head.
#[derive(Debug)]
pub(crate) struct Gpt2 {
    config: DecoderConfig,
    /// The dtype it computes in (the weights may be stored in half precision on the CPU).
    kind: Kind,
    wte: Tensor,
    /// The position embeddings [n_positions, n_embd].
    wpe: Tensor,
    h: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
}

impl Gpt2 {
    /// Takes GPT-2's tensors from `w` (adding the `transformer.` prefix of the hub's bare
    /// checkpoints, which are saved from `GPT2Model`), dropping the causal-mask buffers older
    /// checkpoints carry (`attn.bias`, `attn.masked_bias`), which transformers ignores too.
    pub fn take(w: &mut Weights, vs: &VarStore, c: &DecoderConfig) -> Result<Self> {
        let FamilyOptions::Gpt2(Gpt2Options { scale_by_inverse_layer_idx }) = c.options else {
            return Err(Error::field(&c.path, "model_type", "not read as a GPT-2 configuration"));
        };
        let positions = c.max_positions.ok_or_else(|| Error::field(&c.path, "n_positions", "missing"))?;
        w.add_prefix_if_bare("transformer.", "wte.weight");
        let (hd, inner, eps) = (c.hidden_size, c.intermediate_size, c.norm_eps);
        let wte = w.take(vs, "transformer.wte.weight", &[c.vocab_size, hd])?;
        let wpe = w.take(vs, "transformer.wpe.weight", &[positions, hd])?;
        let mut h = Vec::with_capacity(c.layers.len());
        for i in 0..c.layers.len() {
            let p = format!("transformer.h.{i}");
            for buffer in ["bias", "masked_bias"] {
                w.discard(&format!("{p}.attn.{buffer}"));
            }
            let scale = if scale_by_inverse_layer_idx { c.attn_scale / (i + 1) as f64 } else { c.attn_scale };
            h.push(Block {
                ln_1: LayerNorm::take(w, vs, &format!("{p}.ln_1"), hd, eps)?,
                c_attn: Conv1D::take(w, vs, &format!("{p}.attn.c_attn"), hd, 3 * hd)?,
                attn_c_proj: Conv1D::take(w, vs, &format!("{p}.attn.c_proj"), hd, hd)?,
                ln_2: LayerNorm::take(w, vs, &format!("{p}.ln_2"), hd, eps)?,
                c_fc: Conv1D::take(w, vs, &format!("{p}.mlp.c_fc"), hd, inner)?,
                mlp_c_proj: Conv1D::take(w, vs, &format!("{p}.mlp.c_proj"), inner, hd)?,
                scale,
            });
        }
        let ln_f = LayerNorm::take(w, vs, "transformer.ln_f", hd, eps)?;
        let lm_head = Linear::lm_head(w, vs, &wte, c.tie_word_embeddings, hd, c.vocab_size)?;
        Ok(Gpt2 { config: c.clone(), kind: w.compute_kind(), wte, wpe, h, ln_f, lm_head })
    }

    /// The position embeddings of the new tokens of `step`: rows 0..s of `wpe` [s, n_embd] for a
    /// whole right-padded batch, each row's own [batch, s, n_embd] otherwise. The callers keep
    /// positions below `n_positions` ([`super::CausalLm::hidden_cached`], the scorers' length
    /// checks).
    fn positions(&self, step: &Step, s: i64) -> Tensor {
        match &step.positions {
            None => self.wpe.narrow(0, 0, s),
            Some(positions) => Tensor::embedding(&self.wpe, positions, -1, false, false),
        }
    }

    /// Final hidden states [batch, s, hidden] of the new tokens `ids` [batch, s] of `step`, their
    /// keys and values written to `cache` when there is one, with `attention`.
    pub fn forward(&self, ids: &Tensor, step: &Step, mut cache: Option<&mut KvCache>, attention: Attention) -> Tensor {
        let c = &self.config;
        let (b, s) = ids.size2().expect("[batch, seq] ids");
        let (heads, d, hd) = (c.num_heads, c.head_dim, c.hidden_size);
        let embedded = as_compute(&Tensor::embedding(&self.wte, ids, -1, false, false), self.kind);
        let mut x = &embedded + as_compute(&self.positions(step, s), embedded.kind());
        let mask = step.mask(attention, None, None, None);
        let split = |t: &Tensor| t.view([b, s, heads, d]).transpose(1, 2);
        for (i, block) in self.h.iter().enumerate() {
            let h = block.ln_1.forward_in_input_kind(&x);
            let qkv = block.c_attn.forward_in_input_kind(&h);
            let q = split(&qkv.narrow(-1, 0, hd));
            let k = split(&qkv.narrow(-1, hd, hd));
            let v = split(&qkv.narrow(-1, 2 * hd, hd));
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => cache.store(i, step.past, &k, &v),
                None => (k, v),
            };
            let att = attend(&q, &k, &v, block.scale, &mask);
            x += block.attn_c_proj.forward_in_input_kind(&att);
            let h = block.ln_2.forward_in_input_kind(&x);
            x += block.mlp_c_proj.forward_in_input_kind(&activate(&block.c_fc.forward_in_input_kind(&h), c.activation));
        }
        self.ln_f.forward_in_input_kind(&x)
    }

    /// Logits (fp32) of hidden states.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        self.lm_head.forward_in_input_kind(hidden).to_kind(Kind::Float)
    }
}
