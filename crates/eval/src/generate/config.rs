//! A model's generation defaults as transformers reads them: `generation_config.json` (what
//! `GenerationConfig.from_pretrained` loads), its EOS ids falling back to `config.json`'s (a list
//! allowed in both), and transformers' own defaults for what neither sets (greedy; when sampling,
//! temperature 1, top_k 50, top_p 1). What generation_config.json sets that indolm does not apply
//! (a repetition penalty, beams, a length counting the prompt) is listed, to be shown as notes.
use indolm_core::json_fields::{self, Count, Flag, Number, Strings, TokenIds};
use indolm_torch::error::Result;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The temperature when sampling and neither the command nor the model sets one (transformers').
pub(crate) const DEFAULT_TEMPERATURE: f64 = 1.0;
/// `top_k` when sampling and neither the command nor the model sets one (transformers').
pub(crate) const DEFAULT_TOP_K: usize = 50;
/// `top_p` when sampling and neither the command nor the model sets one (transformers').
pub(crate) const DEFAULT_TOP_P: f64 = 1.0;
/// New tokens at most when neither the command nor the model sets `max_new_tokens`
/// (transformers' own default, `max_length` 20, counts the prompt's tokens too).
pub(crate) const DEFAULT_MAX_NEW_TOKENS: usize = 256;

/// Settings transformers applies when they differ from these values, which indolm does not.
const NOT_APPLIED: &[(&str, f64)] = &[
    ("repetition_penalty", 1.0),
    ("encoder_repetition_penalty", 1.0),
    ("no_repeat_ngram_size", 0.0),
    ("min_length", 0.0),
    ("min_new_tokens", 0.0),
    ("num_beams", 1.0),
    ("num_return_sequences", 1.0),
    ("typical_p", 1.0),
    ("epsilon_cutoff", 0.0),
    ("eta_cutoff", 0.0),
];

/// Settings transformers applies whenever they are set, which indolm does not.
const NOT_APPLIED_WHEN_SET: &[&str] = &[
    "min_p",
    "top_h",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "sequence_bias",
    "penalty_alpha",
    "max_time",
];

/// What a model directory says about generation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDefaults {
    /// The generation_config.json read, if any.
    pub source: Option<PathBuf>,
    /// End-of-sequence ids: generation_config.json's `eos_token_id`, else config.json's.
    pub eos: Vec<i64>,
    /// `pad_token_id`: generation_config.json's, else config.json's.
    pub pad: Option<i64>,
    /// `do_sample` (false when absent: greedy).
    pub do_sample: bool,
    /// `temperature`.
    pub temperature: Option<f64>,
    /// `top_k`.
    pub top_k: Option<usize>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `max_new_tokens`.
    pub max_new_tokens: Option<usize>,
    /// `stop_strings` (one string or a list).
    pub stop_strings: Vec<String>,
    /// What generation_config.json sets that indolm does not apply, a sentence each.
    pub not_applied: Vec<String>,
}

/// The fields of `generation_config.json` indolm applies (`None` when absent or `null`).
#[derive(Debug, Deserialize)]
struct GenerationFields {
    eos_token_id: Option<TokenIds>,
    pad_token_id: Option<TokenIds>,
    do_sample: Option<Flag>,
    temperature: Option<Number>,
    top_k: Option<Count>,
    top_p: Option<Number>,
    max_new_tokens: Option<Count>,
    stop_strings: Option<Strings>,
}

/// The ids generation falls back to in `config.json` (or in its `text_config`).
#[derive(Debug, Deserialize)]
struct ModelIds {
    eos_token_id: Option<TokenIds>,
    pad_token_id: Option<TokenIds>,
}

/// The JSON object in `path`, `None` when the file does not exist.
fn read_object(path: &Path) -> Result<Option<Value>> {
    if !path.exists() {
        return Ok(None);
    }
    json_fields::read_object(path).map(Some)
}

/// The first of token ids.
fn first(ids: Option<TokenIds>) -> Option<i64> {
    ids.and_then(|ids| ids.0.first().copied())
}

impl GenerationDefaults {
    /// The generation_config.json of the first of `dirs` that has one (an adapter's folder, then
    /// its base model's), with `config_json` (the model's config.json) for the EOS and pad ids it
    /// lacks. Neither file is required; a field of the wrong type is an error naming it.
    pub fn read(dirs: &[&Path], config_json: &Path) -> Result<Self> {
        let mut out = GenerationDefaults::default();
        let found = dirs.iter().map(|d| d.join("generation_config.json")).find(|p| p.exists());
        let generation = match &found {
            Some(path) => read_object(path)?,
            None => None,
        };
        if let (Some(path), Some(v)) = (&found, &generation) {
            let g: GenerationFields = json_fields::from_value(path, v)?;
            out.eos = g.eos_token_id.map(|ids| ids.0).unwrap_or_default();
            out.pad = first(g.pad_token_id);
            out.do_sample = g.do_sample.is_some_and(|b| b.0);
            out.temperature = g.temperature.map(|t| t.0);
            out.top_k = g.top_k.map(|k| k.0);
            out.top_p = g.top_p.map(|p| p.0);
            out.max_new_tokens = g.max_new_tokens.map(|n| n.0);
            out.stop_strings = g.stop_strings.map(|s| s.0).unwrap_or_default();
            out.not_applied = not_applied(path, v);
            out.source = Some(path.clone());
        }
        if out.eos.is_empty() || out.pad.is_none() {
            if let Some(v) = read_object(config_json)? {
                // A multimodal config (Gemma 3's) may keep its ids in text_config.
                let text = v.get("text_config").filter(|t| t.is_object()).map(|t| ("text_config", t));
                for (at, v) in std::iter::once(("", &v)).chain(text) {
                    let c: ModelIds = json_fields::from_value_at(config_json, at, v)?;
                    if out.eos.is_empty() {
                        out.eos = c.eos_token_id.map(|ids| ids.0).unwrap_or_default();
                    }
                    if out.pad.is_none() {
                        out.pad = first(c.pad_token_id);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// What `g` (the object of generation_config.json at `path`) sets that indolm does not apply, a
/// sentence each.
fn not_applied(path: &Path, g: &Value) -> Vec<String> {
    let file = path.display();
    let mut out = Vec::new();
    for &(key, neutral) in NOT_APPLIED {
        if let Some(v) = set(g, key).filter(|v| v.as_f64() != Some(neutral)) {
            out.push(format!("{file}: `{key}` {v} is not applied by indolm's generation"));
        }
    }
    for &key in NOT_APPLIED_WHEN_SET {
        if let Some(v) = set(g, key) {
            out.push(format!("{file}: `{key}` {v} is not applied by indolm's generation"));
        }
    }
    if let (Some(v), None) = (set(g, "max_length"), set(g, "max_new_tokens")) {
        out.push(format!(
            "{file}: `max_length` {v} (prompt and new tokens together) is not applied: \
             max_new_tokens bounds the new tokens"
        ));
    }
    out
}

/// The field `key` of `g`, `None` when absent or null.
fn set<'a>(g: &'a Value, key: &str) -> Option<&'a Value> {
    g.get(key).filter(|v| !v.is_null())
}
