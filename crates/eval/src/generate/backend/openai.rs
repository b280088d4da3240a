//! A model served elsewhere as a [`ChatBackend`]: each conversation sent to an OpenAI-compatible
//! `POST {base_url}/chat/completions` (vLLM, llama.cpp's server, `transformers serve`, OpenAI) as
//! `{model, messages, temperature, max_tokens (or max_completion_tokens), seed, top_p, stop}`, with the API
//! key from the environment in an `Authorization: Bearer` header (never written to a log, a cache or
//! an error; credentials in the base URL, `http://user:secret@host/v1`, are sent as HTTP Basic auth
//! when there is no key, and shown as `user:***@`). A connection error, HTTP 429 or 5xx is retried
//! with exponential backoff (jittered from the seed) or after the server's `Retry-After` (seconds or
//! an HTTP date); any other status, and a reply that is not UTF-8, not JSON or not a chat completion,
//! fails at once with the server's message. Requests may be spaced by a rate limit and run a few at a
//! time, the replies in order; once one has failed for good, no other request (or retry) starts.
//!
//! Every answer is appended to a response cache (JSON Lines, one `{"key", "request", "response"}`
//! a line, flushed as it arrives), keyed by the SHA-256 of the URL (without credentials) and the
//! canonical JSON body (keys sorted, no spaces; the key is not in it): a rerun sends nothing, an
//! interrupted run sends only what it had not received, and a cache hit never contacts the server.
//! A hit's key is computed again from the request stored beside it, and a line whose key is not its
//! request's is refused, naming the file and the line.
use super::{ChatBackend, ChatSettings, Reply};
use crate::generate::chat::Messages;
use indolm_torch::error::{Error, IoContext, Result};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable the API key is read from unless another is named.
pub const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";
/// The environment variable that gives the base URL when no flag does.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Retries of a request after its first try, by default.
pub(crate) const DEFAULT_RETRIES: u32 = 6;
/// How long a request may take, its answer included, by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The first pause of the backoff (doubled at each retry).
const BACKOFF_START: Duration = Duration::from_secs(1);
/// The longest pause of the backoff.
const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// The longest `Retry-After` honoured (a longer one is waited this long).
const RETRY_AFTER_CAP: Duration = Duration::from_secs(900);
/// Characters of a server's message kept in an error.
const MESSAGE_CHARS: usize = 400;

/// An API key: sent in the `Authorization` header and nowhere else; its `Debug` shows no part of it.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key `text` (surrounding spaces dropped).
    pub fn new(text: &str) -> Self {
        ApiKey(text.trim().to_string())
    }

    /// `text` with every occurrence of the key replaced by `[redacted]` (a server may echo it).
    fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_string()
        } else {
            text.replace(&self.0, "[redacted]")
        }
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// `url` with the credentials of its authority hidden: `http://user:secret@host/v1` →
/// `http://user:***@host/v1` (a user name alone, which may be a token, → `***@`).
pub(crate) fn redact_url(url: &str) -> String {
    match split_credentials(url) {
        Some((before, credentials, after)) => {
            let shown = match credentials.split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None => "***".to_string(),
            };
            format!("{before}{shown}@{after}")
        }
        None => url.to_string(),
    }
}

/// `url` without the credentials of its authority (what the cache key covers).
fn url_without_credentials(url: &str) -> String {
    match split_credentials(url) {
        Some((before, _, after)) => format!("{before}{after}"),
        None => url.to_string(),
    }
}

/// `url` split around the credentials of its authority: (`scheme://`, `user:secret`, `host/…`)
/// (the authority starts the text when there is no `scheme://`).
fn split_credentials(url: &str) -> Option<(&str, &str, &str)> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')? + start;
    Some((&url[..start], &url[start..at], &url[at + 1..]))
}

/// The request field that bounds a reply's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: vLLM, llama.cpp's server, `transformers serve`, OpenAI's non-reasoning models.
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models (GPT-5 mini, the o-series) accept.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name in the request.
    pub fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The field named `name`, if it is one of the two.
    pub fn from_name(name: &str) -> Option<Self> {
        [MaxTokensField::MaxTokens, MaxTokensField::MaxCompletionTokens].into_iter().find(|f| f.name() == name)
    }
}

/// Where the server is and how to talk to it.
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// The base URL, the part before `/chat/completions` (`http://localhost:8000/v1`).
    pub base_url: String,
    /// The served model's name.
    pub model: String,
    /// The API key, when the server needs one.
    pub api_key: Option<ApiKey>,
    /// Retries of a request after its first try (connection errors, HTTP 429 and 5xx).
    pub retries: u32,
    /// Requests per minute at most, retries included; 0: no limit.
    pub rate_limit: u32,
    /// Requests in flight at once (at least 1).
    pub concurrency: usize,
    /// How long one request may take, its answer included.
    pub timeout: Duration,
    /// The response cache file; `None`: every request goes to the server.
    pub cache: Option<PathBuf>,
    /// The field that bounds a reply's tokens.
    pub max_tokens_field: MaxTokensField,
    /// Variables for the server's chat template, sent as `chat_template_kwargs` when any (vLLM,
    /// `transformers serve` and llama.cpp's server read them; OpenAI refuses the field).
    pub chat_template_kwargs: Map<String, Value>,
}

