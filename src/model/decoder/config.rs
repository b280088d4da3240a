//! A causal LM's `config.json`, read into one [`DecoderConfig`] whatever the family: the family
//! chosen by `model_type` (or `architectures`), then each layer's attention kind (sliding window
//! or full) and rotary frequencies, in both of transformers' layouts (`rope_theta` +
//! `rope_scaling` of older configs, `rope_parameters` of transformers 5, per layer type for
//! Gemma 3 and OLMo 3).
use crate::error::{Error, Result};
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
];

impl Family {
    /// Its `model_type`.
    pub fn name(self) -> &'static str {
        MODEL_TYPES.iter().find(|(_, f)| *f == self).map(|(n, _)| *n).unwrap_or("?")
    }

    /// The supported `model_type` values, comma-separated (for messages).
    pub fn supported() -> String {
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
    pub fn attention_scaling(&self) -> f64 {
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
    /// Its rotary embedding (`None` for BLOOM's ALiBi).
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

/// config.json with typed getters whose errors name the file and the field.
struct Json<'a> {
    path: &'a Path,
    v: &'a Value,
}

impl Json<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.v.get(key).filter(|v| !v.is_null())
    }

    fn int(&self, keys: &[&str]) -> Result<Option<i64>> {
        for key in keys {
            if let Some(v) = self.get(key) {
                return v
                    .as_i64()
                    .filter(|&n| n > 0)
                    .map(Some)
                    .ok_or_else(|| Error::field(self.path, *key, format!("expected a positive integer, found {v}")));
            }
        }
        Ok(None)
    }

    fn req_int(&self, keys: &[&str]) -> Result<i64> {
        self.int(keys)?.ok_or_else(|| Error::field(self.path, keys[0], "missing (expected a positive integer)"))
    }

    fn float(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| Error::field(self.path, key, format!("expected a number, found {v}"))),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => {
                v.as_bool().ok_or_else(|| Error::field(self.path, key, format!("expected true or false, found {v}")))
            }
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A token id, or the first of a list of them.
    fn token_id(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::Array(a) => a.first().and_then(Value::as_i64),
            v => v.as_i64(),
        }
    }
}

