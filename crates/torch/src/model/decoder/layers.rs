//! What the decoder families share, each as transformers computes it: RMSNorm (Llama's `w · x̂`
//! and Gemma's `(1 + w) · x̂`, normalised in fp32), LayerNorm, linear layers with optional
//! bias, rotary embeddings (default, linear, Llama 3.1 and YaRN scaling) at positions 0..seq or
//! at each row's own, the causal mask with padding and sliding windows (a whole batch, or the new
//! tokens after a cache), and attention ([`Attention`]): libtorch's fused scaled-dot-product
//! attention with grouped key/value heads read in place, or expanded where only that lets a fused
//! kernel run ([`GroupedKernels`]), or eager attention with grouped-query heads, an additive bias
//! (ALiBi) and soft-capping, its softmax in fp32.
use super::config::{Activation, Rope, RopeScaling};
use super::load::{as_compute, Weights};
use crate::device::kernels::{sdp_choice, SdpBackend};
use crate::error::{Error, Result};
use std::cell::RefCell;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

pub use crate::model::layers::{LayerNorm, Linear};

/// The decoder families' linear layers, read from a checkpoint: with or without a bias, or over
/// a tied weight, computed in the input's dtype.
impl Linear {
    /// `{name}.weight` (and `{name}.bias` when `bias`) from the checkpoint.
    pub fn take(w: &mut Weights, vs: &VarStore, name: &str, inp: i64, out: i64, bias: bool) -> Result<Self> {
        let weight = w.take(vs, &format!("{name}.weight"), &[out, inp])?;
        let bias = if bias { Some(w.take(vs, &format!("{name}.bias"), &[out])?) } else { None };
        Ok(Linear { weight, bias })
    }

    /// A linear layer over an existing weight (an output projection tied to the embeddings).
    pub(crate) fn tied(weight: &Tensor) -> Self {
        Linear { weight: weight.shallow_clone(), bias: None }
    }

    /// The output projection onto the vocabulary: `lm_head.weight` [vocab, hidden], or the
    /// `embeddings` when the config ties them and the checkpoint has no head of its own.
    pub(crate) fn lm_head(
        w: &mut Weights,
        vs: &VarStore,
        embeddings: &Tensor,
        tied: bool,
        hidden: i64,
        vocab: i64,
    ) -> Result<Self> {
        if tied && !w.has("lm_head.weight") {
            Ok(Linear::tied(embeddings))
        } else {
            Linear::take(w, vs, "lm_head", hidden, vocab, false)
        }
    }

    /// x · weightᵀ + bias, in x's dtype (a weight stored in half precision is cast for this use).
    pub(crate) fn forward_in_input_kind(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let bias = self.bias.as_ref().map(|b| as_compute(b, kind));
        x.linear(&as_compute(&self.weight, kind), bias.as_ref())
    }
}

/// RMSNorm over the last dimension, computed in fp32 and returned in the input's dtype.
#[derive(Debug)]
pub(crate) struct RmsNorm {
    /// The scale, fp32; Gemma's `1 + weight` already added.
    scale: Tensor,
    eps: f64,
    /// Gemma/OLMo multiply in fp32 before casting back; Llama casts, then multiplies.
    scale_in_fp32: bool,
}

impl RmsNorm {
    /// `{name}.weight` [dim]; `plus_one` for Gemma's `(1 + weight)`.
    pub fn take(w: &mut Weights, vs: &VarStore, name: &str, dim: i64, eps: f64, plus_one: bool) -> Result<Self> {
        let weight = w.take(vs, &format!("{name}.weight"), &[dim])?.to_kind(Kind::Float);
        let scale = if plus_one { weight + 1.0 } else { weight };
        Ok(RmsNorm { scale, eps, scale_in_fp32: plus_one })
    }

    /// OLMo's variant: the scale multiplies in fp32.
    pub(crate) fn scaled_in_fp32(mut self) -> Self {
        self.scale_in_fp32 = true;
        self
    }

    /// x / √(mean(x²) + eps) · scale.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let xf = x.to_kind(Kind::Float);
        let normed = &xf * (xf.square().mean_dim(-1, true, Kind::Float) + self.eps).rsqrt();
        if self.scale_in_fp32 {
            (normed * &self.scale).to_kind(kind)
        } else {
            normed.to_kind(kind) * self.scale.to_kind(kind)
        }
    }
}

