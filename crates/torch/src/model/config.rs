//! `BertConfig`: the model's hyper-parameters, read from and written to HF's `config.json`
//! with the same field names, so any HF BERT directory loads and ours load in transformers.
use crate::error::{Error, Result};
use indolm_core::files::read_to_string;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Activation functions of the feed-forward block and the MLM head transform (HF `hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// Exact GELU (erf), HF `"gelu"`.
    Gelu,
    /// Tanh approximation, HF `"gelu_new"` and `"gelu_pytorch_tanh"`.
    GeluTanh,
    /// HF `"relu"`.
    Relu,
    /// HF `"silu"` / `"swish"`.
    Silu,
}

impl Activation {
    /// The `hidden_act` values `parse` accepts.
    pub(crate) const NAMES: &'static [&'static str] =
        &["gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish"];

    /// The activation HF calls `name`, or `None` if indolm does not implement it.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            "silu" | "swish" => Activation::Silu,
            _ => return None,
        })
    }

    /// Applies the activation elementwise.
    pub(crate) fn apply(self, x: &tch::Tensor) -> tch::Tensor {
        match self {
            Activation::Gelu => x.gelu("none"),
            Activation::GeluTanh => x.gelu("tanh"),
            Activation::Relu => x.relu(),
            Activation::Silu => x.silu(),
        }
    }
}

fn default_act() -> String {
    "gelu".into()
}
fn default_dropout() -> f64 {
    0.1
}
fn default_eps() -> f64 {
    1e-12
}
fn default_init_range() -> f64 {
    0.02
}
fn default_type_vocab() -> i64 {
    2
}
fn default_positions() -> i64 {
    512
}
fn default_pos_type() -> String {
    "absolute".into()
}
fn default_model_type() -> String {
    "bert".into()
}

/// HF `BertConfig`. Keys we do not use are kept in `extra` and written back unchanged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BertConfig {
    /// Rows of the word-embedding table (at least the tokenizer's vocabulary).
    pub vocab_size: i64,
    /// Width of the hidden states.
    pub hidden_size: i64,
    /// Encoder layers.
    pub num_hidden_layers: i64,
    /// Attention heads; must divide `hidden_size`.
    pub num_attention_heads: i64,
    /// Inner width of the feed-forward block.
    pub intermediate_size: i64,
    /// Activation name (see `Activation::NAMES`); default `gelu`.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// Dropout on embeddings and sublayer outputs, in [0, 1); default 0.1.
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    /// Dropout on attention probabilities, in [0, 1); default 0.1.
    #[serde(default = "default_dropout")]
    pub attention_probs_dropout_prob: f64,
    /// Positions, i.e. the longest input in tokens; default 512.
    #[serde(default = "default_positions")]
    pub max_position_embeddings: i64,
    /// Token types (segments); default 2.
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: i64,
    /// Standard deviation of the normal initialisation; default 0.02.
    #[serde(default = "default_init_range")]
    pub initializer_range: f64,
    /// LayerNorm epsilon; default 1e-12.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// Id of `[PAD]`, whose embedding row starts at zero; default 0.
    #[serde(default)]
    pub pad_token_id: i64,
    /// Only `absolute` is supported.
    #[serde(default = "default_pos_type")]
    pub position_embedding_type: String,
    /// HF's `model_type`: `bert`, or `xlm-roberta` / `roberta` for the RoBERTa family (BERT's
    /// network with positions offset past the padding id, see [`BertConfig::position_offset`]);
    /// written back as read.
    #[serde(default = "default_model_type")]
    pub model_type: String,
    /// Every other key of `config.json`, written back unchanged.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl BertConfig {
    /// IndoBERT-base / BERT-base sizes with the given vocabulary.
    pub fn base(vocab_size: i64) -> Self {
        Self::new(vocab_size, 768, 12, 12, 3072)
    }

    /// The given sizes with HF's defaults for the rest (GELU, dropout 0.1, 512 positions, 2 token
    /// types, initialiser 0.02, eps 1e-12, `[PAD]` 0).
    pub fn new(vocab_size: i64, hidden: i64, layers: i64, heads: i64, intermediate: i64) -> Self {
        BertConfig {
            vocab_size,
            hidden_size: hidden,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            intermediate_size: intermediate,
            hidden_act: default_act(),
            hidden_dropout_prob: 0.1,
            attention_probs_dropout_prob: 0.1,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            initializer_range: 0.02,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: default_pos_type(),
            model_type: default_model_type(),
            extra: Default::default(),
        }
    }

    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = read_to_string(path)?;
        let config: BertConfig = serde_json::from_str(&text).map_err(|e| Error::json(path, &e))?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks the values that would otherwise fail deep inside libtorch.
    pub fn validate(&self, path: &Path) -> Result<()> {
        if !matches!(self.model_type.as_str(), "bert" | "roberta" | "xlm-roberta") {
            let causal =
                super::decoder::config::family_of(path, &serde_json::json!({"model_type": self.model_type})).is_ok();
            let message = if causal {
                format!(
                    "`{}` is a causal LM, and this command needs a masked LM (bert, roberta, xlm-roberta); causal LMs are scored by `eval pll`, `eval bias` and `eval indommlu`",
                    self.model_type
                )
            } else {
                format!("`{}` is not a supported masked LM (supported: bert, roberta, xlm-roberta)", self.model_type)
            };
            return Err(Error::field(path, "model_type", message));
        }
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return Err(Error::field(path, name, format!("expected a positive integer, found {value}")));
            }
        }
        if self.hidden_size % self.num_attention_heads != 0 {
            return Err(Error::field(
                path,
                "num_attention_heads",
                format!("hidden_size {} is not divisible by {} heads", self.hidden_size, self.num_attention_heads),
            ));
        }
        if Activation::parse(&self.hidden_act).is_none() {
            return Err(Error::field(
                path,
                "hidden_act",
                format!("unknown activation {:?}, expected one of {:?}", self.hidden_act, Activation::NAMES),
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(Error::field(
                path,
                "position_embedding_type",
                format!("only \"absolute\" is supported, found {:?}", self.position_embedding_type),
            ));
        }
        for (name, p) in [
            ("hidden_dropout_prob", self.hidden_dropout_prob),
            ("attention_probs_dropout_prob", self.attention_probs_dropout_prob),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(Error::field(path, name, format!("expected a probability in [0, 1), found {p}")));
            }
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(Error::field(
                path,
                "layer_norm_eps",
                format!("expected a positive number, found {}", self.layer_norm_eps),
            ));
        }
        if self.pad_token_id < 0 || self.pad_token_id >= self.vocab_size {
            return Err(Error::field(
                path,
                "pad_token_id",
                format!("{} is outside the vocabulary of {}", self.pad_token_id, self.vocab_size),
            ));
        }
        if let Some(pad) = self.position_offset() {
            if self.max_position_embeddings <= pad + 1 {
                return Err(Error::field(
                    path,
                    "max_position_embeddings",
                    format!(
                        "{} leaves no position for {:?}, whose positions start at pad_token_id + 1 = {}",
                        self.max_position_embeddings,
                        self.model_type,
                        pad + 1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether this is a RoBERTa-family encoder (`model_type` `xlm-roberta` or `roberta`): BERT's
    /// layers under HF's `roberta.*` / `lm_head.*` names, with positions counted from
    /// `pad_token_id + 1`.
    pub fn is_roberta(&self) -> bool {
        matches!(self.model_type.as_str(), "xlm-roberta" | "roberta")
    }

    /// For the RoBERTa family, the padding id its position ids are offset by (transformers'
    /// `create_position_ids_from_input_ids`: real tokens at `pad + 1 ..`, padding at `pad`);
    /// `None` for BERT (positions `0..seq`).
    pub(crate) fn position_offset(&self) -> Option<i64> {
        self.is_roberta().then_some(self.pad_token_id)
    }

    /// The parsed `hidden_act`; panics on an unknown name, so only call it on a validated config.
    pub(crate) fn activation(&self) -> Activation {
        Activation::parse(&self.hidden_act).expect("validated in from_file/validate")
    }

    /// Width of one attention head: `hidden_size / num_attention_heads`.
    pub fn head_dim(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }

    /// The `config.json` text that transformers' `BertForMaskedLM` loads.
    pub fn to_hf_json(&self) -> String {
        self.to_hf_json_as("BertForMaskedLM", serde_json::Map::new())
    }

    /// `config.json` for another architecture, with extra keys (e.g. `id2label`).
    pub fn to_hf_json_as(&self, architecture: &str, extra: serde_json::Map<String, serde_json::Value>) -> String {
        let mut c = self.clone();
        let architecture = if self.is_roberta() {
            // The same heads under the family's class names (XLMRobertaForMaskedLM …).
            let family = if self.model_type == "roberta" { "Roberta" } else { "XLMRoberta" };
            architecture.strip_prefix("Bert").map_or(architecture.to_string(), |rest| format!("{family}{rest}"))
        } else {
            c.model_type = "bert".into();
            architecture.to_string()
        };
        c.extra.insert("architectures".into(), serde_json::json!([architecture]));
        c.extra.extend(extra);
        serde_json::to_string_pretty(&c).expect("config serializes") + "\n"
    }

    /// Training FLOPs per input token (forward and backward, 3x the forward's matrix products):
    /// the encoder's dense layers and attention at `seq_len`, and the MLM head at the
    /// `predicted_fraction` of positions where indolm computes it. Elementwise work is not
    /// counted; this is the "useful" FLOP figure behind MFU.
    pub fn training_flops_per_token(&self, seq_len: usize, predicted_fraction: f64) -> f64 {
        let (h, ff, v) = (self.hidden_size as f64, self.intermediate_size as f64, self.vocab_size as f64);
        let per_layer = 2.0 * (4.0 * h * h + 2.0 * h * ff) + 2.0 * 2.0 * seq_len as f64 * h;
        let head = predicted_fraction * (2.0 * h * h + 2.0 * h * v);
        3.0 * (self.num_hidden_layers as f64 * per_layer + head)
    }

    /// Parameter count of encoder + embeddings (no heads), for reports.
    pub fn encoder_parameters(&self) -> i64 {
        let h = self.hidden_size;
        let emb = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h;
        let layer = 4 * (h * h + h) + 2 * (h * self.intermediate_size) + self.intermediate_size + h + 4 * h;
        emb + self.num_hidden_layers * layer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> BertConfig {
        BertConfig::new(100, 64, 2, 4, 128)
    }

    fn error_of(change: impl FnOnce(&mut BertConfig)) -> String {
        let mut c = tiny();
        change(&mut c);
        c.validate(Path::new("config.json")).expect_err("invalid").to_string()
    }

    #[test]
    fn every_accepted_activation_name_parses() {
        for name in Activation::NAMES {
            assert!(Activation::parse(name).is_some(), "{name}");
        }
        assert_eq!(Activation::parse("gelu"), Some(Activation::Gelu));
        assert_eq!(Activation::parse("gelu_pytorch_tanh"), Some(Activation::GeluTanh));
        assert_eq!(Activation::parse("swish"), Some(Activation::Silu));
        assert_eq!(Activation::parse("GELU"), None, "names are case-sensitive, as in HF");
        assert_eq!(Activation::parse("gelu_fast"), None);
    }

    #[test]
    fn validation_names_the_field_and_the_value() {
        assert!(tiny().validate(Path::new("config.json")).is_ok());
        assert_eq!(
            error_of(|c| c.vocab_size = 0),
            "config.json: field `vocab_size`: expected a positive integer, found 0"
        );
        assert_eq!(
            error_of(|c| c.num_attention_heads = 3),
            "config.json: field `num_attention_heads`: hidden_size 64 is not divisible by 3 heads"
        );
        assert_eq!(
            error_of(|c| c.hidden_act = "gelu_fast".into()),
            "config.json: field `hidden_act`: unknown activation \"gelu_fast\", expected one of \
             [\"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\", \"relu\", \"silu\", \"swish\"]"
        );
        assert_eq!(
            error_of(|c| c.position_embedding_type = "relative_key".into()),
            "config.json: field `position_embedding_type`: only \"absolute\" is supported, found \"relative_key\""
        );
        assert_eq!(
            error_of(|c| c.attention_probs_dropout_prob = 1.0),
            "config.json: field `attention_probs_dropout_prob`: expected a probability in [0, 1), found 1"
        );
        assert!(error_of(|c| c.hidden_dropout_prob = -0.1).contains("`hidden_dropout_prob`"));
        assert_eq!(
            error_of(|c| c.pad_token_id = 100),
            "config.json: field `pad_token_id`: 100 is outside the vocabulary of 100"
        );
        // Zero heads is caught as non-positive before the division by it.
        assert!(error_of(|c| c.num_attention_heads = 0).contains("expected a positive integer, found 0"));
    }

    #[test]
    fn a_minimal_config_json_takes_the_defaults_of_new_and_keeps_unknown_keys() {
        let text = r#"{"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "torch_dtype": "float32"}"#;
        let mut parsed: BertConfig = serde_json::from_str(text).unwrap();
        assert_eq!(parsed.extra.remove("torch_dtype"), Some(serde_json::json!("float32")));
        assert_eq!(parsed, tiny());
        // Written back with the architecture, parsed back equal (the architecture kept as extra).
        let json: BertConfig = serde_json::from_str(&tiny().to_hf_json()).unwrap();
        assert_eq!(json.extra.get("architectures"), Some(&serde_json::json!(["BertForMaskedLM"])));
        assert!(tiny().to_hf_json().ends_with("}\n"));
    }

    #[test]
    fn sizes_by_hand() {
        assert_eq!(tiny().head_dim(), 16);
        assert_eq!(BertConfig::base(30522).head_dim(), 64);
        // BERT-base without pooler: 108,891,648 parameters (transformers' BertModel has 109,482,240
        // with its 768 × 768 + 768 pooler).
        assert_eq!(BertConfig::base(30522).encoder_parameters(), 108_891_648);
        // h 2, ff 4, vocab 10, one layer, 3 positions, half the positions predicted:
        // layer 2·(4·4 + 2·2·4) + 2·2·3·2 = 88, head 0.5·(2·4 + 2·2·10) = 24, ×3 = 336.
        let c = BertConfig::new(10, 2, 1, 1, 4);
        assert_eq!(c.training_flops_per_token(3, 0.5), 336.0);
    }
}
