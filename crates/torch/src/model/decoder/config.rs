//! A causal LM's `config.json`, read into one [`DecoderConfig`] whatever the family: the family
//! chosen by `model_type` (or `architectures`), then each layer's attention kind (sliding window
//! or full) and rotary frequencies, in both of transformers' layouts (`rope_theta` +
//! `rope_scaling` of older configs, `rope_parameters` of transformers 5, per layer type for
//! Gemma 3 and OLMo 3). XGLM, Falcon and GPT-2, whose configs name things their own way, are read
//! by their own functions into the same shape, with what only they have in [`FamilyOptions`].
use crate::error::{Error, Result};
use indolm_core::json_fields::{self, FirstTokenId, Flag, Lenient, Number, PositiveInt, TokenId};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The causal LM families indolm loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Llama 1-3.x (`rope_scaling` "llama3" included).
    Llama,
    /// Mistral: Llama with a sliding window on every layer.
    Mistral,
    /// Qwen2: Llama with biases on the query, key and value projections.
    Qwen2,
    /// Qwen3: Llama with an RMSNorm over each head's queries and keys.
    Qwen3,
    /// Gemma 2: (1 + w) RMSNorms around attention and MLP, scaled embeddings, soft-capping.
    Gemma2,
    /// Gemma 3 text: Gemma 2 with per-head q/k norms and a local RoPE base on sliding layers.
    Gemma3,
    /// OLMo 2: norms after attention and MLP, q/k norms over the whole projection.
    Olmo2,
    /// OLMo 3: OLMo 2 with sliding-window layers.
    Olmo3,
    /// BLOOM: ALiBi, LayerNorms, a fused query/key/value projection.
    Bloom,
    /// XGLM: fairseq's pre-LayerNorm decoder with scaled embeddings and sinusoidal positions.
    Xglm,
    /// Falcon: rotary or ALiBi, a fused query/key/value projection of multi-query, grouped or
    /// per-head layout, attention and MLP in parallel or in sequence.
    Falcon,
    /// GPT-2 (IndoGPT): learned absolute positions, LayerNorms, `Conv1D` projections.
    Gpt2,
}

/// `model_type` values and the family each names (the first per family is its canonical name).
const MODEL_TYPES: &[(&str, Family)] = &[
    ("llama", Family::Llama),
    ("mistral", Family::Mistral),
    ("qwen2", Family::Qwen2),
    ("qwen3", Family::Qwen3),
    ("gemma2", Family::Gemma2),
    ("gemma3_text", Family::Gemma3),
    ("gemma3", Family::Gemma3),
    ("olmo2", Family::Olmo2),
    ("olmo3", Family::Olmo3),
    ("bloom", Family::Bloom),
    ("xglm", Family::Xglm),
    ("falcon", Family::Falcon),
    ("gpt2", Family::Gpt2),
];

/// `architectures` entries and their family (for a config without `model_type`).
const ARCHITECTURES: &[(&str, Family)] = &[
    ("LlamaForCausalLM", Family::Llama),
    ("MistralForCausalLM", Family::Mistral),
    ("Qwen2ForCausalLM", Family::Qwen2),
    ("Qwen3ForCausalLM", Family::Qwen3),
    ("Gemma2ForCausalLM", Family::Gemma2),
    ("Gemma3ForCausalLM", Family::Gemma3),
    ("Gemma3ForConditionalGeneration", Family::Gemma3),
    ("Olmo2ForCausalLM", Family::Olmo2),
    ("Olmo3ForCausalLM", Family::Olmo3),
    ("BloomForCausalLM", Family::Bloom),
    ("XGLMForCausalLM", Family::Xglm),
    ("FalconForCausalLM", Family::Falcon),
    ("GPT2LMHeadModel", Family::Gpt2),
];

impl Family {
    /// Its `model_type`.
    pub fn name(self) -> &'static str {
        MODEL_TYPES.iter().find(|(_, f)| *f == self).map(|(n, _)| *n).unwrap_or("?")
    }

    /// The supported `model_type` values, comma-separated (for messages).
    pub(crate) fn supported() -> String {
        MODEL_TYPES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

/// Rotary position embedding of one layer type: inverse frequencies from a base and a scaling.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// Base wavelength θ.
    pub theta: f64,
    /// The scaling applied to the inverse frequencies.
    pub scaling: RopeScaling,
}

/// RoPE scalings indolm computes (others are refused when the config is read).
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// None.
    Default,
    /// Every inverse frequency divided by `factor`.
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Llama 3.1's: low frequencies divided by `factor`, high ones kept, smoothed between.
    Llama3 {
        /// The divisor of low frequencies.
        factor: f64,
        /// Wavelengths above original / low_freq_factor are low frequencies.
        low_freq_factor: f64,
        /// Wavelengths below original / high_freq_factor are high frequencies.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original: f64,
    },
    /// YaRN (OLMo 3's long-context checkpoints, Qwen's): each frequency between its
    /// interpolated (divided by `factor`) and original value by a ramp over the dimensions whose
    /// rotations in `original` positions lie between `beta_slow` and `beta_fast`, and cos/sin
    /// multiplied by `attention_factor`, as transformers' `_compute_yarn_parameters`.
    Yarn {
        /// The divisor of interpolated frequencies.
        factor: f64,
        /// `original_max_position_embeddings`.
        original: f64,
        /// Rotations bounding the ramp (defaults 32 and 1).
        beta_fast: f64,
        /// See `beta_fast`.
        beta_slow: f64,
        /// The multiplier of cos and sin (0.1·ln(factor) + 1 unless given, or from `mscale`).
        attention_factor: f64,
        /// Whether the ramp's bounds are rounded outwards to whole dimensions (default true).
        truncate: bool,
    },
}

impl Rope {
    /// The multiplier of cos and sin (YaRN's attention factor; 1 otherwise).
    pub(crate) fn attention_scaling(&self) -> f64 {
        match self.scaling {
            RopeScaling::Yarn { attention_factor, .. } => attention_factor,
            _ => 1.0,
        }
    }
}

/// What one decoder layer does differently from the others.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerKind {
    /// Keys a query sees: those less than this many positions back (`None`: all earlier ones).
    pub window: Option<i64>,
    /// Its rotary embedding (`None` for ALiBi, BLOOM's and Falcon's, and XGLM's sinusoidal positions).
    pub rope: Option<Rope>,
}

/// The MLP activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (Llama, Mistral, Qwen, OLMo).
    Silu,
    /// GELU with the tanh approximation (Gemma, BLOOM).
    GeluTanh,
    /// Exact GELU.
    Gelu,
}

/// What only some families have, beside [`DecoderConfig`]'s shared fields.
#[derive(Debug, Clone, PartialEq)]
pub enum FamilyOptions {
    /// Nothing more (the RoPE families, BLOOM).
    Common,
    /// XGLM's.
    Xglm(XglmOptions),
    /// Falcon's.
    Falcon(FalconOptions),
    /// GPT-2's.
    Gpt2(Gpt2Options),
}

/// What GPT-2's attention does beside the shared scale ([`DecoderConfig::attn_scale`]: 1/√head_dim
/// with `scale_attn_weights`, else 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpt2Options {
    /// `scale_attn_by_inverse_layer_idx`: layer i's scores are further divided by i + 1.
    pub scale_by_inverse_layer_idx: bool,
}

/// XGLM's embeddings, as transformers' `XGLMModel` makes them.
#[derive(Debug, Clone, PartialEq)]
pub struct XglmOptions {
    /// Token embeddings are multiplied by this: √d_model with `scale_embedding` (default), else 1.
    pub embed_scale: f64,
    /// `pad_token_id` (default 1; `None` when null): its row of the sinusoidal table is zeros, so
    /// position `pad_token_id - 2` has no position embedding (an unused row for the usual 1).
    pub padding_idx: Option<i64>,
}

