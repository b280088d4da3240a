//! Prompt files and completion records, both JSON Lines. A prompt line is an object with a
//! `"prompt"` string and an `"id"` (any JSON value; the line number when absent or null; two lines
//! may not share one); other fields are ignored and blank lines skipped. A record is
//! `{"id", "prompt", "completion", "tokens", "stop_reason"}`, one a prompt in the prompts' order.
use super::{encode, Completion, StopReason};
use crate::error::{Error, Result};
use crate::model::decoder::CausalLm;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// What a prompt line looks like, for messages.
const LINE_FORMAT: &str = "each line is {\"id\": ..., \"prompt\": \"...\"}";

/// One prompt of a prompt file.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptLine {
    /// Its line in the file (1-based).
    pub line: usize,
    /// Its id (the line number when the line has none).
    pub id: Value,
    /// Its text.
    pub prompt: String,
}

/// The type of a JSON value, for messages.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The prompts of the JSON Lines file `path`; an error names the file and the line.
pub fn read_prompts(path: &Path) -> Result<Vec<PromptLine>> {
    let text = crate::files::read_to_string(path)?;
    let mut prompts = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| Error::invalid(path, format!("line {n}: {message}"));
        let v: Value = serde_json::from_str(line).map_err(|e| {
            let message = e.to_string();
            let message = message.split(" at line ").next().unwrap_or_default();
            at(format!("not JSON ({message}, column {}); {LINE_FORMAT}", e.column()))
        })?;
        let kind = kind_of(&v);
        let Value::Object(fields) = v else {
            return Err(at(format!("{kind} where an object was expected; {LINE_FORMAT}")));
        };
        let prompt = match fields.get("prompt") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(at(format!("\"prompt\" is {}, not a string", kind_of(other)))),
            None => return Err(at(format!("no \"prompt\" field; {LINE_FORMAT}"))),
        };
        let id = fields.get("id").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| Value::from(n));
        if let Some(first) = ids.insert(id.to_string(), n) {
            return Err(at(format!("the id {id} is line {first}'s too (ids name the completions)")));
        }
        prompts.push(PromptLine { line: n, id, prompt });
    }
    if prompts.is_empty() {
        return Err(Error::invalid(path, format!("no prompts: the file is empty or blank ({LINE_FORMAT})")));
    }
    Ok(prompts)
}

/// The prompts' token ids as transformers' `tokenizer(prompt)` gives them ([`encode`]); an error
/// names the line of a prompt with no tokens, or one that leaves no room for `max_new_tokens` in
/// the model's positions.
pub fn tokenize(lm: &CausalLm, path: &Path, prompts: &[PromptLine], max_new_tokens: usize) -> Result<Vec<Vec<i64>>> {
    let mut out = Vec::with_capacity(prompts.len());
    for p in prompts {
        let at = |message: String| Error::invalid(path, format!("line {}: {message}", p.line));
        let ids = encode(lm, &p.prompt)?;
        if ids.is_empty() {
            return Err(at(format!("the prompt {} has no tokens", crate::files::quoted(&p.prompt))));
        }
        if let Some(max) = lm.config.max_positions {
            if (ids.len() + max_new_tokens) as i64 > max {
                return Err(at(format!(
                    "the prompt has {} tokens: with {max_new_tokens} new ones that passes the model's {max} positions \
                     (config.json's max_position_embeddings)",
                    ids.len()
                )));
            }
        }
        out.push(ids);
    }
    Ok(out)
}

/// One completion record.
#[derive(Debug, serde::Serialize)]
pub struct Record<'a> {
    /// The prompt's id.
    pub id: &'a Value,
    /// The prompt.
    pub prompt: &'a str,
    /// Its completion's text.
    pub completion: &'a str,
    /// The completion's new tokens (an EOS that ended it counted).
    pub tokens: usize,
    /// Why it ended.
    pub stop_reason: StopReason,
}

/// The records of `completions` of `prompts` as JSON Lines, in order.
pub fn records(prompts: &[PromptLine], completions: &[Completion]) -> Result<String> {
    let mut out = String::new();
    for (p, c) in prompts.iter().zip(completions) {
        let record =
            Record { id: &p.id, prompt: &p.prompt, completion: &c.text, tokens: c.tokens(), stop_reason: c.stop };
        let line = serde_json::to_string(&record)
            .map_err(|e| Error::data("completion records", format!("line {}: {e}", p.line)))?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}