impl OpenAiOptions {
    /// `model` at `base_url` with the defaults: no key, [`DEFAULT_RETRIES`], no rate limit, one
    /// request at a time, [`DEFAULT_TIMEOUT`], no cache, `max_tokens`.
    pub fn new(base_url: &str, model: &str) -> Self {
        OpenAiOptions {
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key: None,
            retries: DEFAULT_RETRIES,
            rate_limit: 0,
            concurrency: 1,
            timeout: DEFAULT_TIMEOUT,
            cache: None,
            max_tokens_field: MaxTokensField::MaxTokens,
            chat_template_kwargs: Map::new(),
        }
    }
}

/// A request's outcome in a worker thread: the server's answer and its reply, or why not.
type Outcome = std::result::Result<(Value, Reply), String>;

/// What a backend did: replies from the cache, requests answered, retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiStats {
    /// Replies taken from the cache.
    pub cached: usize,
    /// Requests the server answered (each one once, however many tries it took).
    pub requested: usize,
    /// Tries repeated after a connection error, HTTP 429 or 5xx.
    pub retries: usize,
}

/// A served model answering conversations.
pub struct OpenAiChat {
    /// What sends the requests (shared by the worker threads).
    client: Client,
    /// How replies are generated.
    settings: ChatSettings,
    /// The field that bounds a reply's tokens.
    max_tokens_field: MaxTokensField,
    /// Sent as `chat_template_kwargs` when not empty.
    chat_template_kwargs: Map<String, Value>,
    /// Requests in flight at once.
    concurrency: usize,
    /// The response cache.
    cache: Option<Cache>,
    /// Replies taken from the cache so far.
    cached: usize,
    /// Requests the server answered so far.
    requested: usize,
}

impl OpenAiChat {
    /// The backend `options` describe, generating as `settings` say; an error for a base URL that
    /// is not http(s), settings a server cannot be asked for, or a cache file that cannot be read.
    pub fn open(options: OpenAiOptions, settings: &ChatSettings) -> Result<Self> {
        let base = options.base_url.trim().trim_end_matches('/').to_string();
        let shown = redact_url(&base);
        if !(base.starts_with("http://") || base.starts_with("https://")) || base.contains(char::is_whitespace) {
            return Err(Error::argument(
                "--api-base",
                format!("{shown:?} is not an http:// or https:// URL (the part before /chat/completions)"),
            ));
        }
        if options.model.trim().is_empty() {
            return Err(Error::argument("--api-model", "name the served model"));
        }
        if settings.max_new_tokens == 0 {
            return Err(Error::argument("max_new_tokens", "must be at least 1"));
        }
        if !(settings.temperature.is_finite() && settings.temperature >= 0.0) {
            return Err(Error::argument("temperature", format!("must be 0 or more, not {}", settings.temperature)));
        }
        if let Some(p) = settings.top_p.filter(|p| !(p.is_finite() && *p > 0.0 && *p <= 1.0)) {
            return Err(Error::argument("top_p", format!("must be above 0 and at most 1, not {p}")));
        }
        if options.concurrency == 0 {
            return Err(Error::argument("--api-concurrency", "must be at least 1"));
        }
        if options.timeout.is_zero() {
            return Err(Error::argument("--api-timeout", "must be more than 0 seconds"));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(options.timeout))
            .build()
            .into();
        let rate = (options.rate_limit > 0).then(|| RateLimit {
            interval: Duration::from_secs(60) / options.rate_limit,
            next: Mutex::new(Instant::now()),
        });
        let cache = options.cache.as_deref().map(Cache::open).transpose()?;
        Ok(OpenAiChat {
            client: Client {
                describe: format!("{} at {shown}", options.model),
                model: options.model,
                url: format!("{base}/chat/completions"),
                shown_url: format!("{shown}/chat/completions"),
                key_url: url_without_credentials(&format!("{base}/chat/completions")),
                credentials: split_credentials(&base)
                    .map(|(_, credentials, _)| {
                        let password = credentials.split_once(':').map(|(_, password)| password.to_string());
                        password.into_iter().chain([credentials.to_string()]).filter(|c| !c.is_empty()).collect()
                    })
                    .unwrap_or_default(),
                agent,
                key: options.api_key,
                retries: options.retries,
                rate,
                timeout: options.timeout,
                seed: settings.seed,
                retried: AtomicUsize::new(0),
            },
            settings: settings.clone(),
            max_tokens_field: options.max_tokens_field,
            chat_template_kwargs: options.chat_template_kwargs,
            concurrency: options.concurrency,
            cache,
            cached: 0,
            requested: 0,
        })
    }

    /// Replies from the cache, requests answered and retries so far.
    pub fn stats(&self) -> ApiStats {
        ApiStats {
            cached: self.cached,
            requested: self.requested,
            retries: self.client.retried.load(Ordering::Relaxed),
        }
    }