/// How a Falcon's fused `query_key_value` output lays out queries, keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FalconQkv {
    /// [heads, 3, head_dim]: a query, key and value per head (neither `multi_query` nor
    /// `new_decoder_architecture`: falcon-rw).
    PerHead,
    /// [heads + 2, head_dim]: the queries, then one key and one value for all heads
    /// (`multi_query`: falcon-7b).
    MultiQuery,
    /// [kv_heads, heads / kv_heads + 2, head_dim]: each group's queries, then its key and value
    /// (`new_decoder_architecture`: falcon-40b).
    Grouped,
}

/// Where a Falcon block's layer norms sit and how attention and MLP combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FalconNorms {
    /// `input_layernorm` before attention, whose output joins the residual before
    /// `post_attention_layernorm` and the MLP (`parallel_attn` false).
    Sequential,
    /// One `input_layernorm` feeding attention and the MLP, their outputs added together
    /// (`parallel_attn`; `num_ln_in_parallel_attn` 1 in the new architecture).
    Shared,
    /// `ln_attn` before attention and `ln_mlp` before the MLP, in parallel (the new
    /// architecture's default, `num_ln_in_parallel_attn` 2).
    Two,
}

/// Falcon's layout, from transformers' `FalconConfig` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FalconOptions {
    /// ALiBi (`alibi`) instead of rotary embeddings.
    pub alibi: bool,
    /// The fused projection's layout.
    pub qkv: FalconQkv,
    /// The block's norms.
    pub norms: FalconNorms,
}

/// A causal LM's configuration, every family in one shape.
#[derive(Debug, Clone)]
pub struct DecoderConfig {
    /// `config.json`, for messages.
    pub path: PathBuf,
    /// The family.
    pub family: Family,
    /// Rows of the embedding table.
    pub vocab_size: i64,
    /// Width of the residual stream.
    pub hidden_size: i64,
    /// Width of the MLP.
    pub intermediate_size: i64,
    /// Query heads.
    pub num_heads: i64,
    /// Key/value heads (grouped-query attention when fewer than `num_heads`).
    pub num_kv_heads: i64,
    /// Width of one head.
    pub head_dim: i64,
    /// Each layer's attention window and rotary embedding.
    pub layers: Vec<LayerKind>,
    /// Norm epsilon.
    pub norm_eps: f64,
    /// Longest input the model was trained for (`None`: not recorded).
    pub max_positions: Option<i64>,
    /// Whether the output projection is the embedding table.
    pub tie_word_embeddings: bool,
    /// Biases on the query/key/value projections.
    pub qkv_bias: bool,
    /// A bias on the output projection of attention.
    pub o_bias: bool,
    /// Biases on the MLP's projections.
    pub mlp_bias: bool,
    /// The MLP activation.
    pub activation: Activation,
    /// Attention scores are multiplied by this (1/√head_dim unless `query_pre_attn_scalar`).
    pub attn_scale: f64,
    /// Gemma 2's cap on attention scores: cap · tanh(score / cap).
    pub attn_softcap: Option<f64>,
    /// Gemma 2's cap on the output logits.
    pub final_softcap: Option<f64>,
    /// `bos_token_id` of config.json (the tokenizer's files take precedence).
    pub bos_token_id: Option<i64>,
    /// `eos_token_id` (the first, when a list).
    pub eos_token_id: Option<i64>,
    /// The text model of a multimodal checkpoint (Gemma 3's `gemma3`): its tensors are named
    /// under `language_model.` and the vision tower's are not read.
    pub multimodal: bool,
    /// What only XGLM, Falcon or GPT-2 has.
    pub options: FamilyOptions,
}

/// Gemma3TextConfig's defaults (transformers): a multimodal Gemma 3 config.json (as the hub's
/// gemma-3-4b files are) writes in `text_config` only what differs from them.
fn gemma3_text_defaults() -> Value {
    serde_json::json!({
        "model_type": "gemma3_text", "vocab_size": 262_208, "hidden_size": 2304,
        "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6, "pad_token_id": 0,
        "eos_token_id": 1, "bos_token_id": 2, "tie_word_embeddings": true, "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0, "attention_bias": false, "query_pre_attn_scalar": 256,
        "sliding_window": 4096, "sliding_window_pattern": 6
    })
}

/// The text model's config of a multimodal Gemma 3 config (`model_type` `gemma3` or
/// `Gemma3ForConditionalGeneration`): `text_config` over [`gemma3_text_defaults`]; `None` for any
/// other config, an error for a `gemma3` config without `text_config`.
fn gemma3_text_config(path: &Path, v: &Value) -> Result<Option<Value>> {
    let named = v.get("model_type").and_then(Value::as_str) == Some("gemma3")
        || (v.get("model_type").is_none()
            && v["architectures"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("Gemma3ForConditionalGeneration"))));
    if !named {
        return Ok(None);
    }
    let text = v.get("text_config").and_then(Value::as_object).ok_or_else(|| {
        Error::field(path, "text_config", "missing: a multimodal Gemma 3 config describes its text model there")
    })?;
    let mut merged = gemma3_text_defaults();
    let out = merged.as_object_mut().expect("an object");
    for (k, x) in text {
        out.insert(k.clone(), x.clone());
    }
    out.insert("model_type".into(), "gemma3_text".into());
    Ok(Some(merged))
}

/// The fields of a RoPE family's or BLOOM's `config.json` (`None` when absent or `null`), with the
/// older names (`n_embed`, `n_head`, `n_layer`) beside the newer.
#[derive(Debug, Deserialize)]
struct CommonFields {
    use_bidirectional_attention: Option<Flag>,
    vocab_size: Option<PositiveInt>,
    hidden_size: Option<PositiveInt>,
    n_embed: Option<PositiveInt>,
    num_attention_heads: Option<PositiveInt>,
    n_head: Option<PositiveInt>,
    num_hidden_layers: Option<PositiveInt>,
    n_layer: Option<PositiveInt>,
    num_key_value_heads: Option<PositiveInt>,
    head_dim: Option<PositiveInt>,
    intermediate_size: Option<PositiveInt>,
    #[serde(default)]
    hidden_activation: Lenient<String>,
    #[serde(default)]
    hidden_act: Lenient<String>,
    query_pre_attn_scalar: Option<Number>,
    /// Checked against the number of layers after deserialising.
    layer_types: Option<Value>,
    sliding_window: Option<PositiveInt>,
    #[serde(default)]
    max_window_layers: Lenient<i64>,
    #[serde(default)]
    use_sliding_window: Lenient<bool>,
    #[serde(default)]
    sliding_window_pattern: Lenient<i64>,
    #[serde(default, rename = "_sliding_window_pattern")]
    hidden_sliding_window_pattern: Lenient<i64>,
    attention_bias: Option<Flag>,
    tie_word_embeddings: Option<Flag>,
    mlp_bias: Option<Flag>,
    rms_norm_eps: Option<Number>,
    layer_norm_epsilon: Option<Number>,
    max_position_embeddings: Option<PositiveInt>,
    attn_logit_softcapping: Option<Number>,
    final_logit_softcapping: Option<Number>,
    #[serde(default)]
    bos_token_id: FirstTokenId,
    #[serde(default)]
    eos_token_id: FirstTokenId,
}

/// XGLM's `config.json` fields (`XGLMConfig`'s names first, the usual ones beside them).
#[derive(Debug, Deserialize)]
struct XglmFields {
    vocab_size: Option<PositiveInt>,
    d_model: Option<PositiveInt>,
    hidden_size: Option<PositiveInt>,
    attention_heads: Option<PositiveInt>,
    num_attention_heads: Option<PositiveInt>,
    num_layers: Option<PositiveInt>,
    num_hidden_layers: Option<PositiveInt>,
    ffn_dim: Option<PositiveInt>,
    max_position_embeddings: Option<PositiveInt>,
    /// `None` when absent (XGLMConfig's default 1), `Some(None)` when `null` (no padding row).
    #[serde(default, deserialize_with = "json_fields::present")]
    pad_token_id: Option<Option<TokenId>>,
    tie_word_embeddings: Option<Flag>,
    scale_embedding: Option<Flag>,
    #[serde(default)]
    activation_function: Lenient<String>,
    #[serde(default)]
    bos_token_id: FirstTokenId,
    #[serde(default)]
    eos_token_id: FirstTokenId,
}

