//! The flags that say what answers conversations (a local causal LM, or a served model), shared by
//! the commands that generate chat replies, and the [`ChatBackend`] they open.
use clap::Args;
use indolm_eval::generate::backend::local::LocalChat;
use indolm_eval::generate::backend::openai::{
    ApiKey, MaxTokensField, OpenAiChat, OpenAiOptions, BASE_URL_ENV, DEFAULT_KEY_ENV,
};
use indolm_eval::generate::backend::{ChatBackend, ChatSettings};
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tch::Device;

/// What answers: `--model DIR` (a causal LM loaded here) or `--api-base URL --api-model NAME` (a
/// model an OpenAI-compatible server serves), exactly one of them.
#[derive(Args, Debug, Clone)]
pub struct BackendArgs {
    /// A causal LM directory (Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3, BLOOM, XGLM, Falcon) or
    /// a LoRA adapter folder, loaded here (conversations rendered with its chat template).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// An OpenAI-compatible server instead of --model: its base URL, the part before
    /// /chat/completions (http://localhost:8000/v1 for vLLM, https://api.openai.com/v1); with
    /// --api-model and no --api-base, the OPENAI_BASE_URL environment variable.
    #[arg(long, value_name = "URL")]
    pub api_base: Option<String>,
    /// The served model's name, as the server knows it (gpt-4.1-mini; what vLLM's /v1/models lists).
    #[arg(long, value_name = "NAME")]
    pub api_model: Option<String>,
    /// The environment variable holding the API key, sent as `Authorization: Bearer` and written
    /// nowhere (default: OPENAI_API_KEY; when it is unset, requests carry no key).
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// Retries of a request after a connection error, HTTP 429 or 5xx (default 6: at most 7 tries),
    /// after the server's Retry-After or 1, 2, 4 … s (at most 60, jittered from --seed).
    #[arg(long, value_name = "N")]
    pub api_retries: Option<u32>,
    /// Requests per minute at most, retries included (default 0: no limit).
    #[arg(long, value_name = "RPM")]
    pub api_rate_limit: Option<u32>,
    /// Requests in flight at once (default 1); replies keep the prompts' order.
    #[arg(long, value_name = "N")]
    pub api_concurrency: Option<usize>,
    /// The response cache, JSON Lines appended as answers arrive, so that a rerun asks nothing
    /// and an interrupted run resumes (default: beside the output, OUT's stem + .api-cache.jsonl).
    #[arg(long, value_name = "FILE")]
    pub api_cache: Option<PathBuf>,
    /// Seconds one request may take, its answer included (default 300).
    #[arg(long, value_name = "SECONDS")]
    pub api_timeout: Option<f64>,
    /// The request field that bounds a reply's tokens: max_tokens (default: vLLM, llama.cpp,
    /// transformers serve, OpenAI's GPT-4.1 mini) or max_completion_tokens (OpenAI's reasoning
    /// models: GPT-5 mini, o-series).
    #[arg(long, value_name = "FIELD", value_parser = ["max_tokens", "max_completion_tokens"])]
    pub api_max_tokens_field: Option<String>,
}

/// What the flags name.
#[derive(Debug, Clone, PartialEq)]
pub enum Chosen<'a> {
    /// `--model DIR`.
    Local(&'a Path),
    /// A server at this base URL (`--api-base`, else OPENAI_BASE_URL).
    Api(String),
}

/// The default response cache beside `out`: its stem + `.api-cache.jsonl` in its folder
/// (`runs/answers.jsonl` → `runs/answers.api-cache.jsonl`).
pub fn default_cache(out: &Path) -> PathBuf {
    let stem = out.file_stem().map_or_else(|| "indolm".to_string(), |s| s.to_string_lossy().to_string());
    out.with_file_name(format!("{stem}.api-cache.jsonl"))
}

