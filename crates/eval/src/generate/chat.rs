//! Chat templates: a model folder's Jinja chat template rendered as transformers'
//! `tokenizer.apply_chat_template(messages, add_generation_prompt=True, **kwargs)` renders it.
//!
//! The template is found where transformers' tokenizer finds it ([`ChatTemplate::from_dir`]):
//! `chat_template.jinja`, with named templates in `additional_chat_templates/`, which take
//! precedence over `tokenizer_config.json`'s `chat_template` (a string, or a list of
//! `{"name", "template"}`); of several, `tool_use` when tools are passed, else `default`. It is
//! rendered with minijinja set up as transformers' sandboxed Jinja2 environment: `trim_blocks`,
//! `lstrip_blocks`, Jinja2's loop controls, its `{% generation %}` tag (which only marks what the
//! assistant wrote), `raise_exception` (an error naming the template and its message),
//! `strftime_now`, a `tojson` that writes what Python's `json.dumps` writes with transformers'
//! defaults (minijinja's own escapes HTML and spaces differently), Python's string and dict methods
//! (`.strip()`, `.split()`, `.startswith()`, `.items()`, `.get()`: minijinja-contrib's pycompat)
//! and `{{ value }}` printed as Python's `str` prints it (`None`, `True`, `1e-05`, `['a']`).
//!
//! The template sees the tokenizer's special tokens (`bos_token`, `eos_token`, ... and the
//! model's own `*_token`s), the kwargs ([`TemplateKwargs`]: `enable_thinking`, `date_string`,
//! ...), `messages` (a message's null fields dropped and its reasoning copied to `thinking` and
//! `reasoning_content`, as transformers does), `tools`, `documents` and `add_generation_prompt`
//! (true). The rendered text is tokenized without adding special tokens ([`encode`]): the template
//! writes the BOS itself.
//!
//! A template is code from the model folder, so it runs bounded: a template of more than
//! [`MAX_TEMPLATE_BYTES`] is refused before it is parsed; a render may run [`RENDER_FUEL`]
//! instructions (minijinja's fuel), write [`MAX_RENDERED_BYTES`] and hold
//! [`RENDER_MEMORY_BYTES`] of values at a time (on a thread of its own,
//! [`indolm_core::memory_budget`]); past any of them it stops with one line naming the template file.
use indolm_torch::error::{Error, IoContext, Result};
use indolm_torch::model::decoder::adapter::Adapter;
use indolm_torch::model::decoder::CausalTokenizer;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error as TemplateError, ErrorKind, Output, State};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest chat template read, in bytes: minijinja's parse holds about 100 times a template's
/// size, and real templates are under 20 KB (the paper's nine: 0.3 to 7.8 KB).
pub(crate) const MAX_TEMPLATE_BYTES: usize = 1 << 20;
/// The instructions one render may run (minijinja's fuel). The paper's nine templates take at most
/// 398 on conversations of four messages with tools (Qwen3.5's; about 100 a message, measured by
/// this module's tests); this allows 25,000 times that (a conversation of some 100,000 messages)
/// and stops an endless loop in about a second.
pub(crate) const RENDER_FUEL: u64 = 10_000_000;
/// The longest rendered prompt, in bytes: 16 MiB, some 30 times a 128k-token context window.
pub(crate) const MAX_RENDERED_BYTES: usize = 16 << 20;
/// The memory one render may hold at a time, in bytes: its values (strings grown by `~`, `+`,
/// filters and captures) and its output, the messages it reads not counted.
pub(crate) const RENDER_MEMORY_BYTES: usize = 256 << 20;

/// The template file transformers' tokenizer reads before `tokenizer_config.json`'s.
pub(crate) const CHAT_TEMPLATE_FILE: &str = "chat_template.jinja";
/// The folder of named templates beside it (`tool_use.jinja`, ...).
pub(crate) const CHAT_TEMPLATE_DIR: &str = "additional_chat_templates";
/// The tokenizer's configuration: its special tokens and, without the files above, the template.
const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// Older special tokens, read when tokenizer_config.json has no `added_tokens_decoder`.
const SPECIAL_TOKENS_MAP: &str = "special_tokens_map.json";
/// A processor's template, which transformers' tokenizer does not read.
const PROCESSOR_CHAT_TEMPLATE: &str = "chat_template.json";
/// The special tokens transformers passes to every template (`SPECIAL_TOKENS_ATTRIBUTES`).
const SPECIAL_TOKENS: [&str; 7] =
    ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
/// Where a message's reasoning may be, in transformers' order: the first one set is copied to
/// `thinking` and `reasoning_content`.
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];
/// Names `apply_chat_template` takes as its own parameters, never as template variables, and why
/// they cannot be given.
const RESERVED: [(&str, &str); 5] = [
    ("messages", "the messages come from the prompt"),
    ("add_generation_prompt", "indolm always renders with add_generation_prompt=True"),
    ("continue_final_message", "indolm always starts a new assistant message"),
    ("chat_template", "the template is the model folder's"),
    ("tokenize", "indolm tokenizes the rendered text itself"),
];

/// One template of a folder.
#[derive(Debug, Clone)]
struct Source {
    /// `default`, or a named template's name (`tool_use`).
    name: String,
    /// The file it was read from.
    path: PathBuf,
    /// What minijinja and the errors call it (`chat_template.jinja`).
    label: String,
}

/// A model folder's chat template, ready to render conversations.
pub struct ChatTemplate {
    /// The folder.
    dir: PathBuf,
    /// Its templates, each compiled into `env` under its label.
    sources: Vec<Source>,
    /// minijinja, set up as transformers' Jinja2 environment (shared with the render's thread).
    env: Arc<Environment<'static>>,
    /// The special tokens passed as variables: (name, text).
    special_tokens: Vec<(String, String)>,
    /// The memory a render may hold ([`RENDER_MEMORY_BYTES`]; less in tests).
    memory_budget: usize,
}