/// GPT-2's `config.json` fields (`GPT2Config`'s names first, the usual ones beside them).
#[derive(Debug, Deserialize)]
struct Gpt2Fields {
    vocab_size: Option<PositiveInt>,
    n_embd: Option<PositiveInt>,
    hidden_size: Option<PositiveInt>,
    n_head: Option<PositiveInt>,
    num_attention_heads: Option<PositiveInt>,
    n_layer: Option<PositiveInt>,
    num_hidden_layers: Option<PositiveInt>,
    n_positions: Option<PositiveInt>,
    max_position_embeddings: Option<PositiveInt>,
    /// `None` when absent or `null` (4 × n_embd).
    n_inner: Option<PositiveInt>,
    #[serde(default)]
    activation_function: Lenient<String>,
    layer_norm_epsilon: Option<Number>,
    scale_attn_weights: Option<Flag>,
    scale_attn_by_inverse_layer_idx: Option<Flag>,
    reorder_and_upcast_attn: Option<Flag>,
    add_cross_attention: Option<Flag>,
    tie_word_embeddings: Option<Flag>,
    #[serde(default)]
    bos_token_id: FirstTokenId,
    #[serde(default)]
    eos_token_id: FirstTokenId,
}

/// Falcon's `config.json` fields (`FalconConfig`'s names, and the older `n_embed`, `n_head`,
/// `n_layer`).
#[derive(Debug, Deserialize)]
struct FalconFields {
    vocab_size: Option<PositiveInt>,
    hidden_size: Option<PositiveInt>,
    n_embed: Option<PositiveInt>,
    num_attention_heads: Option<PositiveInt>,
    n_head: Option<PositiveInt>,
    num_hidden_layers: Option<PositiveInt>,
    n_layer: Option<PositiveInt>,
    num_kv_heads: Option<PositiveInt>,
    num_ln_in_parallel_attn: Option<PositiveInt>,
    ffn_hidden_size: Option<PositiveInt>,
    max_position_embeddings: Option<PositiveInt>,
    new_decoder_architecture: Option<Flag>,
    parallel_attn: Option<Flag>,
    multi_query: Option<Flag>,
    alibi: Option<Flag>,
    bias: Option<Flag>,
    tie_word_embeddings: Option<Flag>,
    layer_norm_epsilon: Option<Number>,
    #[serde(default)]
    activation: Lenient<String>,
    #[serde(default)]
    bos_token_id: FirstTokenId,
    #[serde(default)]
    eos_token_id: FirstTokenId,
}

/// The rotary fields of `config.json`: transformers 5's `rope_parameters` (one set, or one per
/// layer type: a choice of layouts, so read as it is and deserialised once chosen), or the older
/// `rope_theta`, `rope_scaling` and Gemma 3's `rope_local_base_freq`.
#[derive(Debug, Deserialize)]
struct RopeFields {
    rope_parameters: Option<Value>,
    rope_theta: Option<Number>,
    rope_local_base_freq: Option<Number>,
    rope_scaling: Option<Value>,
}

/// One set of rotary parameters (`rope_scaling`, or `rope_parameters` or one of its layer types).
#[derive(Debug, Deserialize)]
struct RopeParams {
    #[serde(default)]
    rope_type: Lenient<String>,
    /// The older name of `rope_type`.
    #[serde(default, rename = "type")]
    old_rope_type: Lenient<String>,
    rope_theta: Option<Number>,
    factor: Option<Number>,
    low_freq_factor: Option<Number>,
    high_freq_factor: Option<Number>,
    original_max_position_embeddings: Option<Number>,
    attention_factor: Option<Number>,
    mscale: Option<Number>,
    mscale_all_dim: Option<Number>,
    beta_fast: Option<Number>,
    beta_slow: Option<Number>,
    #[serde(default)]
    truncate: Lenient<bool>,
}

/// The first of `names` the config sets (older names after newer), or an error naming the first.
fn required(path: &Path, names: &[(&str, Option<PositiveInt>)]) -> Result<i64> {
    optional(names).ok_or_else(|| Error::field(path, names[0].0, "missing (expected a positive integer)"))
}

/// The first of `names` the config sets, if any.
fn optional(names: &[(&str, Option<PositiveInt>)]) -> Option<i64> {
    names.iter().find_map(|(_, n)| n.as_ref().map(|n| n.0))
}

/// A flag's value, `default` when absent.
fn flag(field: Option<Flag>, default: bool) -> bool {
    field.map_or(default, |f| f.0)
}

/// The family a config names, by `model_type`, else by `architectures`.
pub(crate) fn family_of(path: &Path, v: &Value) -> Result<Family> {
    if let Some(t) = v.get("model_type").and_then(Value::as_str) {
        if let Some((_, f)) = MODEL_TYPES.iter().find(|(n, _)| *n == t) {
            return Ok(*f);
        }
        return Err(Error::field(
            path,
            "model_type",
            format!("`{t}` is not a supported causal LM (supported: {})", Family::supported()),
        ));
    }
    let archs: Vec<&str> =
        v.get("architectures").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    for a in &archs {
        if let Some((_, f)) = ARCHITECTURES.iter().find(|(n, _)| n == a) {
            return Ok(*f);
        }
    }
    Err(Error::field(
        path,
        "model_type",
        format!(
            "missing, and architectures {archs:?} names no supported causal LM (supported model types: {})",
            Family::supported()
        ),
    ))
}

