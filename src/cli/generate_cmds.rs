//! `indolm generate`: the completions of a causal LM for a file of prompts (JSON Lines in, JSON
//! Lines out), greedy or sampled, with the model's generation_config.json for what the flags
//! leave unset; with `--chat`, each prompt rendered with the model's chat template first. With
//! `--api-base URL --api-model NAME` instead of `--model`, each prompt is sent as a conversation to
//! an OpenAI-compatible server ([`indolm_eval::generate::backend::openai`]) and its replies recorded.
use super::backend_args::{BackendArgs, Chosen};
use clap::Args;
use indolm_core::outln;
use indolm_core::outputs::Output;
use indolm_eval::generate::backend::{ChatBackend, ChatSettings, Reply};
use indolm_eval::generate::chat::{ChatTemplate, Messages, TemplateKwargs};
use indolm_eval::generate::config::{DEFAULT_MAX_NEW_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P};
use indolm_eval::generate::prompts::{
    chat_records, read_chat_prompts, read_prompts, records, render_chat, tokenize, tokenize_chat, ChatInput, ChatLine,
    PromptLine,
};
use indolm_eval::generate::{generate, GenerationDefaults, Sampling, Settings, StopReason};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::{load_causal_lm, CausalLm};
use std::path::{Path, PathBuf};
use tch::Device;

/// `indolm generate`: the model, the prompts, where the completions go, and how to generate.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What generates: `--model DIR` (a causal LM loaded here) or `--api-base URL --api-model NAME`
    /// (a model an OpenAI-compatible server serves, each prompt sent as a conversation).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// The prompts: JSON Lines, one {"id": ..., "prompt": "..."} a line.
    #[arg(long)]
    pub prompts: PathBuf,
    /// Where the completions go: JSON Lines, {"id", "prompt", "completion", "tokens", "stop_reason"}
    /// a prompt, in the prompts' order.
    #[arg(long)]
    pub out: PathBuf,
    /// New tokens at most a completion (default: generation_config.json's max_new_tokens, else
    /// 256).
    #[arg(long)]
    pub max_new_tokens: Option<usize>,
    /// Sample at this temperature; 0: greedy (default: generation_config.json's, 1 when it
    /// samples). Greedy unless this, --top-p, --top-k or generation_config.json's do_sample asks
    /// for sampling. With --api-base: sent as it is, 0 when not given.
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Sample from the most likely tokens holding this share of the probability (default:
    /// generation_config.json's, else 1: all).
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Sample from the K most likely tokens; 0: all (default: generation_config.json's, else 50).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Seed of the sampling (each prompt draws from its own stream of it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// End a completion where this text appears, cutting it there (repeat for several; default:
    /// generation_config.json's stop_strings).
    #[arg(long = "stop")]
    pub stop: Vec<String>,
    /// Prompts generated together at most (default: as many as the device's token budget holds).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Render each prompt with the model's chat template, as transformers'
    /// apply_chat_template(messages, add_generation_prompt=True) does; a line may then give
    /// "messages" ([{"role": ..., "content": ...}, ...]) instead of a "prompt" (one user message).
    #[arg(long)]
    pub chat: bool,
    /// With --chat or --api-base: a system message before each conversation.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// With --chat: a variable for the chat template, VALUE in JSON (enable_thinking=false,
    /// date_string='"26 Jul 2024"'); repeat for several. With --api-base: sent in
    /// chat_template_kwargs, for the server's template.
    #[arg(long = "template-kwarg", value_name = "KEY=VALUE")]
    pub template_kwargs: Vec<String>,
}

/// The prompts read, plain or for chat (with their rendered text).
enum Prompts {
    /// Prompts tokenized as they are.
    Plain(Vec<PromptLine>),
    /// Chat prompts and the text the chat template made of each.
    Chat(Vec<ChatLine>, Vec<String>),
}

/// Refuses flag values that cannot be used, naming the flag; `api`: for a served model.
fn check_flags(args: &GenerateArgs, api: bool) -> Result<()> {
    if args.max_new_tokens == Some(0) {
        return Err(Error::argument("--max-new-tokens", "must be at least 1"));
    }
    if let Some(t) = args.temperature.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        return Err(Error::argument("--temperature", format!("must be 0 (greedy) or a positive number, not {t}")));
    }
    if let Some(p) = args.top_p.filter(|p| !(0.0..=1.0).contains(p)) {
        return Err(Error::argument("--top-p", format!("must be between 0 and 1, not {p}")));
    }
    if args.batch_size == Some(0) {
        return Err(Error::argument("--batch-size", "must be at least 1"));
    }
    if args.stop.iter().any(String::is_empty) {
        return Err(Error::argument("--stop", "an empty stop string would end every completion at once"));
    }
    if api {
        let local_only = [("--top-k", args.top_k.is_some()), ("--batch-size", args.batch_size.is_some())];
        if let Some((flag, _)) = local_only.into_iter().find(|(_, given)| *given) {
            return Err(Error::argument(
                flag,
                "is for a model loaded here (--model): a served model is asked with --temperature, --top-p, --seed, --stop \
                 and --max-new-tokens, --api-concurrency requests at a time",
            ));
        }
    } else if !args.chat {
        if args.system.is_some() {
            return Err(Error::argument("--system", "a system message needs --chat (the model's chat template)"));
        }
        if !args.template_kwargs.is_empty() {
            return Err(Error::argument(
                "--template-kwarg",
                "template variables need --chat (the model's chat template)",
            ));
        }
    }
    Ok(())
}