impl ChatTemplate {
    /// The chat template of the tokenizer in `dir`, as transformers' `AutoTokenizer.from_pretrained(dir)`
    /// finds it, with the special tokens its `tokenizer_config.json` (or, without an
    /// `added_tokens_decoder` there, `special_tokens_map.json`) names. A folder without a template
    /// is an error naming it; so is a template minijinja cannot parse.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::MissingFile {
                path: dir.to_path_buf(),
                hint: "a model folder with its tokenizer files was expected".into(),
            });
        }
        let config_path = dir.join(TOKENIZER_CONFIG);
        let config = read_object(&config_path)?;
        let templates = templates(dir, &config_path, config.as_ref())?;
        if templates.is_empty() {
            return Err(no_template(dir));
        }
        let special_tokens = special_tokens(dir, config.as_ref())?;
        let mut env = environment();
        let mut sources = Vec::with_capacity(templates.len());
        for (source, text) in templates {
            if text.len() > MAX_TEMPLATE_BYTES {
                return Err(too_large(&source.path, text.len()));
            }
            env.add_template_owned(source.label.clone(), without_generation_tags(&text)).map_err(|e| {
                Error::invalid(
                    &source.path,
                    format!("not a chat template indolm can read: {}", one_line(&e.to_string())),
                )
            })?;
            sources.push(source);
        }
        Ok(ChatTemplate {
            dir: dir.to_path_buf(),
            sources,
            env: Arc::new(env),
            special_tokens,
            memory_budget: RENDER_MEMORY_BYTES,
        })
    }

    /// The chat template of the causal LM in `dir`: its own, or for a LoRA adapter folder that of the
    /// folder its tokenizer comes from (the adapter's, else its base model's).
    pub(crate) fn for_model(dir: &Path) -> Result<Self> {
        let adapter = Adapter::open(dir)?;
        Self::from_dir(adapter.as_ref().map_or(dir, |a| a.tokenizer_dir()))
    }

    /// The file of the template used without tools (`chat_template.jinja`, `tokenizer_config.json`).
    pub fn source(&self) -> &Path {
        self.select(false).map_or(self.dir.as_path(), |s| s.path.as_path())
    }

    /// `messages` rendered as `apply_chat_template(messages, tokenize=False,
    /// add_generation_prompt=True, **kwargs)` renders them. The template's `raise_exception` is an
    /// error naming the template file and its message, in one line; so is a render past its
    /// bounds (fuel, output, memory).
    pub fn render(&self, messages: &Messages, kwargs: &TemplateKwargs) -> Result<String> {
        self.render_counted(messages, kwargs).map(|(text, _)| text)
    }

    /// [`ChatTemplate::render`], with the fuel the render took.
    fn render_counted(&self, messages: &Messages, kwargs: &TemplateKwargs) -> Result<(String, u64)> {
        let tools = kwargs.get("tools").filter(|v| !v.is_none());
        let source = self.select(tools.is_some())?;
        let mut context: Vec<(String, Value)> =
            self.special_tokens.iter().map(|(name, token)| (name.clone(), Value::from(token.as_str()))).collect();
        context.extend(kwargs.0.iter().filter(|(k, _)| k != "tools" && k != "documents").cloned());
        context.push(("messages".into(), messages.for_template()));
        context.push(("tools".into(), tools.cloned().unwrap_or_else(|| Value::from(()))));
        context.push(("documents".into(), kwargs.get("documents").cloned().unwrap_or_else(|| Value::from(()))));
        context.push(("add_generation_prompt".into(), Value::from(true)));
        let (env, label, context) = (Arc::clone(&self.env), source.label.clone(), Value::from_iter(context));
        match indolm_core::memory_budget::run_bounded(self.memory_budget, move || render_bounded(&env, &label, context)) {
            Ok(Ok(rendered)) => Ok(rendered),
            Ok(Err(RenderFailure::Template(e))) => Err(failed(source, &e)),
            Ok(Err(RenderFailure::TooLong)) => Err(Error::invalid(
                &source.path,
                format!("the chat template{} wrote more than {} MiB, the cap on a rendered prompt", which(source), MAX_RENDERED_BYTES >> 20),
            )),
            Err(indolm_core::memory_budget::Stopped::OverBudget(bytes)) => Err(Error::invalid(
                &source.path,
                format!(
                    "the chat template{} was stopped holding {} MiB of values, its memory budget (a string or list grown without bound)",
                    which(source),
                    bytes >> 20
                ),
            )),
            Err(indolm_core::memory_budget::Stopped::NoThread(e)) => {
                Err(Error::system("rendering the chat template", format!("no thread to render it on: {e}")))
            }
        }
    }

    /// The template to render: the only one, else `tool_use` with tools when there is one, else
    /// `default` (transformers' `get_chat_template`).
    fn select(&self, tools: bool) -> Result<&Source> {
        let named = |name: &str| self.sources.iter().find(|s| s.name == name);
        if tools {
            if let Some(source) = named("tool_use") {
                return Ok(source);
            }
        }
        named("default").ok_or_else(|| {
            let names: Vec<&str> = self.sources.iter().map(|s| s.name.as_str()).collect();
            Error::invalid(
                &self.dir,
                format!(
                    "{} chat templates ({}) and none named `default`: transformers renders one only when asked for it \
                     by name, which indolm does not",
                    names.len(),
                    names.join(", ")
                ),
            )
        })
    }
}

/// Why a render gave no text.
enum RenderFailure {
    /// minijinja's error, the template's `raise_exception` or its fuel running out among them.
    Template(TemplateError),
    /// The output passed [`MAX_RENDERED_BYTES`].
    TooLong,
}

/// Renders template `label` of `env` with `context` within [`RENDER_FUEL`] (set on the
/// environment) and [`MAX_RENDERED_BYTES`]: the text and the fuel it took.
fn render_bounded(
    env: &Environment<'static>,
    label: &str,
    context: Value,
) -> std::result::Result<(String, u64), RenderFailure> {
    let template = env.get_template(label).map_err(RenderFailure::Template)?;
    let mut out = CappedWriter { bytes: Vec::new(), over: false };
    let fuel = match template.render_captured_to(context, &mut out) {
        Ok(captured) => captured.state().fuel_levels().map_or(0, |(consumed, _)| consumed),
        Err(_) if out.over => return Err(RenderFailure::TooLong),
        Err(e) => return Err(RenderFailure::Template(e)),
    };
    // minijinja writes the UTF-8 of its strings, whole.
    let text = String::from_utf8(out.bytes)
        .map_err(|_| RenderFailure::Template(TemplateError::new(ErrorKind::WriteFailure, "the output is not UTF-8")))?;
    Ok((text, fuel))
}