    /// The request body for `messages`: `{model, messages, temperature, max_tokens, seed}`, with
    /// `top_p` when given, `stop` when there are stop strings and `chat_template_kwargs` when there
    /// are variables (a request without them has the body, so the cache key, it always had).
    pub(crate) fn request_body(&self, messages: &Messages) -> Result<Value> {
        let messages = serde_json::to_value(messages)
            .map_err(|e| Error::data("chat", format!("a conversation cannot be written as JSON: {e}")))?;
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.client.model.as_str()));
        body.insert("messages".into(), messages);
        body.insert("temperature".into(), Value::from(self.settings.temperature));
        body.insert(self.max_tokens_field.name().into(), Value::from(self.settings.max_new_tokens));
        body.insert("seed".into(), Value::from(self.settings.seed));
        if let Some(p) = self.settings.top_p {
            body.insert("top_p".into(), Value::from(p));
        }
        if !self.settings.stop_strings.is_empty() {
            body.insert("stop".into(), Value::from(self.settings.stop_strings.clone()));
        }
        if !self.chat_template_kwargs.is_empty() {
            body.insert("chat_template_kwargs".into(), Value::Object(self.chat_template_kwargs.clone()));
        }
        Ok(Value::Object(body))
    }
}

impl ChatBackend for OpenAiChat {
    fn describe(&self) -> String {
        self.client.describe.clone()
    }

    fn chat(&mut self, conversations: &[Messages], progress: &mut dyn FnMut(usize)) -> Result<Vec<Reply>> {
        let mut replies: Vec<Option<Reply>> = vec![None; conversations.len()];
        // The requests not in the cache, each sent once however many conversations ask it.
        let mut jobs: Vec<Job> = Vec::new();
        let mut job_of: HashMap<String, usize> = HashMap::new();
        let mut hits = 0;
        for (i, messages) in conversations.iter().enumerate() {
            let request = self.request_body(messages)?;
            let body = canonical_json(&request);
            let key = cache_key(&self.client.key_url, &body);
            let hit = self.cache.as_ref().and_then(|c| c.get(&key).map(|entry| (entry, &c.path)));
            if let Some((entry, path)) = hit {
                let line = entry.line;
                let stored = cache_key(&self.client.key_url, &canonical_json(&entry.request));
                if stored != key {
                    return Err(Error::invalid(
                        path,
                        format!(
                            "line {line}: its key {key} is not its request's ({stored}): the line was edited or its key \
                             copied from another line, and would give this prompt another's answer; delete the line \
                             (its request is then sent again)"
                        ),
                    ));
                }
                let reply = reply_of(&entry.response).map_err(|e| Error::invalid(path, format!("line {line}: {e}")))?;
                replies[i] = Some(reply);
                hits += 1;
            } else if let Some(&j) = job_of.get(&key) {
                jobs[j].conversations.push(i);
            } else {
                job_of.insert(key.clone(), jobs.len());
                jobs.push(Job { conversations: vec![i], request, body, key });
            }
        }
        self.cached += hits;
        if hits > 0 {
            progress(hits);
        }
        if !jobs.is_empty() {
            let note = match &self.cache {
                Some(c) => format!("{hits} of {} replies from the cache {}", conversations.len(), c.path.display()),
                None => "no response cache".to_string(),
            };
            eprintln!("note: {note}; {} requests to {}", jobs.len(), self.client.describe);
        }
        let (answered, failure) = self.run(&jobs, &mut replies, progress);
        self.requested += answered;
        if let Some(message) = failure {
            let kept = match &self.cache {
                Some(c) if answered > 0 => {
                    format!("; the replies received ({answered}) are kept in {}: run again to resume", c.path.display())
                }
                _ => String::new(),
            };
            return Err(Error::download(self.client.describe.clone(), format!("{message}{kept}")));
        }
        Ok(replies.into_iter().flatten().collect())
    }
}

/// A request to send, and the conversations that asked it.
struct Job {
    /// The indexes of the conversations it answers.
    conversations: Vec<usize>,
    /// Its body, as written to the cache.
    request: Value,
    /// Its body as sent: canonical JSON.
    body: String,
    /// Its cache key.
    key: String,
}

