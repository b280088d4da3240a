//! An encoder-decoder's `config.json` (T5 or mT5), read as transformers 5's `T5Config` and
//! `MT5Config` read it: each class's defaults for absent fields, the feed-forward activation and
//! gating from `feed_forward_proj` (`gated-gelu` is `gelu_new`) unless `dense_act_fn` and
//! `is_gated_act` say otherwise, and T5's scaling of the decoder output before a tied head.
use crate::error::{Error, Result};
use indolm_core::json_fields::{self, AtLeastInt, Flag, NonNegativeNumber, Text, TokenId};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The encoder-decoder families indolm loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seq2SeqFamily {
    /// T5 (`T5ForConditionalGeneration`): T5 1.0 (relu, tied head) and 1.1 (gated-gelu).
    T5,
    /// mT5 and mT0 (`MT5ForConditionalGeneration`).
    Mt5,
}

impl Seq2SeqFamily {
    /// Its `model_type`.
    pub fn name(self) -> &'static str {
        match self {
            Seq2SeqFamily::T5 => "t5",
            Seq2SeqFamily::Mt5 => "mt5",
        }
    }

    /// The family `config.json` names by `model_type`, or by `architectures` without one; `None`
    /// for any other model.
    pub fn of(v: &Value) -> Option<Self> {
        match v.get("model_type").and_then(Value::as_str) {
            Some("t5") => Some(Seq2SeqFamily::T5),
            Some("mt5") => Some(Seq2SeqFamily::Mt5),
            Some(_) => None,
            None => {
                let archs = v.get("architectures").and_then(Value::as_array).into_iter().flatten();
                archs.filter_map(Value::as_str).find_map(|a| match a {
                    "T5ForConditionalGeneration" => Some(Seq2SeqFamily::T5),
                    "MT5ForConditionalGeneration" => Some(Seq2SeqFamily::Mt5),
                    _ => None,
                })
            }
        }
    }
}

/// The feed-forward activations of transformers' `ACT2FN` that T5 configurations name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedForwardAct {
    /// `relu` (T5 1.0).
    Relu,
    /// `gelu`: the exact (erf) GELU.
    Gelu,
    /// `gelu_new` (mT5's `gated-gelu`): the tanh approximation written out as transformers'
    /// `NewGELUActivation` computes it.
    GeluNew,
    /// `gelu_pytorch_tanh`: torch's fused tanh approximation.
    GeluTanh,
    /// `silu` or `swish`.
    Silu,
}

impl FeedForwardAct {
    /// The activation as transformers' `ACT2FN` computes it.
    pub(crate) fn apply(self, x: &tch::Tensor) -> tch::Tensor {
        match self {
            FeedForwardAct::Relu => x.relu(),
            FeedForwardAct::Gelu => x.gelu("none"),
            FeedForwardAct::GeluTanh => x.gelu("tanh"),
            FeedForwardAct::Silu => x.silu(),
            // NewGELUActivation: 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), op for op.
            FeedForwardAct::GeluNew => {
                let inner = (x + x.pow_tensor_scalar(3.0) * 0.044715) * (2.0 / std::f64::consts::PI).sqrt();
                (x * 0.5) * (inner.tanh() + 1.0)
            }
        }
    }

    /// The activation `name` names, if indolm computes it.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "relu" => FeedForwardAct::Relu,
            "gelu" => FeedForwardAct::Gelu,
            "gelu_new" => FeedForwardAct::GeluNew,
            "gelu_pytorch_tanh" => FeedForwardAct::GeluTanh,
            "silu" | "swish" => FeedForwardAct::Silu,
            _ => return None,
        })
    }
}

/// What the network needs from `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Seq2SeqConfig {
    /// The file it was read from.
    pub path: PathBuf,
    /// T5 or mT5.
    pub family: Seq2SeqFamily,
    /// Rows of the embedding table and of the head.
    pub vocab_size: i64,
    /// The width of the residual stream.
    pub d_model: i64,
    /// The width of one attention head.
    pub d_kv: i64,
    /// The width of the feed-forward layer.
    pub d_ff: i64,
    /// Encoder blocks.
    pub num_layers: i64,
    /// Decoder blocks.
    pub num_decoder_layers: i64,
    /// Attention heads.
    pub num_heads: i64,
    /// Relative-position buckets (half each way in the encoder).
    pub relative_attention_num_buckets: i64,
    /// Distances from this on share the last bucket.
    pub relative_attention_max_distance: i64,
    /// The epsilon of the RMS norms.
    pub layer_norm_epsilon: f64,
    /// The feed-forward activation.
    pub act: FeedForwardAct,
    /// Whether the feed-forward layer is gated (`wi_0`, `wi_1`) or not (`wi`).
    pub gated: bool,
    /// Whether the decoder's output is multiplied by d_model^-0.5 before the head (T5 with a
    /// tied head; never mT5 in transformers 5).
    pub scale_decoder_outputs: bool,
    /// The padding token.
    pub pad_token_id: i64,
    /// The token the decoder's input starts with when labels are shifted right (`None` when
    /// the config has none: transformers' `_shift_right` then refuses).
    pub decoder_start_token_id: Option<i64>,
}