/// The render's output, refusing to grow past [`MAX_RENDERED_BYTES`].
struct CappedWriter {
    /// What was written.
    bytes: Vec<u8>,
    /// Whether a write was refused.
    over: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_RENDERED_BYTES {
            self.over = true;
            return Err(std::io::Error::other("the rendered prompt passed its cap"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A named template's name for messages (` `tool_use``), nothing for the default one.
fn which(source: &Source) -> String {
    if source.name == "default" {
        String::new()
    } else {
        format!(" `{}`", source.name)
    }
}

/// The error of a template `path` of `size` bytes, past [`MAX_TEMPLATE_BYTES`].
fn too_large(path: &Path, size: usize) -> Error {
    Error::invalid(
        path,
        format!(
            "a chat template of {size} bytes, more than the {} KiB indolm parses (real templates are under 20 KB)",
            MAX_TEMPLATE_BYTES >> 10
        ),
    )
}

/// The error of a failed render: the template's own `raise_exception` message, its fuel running
/// out, or minijinja's.
fn failed(source: &Source, e: &TemplateError) -> Error {
    let which = which(source);
    if e.kind() == ErrorKind::OutOfFuel {
        return Error::invalid(
            &source.path,
            format!(
                "the chat template{which} ran out of its instruction budget ({RENDER_FUEL} minijinja instructions; real \
                 templates take about 100 a message): a loop that runs too long"
            ),
        );
    }
    match raised(e) {
        Some(message) => {
            Error::invalid(&source.path, format!("the chat template{which} raised an exception: {}", one_line(message)))
        }
        None => Error::invalid(&source.path, format!("the chat template{which} failed: {}", one_line(&e.to_string()))),
    }
}

/// The message of the `raise_exception` call behind `e`, if it is one.
fn raised(e: &TemplateError) -> Option<&str> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(Raised(message)) = err.downcast_ref::<Raised>() {
            return Some(message.as_str());
        }
        source = err.source();
    }
    None
}

/// `text` on one line: its lines joined by spaces.
fn one_line(text: &str) -> String {
    if text.contains(['\n', '\r']) {
        text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
    } else {
        text.to_string()
    }
}

/// The ids of a rendered chat prompt, as `apply_chat_template(..., tokenize=True)` gives them: the
/// text tokenized with `add_special_tokens=False`, so that a tokenizer which adds a BOS (Llama's,
/// Gemma's) does not add a second one before the template's.
pub fn encode(tokenizer: &CausalTokenizer, rendered: &str) -> Result<Vec<i64>> {
    tokenizer.encode(rendered)
}

// ---------------------------------------------------------------------------------------------
// Messages and kwargs.

/// A conversation to render: message objects in order, each with a string `role` (and usually a
/// `content`), their fields kept in the order they were given (what `tojson` of a message writes).
#[derive(Debug, Clone)]
pub struct Messages(Vec<Value>);

impl Messages {
    /// The conversation of a JSON list of messages (`[{"role": "user", "content": "..."}]`); an
    /// error says what is wrong with it.
    pub fn from_json(text: &str) -> std::result::Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {}", json_message(&e)))?;
        Self::from_value(value)
    }

    /// The conversation of a prompt line's `"messages"` field (the line already read as JSON).
    pub(crate) fn from_line(line: &str) -> std::result::Result<Self, String> {
        /// The field, read in its order.
        #[derive(serde::Deserialize)]
        struct Field {
            messages: Value,
        }
        let field: Field = serde_json::from_str(line).map_err(|e| format!("\"messages\": {}", json_message(&e)))?;
        Self::from_value(field.messages)
    }

    /// Checks `value` is a non-empty list of objects, each with a string `role`.
    fn from_value(value: Value) -> std::result::Result<Self, String> {
        if value.kind() != ValueKind::Seq {
            return Err(format!("\"messages\" is {}, not a list of messages", kind_name(&value)));
        }
        let messages: Vec<Value> = value.try_iter().map_err(|e| e.to_string())?.collect();
        if messages.is_empty() {
            return Err("\"messages\" is an empty list: a conversation needs a message".into());
        }
        for (i, message) in messages.iter().enumerate() {
            if message.kind() != ValueKind::Map {
                return Err(format!("message {} is {}, not an object", i + 1, kind_name(message)));
            }
            if role(message).is_none() {
                return Err(format!("message {} has no \"role\" string (\"user\", \"assistant\", ...)", i + 1));
            }
        }
        Ok(Messages(messages))
    }

    /// One user message: a plain prompt as a conversation.
    pub fn user(prompt: &str) -> Self {
        Messages(vec![message("user", prompt)])
    }

    /// This conversation after a system message of `system`; an error when it starts with a
    /// system message of its own.
    pub(crate) fn with_system(&self, system: &str) -> std::result::Result<Self, String> {
        if self.0.first().and_then(role).as_deref() == Some("system") {
            return Err("the conversation has a system message of its own, and --system would add a second".into());
        }
        Ok(Messages(std::iter::once(message("system", system)).chain(self.0.iter().cloned()).collect()))
    }

    /// The messages as the template sees them: transformers' `_normalize_chat_messages` (null
    /// fields dropped) and `_alias_reasoning_fields`.
    fn for_template(&self) -> Value {
        Value::from(self.0.iter().map(normalized).collect::<Vec<Value>>())
    }
}

impl serde::Serialize for Messages {
    /// The messages as they were given, fields in their order.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&self.0, serializer)
    }
}

/// A message of `role` with `content`.
fn message(role: &str, content: &str) -> Value {
    Value::from_iter([("role", Value::from(role)), ("content", Value::from(content))])
}

/// A message's role, if it is a string.
fn role(message: &Value) -> Option<String> {
    message.get_item(&Value::from("role")).ok().and_then(|r| r.as_str().map(str::to_string))
}

/// A field of `fields`.
fn field(fields: &[(Value, Value)], name: &str) -> Option<Value> {
    fields.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v.clone())
}