/// The family a config names, by `model_type`, else by `architectures`.
pub(crate) fn family_of(path: &Path, v: &Value) -> Result<Family> {
    let j = Json { path, v };
    if let Some(t) = j.str("model_type") {
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
        j.get("architectures").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
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
        let text = crate::files::read_to_string(path)?;
        let v: Value = serde_json::from_str(&text).map_err(|e| Error::json(path, &e))?;
        Self::from_json(path, &v)
    }

    /// Validates a parsed `config.json` (of a multimodal Gemma 3: its text model's).
    pub(crate) fn from_json(path: &Path, v: &Value) -> Result<Self> {
        if let Some(text) = gemma3_text_config(path, v)? {
            return Ok(DecoderConfig { multimodal: true, ..Self::from_json(path, &text)? });
        }
        let family = family_of(path, v)?;
        let j = Json { path, v };
        if j.bool("use_bidirectional_attention", false)? {
            return Err(Error::field(
                path,
                "use_bidirectional_attention",
                "true: an embedding model's bidirectional attention, not a causal LM",
            ));
        }
        let gemma = matches!(family, Family::Gemma2 | Family::Gemma3);
        let bloom = family == Family::Bloom;
        let hidden_size = j.req_int(&["hidden_size", "n_embed"])?;
        let num_heads = j.req_int(&["num_attention_heads", "n_head"])?;
        let num_layers = j.req_int(&["num_hidden_layers", "n_layer"])?;
        let num_kv_heads = if bloom { num_heads } else { j.int(&["num_key_value_heads"])?.unwrap_or(num_heads) };
        if num_heads % num_kv_heads != 0 {
            return Err(Error::field(
                path,
                "num_key_value_heads",
                format!("{num_kv_heads} does not divide num_attention_heads {num_heads}"),
            ));
        }
        let head_dim = match j.int(&["head_dim"])? {
            Some(d) if !bloom => d,
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
        let intermediate_size = if bloom { 4 * hidden_size } else { j.req_int(&["intermediate_size"])? };
        let act_name = j.str("hidden_activation").or_else(|| j.str("hidden_act"));
        let activation = match (bloom, act_name) {
            (true, _) => Activation::GeluTanh,
            (false, None) if gemma => Activation::GeluTanh,
            (false, None) => Activation::Silu,
            (false, Some("silu" | "swish")) => Activation::Silu,
            (false, Some("gelu_pytorch_tanh" | "gelu_new" | "gelu_fast")) => Activation::GeluTanh,
            (false, Some("gelu")) => Activation::Gelu,
            (false, Some(other)) => {
                return Err(Error::field(
                    path,
                    "hidden_act",
                    format!("`{other}` is not supported (silu, gelu, gelu_pytorch_tanh)"),
                ))
            }
        };
        let attn_scale = match j.float("query_pre_attn_scalar")? {
            Some(s) if gemma => positive(&j, "query_pre_attn_scalar", s)?.powf(-0.5),
            _ => (head_dim as f64).powf(-0.5),
        };
        let layer_types = layer_types(&j, family, num_layers)?;
        let sliding_window = j.int(&["sliding_window"])?;
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
            let rope = if bloom { None } else { Some(rope_of(&j, family, kind)?) };
            layers.push(LayerKind { window: if sliding { sliding_window } else { None }, rope });
        }
        let default_bias = family == Family::Qwen2;
        let attention_bias = j.bool("attention_bias", false)?;
        let tie_default = gemma || bloom;
        let softcap = |key: &str| -> Result<Option<f64>> {
            Ok(if family == Family::Gemma2 || family == Family::Gemma3 {
                j.float(key)?.filter(|c| *c > 0.0)
            } else {
                None
            })
        };
        Ok(DecoderConfig {
            path: path.to_path_buf(),
            family,
            vocab_size: j.req_int(&["vocab_size"])?,
            hidden_size,
            intermediate_size,
            num_heads,
            num_kv_heads,
            head_dim,
            layers,
            norm_eps: {
                let key = if bloom { "layer_norm_epsilon" } else { "rms_norm_eps" };
                positive(&j, key, j.float(key)?.unwrap_or(1e-6))?
            },
            max_positions: if bloom { None } else { j.int(&["max_position_embeddings"])? },
            tie_word_embeddings: j.bool("tie_word_embeddings", tie_default)?,
            qkv_bias: bloom || default_bias || attention_bias,
            o_bias: bloom || (!default_bias && attention_bias),
            mlp_bias: bloom || j.bool("mlp_bias", false)?,
            activation,
            attn_scale,
            attn_softcap: softcap("attn_logit_softcapping")?,
            final_softcap: softcap("final_logit_softcapping")?,
            bos_token_id: j.token_id("bos_token_id"),
            eos_token_id: j.token_id("eos_token_id"),
            multimodal: false,
        })
    }
}

/// Each layer's type (`full_attention` or `sliding_attention`): `layer_types` when given, else
/// transformers' default for the family.
fn layer_types(j: &Json, family: Family, n: i64) -> Result<Vec<String>> {
    if let Some(v) = j.get("layer_types") {
        let types: Vec<String> =
            v.as_array().map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect()).unwrap_or_default();
        if types.len() as i64 != n || types.iter().any(|t| t != "full_attention" && t != "sliding_attention") {
            return Err(Error::field(
                j.path,
                "layer_types",
                format!("expected {n} entries, each \"full_attention\" or \"sliding_attention\", found {v}"),
            ));
        }
        return Ok(types);
    }
    let has_window = j.get("sliding_window").is_some();
    let sliding = |i: i64| -> bool {
        match family {
            Family::Mistral => has_window,
            Family::Qwen2 | Family::Qwen3 => {
                let max_window_layers = j.get("max_window_layers").and_then(Value::as_i64).unwrap_or(n);
                has_window
                    && j.get("use_sliding_window").and_then(Value::as_bool).unwrap_or(false)
                    && i >= max_window_layers
            }
            Family::Gemma2 => (i + 1) % 2 != 0,
            Family::Gemma3 => {
                let pattern = ["sliding_window_pattern", "_sliding_window_pattern"]
                    .iter()
                    .find_map(|k| j.get(k).and_then(Value::as_i64))
                    .unwrap_or(6)
                    .max(1);
                (i + 1) % pattern != 0
            }
            Family::Olmo3 => (i + 1) % 4 != 0,
            Family::Llama | Family::Olmo2 | Family::Bloom => false,
        }
    };
    Ok((0..n).map(|i| if sliding(i) { "sliding_attention" } else { "full_attention" }.to_string()).collect())
}