impl OpenAiChat {
    /// Sends `jobs`, `concurrency` at a time, filling `replies` and the cache as answers arrive;
    /// once a request has failed for good no new request (nor retry) starts: the worker that saw
    /// the failure raises the flag before reporting it, and every worker checks it before each try.
    /// Those already sent finish. Returns the requests answered and the first failure's message.
    fn run(
        &mut self,
        jobs: &[Job],
        replies: &mut [Option<Reply>],
        progress: &mut dyn FnMut(usize),
    ) -> (usize, Option<String>) {
        if jobs.is_empty() {
            return (0, None);
        }
        let workers = self.concurrency.min(jobs.len()).max(1);
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let (client, cache) = (&self.client, &mut self.cache);
        let mut answered = 0;
        let mut failure: Option<String> = None;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, Outcome)>();
            for _ in 0..workers {
                let tx = tx.clone();
                let (next, failed) = (&next, &failed);
                scope.spawn(move || {
                    while !failed.load(Ordering::SeqCst) {
                        let j = next.fetch_add(1, Ordering::SeqCst);
                        let Some(job) = jobs.get(j) else { break };
                        // None: not sent (or not retried), another request having failed.
                        let Some(outcome) = client.request(&job.body, j, failed) else { break };
                        if outcome.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        if tx.send((j, outcome)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for (j, result) in rx {
                let job = &jobs[j];
                let outcome = result.and_then(|(response, reply)| match cache.as_mut() {
                    Some(cache) => {
                        cache.put(&job.key, &job.request, &response).map(|()| reply).map_err(|e| e.to_string())
                    }
                    None => Ok(reply),
                });
                match outcome {
                    Ok(reply) => {
                        answered += 1;
                        for &i in &job.conversations {
                            replies[i] = Some(reply.clone());
                        }
                        progress(job.conversations.len());
                    }
                    Err(message) => {
                        failed.store(true, Ordering::SeqCst);
                        if failure.is_none() {
                            failure = Some(message);
                        }
                    }
                }
            }
        });
        (answered, failure)
    }
}

/// A failed try: why, whether another may succeed, and when the server asked to try again.
struct Failure {
    /// What happened, the server's message included.
    message: String,
    /// A connection error, HTTP 429 or 5xx.
    transient: bool,
    /// The server's `Retry-After` (or `retry-after-ms`).
    retry_after: Option<Duration>,
}

/// Requests per minute at most: each try waits for its turn, `interval` after the previous one.
struct RateLimit {
    /// 60 s / the requests per minute.
    interval: Duration,
    /// When the next try may start.
    next: Mutex<Instant>,
}

impl RateLimit {
    /// Waits for this try's turn.
    fn wait(&self) {
        let at = {
            let mut next = self.next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let at = (*next).max(Instant::now());
            *next = at + self.interval;
            at
        };
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
    }
}

/// What sends requests: the HTTP agent, the key, the retry and rate-limit rules.
struct Client {
    /// "MODEL at BASE_URL".
    describe: String,
    /// The served model's name.
    model: String,
    /// `{base}/chat/completions`, credentials included (ureq sends them as Basic auth when no key
    /// is set): never shown.
    url: String,
    /// The URL as messages show it: credentials redacted ([`redact_url`]).
    shown_url: String,
    /// The URL the cache key covers: without credentials.
    key_url: String,
    /// The base URL's password and whole credentials (`user:secret`), hidden in every message.
    credentials: Vec<String>,
    /// The HTTP agent (timeouts set, HTTP statuses as responses).
    agent: ureq::Agent,
    /// The API key.
    key: Option<ApiKey>,
    /// Retries after the first try.
    retries: u32,
    /// The rate limit, when there is one.
    rate: Option<RateLimit>,
    /// The timeout of one request, for messages.
    timeout: Duration,
    /// The seed of the backoff's jitter.
    seed: u64,
    /// Tries repeated so far.
    retried: AtomicUsize,
}

impl Client {
    /// `text` without the key, the URL's credentials or its password.
    fn redact(&self, text: &str) -> String {
        let text = self.key.as_ref().map_or_else(|| text.to_string(), |k| k.redact(text));
        let text = text.replace(&self.url, &self.shown_url);
        self.credentials.iter().fold(text, |text, secret| text.replace(secret.as_str(), "***"))
    }

    /// Sends `body` (request `index` of the run, for the jitter) until it is answered, fails for
    /// good, or has been tried `retries + 1` times; the answer and its reply, else a message.
    /// `None` when `stop` was raised (another request failed) before a try.
    fn request(&self, body: &str, index: usize, stop: &AtomicBool) -> Option<Outcome> {
        let tries = self.retries.saturating_add(1);
        let mut attempt = 1;
        loop {
            if let Some(rate) = &self.rate {
                rate.wait();
            }
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let failure = match self.try_once(body) {
                Ok(done) => return Some(Ok(done)),
                Err(failure) => failure,
            };
            if !failure.transient {
                return Some(Err(failure.message));
            }
            if attempt >= tries {
                let s = if tries == 1 { "try" } else { "tries" };
                let message =
                    format!("{} (gave up after {tries} {s}: --api-retries {})", failure.message, self.retries);
                return Some(Err(message));
            }
            let (pause, why) = match failure.retry_after {
                Some(after) => (after.min(RETRY_AFTER_CAP), ", as its Retry-After asks"),
                None => (backoff(self.seed, index, attempt), ""),
            };
            self.retried.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "note: {}: {}; retrying in {:.1} s{why} (try {} of {tries})",
                self.describe,
                failure.message,
                pause.as_secs_f64(),
                attempt + 1
            );
            pause_unless(pause, stop);
            attempt += 1;
        }
    }

    /// One try: the answer and its reply, or why not.
    fn try_once(&self, body: &str) -> std::result::Result<(Value, Reply), Failure> {
        let mut request = self.agent.post(self.url.as_str()).header("Content-Type", "application/json");
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.0));
        }
        let transport = |e: ureq::Error| {
            let message = match &e {
                ureq::Error::Timeout(_) => {
                    format!("no answer within {} s (--api-timeout)", self.timeout.as_secs_f64())
                }
                _ => format!("cannot reach {}: {}", self.shown_url, self.redact(&e.to_string())),
            };
            let transient = !matches!(
                e,
                ureq::Error::BadUri(_)
                    | ureq::Error::Http(_)
                    | ureq::Error::InvalidProxyUrl
                    | ureq::Error::BodyExceedsLimit(_)
            );
            Failure { message, transient, retry_after: None }
        };
        let mut response = request.send(body).map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let bytes = response.body_mut().read_to_vec().map_err(transport)?;
        let permanent = |message: String| Failure { message, transient: false, retry_after: None };
        let text = match String::from_utf8(bytes) {
            Ok(text) => self.redact(&text),
            // An error answer's status decides its retry; its message shown as far as it is text.
            Err(e) if !(200..300).contains(&status) => self.redact(&String::from_utf8_lossy(e.as_bytes())),
            // A reachable server's bad reply, as one that is not JSON: not retried.
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                return Err(permanent(format!(
                    "HTTP {status}, but the server's reply is not UTF-8 (byte {at} of {} is 0x{:02x})",
                    e.as_bytes().len(),
                    e.as_bytes()[at]
                )));
            }
        };
        if !(200..300).contains(&status) {
            return Err(Failure {
                message: format!("HTTP {status}: {}", server_message(&text)),
                transient: status == 429 || status >= 500,
                retry_after,
            });
        }
        let response: Value = serde_json::from_str(&text)
            .map_err(|e| permanent(format!("HTTP {status}, but the answer is not JSON ({e}): {}", one_line(&text))))?;
        let reply =
            reply_of(&response).map_err(|e| permanent(format!("HTTP {status}, but {e}: {}", one_line(&text))))?;
        Ok((response, reply))
    }
}