/// The `--template-kwarg` flags as template variables.
fn template_kwargs(args: &GenerateArgs) -> Result<TemplateKwargs> {
    let mut kwargs = TemplateKwargs::default();
    for flag in &args.template_kwargs {
        kwargs.set_flag(flag).map_err(|message| Error::argument("--template-kwarg", message))?;
    }
    Ok(kwargs)
}

/// The prompt file read; with `--chat`, each prompt rendered with the chat template of the model
/// folder's tokenizer (before the model is loaded, so that a template's refusal comes first).
fn read(args: &GenerateArgs, model: &Path, kwargs: &TemplateKwargs) -> Result<Prompts> {
    if !args.chat {
        return Ok(Prompts::Plain(read_prompts(&args.prompts)?));
    }
    let lines = read_chat_prompts(&args.prompts)?;
    let template = ChatTemplate::for_model(model)?;
    let rendered = render_chat(&template, &args.prompts, &lines, args.system.as_deref(), kwargs)?;
    eprintln!("note: each prompt rendered with the chat template of {}", template.source().display());
    Ok(Prompts::Chat(lines, rendered))
}

/// The settings from the flags, else `defaults` (the model's), else transformers' defaults.
fn settings(args: &GenerateArgs, defaults: &GenerationDefaults, lm: &CausalLm) -> Settings {
    let asked = args.top_k.is_some() || args.top_p.is_some() || args.temperature.is_some_and(|t| t > 0.0);
    let greedy = args.temperature == Some(0.0) || !(asked || defaults.do_sample);
    let sampling = (!greedy).then(|| Sampling {
        temperature: args.temperature.or(defaults.temperature).unwrap_or(DEFAULT_TEMPERATURE),
        top_k: args.top_k.or(defaults.top_k).unwrap_or(DEFAULT_TOP_K),
        top_p: args.top_p.or(defaults.top_p).unwrap_or(DEFAULT_TOP_P),
        seed: args.seed.unwrap_or(indolm_core::seeds::DEFAULT_SEED),
    });
    let pad = defaults.pad.or(defaults.eos.first().copied()).filter(|p| (0..lm.config.vocab_size).contains(p));
    Settings {
        max_new_tokens: args.max_new_tokens.or(defaults.max_new_tokens).unwrap_or(DEFAULT_MAX_NEW_TOKENS),
        sampling,
        eos: defaults.eos.clone(),
        stop_strings: if args.stop.is_empty() { defaults.stop_strings.clone() } else { args.stop.clone() },
        pad: pad.unwrap_or(0),
        token_budget: indolm_torch::data::batching::token_budget(lm.device),
        batch_size: args.batch_size.unwrap_or(usize::MAX),
    }
}

/// A progress bar over `n` prompts on a terminal's stderr (hidden elsewhere); `eval bias-qa`'s too.
pub(super) fn progress_bar(n: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n as u64).with_style(
        indicatif::ProgressStyle::default_bar()
            .template("{bar:30} {pos}/{len} prompts [{elapsed_precise} < {eta_precise}]")
            .expect("valid template"),
    );
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) || n < 2 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}

/// `generate`: with `--model`, reads the prompts (rendering them with the chat template for
/// `--chat`), loads the model, generates and writes the records (to a temporary name, then
/// renamed), with a summary on stdout; with `--api-base`, asks the served model ([`run_api`]).
pub fn run(args: &GenerateArgs, device: Device) -> Result<()> {
    match args.backend.choose()? {
        Chosen::Local(model) => run_local(args, model, device),
        Chosen::Api(base) => run_api(args, &base),
    }
}