/// `message` without its null fields, its reasoning (the first of [`REASONING_FIELDS`] set) as
/// `{"thinking": reasoning, **message, "reasoning_content": reasoning}` would put it.
fn normalized(message: &Value) -> Value {
    let Ok(keys) = message.try_iter() else { return message.clone() };
    let fields: Vec<(Value, Value)> = keys
        .filter_map(|key| {
            let value = message.get_item(&key).ok()?;
            (!value.is_none() && !value.is_undefined()).then_some((key, value))
        })
        .collect();
    let Some(reasoning) = REASONING_FIELDS.iter().find_map(|name| field(&fields, name)) else {
        return Value::from_iter(fields);
    };
    let thinking = field(&fields, "thinking").unwrap_or_else(|| reasoning.clone());
    let mut out = vec![(Value::from("thinking"), thinking)];
    for (key, value) in &fields {
        match key.as_str() {
            Some("thinking") => {}
            Some("reasoning_content") => out.push((key.clone(), reasoning.clone())),
            _ => out.push((key.clone(), value.clone())),
        }
    }
    if field(&fields, "reasoning_content").is_none() {
        out.push((Value::from("reasoning_content"), reasoning));
    }
    Value::from_iter(out)
}

/// The template variables given beside the messages (`--template-kwarg KEY=VALUE`): what
/// `apply_chat_template(..., **kwargs)` passes on (`enable_thinking=False`, `date_string=...`),
/// `tools` and `documents` as those parameters. A later value of a name replaces an earlier one.
#[derive(Debug, Clone, Default)]
pub struct TemplateKwargs(Vec<(String, Value)>);

impl TemplateKwargs {
    /// The kwargs of a JSON object (`{"enable_thinking": false}`), in its order.
    pub fn from_json(text: &str) -> std::result::Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {}", json_message(&e)))?;
        if value.kind() != ValueKind::Map {
            return Err(format!("template kwargs are a JSON object, not {}", kind_name(&value)));
        }
        let mut kwargs = TemplateKwargs::default();
        for key in value.try_iter().map_err(|e| e.to_string())? {
            let item = value.get_item(&key).map_err(|e| e.to_string())?;
            kwargs.set_value(&key.to_string(), item)?;
        }
        Ok(kwargs)
    }

    /// Sets `key` to the JSON text `value`; an error says why it cannot be a template variable.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        let parsed: Value = serde_json::from_str(value).map_err(|e| {
            format!(
                "the value of `{key}`, {}, is not JSON ({}): write a string in double quotes (KEY='\"text\"'), \
                 true, false and null in lower case",
                indolm_core::files::quoted(value),
                json_message(&e)
            )
        })?;
        self.set_value(key, parsed)
    }

    /// Sets a `KEY=VALUE` flag, VALUE JSON (`enable_thinking=false`).
    pub fn set_flag(&mut self, flag: &str) -> std::result::Result<(), String> {
        let (key, value) = flag
            .split_once('=')
            .ok_or_else(|| format!("{} is not KEY=VALUE (VALUE in JSON)", indolm_core::files::quoted(flag)))?;
        self.set(key.trim(), value)
    }

    /// Sets `key` to `value`, refusing what `apply_chat_template` would refuse.
    fn set_value(&mut self, key: &str, value: Value) -> std::result::Result<(), String> {
        if key.is_empty() {
            return Err("a template variable needs a name".into());
        }
        if let Some((_, why)) = RESERVED.iter().find(|(name, _)| *name == key) {
            return Err(format!("`{key}` is not a template variable: {why}"));
        }
        if matches!(key, "tools" | "documents") && !value.is_none() {
            let objects = value.kind() == ValueKind::Seq
                && value.try_iter().is_ok_and(|mut i| i.all(|v| v.kind() == ValueKind::Map));
            if !objects {
                let what = if key == "tools" { "JSON schemas of functions" } else { "{\"title\", \"text\"} objects" };
                return Err(format!("`{key}` is a list of {what}, not {}", kind_name(&value)));
            }
        }
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value));
        Ok(())
    }

    /// The value of `key`, if set.
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// serde_json's message without its position.
fn json_message(e: &serde_json::Error) -> String {
    let message = e.to_string();
    message.split(" at line ").next().unwrap_or_default().to_string()
}

/// A value's type, for messages.
fn kind_name(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "missing",
        ValueKind::None => "null",
        ValueKind::Bool => "a boolean",
        ValueKind::Number => "a number",
        ValueKind::String => "a string",
        ValueKind::Seq => "a list",
        ValueKind::Map => "an object",
        _ => "not JSON",
    }
}

// ---------------------------------------------------------------------------------------------
// Where the template and the special tokens come from.

/// `path`'s JSON object, `None` when the file is absent.
fn read_object(path: &Path) -> Result<Option<Map<String, Json>>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = indolm_core::files::read_to_string(path)?;
    match serde_json::from_str(&text).map_err(|e| Error::json(path, &e))? {
        Json::Object(map) => Ok(Some(map)),
        _ => Err(Error::invalid(path, "expected a JSON object")),
    }
}