/// The pause before retry `retry` (1 for the first) of request `index`: 1 s doubled at each retry,
/// at most 60 s, times a factor in [0.5, 1) drawn from `seed`, the request and the retry.
fn backoff(seed: u64, index: usize, retry: u32) -> Duration {
    let doubled = BACKOFF_START.as_secs_f64() * 2f64.powi(retry.saturating_sub(1).min(30) as i32);
    let mixed = mix(mix(seed ^ mix(index as u64)) ^ u64::from(retry));
    let unit = (mixed >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_secs_f64(doubled.min(BACKOFF_CAP.as_secs_f64()) * (0.5 + 0.5 * unit))
}

/// Sleeps `pause`, or less when `stop` is raised meanwhile (checked every 20 ms).
fn pause_unless(pause: Duration, stop: &AtomicBool) {
    let until = Instant::now() + pause;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}

/// SplitMix64's step: a well-mixed 64-bit value of `z`.
fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pause a response asks for: `retry-after-ms` (milliseconds), else `Retry-After` in seconds
/// or as an HTTP date (the time left until it; a date already past asks for no pause).
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    retry_after_at(headers, std::time::SystemTime::now())
}

/// [`retry_after`] as of `now`.
fn retry_after_at(headers: &ureq::http::HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    let dated = || -> Option<f64> {
        let at = http_date(headers.get("retry-after")?.to_str().ok()?)?;
        let now = now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
        Some((at as f64 - now).max(0.0))
    };
    let seconds = number("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| number("retry-after")).or_else(dated)?;
    Some(Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64())))
}

/// Seconds since the Unix epoch of an HTTP date in the form RFC 9110 has senders use
/// (IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`); `None` for anything else.
fn http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let clock: Vec<i64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [hour, minute, second] = clock.as_slice() else { return None };
    if !(1..=31).contains(&day) || !(0..24).contains(hour) || !(0..60).contains(minute) || !(0..=60).contains(second) {
        return None;
    }
    // Days since 1970-01-01 of the proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// `text` on one line, at most [`MESSAGE_CHARS`] characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MESSAGE_CHARS {
        return flat;
    }
    format!("{}…", flat.chars().take(MESSAGE_CHARS).collect::<String>())
}

/// The message of an error answer: OpenAI's and llama.cpp's `error.message`, an `error` string,
/// vLLM's `message`, FastAPI's `detail`; else the body itself (on one line, shortened).
fn server_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let found = parsed.as_ref().and_then(|v| {
        let error = v.get("error");
        error
            .and_then(|e| e.get("message"))
            .or_else(|| error.filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"))
            .map(text)
    });
    let message = one_line(&found.unwrap_or_else(|| body.to_string()));
    if message.is_empty() {
        "(no message)".to_string()
    } else {
        message
    }
}