/// `generate --model DIR`.
fn run_local(args: &GenerateArgs, model: &Path, device: Device) -> Result<()> {
    check_flags(args, false)?;
    let kwargs = template_kwargs(args)?;
    super::check_outputs(&[Output::file("--out", &args.out)], &[model, args.prompts.as_path()])?;
    let prompts = read(args, model, &kwargs)?;
    let lm = load_causal_lm(model, device)?;
    let base = lm.config.path.parent().unwrap_or(Path::new("."));
    let defaults = GenerationDefaults::read(&[model, base], &lm.config.path)?;
    for note in &defaults.not_applied {
        eprintln!("note: {note}");
    }
    let settings = settings(args, &defaults, &lm);
    if settings.sampling.is_none() && args.seed.is_some() {
        eprintln!("note: --seed is not used: decoding is greedy (sampling needs --temperature, --top-p or --top-k)");
    }
    if settings.eos.is_empty() {
        eprintln!("note: the model names no eos_token_id: completions end at a stop string or --max-new-tokens");
    }
    let ids = match &prompts {
        Prompts::Plain(lines) => tokenize(&lm, &args.prompts, lines, settings.max_new_tokens)?,
        Prompts::Chat(lines, rendered) => tokenize_chat(&lm, &args.prompts, lines, rendered, settings.max_new_tokens)?,
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
    indolm_core::files::write_atomic(&args.out, written.as_bytes())?;
    let count = |reason: StopReason| completions.iter().filter(|c| c.stop == reason).count();
    let tokens: usize = completions.iter().map(|c| c.tokens()).sum();
    let how = match &settings.sampling {
        None => "greedy".to_string(),
        Some(s) => {
            format!("sampled: temperature {}, top_k {}, top_p {}, seed {}", s.temperature, s.top_k, s.top_p, s.seed)
        }
    };
    outln!(
        "{} completions ({how}; {} eos, {} length, {} stop_string), {tokens} new tokens generated in {seconds:.2} s \
         ({:.1} tokens/s) -> {}",
        completions.len(),
        count(StopReason::Eos),
        count(StopReason::Length),
        count(StopReason::StopString),
        tokens as f64 / seconds.max(1e-9),
        args.out.display()
    );
    Ok(())
}

/// One record of a served model's reply: the line's prompt or messages, the reply's text, its
/// tokens (the server's `usage.completion_tokens`, null when it gives none) and why it ended.
#[derive(serde::Serialize)]
struct ApiRecord<'a> {
    /// The prompt's id.
    id: &'a serde_json::Value,
    /// The line's prompt, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    /// The line's messages, when it gave them (as given: without `--system`'s).
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
fn api_records(lines: &[ChatLine], replies: &[Reply]) -> Result<String> {
    let mut out = String::new();
    for (line, reply) in lines.iter().zip(replies) {
        let (prompt, messages) = match &line.input {
            ChatInput::Prompt(prompt) => (Some(prompt.as_str()), None),
            ChatInput::Messages(messages) => (None, Some(messages)),
        };
        let record = ApiRecord {
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

/// `generate --api-base URL --api-model NAME`: each prompt line sent as a conversation (a `prompt`
/// as one user message, `messages` as given, after `--system`'s), greedy unless `--temperature`,
/// through the response cache (default beside `--out`); the records written as for a local model,
/// with the server's token counts and finish reasons.
fn run_api(args: &GenerateArgs, base: &str) -> Result<()> {
    check_flags(args, true)?;
    let kwargs = template_kwargs(args)?;
    let chat_template_kwargs = super::backend_args::api_template_kwargs(&args.template_kwargs)?;
    let cache = args.backend.cache_file(Some(args.out.as_path()));
    let outputs: Vec<Output> = std::iter::once(Output::file("--out", &args.out))
        .chain(cache.as_deref().map(|c| Output::file("--api-cache", c)))
        .collect();
    super::check_outputs(&outputs, &[args.prompts.as_path()])?;
    let lines = read_chat_prompts(&args.prompts)?;
    let conversations = lines
        .iter()
        .map(|l| {
            l.conversation(args.system.as_deref())
                .map_err(|message| Error::invalid(&args.prompts, format!("line {}: {message}", l.line)))
        })
        .collect::<Result<Vec<Messages>>>()?;
    let settings = ChatSettings {
        max_new_tokens: args.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS),
        temperature: args.temperature.unwrap_or(0.0),
        seed: args.seed.unwrap_or(indolm_core::seeds::DEFAULT_SEED),
        top_p: args.top_p,
        stop_strings: args.stop.clone(),
        template_kwargs: kwargs,
    };
    let mut backend = args.backend.open_api(base, &settings, Some(args.out.as_path()), chat_template_kwargs)?;
    eprintln!(
        "note: each prompt sent as a conversation to {} (the server applies its chat template)",
        backend.describe()
    );
    let bar = progress_bar(conversations.len());
    let started = std::time::Instant::now();
    let replies = backend.chat(&conversations, &mut |n| bar.inc(n as u64))?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    indolm_core::files::write_atomic(&args.out, api_records(&lines, &replies)?.as_bytes())?;
    let count = |reason: &str| replies.iter().filter(|r| r.stop == reason).count();
    let other = replies.len() - count("eos") - count("length") - count("stop_string");
    let tokens: usize = replies.iter().filter_map(|r| r.tokens).sum();
    let how = if settings.temperature > 0.0 {
        format!("temperature {}, seed {}", settings.temperature, settings.seed)
    } else {
        "greedy".to_string()
    };
    let stats = backend.stats();
    outln!(
        "{} completions ({how}; {} eos, {} length, {} stop_string, {other} other), {tokens} new tokens (the server's \
         count); {} from the cache, {} requested, {} retries, in {seconds:.2} s -> {}",
        replies.len(),
        count("eos"),
        count("length"),
        count("stop_string"),
        stats.cached,
        stats.requested,
        stats.retries,
        args.out.display()
    );
    Ok(())
}