/// BLOOM's layer norms, read from a checkpoint.
impl LayerNorm {
    /// `{name}.weight` and `{name}.bias` [dim].
    pub fn take(w: &mut Weights, vs: &VarStore, name: &str, dim: i64, eps: f64) -> Result<Self> {
        let weight = w.take(vs, &format!("{name}.weight"), &[dim])?;
        let bias = w.take(vs, &format!("{name}.bias"), &[dim])?;
        Ok(LayerNorm::from_tensors(weight, bias, eps))
    }
}

/// The MLP activation applied to `x`.
pub(crate) fn activate(x: &Tensor, act: Activation) -> Tensor {
    match act {
        Activation::Silu => x.silu(),
        Activation::GeluTanh => x.gelu("tanh"),
        Activation::Gelu => x.gelu("none"),
    }
}

/// RoPE's inverse frequencies for `head_dim`, as transformers' `ROPE_INIT_FUNCTIONS` compute
/// them (fp32).
pub(crate) fn inv_freq(rope: &Rope, head_dim: i64) -> Vec<f32> {
    let base: Vec<f32> = (0..head_dim)
        .step_by(2)
        .map(|i| {
            let exponent = i as f32 / head_dim as f32;
            1.0 / (rope.theta as f32).powf(exponent)
        })
        .collect();
    match rope.scaling {
        RopeScaling::Default => base,
        RopeScaling::Linear { factor } => base.into_iter().map(|f| f / factor as f32).collect(),
        RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original } => {
            let (factor, low, high, original) =
                (factor as f32, low_freq_factor as f32, high_freq_factor as f32, original as f32);
            let low_wavelen = original / low;
            let high_wavelen = original / high;
            base.into_iter()
                .map(|f| {
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    let scaled = if wavelen > low_wavelen { f / factor } else { f };
                    let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
                    if medium {
                        let smooth = (original / wavelen - low) / (high - low);
                        (1.0 - smooth) * scaled / factor + smooth * scaled
                    } else {
                        scaled
                    }
                })
                .collect()
        }
        RopeScaling::Yarn { factor, original, beta_fast, beta_slow, truncate, .. } => {
            // transformers' `_compute_yarn_parameters`: the ramp's bounds in f64 (Python floats),
            // the frequencies and the ramp in fp32 (torch).
            let dim = head_dim as f64;
            let correction_dim = |rotations: f64| {
                dim * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * rope.theta.ln())
            };
            let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
            if truncate {
                (low, high) = (low.floor(), high.ceil());
            }
            let (low, mut high) = (low.max(0.0), high.min(dim - 1.0));
            if low == high {
                high += 0.001;
            }
            (0..head_dim)
                .step_by(2)
                .enumerate()
                .map(|(i, d)| {
                    let pos_freq = (rope.theta as f32).powf(d as f32 / head_dim as f32);
                    let ramp = ((i as f32 - low as f32) / ((high - low) as f32)).clamp(0.0, 1.0);
                    let extrapolation = 1.0 - ramp;
                    let interpolated = 1.0 / (factor as f32 * pos_freq);
                    interpolated * (1.0 - extrapolation) + (1.0 / pos_freq) * extrapolation
                })
                .collect()
        }
    }
}

/// The inverse frequencies [head_dim / 2] of `rope` on `device` (fp32), made once at load time
/// so that no forward pass copies from the host, with the multiplier of cos and sin.
pub(crate) fn inv_freq_tensor(rope: &Rope, head_dim: i64, device: tch::Device) -> (Tensor, f64) {
    (Tensor::from_slice(&inv_freq(rope, head_dim)).to_device(device), rope.attention_scaling())
}

/// cos and sin [seq, head_dim] for positions 0..seq from [`inv_freq_tensor`]'s frequencies,
/// multiplied by `scaling` (YaRN's attention factor), in `kind` (computed in fp32).
pub(crate) fn rope_tables(inv: &Tensor, scaling: f64, seq: i64, kind: Kind) -> (Tensor, Tensor) {
    let pos = Tensor::arange(seq, (Kind::Float, inv.device()));
    cos_sin(&pos.unsqueeze(1).matmul(&inv.unsqueeze(0)), scaling, kind)
}