/// The reply in a chat completion: the first choice's `message.content`, its `finish_reason`
/// mapped (`stop` → `eos`, or `stop_string` when the server names the stop string it met, as vLLM's
/// `stop_reason` does; `length` → `length`; any other word kept), and `usage.completion_tokens`.
/// The content is a string; or a list of text parts (`{"type": "text", "text": …}`), their texts
/// joined; or null, which a server sends when it has no text to give (a reply its filter stopped,
/// tool calls, which indolm never asks for): an empty completion, its finish reason kept. Anything
/// else (a number, an object, no `content` at all, a part that is not text) is refused, naming the
/// field and what it holds, rather than taken as an empty reply.
fn reply_of(response: &Value) -> std::result::Result<Reply, String> {
    let choice = response
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("the answer has no \"choices\"")?;
    let message = choice.get("message").ok_or("its first choice has no \"message\"")?;
    let text = match message.get("content") {
        Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                let kind = part.get("type").map_or(Some("text"), Value::as_str);
                match (kind, part.get("text")) {
                    (Some("text"), Some(Value::String(t))) => text.push_str(t),
                    _ => {
                        return Err(format!(
                            "choices[0].message.content[{i}] is {}, not a text part ({{\"type\": \"text\", \"text\": \"…\"}})",
                            found(part)
                        ))
                    }
                }
            }
            text
        }
        None => return Err("choices[0].message has no \"content\" (a string, or null when there is no text)".into()),
        Some(other) => {
            return Err(format!(
                "choices[0].message.content is {}, not a string, a list of text parts or null",
                found(other)
            ))
        }
    };
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") if choice.get("stop_reason").is_some_and(Value::is_string) => "stop_string".to_string(),
        Some("stop") => "eos".to_string(),
        Some(other) => other.to_string(),
        None => "unknown".to_string(),
    };
    let tokens = response.pointer("/usage/completion_tokens").and_then(Value::as_u64).map(|t| t as usize);
    Ok(Reply { text, tokens, stop })
}

/// What a JSON value is, for a message: its kind and its text, shortened (`42 (a number)`).
fn found(value: &Value) -> String {
    let kind = crate::generate::prompts::kind_of(value);
    let text = value.to_string();
    let shown =
        if text.chars().count() > 80 { format!("{}…", text.chars().take(80).collect::<String>()) } else { text };
    format!("{shown} ({kind})")
}