/// The rotary embedding of layers of type `kind`.
/// `value` of `field` when it is a positive number (a RoPE base, a scaling factor, an epsilon):
/// zero or a negative value would give NaN or infinite scores rather than an error.
fn positive(j: &Json, field: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        return Ok(value);
    }
    Err(Error::field(j.path, field, format!("expected a positive number, found {value}")))
}

fn rope_of(j: &Json, family: Family, kind: &str) -> Result<Rope> {
    // transformers 5: `rope_parameters`, per layer type for some families.
    if let Some(params) = j.get("rope_parameters") {
        let per_type = params.get(kind).filter(|p| p.is_object());
        let p = per_type.unwrap_or(params);
        let field = if per_type.is_some() { format!("rope_parameters.{kind}") } else { "rope_parameters".into() };
        let theta = p
            .get("rope_theta")
            .and_then(Value::as_f64)
            .ok_or_else(|| Error::field(j.path, format!("{field}.rope_theta"), "missing or not a number"))?;
        let theta = positive(j, &format!("{field}.rope_theta"), theta)?;
        return Ok(Rope { theta, scaling: scaling_of(j, &field, p)? });
    }
    // Older configs: `rope_theta`, `rope_scaling`; Gemma 3's sliding layers use `rope_local_base_freq`
    // and no scaling.
    let default_theta = match family {
        Family::Gemma3 => 1_000_000.0,
        Family::Olmo3 => 500_000.0,
        _ => 10_000.0,
    };
    if family == Family::Gemma3 && kind == "sliding_attention" {
        let theta = positive(j, "rope_local_base_freq", j.float("rope_local_base_freq")?.unwrap_or(10_000.0))?;
        return Ok(Rope { theta, scaling: RopeScaling::Default });
    }
    let theta = positive(j, "rope_theta", j.float("rope_theta")?.unwrap_or(default_theta))?;
    let scaling = match j.get("rope_scaling") {
        None => RopeScaling::Default,
        Some(s) => scaling_of(j, "rope_scaling", s)?,
    };
    Ok(Rope { theta, scaling })
}

fn scaling_of(j: &Json, field: &str, p: &Value) -> Result<RopeScaling> {
    let kind = p.get("rope_type").or_else(|| p.get("type")).and_then(Value::as_str).unwrap_or("default");
    let num = |key: &str| -> Result<f64> {
        let value = p
            .get(key)
            .and_then(Value::as_f64)
            .ok_or_else(|| Error::field(j.path, format!("{field}.{key}"), "missing or not a number"))?;
        positive(j, &format!("{field}.{key}"), value)
    };
    Ok(match kind {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear { factor: num("factor")? },
        "llama3" => RopeScaling::Llama3 {
            factor: num("factor")?,
            low_freq_factor: num("low_freq_factor")?,
            high_freq_factor: num("high_freq_factor")?,
            original: num("original_max_position_embeddings")?,
        },
        // Dynamic NTK changes the frequencies only for sequences longer than the model's
        // positions, which indolm refuses before scoring: within them it is the default.
        "dynamic" => {
            num("factor")?;
            RopeScaling::Default
        }
        "yarn" => {
            let factor = num("factor")?;
            let optional = |key: &str| -> Result<Option<f64>> {
                match p.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(_) => num(key).map(Some),
                }
            };
            let mscale = |scale: f64, m: f64| if scale <= 1.0 { 1.0 } else { 0.1 * m * scale.ln() + 1.0 };
            let attention_factor =
                match (optional("attention_factor")?, optional("mscale")?, optional("mscale_all_dim")?) {
                    (Some(a), _, _) => a,
                    (None, Some(m), Some(all)) => mscale(factor, m) / mscale(factor, all),
                    _ => mscale(factor, 1.0),
                };
            RopeScaling::Yarn {
                factor,
                original: num("original_max_position_embeddings")?,
                beta_fast: optional("beta_fast")?.unwrap_or(32.0),
                beta_slow: optional("beta_slow")?.unwrap_or(1.0),
                attention_factor,
                truncate: p.get("truncate").and_then(Value::as_bool).unwrap_or(true),
            }
        }
        other => {
            return Err(Error::field(
                j.path,
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
        let err = parse(json!({"model_type": "gpt2"})).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "config.json: field `model_type`: `gpt2` is not a supported causal LM (supported: llama, mistral"
            ),
            "{err}"
        );
        let err = parse(json!({"architectures": ["GPT2LMHeadModel"]})).unwrap_err().to_string();
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
}