/// cos and sin [batch, 1, seq, head_dim] at each row's `positions` [batch, seq] (a left-padded
/// batch, or the steps after a cache), computed as [`rope_tables`] computes them.
pub(crate) fn rope_tables_at(inv: &Tensor, scaling: f64, positions: &Tensor, kind: Kind) -> (Tensor, Tensor) {
    let freqs = positions.to_kind(Kind::Float).unsqueeze(-1).matmul(&inv.unsqueeze(0));
    let (cos, sin) = cos_sin(&freqs, scaling, kind);
    (cos.unsqueeze(1), sin.unsqueeze(1))
}

/// cos and sin of the angles `freqs` [.., head_dim / 2] repeated to [.., head_dim], times
/// `scaling`, in `kind`.
fn cos_sin(freqs: &Tensor, scaling: f64, kind: Kind) -> (Tensor, Tensor) {
    let emb = Tensor::cat(&[freqs, freqs], -1);
    if scaling == 1.0 {
        return (emb.cos().to_kind(kind), emb.sin().to_kind(kind));
    }
    ((emb.cos() * scaling).to_kind(kind), (emb.sin() * scaling).to_kind(kind))
}

/// x·cos + rotate_half(x)·sin, x [batch, heads, seq, head_dim].
pub(crate) fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let half = x.size()[3] / 2;
    let x1 = x.narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    let rotated = Tensor::cat(&[&(-x2), &x1], 3);
    x * cos + rotated * sin
}

/// Where a query may look [batch, 1, seq, seq] (bool): earlier or equal positions, real keys,
/// and, with a window, keys fewer than `window` positions back.
pub fn allowed(key_real: &Tensor, window: Option<i64>) -> Tensor {
    allowed_from(key_real, 0, window)
}

/// Where the queries at indices past..keys of a batch may look [batch, 1, keys - past, keys]
/// (bool), `key_real` [batch, keys] marking the real keys: earlier or equal indices, real keys,
/// and, with a window, keys fewer than `window` indices back. In a left-padded batch a row's
/// indices and positions differ by its padding, the same for a query and its keys, so the window
/// is the one transformers' masks draw over cache indices.
pub(crate) fn allowed_from(key_real: &Tensor, past: i64, window: Option<i64>) -> Tensor {
    let (q, k) = query_key_indices(key_real, past);
    let mut ok = k.le_tensor(&q);
    if let Some(w) = window {
        ok = ok.logical_and(&k.gt_tensor(&(&q - w)));
    }
    ok.unsqueeze(0).logical_and(&key_real.to_kind(Kind::Bool).unsqueeze(1)).unsqueeze(1)
}

/// The queries' indices past..keys [keys - past, 1] and the keys' 0..keys [1, keys] (int64, on
/// `key_real`'s device).
fn query_key_indices(key_real: &Tensor, past: i64) -> (Tensor, Tensor) {
    let keys = key_real.size()[1];
    let device = key_real.device();
    let q = Tensor::arange_start(past, keys, (Kind::Int64, device)).unsqueeze(1);
    let k = Tensor::arange(keys, (Kind::Int64, device)).unsqueeze(0);
    (q, k)
}

/// How a causal LM computes attention, chosen once when it is loaded ([`Attention::from_env`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Attention {
    /// libtorch's `scaled_dot_product_attention` with the mask of padding, causality and
    /// windows (ALiBi folded into it as an additive mask): grouped key/value heads are read in
    /// place (`enable_gqa`), or repeated to the query heads where libtorch would otherwise fall
    /// back to its math kernel and picks a fused one for them repeated ([`GroupedKernels`]), so
    /// that the kernel (flash on the CPU; memory-efficient or cuDNN on CUDA) does not
    /// materialise the scores. Where a family's attention cannot be fused (Gemma 2's logit
    /// soft-capping), its layers take [`Attention::Eager`].
    #[default]
    Fused,
    /// The scores written out as a tensor [batch, heads, queries, keys], grouped key/value heads
    /// repeated, softmax in fp32, as transformers' eager attention computes them: the reference
    /// the tests compare [`Attention::Fused`] with.
    Eager,
}