impl BackendArgs {
    /// The first `--api-*` flag given, other than `--api-base`.
    fn api_flag(&self) -> Option<&'static str> {
        [
            ("--api-model", self.api_model.is_some()),
            ("--api-key-env", self.api_key_env.is_some()),
            ("--api-retries", self.api_retries.is_some()),
            ("--api-rate-limit", self.api_rate_limit.is_some()),
            ("--api-concurrency", self.api_concurrency.is_some()),
            ("--api-cache", self.api_cache.is_some()),
            ("--api-timeout", self.api_timeout.is_some()),
            ("--api-max-tokens-field", self.api_max_tokens_field.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// What answers: `--model DIR`, or the server of `--api-base` (of OPENAI_BASE_URL when only
    /// `--api-model` is given); an error for both, neither, or `--api-*` flags beside `--model`.
    pub fn choose(&self) -> Result<Chosen<'_>> {
        match (&self.model, &self.api_base) {
            (Some(_), Some(_)) => Err(Error::argument(
                "--api-base",
                "give --model DIR (a model loaded here) or --api-base URL (a served model), not both",
            )),
            (Some(dir), None) => match self.api_flag() {
                Some(flag) => Err(Error::argument(
                    flag,
                    "is for a served model (--api-base URL --api-model NAME), not --model DIR, which is loaded here",
                )),
                None => Ok(Chosen::Local(dir.as_path())),
            },
            (None, Some(base)) => Ok(Chosen::Api(base.clone())),
            (None, None) if self.api_model.is_some() => match std::env::var(BASE_URL_ENV) {
                Ok(base) if !base.trim().is_empty() => Ok(Chosen::Api(base)),
                _ => Err(Error::argument(
                    "--api-base",
                    format!(
                        "say where {} is served: --api-base URL (https://api.openai.com/v1, \
                         http://localhost:8000/v1), or set {BASE_URL_ENV}",
                        self.api_model.as_deref().unwrap_or_default()
                    ),
                )),
            },
            (None, None) => Err(Error::argument(
                "--model",
                "say what answers: --model DIR (a causal LM loaded here) or --api-base URL --api-model NAME \
                 (a model an OpenAI-compatible server serves)",
            )),
        }
    }

    /// The response cache of a served model: `--api-cache`, else [`default_cache`] beside `out`
    /// when there is one; `None` for a local model.
    pub fn cache_file(&self, out: Option<&Path>) -> Option<PathBuf> {
        match self.choose() {
            Ok(Chosen::Api(_)) => self.api_cache.clone().or_else(|| out.map(default_cache)),
            _ => None,
        }
    }

    /// The API key: the variable `--api-key-env` names (which must be set), else OPENAI_API_KEY
    /// when it is set (a note says when it is not: no key is sent).
    fn api_key(&self) -> Result<Option<ApiKey>> {
        let name = self.api_key_env.as_deref().unwrap_or(DEFAULT_KEY_ENV);
        match std::env::var(name) {
            Ok(key) if !key.trim().is_empty() => Ok(Some(ApiKey::new(&key))),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(Error::argument("--api-key-env", format!("the environment variable {name} is not valid Unicode")))
            }
            _ if self.api_key_env.is_some() => {
                Err(Error::argument("--api-key-env", format!("the environment variable {name} is not set (or empty)")))
            }
            _ => {
                eprintln!("note: {name} is not set: requests carry no API key (a local server needs none)");
                Ok(None)
            }
        }
    }

    /// The served model at `base` (what [`Self::choose`] gave), generating as `settings` say, with
    /// its cache [`Self::cache_file`] of `out` and `chat_template_kwargs` sent when not empty.
    pub fn open_api(
        &self,
        base: &str,
        settings: &ChatSettings,
        out: Option<&Path>,
        chat_template_kwargs: serde_json::Map<String, serde_json::Value>,
    ) -> Result<OpenAiChat> {
        let model = self.api_model.as_deref().filter(|m| !m.trim().is_empty()).ok_or_else(|| {
            Error::argument("--api-model", "name the served model (gpt-4.1-mini; what the server's /v1/models lists)")
        })?;
        let mut options = OpenAiOptions::new(base, model);
        options.api_key = self.api_key()?;
        if let Some(retries) = self.api_retries {
            options.retries = retries;
        }
        options.rate_limit = self.api_rate_limit.unwrap_or(0);
        if let Some(concurrency) = self.api_concurrency {
            options.concurrency = concurrency;
        }
        if let Some(seconds) = self.api_timeout {
            if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
                let message = format!("must be between 0 and 86400 seconds, not {seconds}");
                return Err(Error::argument("--api-timeout", message));
            }
            options.timeout = Duration::from_secs_f64(seconds);
        }
        if let Some(field) = &self.api_max_tokens_field {
            let message = format!("{field:?} is not max_tokens or max_completion_tokens");
            options.max_tokens_field =
                MaxTokensField::from_name(field).ok_or_else(|| Error::argument("--api-max-tokens-field", message))?;
        }
        options.cache = self.cache_file(out);
        options.chat_template_kwargs = chat_template_kwargs;
        OpenAiChat::open(options, settings)
    }

    /// The backend the flags name, generating as `settings` say; a served model's cache is
    /// `--api-cache`, else none (see [`Self::open_beside`]). `settings.template_kwargs` reach a
    /// local model's template only: a served model's template gets the variables
    /// [`Self::open_api`] is given, as `chat_template_kwargs`.
    pub fn open(&self, device: Device, settings: &ChatSettings) -> Result<Box<dyn ChatBackend>> {
        self.open_beside(device, settings, None)
    }

    /// [`Self::open`], a served model's cache defaulting to [`default_cache`] beside `out` (the
    /// command's output file).
    pub fn open_beside(
        &self,
        device: Device,
        settings: &ChatSettings,
        out: Option<&Path>,
    ) -> Result<Box<dyn ChatBackend>> {
        match self.choose()? {
            Chosen::Local(dir) => Ok(Box::new(LocalChat::open(dir, device, settings)?)),
            Chosen::Api(base) => Ok(Box::new(self.open_api(&base, settings, out, serde_json::Map::new())?)),
        }
    }
}

/// `--template-kwarg KEY=VALUE` flags (VALUE in JSON) as the JSON object a served model's chat
/// template reads (`chat_template_kwargs`); a flag that is not KEY=JSON is refused, naming it.
pub fn api_template_kwargs(flags: &[String]) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut kwargs = serde_json::Map::new();
    for flag in flags {
        let parsed = flag
            .split_once('=')
            .and_then(|(key, value)| Some((key.trim(), serde_json::from_str::<serde_json::Value>(value).ok()?)));
        let (key, value) =
            parsed.ok_or_else(|| Error::argument("--template-kwarg", format!("{flag:?} is not KEY=JSON")))?;
        kwargs.insert(key.to_string(), value);
    }
    Ok(kwargs)
}