/// The fields of `config.json` the network reads, each `None` when absent or `null` (the class's
/// default then).
#[derive(Debug, Deserialize)]
struct Fields {
    vocab_size: Option<AtLeastInt<1>>,
    d_model: Option<AtLeastInt<1>>,
    d_kv: Option<AtLeastInt<1>>,
    d_ff: Option<AtLeastInt<1>>,
    num_layers: Option<AtLeastInt<1>>,
    num_decoder_layers: Option<AtLeastInt<1>>,
    num_heads: Option<AtLeastInt<1>>,
    // Halved each way in the encoder: at least 4 keep exact buckets in both halves.
    relative_attention_num_buckets: Option<AtLeastInt<4>>,
    relative_attention_max_distance: Option<AtLeastInt<1>>,
    layer_norm_epsilon: Option<NonNegativeNumber>,
    feed_forward_proj: Option<Text>,
    dense_act_fn: Option<Text>,
    is_gated_act: Option<Flag>,
    scale_decoder_outputs: Option<Flag>,
    tie_word_embeddings: Option<Flag>,
    pad_token_id: Option<TokenId>,
    /// `None` when absent, `Some(None)` when `null` (MT5Config's default differs between them).
    #[serde(default, deserialize_with = "json_fields::present")]
    decoder_start_token_id: Option<Option<TokenId>>,
}