impl Attention {
    /// The environment variable read at load time: `fused` (the default when unset) or `eager`.
    pub(crate) const VARIABLE: &'static str = "INDOLM_ATTENTION";

    /// The attention [`Attention::VARIABLE`] asks for (fused when unset or empty); any other
    /// value is an error naming the variable.
    pub fn from_env() -> Result<Self> {
        match std::env::var(Self::VARIABLE) {
            Err(std::env::VarError::NotPresent) => Ok(Attention::Fused),
            Ok(value) => Self::parse(&value),
            Err(std::env::VarError::NotUnicode(value)) => Self::parse(&value.to_string_lossy()),
        }
    }

    /// `fused`, `eager`, or empty (fused).
    fn parse(value: &str) -> Result<Self> {
        match value.trim() {
            "" | "fused" => Ok(Attention::Fused),
            "eager" => Ok(Attention::Eager),
            other => Err(Error::argument(
                Self::VARIABLE,
                format!("expected `fused` (the default) or `eager`, found {other:?}"),
            )),
        }
    }

    /// Its name, as [`Attention::VARIABLE`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Attention::Fused => "fused",
            Attention::Eager => "eager",
        }
    }
}

/// What one forward pass's attention adds to and masks out of the scores, built once for every
/// layer that shares it, in the form its [`Attention`] takes.
#[derive(Debug)]
pub(crate) struct Mask {
    form: MaskForm,
    /// The fused path's form of grouped key/value heads, and the layout of the inputs it was
    /// decided for: every layer of a forward pass hands [`attend`] the same layout, so libtorch
    /// is asked once a pass.
    grouped: RefCell<Option<(Layout, GroupedHeads)>>,
}

/// What libtorch's kernel choice reads of attention's inputs: each tensor's sizes, strides and
/// alignment (its address modulo 256 bytes: libtorch's allocators align storages to at least
/// that, so this is where its storage offset puts it), and their dtype, device and whether
/// gradients flow.
#[derive(Debug, PartialEq)]
struct Layout {
    geometry: Vec<i64>,
    kind: Kind,
    device: Device,
    requires_grad: bool,
}

impl Layout {
    /// The layout of q, k and v.
    fn of(q: &Tensor, k: &Tensor, v: &Tensor) -> Self {
        let geometry = [q, k, v]
            .iter()
            .flat_map(|t| [t.size(), t.stride(), vec![(t.data_ptr() as usize % 256) as i64]].concat())
            .collect();
        let requires_grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
        Layout { geometry, kind: q.kind(), device: q.device(), requires_grad }
    }
}

/// A [`Mask`]'s tensors.
#[derive(Debug)]
enum MaskForm {
    /// [`allowed_from`]'s bool mask, an additive bias (ALiBi, [batch, heads, 1, keys]) and the
    /// logit soft-cap, applied to the written-out scores.
    Eager { allowed: Tensor, bias: Option<Tensor>, softcap: Option<f64> },
    /// The mask handed to `scaled_dot_product_attention` [batch, 1 or heads, queries, keys]: bool
    /// (true where a query may look), or additive in the scores' dtype (the bias where a query may
    /// look, the dtype's lowest finite value elsewhere). Each query may also look at its own key,
    /// so that no row is wholly masked: that changes only the outputs at padding (a left-padded
    /// prompt's first columns), which no real query reads, and spares the CUDA kernels a row of
    /// −∞ (NaN there).
    Fused(Tensor),
}