impl DecoderConfig {
    /// Reads and validates `path` (a `config.json`).
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_json(path, &json_fields::read_object(path)?)
    }

    /// Validates a parsed `config.json` (of a multimodal Gemma 3: its text model's).
    pub(crate) fn from_json(path: &Path, v: &Value) -> Result<Self> {
        if let Some(text) = gemma3_text_config(path, v)? {
            return Ok(DecoderConfig { multimodal: true, ..Self::from_json(path, &text)? });
        }
        let family = family_of(path, v)?;
        match family {
            Family::Xglm => return xglm_config(path, json_fields::from_value(path, v)?),
            Family::Gpt2 => return gpt2_config(path, json_fields::from_value(path, v)?),
            Family::Falcon => {
                let rope_fields = json_fields::from_value(path, v)?;
                return falcon_config(path, json_fields::from_value(path, v)?, &rope_fields);
            }
            _ => {}
        }
        let f: CommonFields = json_fields::from_value(path, v)?;
        let rope_fields: RopeFields = json_fields::from_value(path, v)?;
        if flag(f.use_bidirectional_attention, false) {
            return Err(Error::field(
                path,
                "use_bidirectional_attention",
                "true: an embedding model's bidirectional attention, not a causal LM",
            ));
        }
        let gemma = matches!(family, Family::Gemma2 | Family::Gemma3);
        let bloom = family == Family::Bloom;
        let hidden_size = required(path, &[("hidden_size", f.hidden_size), ("n_embed", f.n_embed)])?;
        let num_heads = required(path, &[("num_attention_heads", f.num_attention_heads), ("n_head", f.n_head)])?;
        let num_layers = required(path, &[("num_hidden_layers", f.num_hidden_layers), ("n_layer", f.n_layer)])?;
        let num_kv_heads = if bloom { num_heads } else { f.num_key_value_heads.map_or(num_heads, |n| n.0) };
        if num_heads % num_kv_heads != 0 {
            return Err(Error::field(
                path,
                "num_key_value_heads",
                format!("{num_kv_heads} does not divide num_attention_heads {num_heads}"),
            ));
        }
        let head_dim = match f.head_dim {
            Some(d) if !bloom => d.0,
            _ => {
                if hidden_size % num_heads != 0 {
                    return Err(Error::field(
                        path,
                        "hidden_size",
                        format!("{hidden_size} is not a multiple of num_attention_heads {num_heads} (and no head_dim)"),
                    ));
                }
                hidden_size / num_heads
            }
        };
        let intermediate_size =
            if bloom { 4 * hidden_size } else { required(path, &[("intermediate_size", f.intermediate_size)])? };
        let act_name = f.hidden_activation.0.as_deref().or(f.hidden_act.0.as_deref());
        let activation = match (bloom, act_name) {
            (true, _) => Activation::GeluTanh,
            (false, None) if gemma => Activation::GeluTanh,
            (false, None) => Activation::Silu,
            (false, Some(name)) => activation_named(path, "hidden_act", name)?,
        };
        let attn_scale = match &f.query_pre_attn_scalar {
            Some(s) if gemma => positive(path, "query_pre_attn_scalar", s.0)?.powf(-0.5),
            _ => (head_dim as f64).powf(-0.5),
        };
        let layer_types = layer_types(path, &f, family, num_layers)?;
        let sliding_window = f.sliding_window.as_ref().map(|w| w.0);
        let mut layers = Vec::with_capacity(num_layers as usize);
        for kind in &layer_types {
            let sliding = kind == "sliding_attention";
            if sliding && sliding_window.is_none() {
                return Err(Error::field(
                    path,
                    "sliding_window",
                    "missing, but layer_types has sliding_attention layers",
                ));
            }
            let rope = if bloom { None } else { Some(rope_of(path, &rope_fields, family, kind)?) };
            layers.push(LayerKind { window: if sliding { sliding_window } else { None }, rope });
        }
        let default_bias = family == Family::Qwen2;
        let attention_bias = flag(f.attention_bias, false);
        let tie_default = gemma || bloom;
        let softcap = |cap: Option<Number>| if gemma { cap.map(|c| c.0).filter(|c| *c > 0.0) } else { None };
        let (eps_field, eps) =
            if bloom { ("layer_norm_epsilon", f.layer_norm_epsilon) } else { ("rms_norm_eps", f.rms_norm_eps) };
        Ok(DecoderConfig {
            path: path.to_path_buf(),
            family,
            vocab_size: required(path, &[("vocab_size", f.vocab_size)])?,
            hidden_size,
            intermediate_size,
            num_heads,
            num_kv_heads,
            head_dim,
            layers,
            norm_eps: positive(path, eps_field, eps.map_or(1e-6, |e| e.0))?,
            max_positions: if bloom { None } else { f.max_position_embeddings.map(|n| n.0) },
            tie_word_embeddings: flag(f.tie_word_embeddings, tie_default),
            qkv_bias: bloom || default_bias || attention_bias,
            o_bias: bloom || (!default_bias && attention_bias),
            mlp_bias: bloom || flag(f.mlp_bias, false),
            activation,
            attn_scale,
            attn_softcap: softcap(f.attn_logit_softcapping),
            final_softcap: softcap(f.final_logit_softcapping),
            bos_token_id: f.bos_token_id.0,
            eos_token_id: f.eos_token_id.0,
            multimodal: false,
            options: FamilyOptions::Common,
        })
    }
}

/// The activation transformers' `ACT2FN[name]` computes; an error naming `field` for others.
fn activation_named(path: &Path, field: &str, name: &str) -> Result<Activation> {
    match name {
        "silu" | "swish" => Ok(Activation::Silu),
        "gelu_pytorch_tanh" | "gelu_new" | "gelu_fast" => Ok(Activation::GeluTanh),
        "gelu" => Ok(Activation::Gelu),
        other => Err(Error::field(path, field, format!("`{other}` is not supported (silu, gelu, gelu_pytorch_tanh)"))),
    }
}

/// XGLM's config.json, with `XGLMConfig`'s names (`d_model`, `attention_heads`, `num_layers`,
/// `ffn_dim`, `activation_function`) and defaults: LayerNorms of epsilon 1e-5 (`nn.LayerNorm`'s
/// default: config.json has none), biases on every projection, tied embeddings unless
/// `tie_word_embeddings` is false, no RoPE (sinusoidal positions, [`XglmOptions`]).
fn xglm_config(path: &Path, f: XglmFields) -> Result<DecoderConfig> {
    let hidden_size = required(path, &[("d_model", f.d_model), ("hidden_size", f.hidden_size)])?;
    let num_heads =
        required(path, &[("attention_heads", f.attention_heads), ("num_attention_heads", f.num_attention_heads)])?;
    let num_layers = required(path, &[("num_layers", f.num_layers), ("num_hidden_layers", f.num_hidden_layers)])?;
    if hidden_size % num_heads != 0 {
        return Err(Error::field(
            path,
            "d_model",
            format!("{hidden_size} is not a multiple of attention_heads {num_heads}"),
        ));
    }
    if hidden_size < 4 {
        let why = format!("{hidden_size} is too small for XGLM's sinusoidal positions (at least 4)");
        return Err(Error::field(path, "d_model", why));
    }
    let padding_idx = match f.pad_token_id {
        None => Some(1),
        Some(given) => given.map(|t| t.0),
    };
    let head_dim = hidden_size / num_heads;
    let activation = f.activation_function.0.as_deref().unwrap_or("gelu");
    Ok(DecoderConfig {
        path: path.to_path_buf(),
        family: Family::Xglm,
        vocab_size: required(path, &[("vocab_size", f.vocab_size)])?,
        hidden_size,
        intermediate_size: required(path, &[("ffn_dim", f.ffn_dim)])?,
        num_heads,
        num_kv_heads: num_heads,
        head_dim,
        layers: vec![LayerKind { window: None, rope: None }; num_layers as usize],
        norm_eps: 1e-5,
        max_positions: Some(f.max_position_embeddings.map_or(2048, |n| n.0)),
        tie_word_embeddings: flag(f.tie_word_embeddings, true),
        qkv_bias: true,
        o_bias: true,
        mlp_bias: true,
        activation: activation_named(path, "activation_function", activation)?,
        attn_scale: (head_dim as f64).powf(-0.5),
        attn_softcap: None,
        final_softcap: None,
        bos_token_id: f.bos_token_id.0,
        eos_token_id: f.eos_token_id.0,
        multimodal: false,
        options: FamilyOptions::Xglm(XglmOptions {
            embed_scale: if flag(f.scale_embedding, true) { (hidden_size as f64).sqrt() } else { 1.0 },
            padding_idx,
        }),
    })
}

/// The largest GPT-2 size (`n_embd`, `n_inner`, `n_positions`, `vocab_size`) read: 2^31, so that
/// every product of two sizes fits an i64.
const GPT2_MAX_SIZE: i64 = 1 << 31;

/// The most GPT-2 layers read (a description of each is made before any weight is read).
const GPT2_MAX_LAYERS: i64 = 4096;