impl Seq2SeqConfig {
    /// Reads and checks `path`.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_json(path, &json_fields::read_object(path)?)
    }

    /// Checks a parsed `config.json`, with `T5Config`'s or `MT5Config`'s defaults.
    pub(crate) fn from_json(path: &Path, v: &Value) -> Result<Self> {
        let family = Seq2SeqFamily::of(v).ok_or_else(|| {
            Error::field(
                path,
                "model_type",
                "expected t5 or mt5 (or architectures naming T5 or MT5ForConditionalGeneration)",
            )
        })?;
        let f: Fields = json_fields::from_value(path, v)?;
        let int = |field: Option<AtLeastInt<1>>, default: i64| field.map_or(default, |n| n.0);
        let mt5 = family == Seq2SeqFamily::Mt5;
        let num_layers = int(f.num_layers, if mt5 { 8 } else { 6 });
        let proj = f.feed_forward_proj.as_ref().map_or(if mt5 { "gated-gelu" } else { "relu" }, |t| t.0.as_str());
        let parts: Vec<&str> = proj.split('-').collect();
        if parts.len() > 2 || (parts.len() == 2 && parts[0] != "gated") {
            return Err(Error::field(path, "feed_forward_proj", format!("`{proj}`: expected `ACT` or `gated-ACT`")));
        }
        let named_act = if proj == "gated-gelu" { "gelu_new" } else { parts[parts.len() - 1] };
        let act_field = if f.dense_act_fn.is_some() { "dense_act_fn" } else { "feed_forward_proj" };
        let act_name = f.dense_act_fn.as_ref().map_or(named_act, |t| t.0.as_str());
        let act = FeedForwardAct::parse(act_name).ok_or_else(|| {
            Error::field(
                path,
                act_field,
                format!("activation `{act_name}` is not supported (relu, gelu, gelu_new, gelu_pytorch_tanh, silu)"),
            )
        })?;
        let gated = f.is_gated_act.map_or(parts[0] == "gated" && parts.len() == 2, |b| b.0);
        // T5Config: scaled unless config.json says tie_word_embeddings false (a saved
        // scale_decoder_outputs wins); MT5ForConditionalGeneration never scales.
        let scale_decoder_outputs = match family {
            Seq2SeqFamily::Mt5 => false,
            Seq2SeqFamily::T5 => match f.scale_decoder_outputs {
                Some(s) => s.0,
                None => f.tie_word_embeddings.map(|b| b.0) != Some(false),
            },
        };
        Ok(Seq2SeqConfig {
            path: path.to_path_buf(),
            family,
            vocab_size: int(f.vocab_size, if mt5 { 250_112 } else { 32_128 }),
            d_model: int(f.d_model, 512),
            d_kv: int(f.d_kv, 64),
            d_ff: int(f.d_ff, if mt5 { 1024 } else { 2048 }),
            num_layers,
            num_decoder_layers: int(f.num_decoder_layers, num_layers),
            num_heads: int(f.num_heads, if mt5 { 6 } else { 8 }),
            relative_attention_num_buckets: f.relative_attention_num_buckets.map_or(32, |n| n.0),
            relative_attention_max_distance: int(f.relative_attention_max_distance, 128),
            layer_norm_epsilon: f.layer_norm_epsilon.map_or(1e-6, |e| e.0),
            act,
            gated,
            scale_decoder_outputs,
            pad_token_id: f.pad_token_id.map_or(0, |t| t.0),
            // MT5Config's default is 0; T5Config has none (an explicit null is none for both).
            decoder_start_token_id: match f.decoder_start_token_id {
                None if mt5 => Some(0),
                given => given.flatten().map(|t| t.0),
            },
        })
    }

    /// The id every label sequence is shifted right behind, or an error naming the field.
    pub fn decoder_start(&self) -> Result<i64> {
        self.decoder_start_token_id.ok_or_else(|| {
            Error::field(
                &self.path,
                "decoder_start_token_id",
                "missing: the decoder's labels are shifted right behind it (T5's is usually the pad token, 0)",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<Seq2SeqConfig> {
        Seq2SeqConfig::from_json(Path::new("config.json"), &v)
    }

    #[test]
    fn mt5_and_t5_take_their_classes_defaults_and_scaling_rules() {
        let mt5 = read(json!({"model_type": "mt5", "tie_word_embeddings": false, "d_model": 64})).unwrap();
        assert_eq!((mt5.act, mt5.gated, mt5.scale_decoder_outputs), (FeedForwardAct::GeluNew, true, false));
        assert_eq!((mt5.num_layers, mt5.num_decoder_layers, mt5.num_heads, mt5.d_ff), (8, 8, 6, 1024));
        assert_eq!(mt5.decoder_start_token_id, Some(0));
        // transformers 5's MT5ForConditionalGeneration never scales, whatever the config says.
        assert!(!read(json!({"model_type": "mt5", "tie_word_embeddings": true})).unwrap().scale_decoder_outputs);
        let t5 = read(json!({"architectures": ["T5ForConditionalGeneration"], "num_layers": 2})).unwrap();
        assert_eq!(
            (t5.family, t5.act, t5.gated, t5.scale_decoder_outputs),
            (Seq2SeqFamily::T5, FeedForwardAct::Relu, false, true)
        );
        assert_eq!((t5.num_decoder_layers, t5.decoder_start_token_id), (2, None));
        assert!(t5.decoder_start().unwrap_err().to_string().contains("field `decoder_start_token_id`: missing"));
        let v11 = read(json!({"model_type": "t5", "tie_word_embeddings": false, "feed_forward_proj": "gated-gelu"}));
        let v11 = v11.unwrap();
        assert_eq!((v11.act, v11.gated, v11.scale_decoder_outputs), (FeedForwardAct::GeluNew, true, false));
        // A config saved by transformers 5 says tie_word_embeddings true and scale_decoder_outputs.
        let saved = read(json!({"model_type": "t5", "tie_word_embeddings": true, "scale_decoder_outputs": false}));
        assert!(!saved.unwrap().scale_decoder_outputs);
        // dense_act_fn and is_gated_act, when saved, win over feed_forward_proj.
        let over = read(json!({"model_type": "mt5", "dense_act_fn": "relu", "is_gated_act": false})).unwrap();
        assert_eq!((over.act, over.gated), (FeedForwardAct::Relu, false));
    }

    #[test]
    fn unusable_fields_are_named() {
        let err = read(json!({"model_type": "t5", "feed_forward_proj": "double-gated-gelu"})).unwrap_err().to_string();
        assert!(err.contains("field `feed_forward_proj`"), "{err}");
        let err = read(json!({"model_type": "t5", "feed_forward_proj": "gated-mish"})).unwrap_err().to_string();
        assert!(err.contains("field `feed_forward_proj`") && err.contains("`mish`"), "{err}");
        let err = read(json!({"model_type": "t5", "d_model": "wide"})).unwrap_err().to_string();
        assert!(err.contains("field `d_model`"), "{err}");
        let err = read(json!({"model_type": "bert"})).unwrap_err().to_string();
        assert!(err.contains("field `model_type`"), "{err}");
    }
}
