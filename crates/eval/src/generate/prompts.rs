//! Prompt files and completion records, both JSON Lines. A prompt line is an object with a
//! `"prompt"` string and an `"id"` (any JSON value; the line number when absent or null; two lines
//! may not share one); other fields are ignored and blank lines skipped. A chat prompt line
//! ([`read_chat_prompts`]) holds `"messages"` (`[{"role": ..., "content": ...}, ...]`) or a
//! `"prompt"`, taken as one user message. A record is `{"id", "prompt", "completion", "tokens",
//! "stop_reason"}`, one a prompt in the prompts' order; a chat record
//! ([`chat_records`]) is `{"id", "prompt" or "messages", "rendered", "completion", "tokens",
//! "stop_reason"}`, `rendered` the text the chat template made of it.
use super::chat::{self, ChatTemplate, Messages, TemplateKwargs};
use super::{encode, Completion, StopReason};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::CausalLm;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// What a prompt line looks like, for messages.
const LINE_FORMAT: &str = "each line is {\"id\": ..., \"prompt\": \"...\"}";
/// What a chat prompt line looks like, for messages.
const CHAT_LINE_FORMAT: &str =
    "each line is {\"id\": ..., \"messages\": [{\"role\": \"user\", \"content\": \"...\"}]} \
     or {\"id\": ..., \"prompt\": \"...\"}";

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

/// One prompt of a chat prompt file.
#[derive(Debug, Clone)]
pub(crate) struct ChatLine {
    /// Its line in the file (1-based).
    pub line: usize,
    /// Its id (the line number when the line has none).
    pub id: Value,
    /// What it gives.
    pub input: ChatInput,
}

/// What a chat prompt line gives.
#[derive(Debug, Clone)]
pub(crate) enum ChatInput {
    /// A `"prompt"`: one user message.
    Prompt(String),
    /// `"messages"`: a conversation.
    Messages(Messages),
}

impl ChatLine {
    /// The conversation the template renders: the line's messages, or its prompt as one user
    /// message, after a system message of `system` when given (an error when the line has one
    /// of its own).
    pub(crate) fn conversation(&self, system: Option<&str>) -> std::result::Result<Messages, String> {
        let messages = match &self.input {
            ChatInput::Prompt(prompt) => Messages::user(prompt),
            ChatInput::Messages(messages) => messages.clone(),
        };
        match system {
            Some(system) => messages.with_system(system),
            None => Ok(messages),
        }
    }
}

/// The type of a JSON value, for messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The lines of the JSON Lines file `path` as (line number, id, what `content` makes of the line's
/// fields and text); an error names the file and the line, `format` saying what a line looks like.
fn read_lines<T>(
    path: &Path,
    format: &str,
    mut content: impl FnMut(&Map<String, Value>, &str) -> std::result::Result<T, String>,
) -> Result<Vec<(usize, Value, T)>> {
    let text = indolm_core::files::read_to_string(path)?;
    let mut lines = Vec::new();
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
            at(format!("not JSON ({message}, column {}); {format}", e.column()))
        })?;
        let kind = kind_of(&v);
        let Value::Object(fields) = v else {
            return Err(at(format!("{kind} where an object was expected; {format}")));
        };
        let item = content(&fields, line).map_err(at)?;
        let id = fields.get("id").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| Value::from(n));
        if let Some(first) = ids.insert(id.to_string(), n) {
            return Err(at(format!("the id {id} is line {first}'s too (ids name the completions)")));
        }
        lines.push((n, id, item));
    }
    if lines.is_empty() {
        return Err(Error::invalid(path, format!("no prompts: the file is empty or blank ({format})")));
    }
    Ok(lines)
}

/// The prompts of the JSON Lines file `path`; an error names the file and the line.
pub fn read_prompts(path: &Path) -> Result<Vec<PromptLine>> {
    let lines = read_lines(path, LINE_FORMAT, |fields, _| match fields.get("prompt") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("\"prompt\" is {}, not a string", kind_of(other))),
        None => Err(format!("no \"prompt\" field; {LINE_FORMAT}")),
    })?;
    Ok(lines.into_iter().map(|(line, id, prompt)| PromptLine { line, id, prompt }).collect())
}

/// The chat prompts of the JSON Lines file `path`: each line's `"messages"` (fields kept in
/// their order) or `"prompt"`; an error names the file and the line.
pub(crate) fn read_chat_prompts(path: &Path) -> Result<Vec<ChatLine>> {
    let lines = read_lines(path, CHAT_LINE_FORMAT, |fields, line| {
        let messages = fields.get("messages").filter(|v| !v.is_null());
        match (messages, fields.get("prompt").filter(|v| !v.is_null())) {
            (Some(_), Some(_)) => Err("both \"messages\" and \"prompt\": give one".to_string()),
            (Some(_), None) => Messages::from_line(line).map(ChatInput::Messages),
            (None, Some(Value::String(s))) => Ok(ChatInput::Prompt(s.clone())),
            (None, Some(other)) => Err(format!("\"prompt\" is {}, not a string", kind_of(other))),
            (None, None) => Err(format!("no \"messages\" or \"prompt\" field; {CHAT_LINE_FORMAT}")),
        }
    })?;
    Ok(lines.into_iter().map(|(line, id, input)| ChatLine { line, id, input }).collect())
}

