//! `indolm generate` end to end: a file of prompts (JSON Lines) completed by a causal LM loaded
//! here ([`run_local`]: the settings asked merged over the model's generation_config.json, each
//! prompt rendered with the model's chat template first when asked) or by a served model
//! ([`run_served`]: each prompt sent as a conversation), the records written in the prompts'
//! order (atomically), and the summary of what was generated returned.
use super::backend::openai::OpenAiChat;
use super::backend::{ChatBackend, ChatSettings, Reply};
use super::chat::{ChatTemplate, Messages, TemplateKwargs};
use super::config::{DEFAULT_MAX_NEW_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P};
use super::prompts::{
    chat_records, read_chat_prompts, read_prompts, records, render_chat, tokenize, tokenize_chat, ChatInput, ChatLine,
    PromptLine,
};
use super::{generate, progress_bar, GenerationDefaults, Sampling, Settings, StopReason};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::{load_causal_lm, CausalLm};
use std::path::{Path, PathBuf};
use tch::Device;

/// How to generate, as asked (`None`: the model's generation_config.json, else transformers'
/// defaults).
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// New tokens at most a completion.
    pub max_new_tokens: Option<usize>,
    /// Sampling temperature; 0: greedy.
    pub temperature: Option<f64>,
    /// Nucleus sampling's probability mass.
    pub top_p: Option<f64>,
    /// Sample from the K most likely tokens; 0: all.
    pub top_k: Option<usize>,
    /// Seed of the sampling.
    pub seed: Option<u64>,
    /// Texts that end a completion (empty: the model's).
    pub stop: Vec<String>,
    /// Prompts generated together at most (a local model).
    pub batch_size: Option<usize>,
}

impl Asked {
    /// The settings asked, else `defaults` (the model's), else transformers' defaults: greedy
    /// unless a temperature above 0, a top-p, a top-k or the model's do_sample asks for sampling.
    pub fn settings(&self, defaults: &GenerationDefaults, lm: &CausalLm) -> Settings {
        let asked = self.top_k.is_some() || self.top_p.is_some() || self.temperature.is_some_and(|t| t > 0.0);
        let greedy = self.temperature == Some(0.0) || !(asked || defaults.do_sample);
        let sampling = (!greedy).then(|| Sampling {
            temperature: self.temperature.or(defaults.temperature).unwrap_or(DEFAULT_TEMPERATURE),
            top_k: self.top_k.or(defaults.top_k).unwrap_or(DEFAULT_TOP_K),
            top_p: self.top_p.or(defaults.top_p).unwrap_or(DEFAULT_TOP_P),
            seed: self.seed.unwrap_or(indolm_core::seeds::DEFAULT_SEED),
        });
        let pad = defaults.pad.or(defaults.eos.first().copied()).filter(|p| (0..lm.config.vocab_size).contains(p));
        Settings {
            max_new_tokens: self.max_new_tokens.or(defaults.max_new_tokens).unwrap_or(DEFAULT_MAX_NEW_TOKENS),
            sampling,
            eos: defaults.eos.clone(),
            stop_strings: if self.stop.is_empty() { defaults.stop_strings.clone() } else { self.stop.clone() },
            pad: pad.unwrap_or(0),
            token_budget: indolm_torch::data::batching::token_budget(lm.device),
            batch_size: self.batch_size.unwrap_or(usize::MAX),
        }
    }

    /// The settings a served model is asked with: greedy unless a temperature, `template_kwargs`
    /// for a local template.
    pub(crate) fn chat_settings(&self, template_kwargs: TemplateKwargs) -> ChatSettings {
        ChatSettings {
            max_new_tokens: self.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS),
            temperature: self.temperature.unwrap_or(0.0),
            seed: self.seed.unwrap_or(indolm_core::seeds::DEFAULT_SEED),
            top_p: self.top_p,
            stop_strings: self.stop.clone(),
            template_kwargs,
        }
    }
}

/// What to complete, where the records go, and how.
#[derive(Debug, Clone)]
pub struct FileRequest {
    /// The prompts: JSON Lines, one {"id": ..., "prompt": "..."} (or "messages") a line.
    pub prompts: PathBuf,
    /// Where the records go (JSON Lines).
    pub out: PathBuf,
    /// A local model: render each prompt with its chat template.
    pub chat: bool,
    /// A system message before each conversation.
    pub system: Option<String>,
    /// Variables for a local chat template.
    pub template_kwargs: TemplateKwargs,
    /// How to generate.
    pub asked: Asked,
}