/// GPT-2's config.json, with `GPT2Config`'s names (`n_embd`, `n_head`, `n_layer`, `n_positions`,
/// `n_inner`, `activation_function`, `layer_norm_epsilon`; `hidden_size` and the other usual
/// names beside them) and defaults (`n_positions` 1024, `n_inner` 4 × n_embd, `gelu_new`,
/// epsilon 1e-5, `scale_attn_weights` true, tied embeddings), biases on every projection, no
/// RoPE (learned positions). Sizes past [`GPT2_MAX_SIZE`] and layers past [`GPT2_MAX_LAYERS`] are
/// refused before anything is allocated; so are `reorder_and_upcast_attn` (its fp32 upcast of
/// the scores is not implemented) and `add_cross_attention` (an encoder-decoder's layers).
fn gpt2_config(path: &Path, f: Gpt2Fields) -> Result<DecoderConfig> {
    let hidden_size = required(path, &[("n_embd", f.n_embd), ("hidden_size", f.hidden_size)])?;
    let num_heads = required(path, &[("n_head", f.n_head), ("num_attention_heads", f.num_attention_heads)])?;
    let num_layers = required(path, &[("n_layer", f.n_layer), ("num_hidden_layers", f.num_hidden_layers)])?;
    let vocab_size = required(path, &[("vocab_size", f.vocab_size)])?;
    let positions = optional(&[("n_positions", f.n_positions), ("max_position_embeddings", f.max_position_embeddings)])
        .unwrap_or(1024);
    let intermediate_size = f.n_inner.map_or(hidden_size.saturating_mul(4), |n| n.0);
    for (field, size) in [
        ("n_embd", hidden_size),
        ("n_inner", intermediate_size),
        ("n_positions", positions),
        ("vocab_size", vocab_size),
    ] {
        if size > GPT2_MAX_SIZE {
            return Err(Error::field(path, field, format!("{size} is past the largest size read ({GPT2_MAX_SIZE})")));
        }
    }
    if num_layers > GPT2_MAX_LAYERS {
        let why = format!("{num_layers} layers: at most {GPT2_MAX_LAYERS} are read");
        return Err(Error::field(path, "n_layer", why));
    }
    if hidden_size % num_heads != 0 {
        return Err(Error::field(path, "n_embd", format!("{hidden_size} is not a multiple of n_head {num_heads}")));
    }
    let refused = [
        (
            "reorder_and_upcast_attn",
            f.reorder_and_upcast_attn,
            "true: the fp32 upcast and reordering of the attention scores are not supported",
        ),
        (
            "add_cross_attention",
            f.add_cross_attention,
            "true: cross-attention layers over an encoder's states are not supported",
        ),
    ];
    if let Some((field, _, why)) = refused.into_iter().find(|(_, set, _)| flag(*set, false)) {
        return Err(Error::field(path, field, why));
    }
    let head_dim = hidden_size / num_heads;
    let activation = f.activation_function.0.as_deref().unwrap_or("gelu_new");
    Ok(DecoderConfig {
        path: path.to_path_buf(),
        family: Family::Gpt2,
        vocab_size,
        hidden_size,
        intermediate_size,
        num_heads,
        num_kv_heads: num_heads,
        head_dim,
        layers: vec![LayerKind { window: None, rope: None }; num_layers as usize],
        norm_eps: positive(path, "layer_norm_epsilon", f.layer_norm_epsilon.map_or(1e-5, |e| e.0))?,
        max_positions: Some(positions),
        tie_word_embeddings: flag(f.tie_word_embeddings, true),
        qkv_bias: true,
        o_bias: true,
        mlp_bias: true,
        activation: activation_named(path, "activation_function", activation)?,
        attn_scale: if flag(f.scale_attn_weights, true) { (head_dim as f64).powf(-0.5) } else { 1.0 },
        attn_softcap: None,
        final_softcap: None,
        bos_token_id: f.bos_token_id.0,
        eos_token_id: f.eos_token_id.0,
        multimodal: false,
        options: FamilyOptions::Gpt2(Gpt2Options {
            scale_by_inverse_layer_idx: flag(f.scale_attn_by_inverse_layer_idx, false),
        }),
    })
}

/// Falcon's config.json, with `FalconConfig`'s names (`n_embed`, `n_head`, `n_layer` of older
/// files too) and defaults (`multi_query` and `parallel_attn` true; `alibi`, `bias` and
/// `new_decoder_architecture` false; `ffn_hidden_size` 4 × hidden; epsilon 1e-5; exact GELU),
/// refusing the combinations transformers' `FalconDecoderLayer` cannot run.
fn falcon_config(path: &Path, f: FalconFields, rope_fields: &RopeFields) -> Result<DecoderConfig> {
    let hidden_size = required(path, &[("hidden_size", f.hidden_size), ("n_embed", f.n_embed)])?;
    let num_heads = required(path, &[("num_attention_heads", f.num_attention_heads), ("n_head", f.n_head)])?;
    let num_layers = required(path, &[("num_hidden_layers", f.num_hidden_layers), ("n_layer", f.n_layer)])?;
    if hidden_size % num_heads != 0 {
        return Err(Error::field(
            path,
            "hidden_size",
            format!("{hidden_size} is not a multiple of num_attention_heads {num_heads}"),
        ));
    }
    let new_architecture = flag(f.new_decoder_architecture, false);
    let parallel = flag(f.parallel_attn, true);
    let alibi = flag(f.alibi, false);
    let bias = flag(f.bias, false);
    let kv_given = f.num_kv_heads.map(|n| n.0);
    let (qkv, num_kv_heads) = if new_architecture {
        let kv = kv_given.unwrap_or(num_heads);
        if num_heads % kv != 0 {
            let why = format!("{kv} does not divide num_attention_heads {num_heads}");
            return Err(Error::field(path, "num_kv_heads", why));
        }
        (FalconQkv::Grouped, kv)
    } else if flag(f.multi_query, true) {
        (FalconQkv::MultiQuery, 1)
    } else {
        if let Some(kv) = kv_given.filter(|&kv| kv != num_heads) {
            let why = format!(
                "{kv} differs from num_attention_heads {num_heads}: without multi_query or new_decoder_architecture each head has its own key and value"
            );
            return Err(Error::field(path, "num_kv_heads", why));
        }
        (FalconQkv::PerHead, num_heads)
    };
    let norms = match (new_architecture, parallel, f.num_ln_in_parallel_attn.map(|n| n.0)) {
        (true, false, _) => {
            let why = "false with new_decoder_architecture, a layout transformers' Falcon cannot run";
            return Err(Error::field(path, "parallel_attn", why));
        }
        (true, true, None | Some(2)) => FalconNorms::Two,
        (true, true, Some(1)) => FalconNorms::Shared,
        (true, true, Some(n)) => {
            return Err(Error::field(path, "num_ln_in_parallel_attn", format!("{n}: expected 1 or 2")));
        }
        (false, true, Some(2)) => {
            let why = "2 without new_decoder_architecture, a layout transformers' Falcon cannot run";
            return Err(Error::field(path, "num_ln_in_parallel_attn", why));
        }
        (false, true, _) => FalconNorms::Shared,
        (false, false, _) => FalconNorms::Sequential,
    };
    let rope = if alibi { None } else { Some(rope_of(path, rope_fields, Family::Falcon, "full_attention")?) };
    let head_dim = hidden_size / num_heads;
    let activation = f.activation.0.as_deref().unwrap_or("gelu");
    Ok(DecoderConfig {
        path: path.to_path_buf(),
        family: Family::Falcon,
        vocab_size: required(path, &[("vocab_size", f.vocab_size)])?,
        hidden_size,
        intermediate_size: f.ffn_hidden_size.map_or(4 * hidden_size, |n| n.0),
        num_heads,
        num_kv_heads,
        head_dim,
        layers: vec![LayerKind { window: None, rope }; num_layers as usize],
        norm_eps: positive(path, "layer_norm_epsilon", f.layer_norm_epsilon.map_or(1e-5, |e| e.0))?,
        max_positions: Some(f.max_position_embeddings.map_or(2048, |n| n.0)),
        tie_word_embeddings: flag(f.tie_word_embeddings, true),
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: bias,
        activation: activation_named(path, "activation", activation)?,
        attn_scale: (head_dim as f64).powf(-0.5),
        attn_softcap: None,
        final_softcap: None,
        bos_token_id: f.bos_token_id.0,
        eos_token_id: f.eos_token_id.0,
        multimodal: false,
        options: FamilyOptions::Falcon(FalconOptions { alibi, qkv, norms }),
    })
}