/// `value` as canonical JSON: object keys sorted, no spaces (what is sent, hashed and cached).
pub(crate) fn canonical_json(value: &Value) -> String {
    /// Appends `value` to `out`.
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(key.as_str()).to_string());
                    out.push(':');
                    write(item, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The cache key of a request: the SHA-256 (hex) of `POST {url}`, a newline and the canonical body.
pub(crate) fn cache_key(url: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(format!("POST {url}\n").as_bytes());
    hasher.update(body.as_bytes());
    format!("{:x}", hasher.finalize())
}

/// A cache entry: the request its key was computed from, the answer, and its line in the file.
struct Entry {
    /// The request as sent (its canonical JSON is what the key hashes).
    request: Value,
    /// The server's answer.
    response: Value,
    /// Its line in the file (1-based).
    line: usize,
}

/// The response cache: the answers of a JSON Lines file by key, and the file to append new ones to.
struct Cache {
    /// The file.
    path: PathBuf,
    /// The entries read and written, by key.
    entries: HashMap<String, Entry>,
    /// The line the next entry is written on.
    next_line: usize,
    /// The file opened for appending, once something is written.
    file: Option<std::fs::File>,
}

impl Cache {
    /// The cache in `path` (none yet when the file does not exist). A last line cut short (a write
    /// interrupted) is removed from the file with a note; any other line that is not an entry is an
    /// error naming the file and the line.
    fn open(path: &Path) -> Result<Self> {
        let mut cache = Cache { path: path.to_path_buf(), entries: HashMap::new(), next_line: 1, file: None };
        if !path.exists() {
            return Ok(cache);
        }
        let text = indolm_core::files::read_to_string(path)?;
        let mut offset = 0;
        let mut torn = None;
        for (i, line) in text.split_inclusive('\n').enumerate() {
            let start = offset;
            offset += line.len();
            if line.trim().is_empty() {
                cache.next_line = i + 2;
                continue;
            }
            let entry = serde_json::from_str::<Value>(line).ok().and_then(|mut v| {
                let key = v.get("key")?.as_str()?.to_string();
                let response = v.get_mut("response").filter(|r| r.is_object())?.take();
                let request = v.get_mut("request").filter(|r| r.is_object())?.take();
                Some((key, Entry { request, response, line: i + 1 }))
            });
            match entry {
                Some((key, entry)) => {
                    cache.entries.insert(key, entry);
                    cache.next_line = i + 2;
                }
                None if !line.ends_with('\n') => torn = Some(start),
                None => {
                    return Err(Error::invalid(
                        path,
                        format!("line {}: not a cache entry ({{\"key\", \"request\", \"response\"}})", i + 1),
                    ))
                }
            }
        }
        if let Some(keep) = torn {
            let file = std::fs::OpenOptions::new().write(true).open(path).with_path(path)?;
            file.set_len(keep as u64).with_path(path)?;
            eprintln!(
                "note: {}: its last line was cut short (a write interrupted): removed, its request is sent again",
                path.display()
            );
        } else if !text.is_empty() && !text.ends_with('\n') {
            // A complete last entry without its newline: the next one starts on a line of its own.
            cache.append(b"\n")?;
        }
        Ok(cache)
    }

    /// The entry cached under `key`.
    fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Appends `bytes` to the file (created when missing), flushed to the disk.
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let file = match self.file.take() {
            Some(file) => file,
            None => std::fs::OpenOptions::new().create(true).append(true).open(&self.path).with_path(&self.path)?,
        };
        let file = self.file.insert(file);
        file.write_all(bytes).with_path(&self.path)?;
        file.sync_data().with_path(&self.path)
    }

    /// Appends the answer `response` to `request` under `key`.
    fn put(&mut self, key: &str, request: &Value, response: &Value) -> Result<()> {
        let mut entry = Map::new();
        entry.insert("key".into(), Value::from(key));
        entry.insert("request".into(), request.clone());
        entry.insert("response".into(), response.clone());
        let mut line = canonical_json(&Value::Object(entry));
        line.push('\n');
        self.append(line.as_bytes())?;
        let entry = Entry { request: request.clone(), response: response.clone(), line: self.next_line };
        self.entries.insert(key.to_string(), entry);
        self.next_line += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finish_reasons_map_to_stop_reasons_and_tokens_come_from_usage() {
        let answer = |choice: Value| json!({"choices": [choice], "usage": {"completion_tokens": 7}});
        let stop = reply_of(&answer(json!({"message": {"content": "Jakarta."}, "finish_reason": "stop"}))).unwrap();
        assert_eq!(stop, Reply { text: "Jakarta.".into(), tokens: Some(7), stop: "eos".into() });
        let cases = [
            (json!({"message": {"content": "a"}, "finish_reason": "length"}), "length"),
            (json!({"message": {"content": "a"}, "finish_reason": "stop", "stop_reason": "###"}), "stop_string"),
            (json!({"message": {"content": "a"}, "finish_reason": "stop", "stop_reason": 2}), "eos"),
            (json!({"message": {"content": null}, "finish_reason": "content_filter"}), "content_filter"),
        ];
        for (choice, want) in cases {
            assert_eq!(reply_of(&answer(choice.clone())).unwrap().stop, want, "{choice}");
        }
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]});
        assert_eq!(reply_of(&parts).unwrap(), Reply { text: "ab".into(), tokens: None, stop: "unknown".into() });
        assert!(reply_of(&json!({"error": "x"})).unwrap_err().contains("no \"choices\""));
        // Null content (a tool call, a filtered reply): an empty completion, its finish reason kept.
        let tools =
            json!({"choices": [{"message": {"content": null, "tool_calls": []}, "finish_reason": "tool_calls"}]});
        assert_eq!(reply_of(&tools).unwrap(), Reply { text: "".into(), tokens: None, stop: "tool_calls".into() });
        // Anything else that is not text is refused, the field and what it holds named.
        let refused = |message: Value| reply_of(&json!({"choices": [{"message": message}]})).unwrap_err();
        let cases = [
            (json!({"content": 42}), "choices[0].message.content is 42 (a number), not a string"),
            (json!({"content": {"text": "a"}}), "choices[0].message.content is {\"text\":\"a\"} (an object)"),
            (json!({"content": ["a"]}), "choices[0].message.content[0] is \"a\" (a string), not a text part"),
            (json!({"content": [{"text": "a"}, {"type": "image_url"}]}), "content[1] is {\"type\":\"image_url\"}"),
            (json!({"content": [{"type": "text", "text": 5}]}), "content[0] is {\"text\":5,\"type\":\"text\"}"),
            (json!({"role": "assistant"}), "choices[0].message has no \"content\""),
        ];
        for (message, expected) in cases {
            let err = refused(message.clone());
            assert!(err.contains(expected), "{message}: {err}");
        }
        let long = refused(json!({"content": {"text": "x".repeat(10_000)}}));
        assert!(long.len() < 300, "the value shown is shortened: {long}");
    }

    #[test]
    fn credentials_in_a_url_are_redacted_and_left_out_of_the_cache_key() {
        for (url, shown, keyed) in [
            ("http://user:secret@h:8000/v1", "http://user:***@h:8000/v1", "http://h:8000/v1"),
            ("https://tok3n@h/v1", "https://***@h/v1", "https://h/v1"),
            ("http://h/v1?next=a@b", "http://h/v1?next=a@b", "http://h/v1?next=a@b"),
            ("http://u:p@ss@h/v1", "http://u:***@h/v1", "http://h/v1"),
            ("http://h/v1", "http://h/v1", "http://h/v1"),
            ("user:secret@h/v1", "user:***@h/v1", "h/v1"),
        ] {
            assert_eq!((redact_url(url), url_without_credentials(url)), (shown.to_string(), keyed.to_string()));
        }
        let settings = ChatSettings {
            max_new_tokens: 4,
            temperature: 0.0,
            seed: 1,
            top_p: None,
            stop_strings: Vec::new(),
            template_kwargs: Default::default(),
        };
        let chat = OpenAiChat::open(OpenAiOptions::new("http://u:pass-w0rd@127.0.0.1:9/v1/", "m"), &settings).unwrap();
        assert_eq!(chat.describe(), "m at http://u:***@127.0.0.1:9/v1");
        assert_eq!(chat.client.key_url, "http://127.0.0.1:9/v1/chat/completions");
        let message = "cannot reach http://u:pass-w0rd@127.0.0.1:9/v1/chat/completions (pass-w0rd)";
        assert_eq!(chat.client.redact(message), "cannot reach http://u:***@127.0.0.1:9/v1/chat/completions (***)");
        let err = OpenAiChat::open(OpenAiOptions::new("ftp://u:pass-w0rd@h/v1", "m"), &settings).err().unwrap();
        assert!(!err.to_string().contains("pass-w0rd"), "{err}");
    }

    #[test]
    fn canonical_json_sorts_keys_and_the_cache_key_covers_url_and_body() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0});
        let body = canonical_json(&a);
        assert_eq!(body, r#"{"messages":[{"content":"x","role":"user"}],"model":"m","temperature":0.0}"#);
        let key = cache_key("http://h/v1/chat/completions", &body);
        assert_eq!(key.len(), 64);
        assert_ne!(key, cache_key("http://other/v1/chat/completions", &body));
        assert_ne!(key, cache_key("http://h/v1/chat/completions", &canonical_json(&json!({"model": "n"}))));
    }

    #[test]
    fn backoff_doubles_up_to_a_minute_with_jitter_from_the_seed() {
        for retry in 1..=10 {
            let full = (1u64 << (retry - 1)).min(60) as f64;
            let pause = backoff(3407, 2, retry).as_secs_f64();
            assert!((0.5 * full..full).contains(&pause), "retry {retry}: {pause}");
            assert_eq!(backoff(3407, 2, retry), backoff(3407, 2, retry), "from the seed");
        }
        assert_ne!(backoff(3407, 2, 3), backoff(3408, 2, 3));
        assert_ne!(backoff(3407, 2, 3), backoff(3407, 3, 3));
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds_and_the_key_is_redacted() {
        let mut headers = ureq::http::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        // An HTTP date: the time left until it (a date past: no pause; another form: none).
        // The dates' epoch seconds are Python's `email.utils.parsedate_to_datetime(d).timestamp()`.
        for (date, epoch) in [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
            ("Thu, 03 Dec 2026 07:45:00 GMT", 1_796_283_900),
            ("Tue, 29 Feb 2028 23:59:59 GMT", 1_835_481_599),
        ] {
            assert_eq!(http_date(date), Some(epoch), "{date}");
        }
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_796_283_900 - 30);
        let mut dated = ureq::http::HeaderMap::new();
        dated.insert("retry-after", "Thu, 03 Dec 2026 07:45:00 GMT".parse().unwrap());
        assert_eq!(retry_after_at(&dated, now), Some(Duration::from_secs(30)));
        dated.insert("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap());
        assert_eq!(retry_after_at(&dated, now), Some(Duration::ZERO));
        for other in
            ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 32 Nov 1994 08:49:37 GMT"]
        {
            dated.insert("retry-after", other.parse().unwrap());
            assert_eq!(retry_after_at(&dated, now), None, "{other}");
        }
        let key = ApiKey::new(" sk-secret-123 ");
        assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
        assert_eq!(key.redact("bad key sk-secret-123!"), "bad key [redacted]!");
        assert_eq!(server_message(r#"{"error": {"message": "no\nway"}}"#), "no way");
        assert_eq!(server_message(r#"{"detail": "pinned"}"#), "pinned");
        assert_eq!(server_message(r#"{"object": "error", "message": "vllm says"}"#), "vllm says");
        assert_eq!(server_message("plain text"), "plain text");
    }

    #[test]
    fn a_torn_last_line_of_the_cache_is_removed_and_a_bad_line_before_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.jsonl");
        let entry = r#"{"key":"k1","request":{},"response":{"choices":[]}}"#;
        std::fs::write(&path, format!("{entry}\n{{\"key\":\"k2\",\"requ")).unwrap();
        let mut cache = Cache::open(&path).unwrap();
        assert!(cache.get("k1").is_some() && cache.get("k2").is_none());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{entry}\n"));
        cache.put("k3", &json!({}), &json!({"choices": []})).unwrap();
        let reread = Cache::open(&path).unwrap();
        assert!(reread.get("k1").is_some() && reread.get("k3").is_some());
        std::fs::write(&path, format!("not json\n{entry}\n")).unwrap();
        let err = Cache::open(&path).err().unwrap().to_string();
        assert!(err.contains("cache.jsonl: line 1: not a cache entry"), "{err}");
        // Entries keep their line, read or written.
        std::fs::write(&path, format!("{entry}\n\n{}", entry.replace("k1", "k2"))).unwrap();
        let mut cache = Cache::open(&path).unwrap();
        cache.put("k4", &json!({}), &json!({"choices": []})).unwrap();
        let lines: Vec<usize> = ["k1", "k2", "k4"].iter().map(|k| cache.get(k).unwrap().line).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert!(std::fs::read_to_string(&path).unwrap().lines().nth(3).unwrap().contains("\"k4\""));
    }
}