/// The prompts read, plain or for chat (with their rendered text).
enum Prompts {
    /// Prompts tokenized as they are.
    Plain(Vec<PromptLine>),
    /// Chat prompts and the text the chat template made of each.
    Chat(Vec<ChatLine>, Vec<String>),
}

/// The prompt file read; for chat, each prompt rendered with the chat template of the model
/// folder's tokenizer (before the model is loaded, so that a template's refusal comes first).
fn read(request: &FileRequest, model: &Path) -> Result<Prompts> {
    if !request.chat {
        return Ok(Prompts::Plain(read_prompts(&request.prompts)?));
    }
    let lines = read_chat_prompts(&request.prompts)?;
    let template = ChatTemplate::for_model(model)?;
    let rendered =
        render_chat(&template, &request.prompts, &lines, request.system.as_deref(), &request.template_kwargs)?;
    eprintln!("note: each prompt rendered with the chat template of {}", template.source().display());
    Ok(Prompts::Chat(lines, rendered))
}

/// What a local model generated; its [`std::fmt::Display`] is `generate`'s summary line.
#[derive(Debug, Clone)]
pub struct LocalSummary {
    /// Completions written.
    pub completions: usize,
    /// `greedy`, or the sampling's parameters.
    pub how: String,
    /// Completions ended by an EOS.
    pub eos: usize,
    /// Completions ended by `max_new_tokens`.
    pub length: usize,
    /// Completions ended by a stop string.
    pub stop_string: usize,
    /// New tokens generated.
    pub tokens: usize,
    /// Seconds the generation took.
    pub seconds: f64,
    /// The records' file.
    pub out: PathBuf,
}

impl std::fmt::Display for LocalSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} completions ({}; {} eos, {} length, {} stop_string), {} new tokens generated in {:.2} s \
             ({:.1} tokens/s) -> {}",
            self.completions,
            self.how,
            self.eos,
            self.length,
            self.stop_string,
            self.tokens,
            self.seconds,
            self.tokens as f64 / self.seconds.max(1e-9),
            self.out.display()
        )
    }
}

/// Completes `request`'s prompts with the causal LM `model` on `device`: the prompts read (and
/// rendered with the chat template when asked), the model loaded with its generation defaults,
/// the completions generated and their records written (to a temporary name, then renamed).
pub fn run_local(request: &FileRequest, model: &Path, device: Device) -> Result<LocalSummary> {
    let prompts = read(request, model)?;
    let lm = load_causal_lm(model, device)?;
    let base = lm.config.path.parent().unwrap_or(Path::new("."));
    let defaults = GenerationDefaults::read(&[model, base], &lm.config.path)?;
    for note in &defaults.not_applied {
        eprintln!("note: {note}");
    }
    let settings = request.asked.settings(&defaults, &lm);
    if settings.sampling.is_none() && request.asked.seed.is_some() {
        eprintln!("note: --seed is not used: decoding is greedy (sampling needs --temperature, --top-p or --top-k)");
    }
    if settings.eos.is_empty() {
        eprintln!("note: the model names no eos_token_id: completions end at a stop string or --max-new-tokens");
    }
    let ids = match &prompts {
        Prompts::Plain(lines) => tokenize(&lm, &request.prompts, lines, settings.max_new_tokens)?,
        Prompts::Chat(lines, rendered) => {
            tokenize_chat(&lm, &request.prompts, lines, rendered, settings.max_new_tokens)?
        }
    };
    let bar = progress_bar(ids.len());
    let started = std::time::Instant::now();
    let completions = generate(&lm, &ids, &settings, &mut |n| bar.inc(n as u64))?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let written = match &prompts {
        Prompts::Plain(lines) => records(lines, &completions)?,
        Prompts::Chat(lines, rendered) => chat_records(lines, rendered, &completions)?,
    };
    indolm_core::files::write_atomic(&request.out, written.as_bytes())?;
    let count = |reason: StopReason| completions.iter().filter(|c| c.stop == reason).count();
    let how = match &settings.sampling {
        None => "greedy".to_string(),
        Some(s) => {
            format!("sampled: temperature {}, top_k {}, top_p {}, seed {}", s.temperature, s.top_k, s.top_p, s.seed)
        }
    };
    Ok(LocalSummary {
        completions: completions.len(),
        how,
        eos: count(StopReason::Eos),
        length: count(StopReason::Length),
        stop_string: count(StopReason::StopString),
        tokens: completions.iter().map(|c| c.tokens()).sum(),
        seconds,
        out: request.out.clone(),
    })
}