/// Refuses a prompt (`what`, shown in messages) with no tokens, or one that leaves no room for
/// `max_new_tokens` in the model's positions.
fn check_length(lm: &CausalLm, ids: &[i64], max_new_tokens: usize, what: &str) -> std::result::Result<(), String> {
    if ids.is_empty() {
        return Err(format!("{what} has no tokens"));
    }
    if let Some(max) = lm.config.max_positions {
        if (ids.len() + max_new_tokens) as i64 > max {
            return Err(format!(
                "the prompt has {} tokens: with {max_new_tokens} new ones that passes the model's {max} positions \
                 (config.json's max_position_embeddings)",
                ids.len()
            ));
        }
    }
    Ok(())
}

/// The prompts' token ids as transformers' `tokenizer(prompt)` gives them ([`encode`]); an error
/// names the line of a prompt with no tokens, or one that leaves no room for `max_new_tokens` in
/// the model's positions.
pub fn tokenize(lm: &CausalLm, path: &Path, prompts: &[PromptLine], max_new_tokens: usize) -> Result<Vec<Vec<i64>>> {
    let mut out = Vec::with_capacity(prompts.len());
    for p in prompts {
        let ids = encode(lm, &p.prompt)?;
        let what = format!("the prompt {}", indolm_core::files::quoted(&p.prompt));
        check_length(lm, &ids, max_new_tokens, &what)
            .map_err(|message| Error::invalid(path, format!("line {}: {message}", p.line)))?;
        out.push(ids);
    }
    Ok(out)
}

/// The chat prompts rendered by `template` with `kwargs`, each after a system message of `system`
/// when given; an error (the template's `raise_exception` among them) names the line.
pub(crate) fn render_chat(
    template: &ChatTemplate,
    path: &Path,
    lines: &[ChatLine],
    system: Option<&str>,
    kwargs: &TemplateKwargs,
) -> Result<Vec<String>> {
    lines
        .iter()
        .map(|l| {
            let at = |message: String| Error::invalid(path, format!("line {}: {message}", l.line));
            let conversation = l.conversation(system).map_err(at)?;
            template.render(&conversation, kwargs).map_err(|e| at(e.to_string()))
        })
        .collect()
}

/// The rendered chat prompts' token ids as `apply_chat_template(..., tokenize=True)` gives them
/// ([`chat::encode`]: no special tokens added); an error names the line of a prompt with no
/// tokens, or one that leaves no room for `max_new_tokens` in the model's positions.
pub(crate) fn tokenize_chat(
    lm: &CausalLm,
    path: &Path,
    lines: &[ChatLine],
    rendered: &[String],
    max_new_tokens: usize,
) -> Result<Vec<Vec<i64>>> {
    let mut out = Vec::with_capacity(lines.len());
    for (l, text) in lines.iter().zip(rendered) {
        let ids = chat::encode(&lm.tokenizer, text)?;
        let what = format!("the rendered prompt {}", indolm_core::files::quoted(text));
        check_length(lm, &ids, max_new_tokens, &what)
            .map_err(|message| Error::invalid(path, format!("line {}: {message}", l.line)))?;
        out.push(ids);
    }
    Ok(out)
}

/// One completion record.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Record<'a> {
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

/// One completion record of a chat prompt.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ChatRecord<'a> {
    /// The prompt's id.
    pub id: &'a Value,
    /// The line's prompt, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<&'a str>,
    /// The line's messages, when it gave them (as given: without `--system`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<&'a Messages>,
    /// The text the chat template made of the conversation: what was tokenized.
    pub rendered: &'a str,
    /// Its completion's text.
    pub completion: &'a str,
    /// The completion's new tokens (an EOS that ended it counted).
    pub tokens: usize,
    /// Why it ended.
    pub stop_reason: StopReason,
}

/// `records` as JSON Lines, each with its line number for errors.
fn json_lines<T: serde::Serialize>(records: impl Iterator<Item = (usize, T)>) -> Result<String> {
    let mut out = String::new();
    for (line, record) in records {
        let text = serde_json::to_string(&record)
            .map_err(|e| Error::data("completion records", format!("line {line}: {e}")))?;
        out.push_str(&text);
        out.push('\n');
    }
    Ok(out)
}

/// The records of `completions` of `prompts` as JSON Lines, in order.
pub fn records(prompts: &[PromptLine], completions: &[Completion]) -> Result<String> {
    json_lines(prompts.iter().zip(completions).map(|(p, c)| {
        let record =
            Record { id: &p.id, prompt: &p.prompt, completion: &c.text, tokens: c.tokens(), stop_reason: c.stop };
        (p.line, record)
    }))
}

/// The records of `completions` of the chat prompts `lines` (rendered as `rendered`) as JSON
/// Lines, in order.
pub(crate) fn chat_records(lines: &[ChatLine], rendered: &[String], completions: &[Completion]) -> Result<String> {
    json_lines(lines.iter().zip(rendered).zip(completions).map(|((l, text), c)| {
        let (prompt, messages) = match &l.input {
            ChatInput::Prompt(prompt) => (Some(prompt.as_str()), None),
            ChatInput::Messages(messages) => (None, Some(messages)),
        };
        let record = ChatRecord {
            id: &l.id,
            prompt,
            messages,
            rendered: text,
            completion: &c.text,
            tokens: c.tokens(),
            stop_reason: c.stop,
        };
        (l.line, record)
    }))
}