impl Mask {
    /// The mask of queries past..keys over the keys `key_real` [batch, keys] marks real (see
    /// [`allowed_from`]), with `window`, an additive `bias` broadcast over the queries (ALiBi,
    /// [batch, heads, 1, keys], in the scores' dtype) and a logit `softcap`. Fused unless
    /// `attention` is eager or a soft-cap needs the written-out scores.
    pub fn new(
        attention: Attention,
        key_real: &Tensor,
        past: i64,
        window: Option<i64>,
        bias: Option<Tensor>,
        softcap: Option<f64>,
    ) -> Self {
        let allowed = allowed_from(key_real, past, window);
        if attention == Attention::Eager || softcap.is_some() {
            return Mask { form: MaskForm::Eager { allowed, bias, softcap }, grouped: RefCell::new(None) };
        }
        let (q, k) = query_key_indices(key_real, past);
        let allowed = allowed.logical_or(&k.eq_tensor(&q).unsqueeze(0).unsqueeze(0));
        let mask = match bias {
            Some(bias) => bias.where_scalarother(&allowed, lowest(bias.kind())),
            None => allowed,
        };
        Mask { form: MaskForm::Fused(mask), grouped: RefCell::new(None) }
    }

    /// The form in which the fused path hands grouped heads k and v to libtorch for queries q
    /// under this mask ([`GroupedKernels::heads`]), asked once for each layout of the inputs.
    fn grouped_heads(&self, q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor) -> GroupedHeads {
        let layout = Layout::of(q, k, v);
        let mut known = self.grouped.borrow_mut();
        match known.as_ref() {
            Some((seen, heads)) if *seen == layout => *heads,
            _ => {
                // Where libtorch cannot say, the heads stay in place, and the attention call
                // itself raises what libtorch raises.
                let heads = GroupedKernels::of(q, k, v, Some(mask)).map_or(GroupedHeads::InPlace, |g| g.heads());
                *known = Some((layout, heads));
                heads
            }
        }
    }
}

/// How the fused path hands grouped key/value heads (fewer than the query heads) to libtorch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupedHeads {
    /// Read in place (`enable_gqa`): no copy.
    InPlace,
    /// Each key/value head repeated over the query heads that read it, a copy [batch, heads,
    /// keys, head_dim] of k and of v (transformers' `repeat_kv`, which libtorch's math kernel
    /// also does under `enable_gqa`).
    Expanded,
}

/// The kernels libtorch picks for one attention call with grouped key/value heads, read in place
/// (`enable_gqa`) and expanded to the query heads.
///
/// What libtorch 2.11 does on CUDA, as read from torch's `sdp_utils.cpp` and the strings of the
/// wheel's libtorch_cuda.so (no GPU has run this yet): cuDNN attention is tried first only on
/// sm90/sm100 with cuDNN newer than 9.15 (an H100 or H200 with the cu13 wheel's cuDNN 9.19), and
/// never under deterministic algorithms; it takes a mask (and, in torch's current source,
/// grouped heads). Then flash attention, which reads grouped heads in place but takes no mask;
/// then the memory-efficient kernel, which takes a mask but not grouped heads (its forward checks
/// `query.size(2) == key.size(2)`); then math. So a padded batch of a grouped-query model (Llama
/// 3, Mistral, Qwen, Gemma, multi-query Falcon) may fall back to the math kernel, which repeats
/// the heads itself and writes out the scores [batch, heads, queries, keys] in fp32 (4 rows of
/// 512 tokens, 32 heads: 128 MiB a layer, growing with the square of the length), where repeating
/// them first lets the memory-efficient kernel run. On the CPU, libtorch's flash kernel takes
/// both, and nothing is repeated. Which holds is never assumed: [`GroupedKernels::of`] asks
/// libtorch ([`sdp_choice`]) for both forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupedKernels {
    /// The kernel for the heads read in place.
    pub in_place: SdpBackend,
    /// The kernel for the heads expanded to the query heads.
    pub expanded: SdpBackend,
}