/// What a served model generated; its [`std::fmt::Display`] is `generate`'s summary line.
#[derive(Debug, Clone)]
pub struct ServedSummary {
    /// Replies written.
    pub completions: usize,
    /// `greedy`, or the temperature and seed.
    pub how: String,
    /// Replies that ended by themselves.
    pub eos: usize,
    /// Replies ended by the length bound.
    pub length: usize,
    /// Replies ended by a stop string.
    pub stop_string: usize,
    /// Replies ended for another reason the server gave.
    pub other: usize,
    /// New tokens, as the server counts them.
    pub tokens: usize,
    /// Replies taken from the response cache.
    pub cached: usize,
    /// Requests the server answered.
    pub requested: usize,
    /// Tries repeated.
    pub retries: usize,
    /// Seconds the replies took.
    pub seconds: f64,
    /// The records' file.
    pub out: PathBuf,
}

impl std::fmt::Display for ServedSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} completions ({}; {} eos, {} length, {} stop_string, {} other), {} new tokens (the server's \
             count); {} from the cache, {} requested, {} retries, in {:.2} s -> {}",
            self.completions,
            self.how,
            self.eos,
            self.length,
            self.stop_string,
            self.other,
            self.tokens,
            self.cached,
            self.requested,
            self.retries,
            self.seconds,
            self.out.display()
        )
    }
}

/// One record of a served model's reply: the line's prompt or messages, the reply's text, its
/// tokens (the server's `usage.completion_tokens`, null when it gives none) and why it ended.
#[derive(serde::Serialize)]
struct ServedRecord<'a> {
    /// The prompt's id.
    id: &'a serde_json::Value,
    /// The line's prompt, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    /// The line's messages, when it gave them (as given: without the system message).
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a Messages>,
    /// The reply's text.
    completion: &'a str,
    /// Its tokens, as the server counts them.
    tokens: Option<usize>,
    /// `eos`, `length`, `stop_string`, or the server's own `finish_reason`.
    stop_reason: &'a str,
}

/// The records of `replies` to the prompt lines `lines` as JSON Lines, in order.
fn served_records(lines: &[ChatLine], replies: &[Reply]) -> Result<String> {
    let mut out = String::new();
    for (line, reply) in lines.iter().zip(replies) {
        let (prompt, messages) = match &line.input {
            ChatInput::Prompt(prompt) => (Some(prompt.as_str()), None),
            ChatInput::Messages(messages) => (None, Some(messages)),
        };
        let record = ServedRecord {
            id: &line.id,
            prompt,
            messages,
            completion: &reply.text,
            tokens: reply.tokens,
            stop_reason: &reply.stop,
        };
        let text = serde_json::to_string(&record)
            .map_err(|e| Error::data("completion records", format!("line {}: {e}", line.line)))?;
        out.push_str(&text);
        out.push('\n');
    }
    Ok(out)
}

/// Completes `request`'s prompts with the served model `open` opens (given the settings asked):
/// each prompt line sent as a conversation (a `prompt` as one user message, `messages` as given,
/// after the system message), and the records written as for a local model, with the server's
/// token counts and finish reasons.
pub fn run_served(request: &FileRequest, open: &dyn Fn(&ChatSettings) -> Result<OpenAiChat>) -> Result<ServedSummary> {
    let lines = read_chat_prompts(&request.prompts)?;
    let conversations = lines
        .iter()
        .map(|l| {
            l.conversation(request.system.as_deref())
                .map_err(|message| Error::invalid(&request.prompts, format!("line {}: {message}", l.line)))
        })
        .collect::<Result<Vec<Messages>>>()?;
    let settings = request.asked.chat_settings(request.template_kwargs.clone());
    let mut backend = open(&settings)?;
    eprintln!(
        "note: each prompt sent as a conversation to {} (the server applies its chat template)",
        backend.describe()
    );
    let bar = progress_bar(conversations.len());
    let started = std::time::Instant::now();
    let replies = backend.chat(&conversations, &mut |n| bar.inc(n as u64))?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    indolm_core::files::write_atomic(&request.out, served_records(&lines, &replies)?.as_bytes())?;
    let count = |reason: &str| replies.iter().filter(|r| r.stop == reason).count();
    let how = if settings.temperature > 0.0 {
        format!("temperature {}, seed {}", settings.temperature, settings.seed)
    } else {
        "greedy".to_string()
    };
    let stats = backend.stats();
    Ok(ServedSummary {
        completions: replies.len(),
        how,
        eos: count("eos"),
        length: count("length"),
        stop_string: count("stop_string"),
        other: replies.len() - count("eos") - count("length") - count("stop_string"),
        tokens: replies.iter().filter_map(|r| r.tokens).sum(),
        cached: stats.cached,
        requested: stats.requested,
        retries: stats.retries,
        seconds,
        out: request.out.clone(),
    })
}