/// Each layer's type (`full_attention` or `sliding_attention`): `layer_types` when given, else
/// transformers' default for the family.
fn layer_types(path: &Path, f: &CommonFields, family: Family, n: i64) -> Result<Vec<String>> {
    if let Some(v) = &f.layer_types {
        let types: Vec<String> =
            v.as_array().map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect()).unwrap_or_default();
        if types.len() as i64 != n || types.iter().any(|t| t != "full_attention" && t != "sliding_attention") {
            return Err(Error::field(
                path,
                "layer_types",
                format!("expected {n} entries, each \"full_attention\" or \"sliding_attention\", found {v}"),
            ));
        }
        return Ok(types);
    }
    let has_window = f.sliding_window.is_some();
    let sliding = |i: i64| -> bool {
        match family {
            Family::Mistral => has_window,
            Family::Qwen2 | Family::Qwen3 => {
                let max_window_layers = f.max_window_layers.0.unwrap_or(n);
                has_window && f.use_sliding_window.0.unwrap_or(false) && i >= max_window_layers
            }
            Family::Gemma2 => (i + 1) % 2 != 0,
            Family::Gemma3 => {
                let pattern = f.sliding_window_pattern.0.or(f.hidden_sliding_window_pattern.0).unwrap_or(6).max(1);
                (i + 1) % pattern != 0
            }
            Family::Olmo3 => (i + 1) % 4 != 0,
            Family::Llama | Family::Olmo2 | Family::Bloom | Family::Xglm | Family::Falcon | Family::Gpt2 => false,
        }
    };
    Ok((0..n).map(|i| if sliding(i) { "sliding_attention" } else { "full_attention" }.to_string()).collect())
}

/// `value` of `field` when it is a positive number (a RoPE base, a scaling factor, an epsilon):
/// zero or a negative value would give NaN or infinite scores rather than an error.
fn positive(path: &Path, field: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        return Ok(value);
    }
    Err(Error::field(path, field, format!("expected a positive number, found {value}")))
}

/// The rotary embedding of layers of type `kind`.
fn rope_of(path: &Path, r: &RopeFields, family: Family, kind: &str) -> Result<Rope> {
    // transformers 5: `rope_parameters`, per layer type for some families.
    if let Some(params) = &r.rope_parameters {
        let per_type = params.get(kind).filter(|p| p.is_object());
        let field = if per_type.is_some() { format!("rope_parameters.{kind}") } else { "rope_parameters".into() };
        let p: RopeParams = json_fields::from_value_at(path, &field, per_type.unwrap_or(params))?;
        let theta = required_number(path, &field, "rope_theta", &p.rope_theta)?;
        return Ok(Rope { theta, scaling: scaling_of(path, &field, &p)? });
    }
    // Older configs: `rope_theta`, `rope_scaling`; Gemma 3's sliding layers use `rope_local_base_freq`
    // and no scaling.
    let default_theta = match family {
        Family::Gemma3 => 1_000_000.0,
        Family::Olmo3 => 500_000.0,
        _ => 10_000.0,
    };
    if family == Family::Gemma3 && kind == "sliding_attention" {
        let theta = positive(path, "rope_local_base_freq", r.rope_local_base_freq.as_ref().map_or(10_000.0, |t| t.0))?;
        return Ok(Rope { theta, scaling: RopeScaling::Default });
    }
    let theta = positive(path, "rope_theta", r.rope_theta.as_ref().map_or(default_theta, |t| t.0))?;
    let scaling = match &r.rope_scaling {
        None => RopeScaling::Default,
        Some(s) => scaling_of(path, "rope_scaling", &json_fields::from_value_at(path, "rope_scaling", s)?)?,
    };
    Ok(Rope { theta, scaling })
}

/// `key` of the rotary parameters at `field`, which must be set and positive.
fn required_number(path: &Path, field: &str, key: &str, value: &Option<Number>) -> Result<f64> {
    let value =
        value.as_ref().ok_or_else(|| Error::field(path, format!("{field}.{key}"), "missing or not a number"))?;
    positive(path, &format!("{field}.{key}"), value.0)
}