impl GroupedKernels {
    /// The kernels libtorch picks for q [b, heads, queries, d] over k and v [b, kv_heads, keys,
    /// d] under `mask`, no dropout: in place, and for tensors laid out as [`repeat_heads`] makes
    /// them (contiguous, unfilled: the choice reads no values).
    pub fn of(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Self> {
        let in_place = sdp_choice(q, k, v, mask, 0.0, false, true)?;
        let heads = q.size()[1];
        let like = |t: &Tensor| {
            let mut size = t.size();
            size[1] = heads;
            Tensor::empty(size.as_slice(), (t.kind(), t.device())).set_requires_grad(t.requires_grad())
        };
        let expanded = sdp_choice(q, &like(k), &like(v), mask, 0.0, false, false)?;
        Ok(GroupedKernels { in_place, expanded })
    }

    /// Expanded where only that gives a fused kernel (the heads in place would take the math
    /// kernel), in place otherwise.
    pub fn heads(&self) -> GroupedHeads {
        if !self.in_place.is_fused() && self.expanded.is_fused() {
            GroupedHeads::Expanded
        } else {
            GroupedHeads::InPlace
        }
    }
}

/// The shapes `indolm info --attention` asks libtorch about.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Rows of a batch.
    pub batch: i64,
    /// Query heads.
    pub heads: i64,
    /// Key/value heads (dividing `heads`).
    pub kv_heads: i64,
    /// Tokens a row (queries and keys).
    pub seq: i64,
    /// Dimension of a head.
    pub head_dim: i64,
}

/// One mask [`attention_kernels`] asks about, and libtorch's kernels for it.
#[derive(Debug, Clone)]
pub struct MaskedKernels {
    /// The mask, in words.
    pub mask: &'static str,
    /// The kernels, grouped heads in place and expanded.
    pub kernels: GroupedKernels,
}

/// The most elements a tensor of [`attention_kernels`]'s question may have (2 GiB in bf16).
const MAX_ASKED_ELEMENTS: i64 = 1 << 30;

/// The kernels libtorch picks for the decoders' fused attention at `shape` in `kind` on
/// `device`: with no mask, with the decoders' own boolean mask of a padded batch (causal, the
/// second half of every other row padding) and with the additive form they give ALiBi families
/// (a zero bias: its values do not matter to the choice), each with the heads in place and
/// expanded. An error for heads that do not divide, or when libtorch cannot say.
pub fn attention_kernels(shape: AttentionShape, kind: Kind, device: Device) -> Result<Vec<MaskedKernels>> {
    let AttentionShape { batch, heads, kv_heads, seq, head_dim } = shape;
    if [batch, heads, kv_heads, seq, head_dim].iter().any(|&n| n < 1) || heads % kv_heads != 0 {
        return Err(Error::argument(
            "--attention-shape",
            format!(
                "expected positive sizes with the key/value heads dividing the query heads, found {batch},{heads},{kv_heads},{seq},{head_dim}"
            ),
        ));
    }
    // The question is asked of real (unfilled) tensors, the padding mask [batch, 1, seq, seq]
    // among them: sizes past a 7B model's longest batches are refused before they are allocated.
    let elements = |dims: &[i64]| dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
    let largest = [elements(&[batch, heads, seq, head_dim]), elements(&[batch, seq, seq])];
    if largest.iter().any(|n| n.is_none_or(|n| n > MAX_ASKED_ELEMENTS)) {
        return Err(Error::argument(
            "--attention-shape",
            format!(
                "{batch},{heads},{kv_heads},{seq},{head_dim} asks for tensors past {MAX_ASKED_ELEMENTS} elements (the queries, or the padding mask batch x tokens x tokens): ask about a smaller batch or fewer tokens"
            ),
        ));
    }
    let q = Tensor::empty([batch, heads, seq, head_dim], (kind, device));
    let kv = Tensor::empty([batch, kv_heads, seq, head_dim], (kind, device));
    let rows: Vec<i64> = (0..batch).map(|r| if r % 2 == 1 { seq / 2 } else { seq }).collect();
    let key_real = Tensor::arange(seq, (Kind::Int64, device))
        .unsqueeze(0)
        .lt_tensor(&Tensor::from_slice(&rows).to_device(device).unsqueeze(1));
    let masks = [
        ("boolean padding mask", Mask::new(Attention::Fused, &key_real, 0, None, None, None)),
        (
            "additive padding mask",
            Mask::new(
                Attention::Fused,
                &key_real,
                0,
                None,
                Some(Tensor::zeros([batch, heads, 1, seq], (kind, device))),
                None,
            ),
        ),
    ];
    let mut found = vec![MaskedKernels { mask: "no mask", kernels: GroupedKernels::of(&q, &kv, &kv, None)? }];
    for (name, mask) in &masks {
        let MaskForm::Fused(m) = &mask.form else { unreachable!("a fused mask without a soft-cap") };
        found.push(MaskedKernels { mask: name, kernels: GroupedKernels::of(&q, &kv, &kv, Some(m))? });
    }
    Ok(found)
}

