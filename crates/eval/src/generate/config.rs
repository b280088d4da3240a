//! A model's generation defaults as transformers reads them: `generation_config.json` (what
//! `GenerationConfig.from_pretrained` loads), its EOS ids falling back to `config.json`'s (a list
//! allowed in both), and transformers' own defaults for what neither sets (greedy; when sampling,
//! temperature 1, top_k 50, top_p 1). What generation_config.json sets that indolm does not apply
//! (a repetition penalty, beams, a length counting the prompt) is listed, to be shown as notes.
use indolm_torch::error::{Error, IoContext, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The temperature when sampling and neither the command nor the model sets one (transformers').
pub const DEFAULT_TEMPERATURE: f64 = 1.0;
/// `top_k` when sampling and neither the command nor the model sets one (transformers').
pub const DEFAULT_TOP_K: usize = 50;
/// `top_p` when sampling and neither the command nor the model sets one (transformers').
pub const DEFAULT_TOP_P: f64 = 1.0;
/// New tokens at most when neither the command nor the model sets `max_new_tokens`
/// (transformers' own default, `max_length` 20, counts the prompt's tokens too).
pub const DEFAULT_MAX_NEW_TOKENS: usize = 256;

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

/// A JSON file's fields with getters whose errors name the file and the field.
struct Fields<'a> {
    path: &'a Path,
    v: &'a Value,
}

impl Fields<'_> {
    /// The field, `None` when absent or null.
    fn get(&self, key: &str) -> Option<&Value> {
        self.v.get(key).filter(|v| !v.is_null())
    }

    /// Token ids: one, or a list of them.
    fn ids(&self, key: &str) -> Result<Option<Vec<i64>>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let wrong = || Error::field(self.path, key, format!("expected a token id or a list of them, found {v}"));
        match v {
            Value::Array(items) => items.iter().map(|x| x.as_i64().ok_or_else(wrong)).collect::<Result<_>>().map(Some),
            _ => v.as_i64().map(|id| Some(vec![id])).ok_or_else(wrong),
        }
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

    fn count(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(|n| Some(n as usize))
                .ok_or_else(|| Error::field(self.path, key, format!("expected a non-negative integer, found {v}"))),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| Error::field(self.path, key, format!("expected true or false, found {v}"))),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>> {
        let Some(v) = self.get(key) else { return Ok(Vec::new()) };
        let wrong = || Error::field(self.path, key, format!("expected a string or a list of strings, found {v}"));
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(items) => items.iter().map(|x| x.as_str().map(String::from).ok_or_else(wrong)).collect(),
            _ => Err(wrong()),
        }
    }
}

/// The JSON object in `path`, `None` when the file does not exist.
fn read_object(path: &Path) -> Result<Option<Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_path(path)?;
    let v: Value = serde_json::from_str(&text).map_err(|e| Error::json(path, &e))?;
    if !v.is_object() {
        return Err(Error::invalid(path, "expected a JSON object"));
    }
    Ok(Some(v))
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
            let g = Fields { path, v };
            out.eos = g.ids("eos_token_id")?.unwrap_or_default();
            out.pad = g.ids("pad_token_id")?.and_then(|ids| ids.first().copied());
            out.do_sample = g.bool("do_sample")?.unwrap_or(false);
            out.temperature = g.float("temperature")?;
            out.top_k = g.count("top_k")?;
            out.top_p = g.float("top_p")?;
            out.max_new_tokens = g.count("max_new_tokens")?;
            out.stop_strings = g.strings("stop_strings")?;
            out.not_applied = not_applied(&g);
            out.source = Some(path.clone());
        }
        if out.eos.is_empty() || out.pad.is_none() {
            if let Some(v) = read_object(config_json)? {
                // A multimodal config (Gemma 3's) may keep its ids in text_config.
                let text = v.get("text_config").filter(|t| t.is_object());
                for v in std::iter::once(&v).chain(text) {
                    let c = Fields { path: config_json, v };
                    if out.eos.is_empty() {
                        out.eos = c.ids("eos_token_id")?.unwrap_or_default();
                    }
                    if out.pad.is_none() {
                        out.pad = c.ids("pad_token_id")?.and_then(|ids| ids.first().copied());
                    }
                }
            }
        }
        Ok(out)
    }
}

/// What `g` sets that indolm does not apply, a sentence each.
fn not_applied(g: &Fields) -> Vec<String> {
    let file = g.path.display();
    let mut out = Vec::new();
    for &(key, neutral) in NOT_APPLIED {
        if let Some(v) = g.get(key).filter(|v| v.as_f64() != Some(neutral)) {
            out.push(format!("{file}: `{key}` {v} is not applied by indolm's generation"));
        }
    }
    for &key in NOT_APPLIED_WHEN_SET {
        if let Some(v) = g.get(key) {
            out.push(format!("{file}: `{key}` {v} is not applied by indolm's generation"));
        }
    }
    if let (Some(v), None) = (g.get("max_length"), g.get("max_new_tokens")) {
        out.push(format!(
            "{file}: `max_length` {v} (prompt and new tokens together) is not applied: \
             max_new_tokens bounds the new tokens"
        ));
    }
    out
}