/// The scaling the rotary parameters `p` (at `field`) describe.
fn scaling_of(path: &Path, field: &str, p: &RopeParams) -> Result<RopeScaling> {
    let kind = p.rope_type.0.as_deref().or(p.old_rope_type.0.as_deref()).unwrap_or("default");
    let num = |key: &str, value: &Option<Number>| required_number(path, field, key, value);
    let optional = |key: &str, value: &Option<Number>| value.as_ref().map(|_| num(key, value)).transpose();
    Ok(match kind {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear { factor: num("factor", &p.factor)? },
        "llama3" => RopeScaling::Llama3 {
            factor: num("factor", &p.factor)?,
            low_freq_factor: num("low_freq_factor", &p.low_freq_factor)?,
            high_freq_factor: num("high_freq_factor", &p.high_freq_factor)?,
            original: num("original_max_position_embeddings", &p.original_max_position_embeddings)?,
        },
        // Dynamic NTK changes the frequencies only for sequences longer than the model's
        // positions, which indolm refuses before scoring: within them it is the default.
        "dynamic" => {
            num("factor", &p.factor)?;
            RopeScaling::Default
        }
        "yarn" => {
            let factor = num("factor", &p.factor)?;
            let mscale = |scale: f64, m: f64| if scale <= 1.0 { 1.0 } else { 0.1 * m * scale.ln() + 1.0 };
            let attention_factor = match (
                optional("attention_factor", &p.attention_factor)?,
                optional("mscale", &p.mscale)?,
                optional("mscale_all_dim", &p.mscale_all_dim)?,
            ) {
                (Some(a), _, _) => a,
                (None, Some(m), Some(all)) => mscale(factor, m) / mscale(factor, all),
                _ => mscale(factor, 1.0),
            };
            RopeScaling::Yarn {
                factor,
                original: num("original_max_position_embeddings", &p.original_max_position_embeddings)?,
                beta_fast: optional("beta_fast", &p.beta_fast)?.unwrap_or(32.0),
                beta_slow: optional("beta_slow", &p.beta_slow)?.unwrap_or(1.0),
                attention_factor,
                truncate: p.truncate.0.unwrap_or(true),
            }
        }
        other => {
            return Err(Error::field(
                path,
                format!("{field}.rope_type"),
                format!("`{other}` is not supported (default, linear, llama3, dynamic, yarn)"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<DecoderConfig> {
        DecoderConfig::from_json(Path::new("config.json"), &v)
    }

    #[test]
    fn unknown_model_types_are_refused_naming_the_supported_ones() {
        let err = parse(json!({"model_type": "gpt_neox"})).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "config.json: field `model_type`: `gpt_neox` is not a supported causal LM (supported: llama, mistral"
            ),
            "{err}"
        );
        let err = parse(json!({"architectures": ["GPTNeoXForCausalLM"]})).unwrap_err().to_string();
        assert!(err.contains("names no supported causal LM"), "{err}");
    }

    #[test]
    fn older_configs_give_layer_kinds_and_rope_by_family_defaults() {
        let c = parse(json!({"architectures": ["Gemma3ForCausalLM"], "vocab_size": 10, "hidden_size": 8,
            "intermediate_size": 16, "num_hidden_layers": 7, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 4, "sliding_window": 3, "rope_local_base_freq": 10.0, "rope_theta": 100.0,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "query_pre_attn_scalar": 16}))
        .unwrap();
        assert_eq!(c.family, Family::Gemma3);
        let windows: Vec<Option<i64>> = c.layers.iter().map(|l| l.window).collect();
        assert_eq!(windows, vec![Some(3), Some(3), Some(3), Some(3), Some(3), None, Some(3)]);
        assert_eq!(c.layers[0].rope, Some(Rope { theta: 10.0, scaling: RopeScaling::Default }));
        assert_eq!(c.layers[5].rope, Some(Rope { theta: 100.0, scaling: RopeScaling::Linear { factor: 8.0 } }));
        assert_eq!(c.attn_scale, 0.25);
        assert!(c.tie_word_embeddings);
        let err = parse(json!({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "rope_scaling": {"type": "longrope", "factor": 2.0}}))
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "config.json: field `rope_scaling.rope_type`: `longrope` is not supported (default, linear, llama3, dynamic, yarn)"
        );
    }

    /// gemma-3-4b-pt's config.json: a multimodal config whose `text_config` lists only what
    /// differs from Gemma3TextConfig's defaults.
    #[test]
    fn a_multimodal_gemma3_config_gives_its_text_model_over_the_defaults() {
        let c = parse(json!({
            "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "boi_token_index": 255_999, "eoi_token_index": 256_000, "eos_token_id": [1, 106],
            "image_token_index": 262_144, "mm_tokens_per_image": 256,
            "text_config": {"hidden_size": 2560, "intermediate_size": 10_240, "model_type": "gemma3_text",
                "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024},
            "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}
        }))
        .unwrap();
        assert!(c.multimodal);
        assert_eq!(
            (c.family, c.vocab_size, c.hidden_size, c.intermediate_size),
            (Family::Gemma3, 262_208, 2560, 10_240)
        );
        assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim, c.layers.len()), (8, 4, 256, 34));
        assert_eq!((c.bos_token_id, c.eos_token_id, c.max_positions), (Some(2), Some(1), Some(131_072)));
        assert!(c.tie_word_embeddings && c.attn_softcap.is_none() && c.final_softcap.is_none());
        assert_eq!(c.attn_scale, 256f64.powf(-0.5));
        let full: Vec<usize> =
            c.layers.iter().enumerate().filter(|(_, l)| l.window.is_none()).map(|(i, _)| i).collect();
        assert_eq!(full, [5, 11, 17, 23, 29]);
        assert_eq!(c.layers[0].window, Some(1024));
        assert_eq!(c.layers[0].rope, Some(Rope { theta: 10_000.0, scaling: RopeScaling::Default }));
        assert_eq!(c.layers[5].rope, Some(Rope { theta: 1_000_000.0, scaling: RopeScaling::Linear { factor: 8.0 } }));
        let err = parse(json!({"model_type": "gemma3"})).unwrap_err().to_string();
        assert!(err.contains("`text_config`") && err.contains("missing"), "{err}");
        let err = parse(json!({"model_type": "gemma3_text", "use_bidirectional_attention": true})).unwrap_err();
        assert!(err.to_string().contains("not a causal LM"), "{err}");
    }

    /// The `falcon` config.json files of falcon-7b, falcon-40b and falcon-rw-1b (the hub's, as
    /// transformers reads them): each fused projection's layout, key/value heads and norms.
    #[test]
    fn falcon_7b_40b_and_rw_configs_give_their_attention_layouts() {
        let shared = json!({"apply_residual_connection_post_layernorm": false, "architectures": ["FalconForCausalLM"],
            "attention_dropout": 0.0, "hidden_dropout": 0.0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5,
            "model_type": "falcon", "torch_dtype": "bfloat16", "transformers_version": "4.27.4", "use_cache": true});
        let with = |extra: Value| {
            let mut v = shared.clone();
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            parse(v)
        };
        let falcon = |alibi, qkv, norms| FamilyOptions::Falcon(FalconOptions { alibi, qkv, norms });
        let c = with(json!({"alibi": false, "bias": false, "bos_token_id": 11, "eos_token_id": 11,
            "hidden_size": 4544, "multi_query": true, "new_decoder_architecture": false, "num_attention_heads": 71,
            "num_hidden_layers": 32, "parallel_attn": true, "vocab_size": 65_024}))
        .unwrap();
        assert_eq!(c.family, Family::Falcon);
        assert_eq!(
            (c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.layers.len()),
            (71, 1, 64, 18_176, 32),
            "falcon-7b: multi-query, one key/value head"
        );
        assert_eq!(c.options, falcon(false, FalconQkv::MultiQuery, FalconNorms::Shared));
        assert_eq!(c.layers[31].rope, Some(Rope { theta: 10_000.0, scaling: RopeScaling::Default }));
        assert!(!c.qkv_bias && !c.o_bias && !c.mlp_bias && c.tie_word_embeddings);
        assert_eq!((c.norm_eps, c.max_positions, c.activation), (1e-5, Some(2048), Activation::Gelu));
        assert_eq!((c.bos_token_id, c.eos_token_id, c.attn_scale), (Some(11), Some(11), 0.125));
        let c = with(json!({"alibi": false, "bias": false, "bos_token_id": 11, "eos_token_id": 11,
            "hidden_size": 8192, "new_decoder_architecture": true, "num_attention_heads": 128, "num_hidden_layers": 60,
            "num_kv_heads": 8, "parallel_attn": true, "vocab_size": 65_024}))
        .unwrap();
        assert_eq!(
            (c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.layers.len()),
            (128, 8, 64, 32_768, 60),
            "falcon-40b: 8 key/value groups of 16 heads"
        );
        assert_eq!(c.options, falcon(false, FalconQkv::Grouped, FalconNorms::Two), "ln_attn and ln_mlp");
        // falcon-11B's layout: the new architecture with one norm, its own RoPE base and MLP width.
        let c = with(json!({"hidden_size": 4096, "new_decoder_architecture": true, "num_attention_heads": 32,
            "num_hidden_layers": 60, "num_kv_heads": 8, "num_ln_in_parallel_attn": 1, "rope_theta": 500_042.0,
            "ffn_hidden_size": 16_384, "max_position_embeddings": 8192, "vocab_size": 65_024}))
        .unwrap();
        assert_eq!((c.num_kv_heads, c.intermediate_size, c.max_positions), (8, 16_384, Some(8192)));
        assert_eq!(c.options, falcon(false, FalconQkv::Grouped, FalconNorms::Shared));
        assert_eq!(c.layers[0].rope.as_ref().map(|r| r.theta), Some(500_042.0));
        let c = with(json!({"alibi": true, "bias": true, "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 2048,
            "multi_query": false, "new_decoder_architecture": false, "num_attention_heads": 32,
            "num_hidden_layers": 24, "parallel_attn": false, "vocab_size": 50_304}))
        .unwrap();
        assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size), (32, 32, 64, 8192), "falcon-rw-1b");
        assert_eq!(c.options, falcon(true, FalconQkv::PerHead, FalconNorms::Sequential));
        assert!(c.layers.iter().all(|l| l.rope.is_none() && l.window.is_none()));
        assert!(c.qkv_bias && c.o_bias && c.mlp_bias);
    }

    /// Falcon layouts transformers' FalconDecoderLayer cannot run, and the older `RefinedWeb`
    /// configs (remote code, which transformers does not map to Falcon), are refused by name.
    #[test]
    fn impossible_falcon_layouts_and_refinedweb_configs_are_refused() {
        let base = json!({"model_type": "falcon", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 4,
            "num_hidden_layers": 1});
        let refused = |extra: Value| {
            let mut v = base.clone();
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            parse(v).unwrap_err().to_string()
        };
        let err = refused(json!({"new_decoder_architecture": true, "parallel_attn": false}));
        assert!(err.starts_with("config.json: field `parallel_attn`: false with new_decoder_architecture"), "{err}");
        let err = refused(json!({"num_ln_in_parallel_attn": 2}));
        assert!(err.starts_with("config.json: field `num_ln_in_parallel_attn`: 2 without"), "{err}");
        let err = refused(json!({"new_decoder_architecture": true, "num_ln_in_parallel_attn": 3}));
        assert!(err.ends_with("field `num_ln_in_parallel_attn`: 3: expected 1 or 2"), "{err}");
        let err = refused(json!({"new_decoder_architecture": true, "num_kv_heads": 3}));
        assert!(err.ends_with("field `num_kv_heads`: 3 does not divide num_attention_heads 4"), "{err}");
        let err = refused(json!({"multi_query": false, "num_kv_heads": 2}));
        assert!(err.contains("field `num_kv_heads`: 2 differs from num_attention_heads 4"), "{err}");
        let err = refused(json!({"activation": "relu"}));
        assert!(err.ends_with("field `activation`: `relu` is not supported (silu, gelu, gelu_pytorch_tanh)"), "{err}");
        // The parallel layout with one norm is transformers' default for the old architecture.
        let mut ok = base;
        ok["num_ln_in_parallel_attn"] = json!(1);
        assert_eq!(
            parse(ok).unwrap().options,
            FamilyOptions::Falcon(FalconOptions {
                alibi: false,
                qkv: FalconQkv::MultiQuery,
                norms: FalconNorms::Shared
            })
        );
        let err = parse(json!({"model_type": "RefinedWeb", "architectures": ["RWForCausalLM"], "n_head": 128}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`RefinedWeb` is not a supported causal LM"), "{err}");
    }

    /// xglm-564M's config.json: XGLM's own names, the LayerNorm epsilon config.json lacks,
    /// √d_model embeddings and the sinusoidal table's zero row at `pad_token_id`.
    #[test]
    fn the_xglm_564m_config_gives_xglm_names_and_defaults() {
        let hub = json!({"activation_dropout": 0.0, "activation_function": "gelu", "architectures": ["XGLMForCausalLM"],
            "attention_dropout": 0.1, "attention_heads": 16, "bos_token_id": 0, "d_model": 1024,
            "decoder_start_token_id": 2, "dropout": 0.1, "eos_token_id": 2, "ffn_dim": 4096, "init_std": 0.02,
            "layerdrop": 0.0, "max_position_embeddings": 2048, "model_type": "xglm", "num_layers": 24,
            "pad_token_id": 1, "scale_embedding": true, "transformers_version": "4.16.0.dev0", "use_cache": true,
            "vocab_size": 256_008});
        let c = parse(hub.clone()).unwrap();
        assert_eq!(c.family, Family::Xglm);
        assert_eq!(
            (c.vocab_size, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim),
            (256_008, 1024, 4096, 16, 16, 64)
        );
        assert_eq!(
            (c.layers.len(), c.norm_eps, c.max_positions, c.activation),
            (24, 1e-5, Some(2048), Activation::Gelu)
        );
        assert!(c.layers.iter().all(|l| l.rope.is_none() && l.window.is_none()));
        assert!(c.tie_word_embeddings && c.qkv_bias && c.o_bias && c.mlp_bias);
        assert_eq!((c.bos_token_id, c.eos_token_id, c.attn_scale), (Some(0), Some(2), 0.125));
        assert_eq!(c.options, FamilyOptions::Xglm(XglmOptions { embed_scale: 32.0, padding_idx: Some(1) }));
        let mut v = hub.clone();
        v["scale_embedding"] = json!(false);
        v["pad_token_id"] = Value::Null;
        assert_eq!(parse(v).unwrap().options, FamilyOptions::Xglm(XglmOptions { embed_scale: 1.0, padding_idx: None }));
        let mut v = hub.clone();
        v.as_object_mut().unwrap().remove("pad_token_id");
        let FamilyOptions::Xglm(o) = parse(v).unwrap().options else { panic!("XGLM options") };
        assert_eq!(o.padding_idx, Some(1), "XGLMConfig's default pad_token_id");
        let mut v = hub.clone();
        v["activation_function"] = json!("relu");
        let err = parse(v).unwrap_err().to_string();
        assert!(err.ends_with("field `activation_function`: `relu` is not supported (silu, gelu, gelu_pytorch_tanh)"));
        let mut v = hub;
        v["attention_heads"] = json!(15);
        let err = parse(v).unwrap_err().to_string();
        assert!(err.ends_with("field `d_model`: 1024 is not a multiple of attention_heads 15"), "{err}");
        assert_eq!((Family::Xglm.name(), Family::Falcon.name()), ("xglm", "falcon"));
        assert!(Family::supported().ends_with("bloom, xglm, falcon, gpt2"), "{}", Family::supported());
    }

    /// openai-community/gpt2's config.json (GPT2Config's names, `n_inner` absent), IndoGPT's
    /// special ids (BOS 0, EOS 1, `n_inner` null), and the layouts and sizes refused.
    #[test]
    fn the_gpt2_config_gives_gpt2_names_and_defaults() {
        let hub = json!({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50_256, "embd_pdrop": 0.1, "eos_token_id": 50_256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-5, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
            "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
            "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
            "summary_use_proj": true, "vocab_size": 50_257});
        let c = parse(hub.clone()).unwrap();
        assert_eq!(c.family, Family::Gpt2);
        assert_eq!(
            (c.vocab_size, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim),
            (50_257, 768, 3072, 12, 12, 64)
        );
        assert_eq!(
            (c.layers.len(), c.norm_eps, c.max_positions, c.activation),
            (12, 1e-5, Some(1024), Activation::GeluTanh)
        );
        assert!(c.layers.iter().all(|l| l.rope.is_none() && l.window.is_none()));
        assert!(c.tie_word_embeddings && c.qkv_bias && c.o_bias && c.mlp_bias);
        assert_eq!((c.bos_token_id, c.eos_token_id, c.attn_scale), (Some(50_256), Some(50_256), 0.125));
        assert_eq!(c.options, FamilyOptions::Gpt2(Gpt2Options { scale_by_inverse_layer_idx: false }));
        let with = |extra: Value| {
            let mut v = hub.clone();
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            parse(v)
        };
        let c = with(json!({"bos_token_id": 0, "eos_token_id": 1, "n_inner": null, "scale_attn_weights": false,
            "scale_attn_by_inverse_layer_idx": true}))
        .unwrap();
        assert_eq!((c.bos_token_id, c.eos_token_id, c.intermediate_size, c.attn_scale), (Some(0), Some(1), 3072, 1.0));
        assert_eq!(c.options, FamilyOptions::Gpt2(Gpt2Options { scale_by_inverse_layer_idx: true }));
        let mut bare = hub.clone();
        bare.as_object_mut().unwrap().remove("n_positions");
        bare.as_object_mut().unwrap().remove("model_type");
        let c = parse(bare).unwrap();
        assert_eq!((c.family, c.max_positions), (Family::Gpt2, Some(1024)), "by architecture, GPT2Config's default");
        let refused = |extra: Value| with(extra).unwrap_err().to_string();
        let err = refused(json!({"reorder_and_upcast_attn": true}));
        assert!(err.contains("field `reorder_and_upcast_attn`: true: the fp32 upcast"), "{err}");
        let err = refused(json!({"add_cross_attention": true}));
        assert!(err.contains("field `add_cross_attention`: true: cross-attention"), "{err}");
        let err = refused(json!({"activation_function": "relu"}));
        assert!(err.ends_with("field `activation_function`: `relu` is not supported (silu, gelu, gelu_pytorch_tanh)"));
        let err = refused(json!({"n_head": 5}));
        assert!(err.ends_with("field `n_embd`: 768 is not a multiple of n_head 5"), "{err}");
        let err = refused(json!({"n_layer": 1_000_000_000_000i64}));
        assert!(err.ends_with("field `n_layer`: 1000000000000 layers: at most 4096 are read"), "{err}");
        let err = refused(json!({"n_embd": i64::MAX, "n_head": 1}));
        assert!(err.contains("field `n_embd`: 9223372036854775807 is past the largest size read"), "{err}");
        let err = refused(json!({"n_inner": 1i64 << 40}));
        assert!(err.contains("field `n_inner`"), "{err}");
        let err = refused(json!({"layer_norm_epsilon": 0.0}));
        assert!(err.contains("field `layer_norm_epsilon`: expected a positive number"), "{err}");
    }
}