/// The lowest finite value of a score dtype (bf16's exactly: a value past it does not convert).
fn lowest(kind: Kind) -> f64 {
    match kind {
        Kind::BFloat16 => -3.389_531_389_251_535_5e38,
        Kind::Half => -65504.0,
        _ => f32::MIN as f64,
    }
}

/// Attention of q [b, heads, s, d] over k/v [b, kv_heads, keys, d] (keys = s, or more after a
/// cache) under `mask`, the scores scaled by `scale`; returns [b, s, heads·d].
///
/// Eager: scores plus the bias (broadcast), soft-capped, masked (the dtype's lowest value where a
/// query may not look, as transformers does), softmax in fp32. Fused: libtorch's
/// `scaled_dot_product_attention` with the mask, grouped heads read in place (`enable_gqa`) or
/// expanded where only that lets a fused kernel run ([`GroupedKernels`]).
pub(crate) fn attend(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64, mask: &Mask) -> Tensor {
    let (b, heads, s, d) = q.size4().expect("[batch, heads, seq, head_dim]");
    let groups = heads / k.size()[1];
    let out = match &mask.form {
        MaskForm::Fused(m) => {
            let form = if groups > 1 { mask.grouped_heads(q, k, v, m) } else { GroupedHeads::InPlace };
            fused(q, k, v, m, scale, form)
        }
        MaskForm::Eager { allowed, bias, softcap } => {
            let (k, v) = if groups > 1 {
                (repeat_heads(k, groups), repeat_heads(v, groups))
            } else {
                (k.shallow_clone(), v.shallow_clone())
            };
            let mut scores = q.matmul(&k.transpose(2, 3)) * scale;
            if let Some(bias) = bias {
                scores += bias;
            }
            if let Some(cap) = softcap {
                scores = (scores / *cap).tanh() * *cap;
            }
            let scores = scores.masked_fill(&allowed.logical_not(), lowest(scores.kind()));
            scores.softmax(-1, Kind::Float).to_kind(q.kind()).matmul(&v)
        }
    };
    out.transpose(1, 2).reshape([b, s, heads * d])
}

/// libtorch's `scaled_dot_product_attention` of q over k and v under the fused `mask`, the grouped
/// heads handed over in `form`.
fn fused(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, scale: f64, form: GroupedHeads) -> Tensor {
    let groups = q.size()[1] / k.size()[1];
    match form {
        GroupedHeads::Expanded if groups > 1 => {
            let (k, v) = (repeat_heads(k, groups), repeat_heads(v, groups));
            Tensor::scaled_dot_product_attention(q, &k, &v, Some(mask), 0.0, false, scale, false)
        }
        _ => Tensor::scaled_dot_product_attention(q, k, v, Some(mask), 0.0, false, scale, groups > 1),
    }
}