/// A template file's text as Python's `open(path).read()` gives it (universal newlines); a file
/// past [`MAX_TEMPLATE_BYTES`] is refused before it is read.
fn read_template(path: &Path) -> Result<String> {
    let size = std::fs::metadata(path).with_path(path)?.len();
    if size > MAX_TEMPLATE_BYTES as u64 {
        return Err(too_large(path, usize::try_from(size).unwrap_or(usize::MAX)));
    }
    Ok(indolm_core::files::read_to_string(path)?.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The folder's templates with their text: `chat_template.jinja` (`default`) and the named ones
/// of `additional_chat_templates/`, else those of `tokenizer_config.json`'s `chat_template`.
fn templates(dir: &Path, config_path: &Path, config: Option<&Map<String, Json>>) -> Result<Vec<(Source, String)>> {
    let mut found: Vec<(Source, String)> = Vec::new();
    let file = dir.join(CHAT_TEMPLATE_FILE);
    if file.is_file() {
        let text = read_template(&file)?;
        add(&mut found, Source { name: "default".into(), label: CHAT_TEMPLATE_FILE.into(), path: file }, text);
    }
    let extra = dir.join(CHAT_TEMPLATE_DIR);
    if extra.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&extra)
            .with_path(&extra)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jinja"))
            .collect();
        files.sort();
        for path in files {
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let text = read_template(&path)?;
            add(&mut found, Source { label: format!("{CHAT_TEMPLATE_DIR}/{name}.jinja"), name, path }, text);
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let label = |name: &str| format!("{TOKENIZER_CONFIG} chat_template {name}");
    match config.and_then(|c| c.get("chat_template")) {
        None | Some(Json::Null) => {}
        Some(Json::String(text)) => add(
            &mut found,
            Source {
                name: "default".into(),
                label: format!("{TOKENIZER_CONFIG} chat_template"),
                path: config_path.into(),
            },
            text.clone(),
        ),
        Some(Json::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let (Some(name), Some(text)) =
                    (item.get("name").and_then(Json::as_str), item.get("template").and_then(Json::as_str))
                else {
                    return Err(Error::field(
                        config_path,
                        format!("chat_template[{i}]"),
                        "expected {\"name\": \"...\", \"template\": \"...\"}",
                    ));
                };
                add(
                    &mut found,
                    Source { name: name.into(), label: label(name), path: config_path.into() },
                    text.into(),
                );
            }
        }
        Some(other) => {
            return Err(Error::field(
                config_path,
                "chat_template",
                format!("expected a template or a list of named templates, found {other}"),
            ))
        }
    }
    Ok(found)
}

/// Adds `source` to `found`, in place of an earlier template of its name.
fn add(found: &mut Vec<(Source, String)>, source: Source, text: String) {
    found.retain(|(s, _)| s.name != source.name);
    found.push((source, text));
}

/// The error for a folder without a chat template.
fn no_template(dir: &Path) -> Error {
    let mut message = format!(
        "no chat template: neither {CHAT_TEMPLATE_FILE} nor a `chat_template` in {TOKENIZER_CONFIG} (a base model \
         has none)"
    );
    if dir.join(PROCESSOR_CHAT_TEMPLATE).is_file() {
        message.push_str(&format!(
            "; its {PROCESSOR_CHAT_TEMPLATE} is a processor's, which transformers' tokenizer does not read: save its \
             \"chat_template\" as {CHAT_TEMPLATE_FILE}"
        ));
    }
    Error::invalid(dir, message)
}

/// A special token's text: a string, or an added token's `content`; `None` for null.
fn token_text(value: &Json) -> Option<String> {
    match value {
        Json::String(s) => Some(s.clone()),
        Json::Object(o) => o.get("content").and_then(Json::as_str).map(str::to_string),
        _ => None,
    }
}

/// The special tokens transformers passes to the template (its `special_tokens_map`): the seven
/// named ones that are set, the model's own `*_token` keys and those of a map
/// `extra_special_tokens` (Gemma 3's `image_token`); `special_tokens_map.json`'s override
/// tokenizer_config.json's when the latter has no `added_tokens_decoder` (transformers' older
/// path).
fn special_tokens(dir: &Path, config: Option<&Map<String, Json>>) -> Result<Vec<(String, String)>> {
    let empty = Map::new();
    let config = config.unwrap_or(&empty);
    let mut tokens: BTreeMap<String, String> = BTreeMap::new();
    let mut named: Map<String, Json> = Map::new();
    for (key, value) in config {
        if SPECIAL_TOKENS.contains(&key.as_str()) {
            named.insert(key.clone(), value.clone());
        } else {
            own_token(key, value, &mut tokens);
        }
    }
    if !config.contains_key("added_tokens_decoder") {
        if let Some(map) = read_object(&dir.join(SPECIAL_TOKENS_MAP))? {
            for (key, value) in &map {
                if SPECIAL_TOKENS.contains(&key.as_str()) {
                    named.insert(key.clone(), value.clone());
                } else {
                    own_token(key, value, &mut tokens);
                }
            }
        }
    }
    for key in SPECIAL_TOKENS {
        if let Some(text) = named.get(key).and_then(token_text) {
            tokens.insert(key.to_string(), text);
        }
    }
    Ok(tokens.into_iter().collect())
}

/// Records a model's own special token: a `*_token` key other than the seven named ones, or the
/// entries of a map `extra_special_tokens`.
fn own_token(key: &str, value: &Json, tokens: &mut BTreeMap<String, String>) {
    if key == "extra_special_tokens" {
        if let Json::Object(extra) = value {
            for (name, token) in extra {
                if let Some(text) = token_text(token) {
                    tokens.insert(name.clone(), text);
                }
            }
        }
    } else if key.ends_with("_token") && !SPECIAL_TOKENS.contains(&key) {
        if let Some(text) = token_text(value) {
            tokens.insert(key.to_string(), text);
        }
    }
}

/// `source` with transformers' `{% generation %}` … `{% endgeneration %}` tags (its
/// AssistantTracker extension, which only marks what the assistant wrote) as `{% if true %}` …
/// `{% endif %}`: the same text, the same whitespace control.
fn without_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        let after = &rest[start + 2..];
        out.push_str(&rest[..start]);
        match generation_tag(after) {
            Some((length, tag)) => {
                out.push_str(&tag);
                rest = &after[length..];
            }
            None => {
                out.push_str("{%");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// For the text after a `{%` that opens a `generation` or `endgeneration` tag: how much of it the
/// tag takes (up to its `%}`) and the tag that replaces it.
fn generation_tag(after: &str) -> Option<(usize, String)> {
    let modifier = |c: Option<char>| c.filter(|&c| matches!(c, '-' | '+'));
    let open = modifier(after.chars().next());
    let body = after[open.map_or(0, char::len_utf8)..].trim_start();
    let word_end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(body.len());
    let keyword = match &body[..word_end] {
        "generation" => "if true",
        "endgeneration" => "endif",
        _ => return None,
    };
    let tail = body[word_end..].trim_start();
    let close = modifier(tail.chars().next());
    let tail = &tail[close.map_or(0, char::len_utf8)..];
    if !tail.starts_with("%}") {
        return None;
    }
    let length = after.len() - tail.len() + 2;
    let text = |c: Option<char>| c.map(String::from).unwrap_or_default();
    Some((length, format!("{{%{} {keyword} {}%}}", text(open), text(close))))
}

// ---------------------------------------------------------------------------------------------
// The environment: transformers' Jinja2 sandbox in minijinja.

/// minijinja as transformers' `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
/// extensions=[AssistantTracker, loopcontrols])`, with its `tojson`, `raise_exception` and
/// `strftime_now`, Python's methods and Python's `str` for printed values.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // Jinja2's default: the template's last newline is not written.
    env.set_keep_trailing_newline(false);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(python_formatter);
    env.set_fuel(Some(RENDER_FUEL));
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env
}

/// What `raise_exception(message)` raises: the template refusing what it was given.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// transformers' `raise_exception(message)`: ends the render with the template's message.
fn raise_exception(message: Value) -> std::result::Result<Value, TemplateError> {
    let message = message.to_string();
    Err(TemplateError::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

/// transformers' `strftime_now(format)`: the local time now as Python's
/// `datetime.now().strftime(format)` writes it (C's strftime, after Python's own `%f` and a naive
/// time's empty `%z` and `%Z`).
fn strftime_now(format: String) -> std::result::Result<String, TemplateError> {
    let fail = |why: &str| TemplateError::new(ErrorKind::InvalidOperation, format!("strftime_now: {why}"));
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|_| fail("a clock before 1970"))?;
    let format = python_directives(&format, now.subsec_micros());
    let c_format = std::ffi::CString::new(format).map_err(|_| fail("the format holds a NUL character"))?;
    let seconds = libc::time_t::try_from(now.as_secs()).map_err(|_| fail("a time past time_t"))?;
    // SAFETY: an all-zero `tm` is valid (integers and a null zone pointer); localtime_r overwrites it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals for the call; localtime_r is the reentrant form.
    if unsafe { libc::localtime_r(&seconds, &mut tm) }.is_null() {
        return Err(fail("no local time for now"));
    }
    let mut size = 256;
    loop {
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has `size` writable bytes, the format is NUL-terminated and `tm` was filled
        // in above; strftime writes at most `size` bytes, its NUL included.
        let written = unsafe { libc::strftime(buf.as_mut_ptr().cast(), size, c_format.as_ptr(), &tm) };
        // 0 is a result too long for the buffer, or an empty one.
        if written > 0 || size >= 1 << 16 {
            buf.truncate(written);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
        size *= 16;
    }
}

/// `format` with the directives Python's `datetime.strftime` handles before C's: `%f`
/// (microseconds), and `%z` and `%Z` (empty for the naive time `datetime.now()` is).
fn python_directives(format: &str, micros: u32) -> String {
    let mut out = String::with_capacity(format.len());
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('f') => {
                let _ = write!(out, "{micros:06}");
            }
            Some('z' | 'Z') => {}
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Writes `{{ value }}` as Jinja2 does: Python's `str(value)`.
fn python_formatter(
    out: &mut Output<'_>,
    _state: &State<'_, '_>,
    value: &Value,
) -> std::result::Result<(), TemplateError> {
    out.write_str(&python_str(value))
        .map_err(|_| TemplateError::new(ErrorKind::WriteFailure, "could not write the rendered text"))
}

/// Python's `str(value)`: a string as it is, nothing for undefined, else [`python_repr`].
fn python_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        _ => python_repr(value),
    }
}

/// Python's `repr(value)` for the values templates hold: `None`, `True`, `1`, `1.0`, `1e-05`,
/// `'text'`, `[1, 'a']`, `{'a': None}`; minijinja's own text for anything else.
fn python_repr(value: &Value) -> String {
    match value.kind() {
        ValueKind::None => "None".into(),
        ValueKind::Bool => (if value.is_true() { "True" } else { "False" }).into(),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(x) if x.is_nan() => "nan".into(),
            Ok(x) if x.is_infinite() => (if x > 0.0 { "inf" } else { "-inf" }).into(),
            Ok(x) => python_float(x),
            Err(_) => value.to_string(),
        },
        ValueKind::String => python_str_repr(value.as_str().unwrap_or_default()),
        ValueKind::Seq => match value.try_iter() {
            Ok(items) => format!("[{}]", items.map(|v| python_repr(&v)).collect::<Vec<_>>().join(", ")),
            Err(_) => value.to_string(),
        },
        ValueKind::Map => match value.try_iter() {
            Ok(keys) => {
                let entries: Vec<String> = keys
                    .map(|k| {
                        let v = value.get_item(&k).unwrap_or_default();
                        format!("{}: {}", python_repr(&k), python_repr(&v))
                    })
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
            Err(_) => value.to_string(),
        },
        _ => value.to_string(),
    }
}

/// Python's `repr` of a string: single quotes unless it holds one and no double quote; backslash,
/// the quote and non-printable characters escaped.
fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !python_printable(c) => {
                let n = u32::from(c);
                let _ = match n {
                    0..=0xff => write!(out, "\\x{n:02x}"),
                    0x100..=0xffff => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Whether Python's `str.isprintable()` holds for `c`, for the characters text holds: control
/// characters, the separators but the space and the common format characters are not printable.
fn python_printable(c: char) -> bool {
    !matches!(
        u32::from(c),
        0..=0x1f
            | 0x7f..=0xa0
            | 0xad
            | 0x1680
            | 0x2000..=0x200f
            | 0x2028..=0x202f
            | 0x205f..=0x2064
            | 0x2066..=0x206f
            | 0x3000
            | 0xfeff
    )
}

/// Python's `repr` of a finite float: the shortest digits that read back as `x`, positional from
/// 1e-4 up to 1e16 (`0.0001`, `1e+16`), else with a signed exponent of two digits at least
/// (`1e-05`, `1.5e+20`).
fn python_float(x: f64) -> String {
    let scientific = format!("{:e}", x.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    // Digits before the decimal point.
    let point = exponent + 1;
    let n = digits.len() as i32;
    let body = if point <= -4 || point > 16 {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() { first.to_string() } else { format!("{first}.{rest}") };
        format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
    } else if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point >= n {
        format!("{digits}{}.0", "0".repeat((point - n) as usize))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    let sign = if x.is_sign_negative() { "-" } else { "" };
    format!("{sign}{body}")
}

// ---------------------------------------------------------------------------------------------
// tojson: Python's json.dumps as transformers calls it.

/// How [`tojson`] writes: `json.dumps`'s arguments.
struct JsonStyle {
    /// `ensure_ascii`: everything past ASCII as `\uXXXX`.
    ascii: bool,
    /// `indent`: each level's indentation, `None` for one line.
    indent: Option<String>,
    /// Between items (`separators[0]`).
    item_separator: String,
    /// Between a key and its value (`separators[1]`).
    key_separator: String,
    /// `sort_keys`.
    sort_keys: bool,
}

/// transformers' `tojson` filter: `json.dumps(value, ensure_ascii=False, indent=None,
/// separators=None, sort_keys=False)`, each argument by position or by name.
fn tojson(value: Value, args: Rest<Value>, kwargs: Kwargs) -> std::result::Result<String, TemplateError> {
    const PARAMETERS: [&str; 4] = ["ensure_ascii", "indent", "separators", "sort_keys"];
    let invalid = |message: String| TemplateError::new(ErrorKind::InvalidOperation, message);
    if args.len() > PARAMETERS.len() {
        return Err(TemplateError::new(ErrorKind::TooManyArguments, "tojson takes 4 arguments at most"));
    }
    let mut given: [Option<Value>; 4] = Default::default();
    for (slot, arg) in given.iter_mut().zip(args.iter()) {
        *slot = Some(arg.clone());
    }
    for (slot, name) in given.iter_mut().zip(PARAMETERS) {
        if let Some(value) = kwargs.get::<Option<Value>>(name)? {
            if slot.is_some() {
                return Err(invalid(format!("tojson got two values for `{name}`")));
            }
            *slot = Some(value);
        }
    }
    kwargs.assert_all_used()?;
    let [ensure_ascii, indent, separators, sort_keys] = given;
    let indent = match indent.filter(|v| !v.is_none()) {
        None => None,
        Some(v) if v.kind() == ValueKind::String => Some(v.as_str().unwrap_or_default().to_string()),
        Some(v) if v.kind() == ValueKind::Bool => Some((if v.is_true() { " " } else { "" }).to_string()),
        Some(v) if v.is_integer() => Some(" ".repeat(v.as_i64().unwrap_or(0).clamp(0, 1 << 12) as usize)),
        Some(v) => return Err(invalid(format!("tojson's indent is a number or a string, not {}", kind_name(&v)))),
    };
    let (item_separator, key_separator) = match separators.filter(|v| !v.is_none()) {
        None => ((if indent.is_some() { "," } else { ", " }).to_string(), ": ".to_string()),
        Some(v) => {
            let parts: Vec<Value> = v.try_iter().map(Iterator::collect).unwrap_or_default();
            match parts.as_slice() {
                [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                    (item.as_str().unwrap_or_default().to_string(), key.as_str().unwrap_or_default().to_string())
                }
                _ => {
                    return Err(invalid("tojson's separators are two strings: (item separator, key separator)".into()))
                }
            }
        }
    };
    let style = JsonStyle {
        ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        indent,
        item_separator,
        key_separator,
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
    };
    let mut out = String::new();
    write_json(&mut out, &value, &style, 0)?;
    Ok(out)
}

/// Writes `value` as JSON at nesting `level`.
fn write_json(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    level: usize,
) -> std::result::Result<(), TemplateError> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&json_number(value)?),
        ValueKind::String => write_json_string(out, value.as_str().unwrap_or_default(), style.ascii),
        ValueKind::Seq => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, ('[', ']'), &items, style, level, |out, item, level| {
                write_json(out, item, style, level)
            })?;
        }
        ValueKind::Map => {
            let mut entries: Vec<(String, Value)> = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((json_key(&key)?, item));
            }
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(out, ('{', '}'), &entries, style, level, |out, entry: &(String, Value), level| {
                write_json_string(out, &entry.0, style.ascii);
                out.push_str(&style.key_separator);
                write_json(out, &entry.1, style, level)
            })?;
        }
        kind => {
            return Err(TemplateError::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

/// Writes a list or an object of `items` between `brackets` as `json.dumps` lays them out: empty
/// as `[]`, on one line without an indent, else an item a line, indented a level deeper.
fn write_container<T>(
    out: &mut String,
    brackets: (char, char),
    items: &[T],
    style: &JsonStyle,
    level: usize,
    mut write: impl FnMut(&mut String, &T, usize) -> std::result::Result<(), TemplateError>,
) -> std::result::Result<(), TemplateError> {
    out.push(brackets.0);
    if items.is_empty() {
        out.push(brackets.1);
        return Ok(());
    }
    let newline = style.indent.as_ref().map(|indent| format!("\n{}", indent.repeat(level + 1)));
    if let Some(newline) = &newline {
        out.push_str(newline);
    }
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
            if let Some(newline) = &newline {
                out.push_str(newline);
            }
        }
        write(out, item, level + 1)?;
    }
    if let Some(indent) = &style.indent {
        out.push('\n');
        out.push_str(&indent.repeat(level));
    }
    out.push(brackets.1);
    Ok(())
}

/// A number as `json.dumps` writes it: an integer's digits, a float's `repr`, `NaN`, `Infinity`.
fn json_number(value: &Value) -> std::result::Result<String, TemplateError> {
    if value.is_integer() {
        return Ok(value.to_string());
    }
    let x = f64::try_from(value.clone())?;
    Ok(if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        (if x > 0.0 { "Infinity" } else { "-Infinity" }).into()
    } else {
        python_float(x)
    })
}

/// An object key as `json.dumps` writes it: a string as it is, a number, boolean or null as its
/// JSON text.
fn json_key(key: &Value) -> std::result::Result<String, TemplateError> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_string()),
        ValueKind::Number => json_number(key),
        ValueKind::Bool => Ok((if key.is_true() { "true" } else { "false" }).into()),
        ValueKind::None => Ok("null".into()),
        kind => Err(TemplateError::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

/// Writes `s` as a JSON string as `json.dumps` does: `"` and `\` escaped, `\n`, `\r`, `\t`, `\b`,
/// `\f` and other control characters as `\u00XX`; with `ascii`, everything past `~` as `\uXXXX`
/// (UTF-16 units, lower-case hex).
fn write_json_string(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 || (ascii && !(' '..='~').contains(&c)) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A model folder holding `template` as chat_template.jinja, with Llama's special tokens.
    fn folder(name: &str, template: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("indolm-chat-bounds-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(TOKENIZER_CONFIG), r#"{"bos_token": "<s>", "eos_token": "</s>"}"#).unwrap();
        std::fs::write(dir.join(CHAT_TEMPLATE_FILE), template).unwrap();
        dir
    }

    /// The error of rendering a question with `template` (with a memory budget of `memory`
    /// bytes, else the default), checked to be one line naming the template file and to come
    /// within `seconds`.
    fn refusal(name: &str, template: &str, memory: Option<usize>, seconds: u64) -> String {
        let dir = folder(name, template);
        let start = Instant::now();
        let mut chat = ChatTemplate::from_dir(&dir).unwrap();
        chat.memory_budget = memory.unwrap_or(chat.memory_budget);
        let err = chat.render(&Messages::user("Halo"), &TemplateKwargs::default());
        let message = err.unwrap_err().to_string();
        assert!(start.elapsed() < Duration::from_secs(seconds), "{name}: took {:?}", start.elapsed());
        assert!(message.contains(CHAT_TEMPLATE_FILE) && !message.contains('\n'), "{name}: {message}");
        let _ = std::fs::remove_dir_all(&dir);
        message
    }

    #[test]
    fn the_papers_templates_render_well_inside_the_fuel() {
        // The nine templates of tests/it/generation.rs (which checks their text against
        // transformers), on conversations of every shape and with tools: the fuel each render
        // takes stays under a thousandth of the budget.
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/chat_templates");
        let conversations = [
            r#"[{"role": "system", "content": "Jawab singkat."}, {"role": "user", "content": "Apa ibu kota Indonesia?"}, {"role": "assistant", "content": "Jakarta."}, {"role": "user", "content": "Dan Jawa Barat?"}]"#,
            r#"[{"role": "user", "content": "Berapa 2 + 2?"}, {"role": "assistant", "content": "<think>\n2 + 2 = 4\n</think>\n\nEmpat.", "reasoning_content": "2 + 2 = 4"}, {"role": "user", "content": "Kalau 3 + 3?"}]"#,
        ];
        let tools = r#"{"tools": [{"type": "function", "function": {"name": "cuaca", "description": "Cuaca di kota", "parameters": {"type": "object", "properties": {"kota": {"type": "string"}}, "required": ["kota"]}}}]}"#;
        let mut most = (0, "");
        for stem in [
            "llama-2-7b-chat",
            "llama-3.1-8b-instruct",
            "qwen2-7b-instruct",
            "qwen2.5-7b-instruct",
            "qwen3-8b",
            "qwen3.5-9b",
            "gemma-2-9b-it",
            "gemma-3-4b-it",
            "olmo-3-7b-instruct",
        ] {
            let text = std::fs::read_to_string(fixtures.join(format!("{stem}.jinja"))).unwrap();
            let template = ChatTemplate::from_dir(&folder(stem, &text)).unwrap();
            let mut rendered = 0;
            for kwargs in ["{}", tools] {
                for conversation in conversations {
                    let (messages, kwargs) =
                        (Messages::from_json(conversation).unwrap(), TemplateKwargs::from_json(kwargs).unwrap());
                    // Some templates refuse a system message or reasoning (raise_exception).
                    if let Ok((_, fuel)) = template.render_counted(&messages, &kwargs) {
                        rendered += 1;
                        assert!(fuel > 0 && fuel < RENDER_FUEL / 1000, "{stem}: {fuel} instructions");
                        most = most.max((fuel, stem));
                    }
                }
            }
            assert!(rendered >= 2, "{stem}: only {rendered} renders");
        }
        println!("the most fuel a paper template took: {} instructions ({})", most.0, most.1);
    }

    #[test]
    fn an_endless_loop_runs_out_of_fuel_in_one_line() {
        // 10^10 iterations: without fuel, hours.
        let loops = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}";
        let message = refusal("fuel", loops, None, 5);
        assert!(message.contains("ran out of its instruction budget (10000000 minijinja instructions"), "{message}");
    }

    #[test]
    fn strings_grown_without_bound_are_stopped_at_the_memory_budget() {
        // 2^40 bytes by doubling, in a namespace across a loop's iterations or by one `set` after
        // another, and a string multiplied by `replace`: gigabytes within seconds unbounded. Here
        // with a budget of 32 MiB (what a stopped render keeps until the process ends), the
        // mechanism of the default 256 MiB.
        let namespace =
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
        let sets = format!("{{% set s = 'x' %}}{}{{{{ s|length }}}}", "{% set s = s ~ s %}".repeat(40));
        let replace = "{{ ('x' * 1000000)|replace('x', 'xyz' * 100) }}";
        for (name, template) in [("namespace", namespace), ("sets", sets.as_str()), ("replace", replace)] {
            let message = refusal(name, template, Some(32 << 20), 5);
            assert!(message.contains("was stopped holding 32 MiB of values, its memory budget"), "{name}: {message}");
        }
    }

    #[test]
    fn a_rendered_prompt_past_its_cap_is_refused() {
        let message = refusal("output", "{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}", None, 5);
        assert!(message.contains("wrote more than 16 MiB, the cap on a rendered prompt"), "{message}");
        // Just under the cap renders.
        let dir = folder("output-ok", "{% for i in range(16) %}{{ 'x' * 1000000 }}{% endfor %}");
        let text = ChatTemplate::from_dir(&dir).unwrap().render(&Messages::user("Halo"), &TemplateKwargs::default());
        assert_eq!(text.unwrap().len(), 16_000_000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_template_past_its_size_cap_is_refused_before_parsing() {
        let big = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        let dir = folder("size", &big);
        let message = ChatTemplate::from_dir(&dir).err().unwrap().to_string();
        assert!(
            message.contains(CHAT_TEMPLATE_FILE)
                && message.contains("a chat template of 1048577 bytes, more than the 1024 KiB"),
            "{message}"
        );
        // The same in tokenizer_config.json's `chat_template`.
        std::fs::remove_file(dir.join(CHAT_TEMPLATE_FILE)).unwrap();
        std::fs::write(dir.join(TOKENIZER_CONFIG), serde_json::json!({ "chat_template": big }).to_string()).unwrap();
        let message = ChatTemplate::from_dir(&dir).err().unwrap().to_string();
        assert!(message.contains(TOKENIZER_CONFIG) && message.contains("1048577 bytes"), "{message}");
        // At the cap, it is read.
        std::fs::write(dir.join(CHAT_TEMPLATE_FILE), &big[1..]).unwrap();
        assert!(ChatTemplate::from_dir(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
