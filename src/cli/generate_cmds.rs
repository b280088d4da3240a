//! `indolm generate`: the completions of a causal LM for a file of prompts (JSON Lines in, JSON
//! Lines out), greedy or sampled, with the model's generation_config.json for what the flags
//! leave unset; with `--chat`, each prompt rendered with the model's chat template first. With
//! `--api-base URL --api-model NAME` instead of `--model`, each prompt is sent as a conversation to
//! an OpenAI-compatible server ([`indolm_eval::generate::backend::openai`]) and its replies recorded.
use super::backend_args::{BackendArgs, Chosen};
use clap::Args;
use indolm_core::outln;
use indolm_core::outputs::Output;
use indolm_eval::generate::backend::ChatSettings;
use indolm_eval::generate::chat::TemplateKwargs;
use indolm_eval::generate::run::{Asked, FileRequest};
use indolm_torch::error::{Error, Result};
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

/// What the flags ask: the files, the chat rendering and the generation settings.
fn request(args: &GenerateArgs, template_kwargs: TemplateKwargs) -> FileRequest {
    FileRequest {
        prompts: args.prompts.clone(),
        out: args.out.clone(),
        chat: args.chat,
        system: args.system.clone(),
        template_kwargs,
        asked: Asked {
            max_new_tokens: args.max_new_tokens,
            temperature: args.temperature,
            top_p: args.top_p,
            top_k: args.top_k,
            seed: args.seed,
            stop: args.stop.clone(),
            batch_size: args.batch_size,
        },
    }
}

/// `generate`: with `--model`, the prompts completed by the model loaded here (rendered with its
/// chat template for `--chat`); with `--api-base`, by the served model ([`run_api`]); the records
/// written ([`indolm_eval::generate::run`]) and a summary on stdout.
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
    let summary = indolm_eval::generate::run::run_local(&request(args, kwargs), model, device)?;
    outln!("{summary}");
    Ok(())
}

/// `generate --api-base URL --api-model NAME`: each prompt line sent as a conversation, greedy
/// unless `--temperature`, through the response cache (default beside `--out`).
fn run_api(args: &GenerateArgs, base: &str) -> Result<()> {
    check_flags(args, true)?;
    let kwargs = template_kwargs(args)?;
    let chat_template_kwargs = super::backend_args::api_template_kwargs(&args.template_kwargs)?;
    let cache = args.backend.cache_file(Some(args.out.as_path()));
    let outputs: Vec<Output> = std::iter::once(Output::file("--out", &args.out))
        .chain(cache.as_deref().map(|c| Output::file("--api-cache", c)))
        .collect();
    super::check_outputs(&outputs, &[args.prompts.as_path()])?;
    let open = |settings: &ChatSettings| {
        args.backend.open_api(base, settings, Some(args.out.as_path()), chat_template_kwargs.clone())
    };
    let summary = indolm_eval::generate::run::run_served(&request(args, kwargs), &open)?;
    outln!("{summary}");
    Ok(())
}