/// x [b, kv_heads, keys, d] with each head repeated `groups` times in a row [b, kv_heads ·
/// groups, keys, d]: query head h reads key/value head h / groups, as under `enable_gqa`. One
/// copy, by a broadcast view (no host wait, unlike a repeat count held in a tensor).
fn repeat_heads(x: &Tensor, groups: i64) -> Tensor {
    let (b, kv_heads, keys, d) = x.size4().expect("[batch, kv_heads, keys, head_dim]");
    x.unsqueeze(2).expand([b, kv_heads, groups, keys, d], false).reshape([b, kv_heads * groups, keys, d])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queries [2, 8, 6, 16] over 2 key/value heads (groups of 4), fp32, and a batch whose first
    /// row has two padding keys at the left.
    fn grouped_inputs() -> (Tensor, Tensor, Tensor, Tensor) {
        tch::manual_seed(7);
        let options = (Kind::Float, Device::Cpu);
        let (q, k, v) = (
            Tensor::randn([2, 8, 6, 16], options),
            Tensor::randn([2, 2, 6, 16], options),
            Tensor::randn([2, 2, 6, 16], options),
        );
        let key_real = Tensor::from_slice2(&[[0i64, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]);
        (q, k, v, key_real)
    }

    #[test]
    fn expanded_heads_attend_as_heads_read_in_place_under_a_mask() {
        let (q, k, v, key_real) = grouped_inputs();
        let bias = Tensor::randn([2, 8, 1, 6], (Kind::Float, Device::Cpu));
        for bias in [None, Some(bias)] {
            let additive = bias.is_some();
            let mask = Mask::new(Attention::Fused, &key_real, 0, None, bias, None);
            let MaskForm::Fused(m) = &mask.form else { panic!("a fused mask") };
            assert_eq!(m.kind(), if additive { Kind::Float } else { Kind::Bool });
            let in_place = fused(&q, &k, &v, m, 0.25, GroupedHeads::InPlace);
            let expanded = fused(&q, &k, &v, m, 0.25, GroupedHeads::Expanded);
            let differs = (&in_place - &expanded).abs().max().double_value(&[]);
            assert!(differs <= 1e-5, "additive {additive}: expanded heads differ by {differs}");
            // Each kv head read by its own group of query heads: the other order differs.
            let tiled = Tensor::scaled_dot_product_attention(
                &q,
                &k.repeat([1, 4, 1, 1]),
                &v.repeat([1, 4, 1, 1]),
                Some(m),
                0.0,
                false,
                0.25,
                false,
            );
            assert!((&in_place - &tiled).abs().max().double_value(&[]) > 1e-2);
        }
    }

    #[test]
    fn grouped_heads_are_expanded_only_where_that_gives_a_fused_kernel() {
        use SdpBackend as B;
        let heads = |in_place, expanded| GroupedKernels { in_place, expanded }.heads();
        assert_eq!(heads(B::Math, B::MemoryEfficient), GroupedHeads::Expanded);
        assert_eq!(heads(B::Math, B::CuDnn), GroupedHeads::Expanded);
        assert_eq!(heads(B::Flash, B::Flash), GroupedHeads::InPlace);
        assert_eq!(heads(B::CuDnn, B::CuDnn), GroupedHeads::InPlace);
        assert_eq!(heads(B::Math, B::Math), GroupedHeads::InPlace);
        // On the CPU libtorch's flash kernel takes the mask and the grouped heads: nothing to
        // expand, asked once for the layers of a pass.
        let (q, k, v, key_real) = grouped_inputs();
        let mask = Mask::new(Attention::Fused, &key_real, 0, None, None, None);
        let MaskForm::Fused(m) = &mask.form else { panic!("a fused mask") };
        assert_eq!(
            GroupedKernels::of(&q, &k, &v, Some(m)).unwrap(),
            GroupedKernels { in_place: B::Flash, expanded: B::Flash }
        );
        assert_eq!(mask.grouped_heads(&q, &k, &v, m), GroupedHeads::InPlace);
        assert!(mask.grouped.borrow().is_some());
    }

    #[test]
    fn the_kernel_report_covers_no_mask_and_both_padding_masks() {
        let shape = AttentionShape { batch: 2, heads: 8, kv_heads: 2, seq: 32, head_dim: 16 };
        let report = attention_kernels(shape, Kind::Float, Device::Cpu).unwrap();
        let masks: Vec<&str> = report.iter().map(|r| r.mask).collect();
        assert_eq!(masks, ["no mask", "boolean padding mask", "additive padding mask"]);
        assert!(report.iter().all(|r| r.kernels.in_place == SdpBackend::Flash), "{report:?}");
        let bad = AttentionShape { kv_heads: 3, ..shape };
        let err = attention_kernels(bad, Kind::Float, Device::Cpu).unwrap_err().to_string();
        assert!(err.contains("key/value heads dividing the query heads"), "{err}");
        // Hostile sizes are refused before anything is allocated: past the bound, and past i64.
        for huge in [AttentionShape { seq: 1 << 20, ..shape }, AttentionShape { batch: i64::MAX, ..shape }] {
            let err = attention_kernels(huge, Kind::Float, Device::Cpu).unwrap_err().to_string();
            assert!(err.contains("asks for tensors past 1073741824 elements"), "{err}");
        }
    }
}
