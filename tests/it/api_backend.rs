//! The OpenAI-compatible backend (`indolm generate --api-base`, crates/eval/src/generate/backend/openai.rs)
//! against two servers.
//!
//! A real one: `transformers serve` (transformers 5.24 with fastapi, uvicorn and openai, pinned in
//! tests/reference/requirements.txt) on a copy of the Llama fixture given Llama 2's chat template,
//! on the CPU. indolm's greedy replies to prompts and a conversation, with a system message and two
//! requests in flight, equal the server's own answers to the same requests fetched with the openai
//! client (`hf_reference.py openai-chat`): text, token count, finish reason. With the server
//! stopped, a rerun answers from the response cache alone with the same output, and a request not
//! in the cache fails after its retries, naming the URL.
//!
//! A fake one (`openai_server.py fake`, the standard library's http.server) answering 429 with
//! Retry-After, 503 without it, 400 with an OpenAI error, slowly, or with the Authorization header
//! it was sent: the retries and their pauses, requests in flight at once, the cache resuming after a
//! torn last line, the rate limit, the request body's fields, the error texts, the flags refused,
//! and the API key in no output and no file.
use crate::common::*;
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The API key sent to the fake server, which must be written nowhere.
const KEY: &str = "sk-indolm-test-5f0c1d9e";
/// The environment variable it is read from (`--api-key-env`).
const KEY_ENV: &str = "INDOLM_TEST_API_KEY";

/// A server process, ended and reaped when dropped, however the test ends; its stdin is a pipe
/// whose closing ends it too (openai_server.py waits on it), should this process die first.
struct Server {
    child: Child,
    /// Where its output goes, shown when it fails.
    log: PathBuf,
}

impl Server {
    /// `python openai_server.py ARGS`, its stderr (and stdout, unless `piped_stdout`) into `log`.
    fn start(args: &[&str], log: &Path, piped_stdout: bool) -> Server {
        let file = std::fs::File::create(log).unwrap();
        let stdout = if piped_stdout { Stdio::piped() } else { Stdio::from(file.try_clone().unwrap()) };
        let child = Command::new(python())
            .arg(root().join("tests/reference/indolm_reference/openai_server.py"))
            .args(args)
            .env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_VERBOSITY", "error")
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start the server");
        Server { child, log: log.to_path_buf() }
    }

    /// What it wrote.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port of 127.0.0.1 free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Whether `GET /health` on `port` answers 200 (plain HTTP/1.0 over a socket: no proxy involved).
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

/// Runs indolm in a process of its own with `env` added, without the caller's OpenAI variables and
/// proxies (the servers are on 127.0.0.1).
fn run_indolm(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
    command.args(args);
    for name in ["OPENAI_API_KEY", "OPENAI_BASE_URL", KEY_ENV, "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        command.env_remove(name).env_remove(name.to_lowercase());
    }
    command.envs(env.iter().copied());
    command.output().expect("run indolm")
}

/// [`run_indolm`], expected to succeed: (stdout, stderr).
fn api_ok(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let out = run_indolm(args, env);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    assert!(out.status.success(), "indolm {args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// [`run_indolm`], expected to fail with one error line after its notes: its stderr.
fn api_fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run_indolm(args, env);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "indolm {args:?}: expected exit 1, stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: "), "the error is the last line: {stderr}");
    assert_eq!(stderr.lines().filter(|l| l.starts_with("error: ")).count(), 1, "{stderr}");
    stderr
}

/// The JSON values of a JSON Lines file.
fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn transformers_serve_greedy_replies_are_its_own_and_a_rerun_needs_no_server() {
    let work = scratch("api-serve");
    let model = copy_dir(crate::decoders::llama(), "api-serve-llama");
    let path = model.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let template = root().join("tests/fixtures/chat_templates/llama-2-7b-chat.jinja");
    config["chat_template"] = json!(std::fs::read_to_string(template).unwrap());
    std::fs::write(&path, config.to_string()).unwrap();
    let port = free_port();
    let m = model.to_str().unwrap();
    let mut server = Server::start(&["serve", m, &port.to_string()], &work.join("serve.log"), false);
    // Two prompts and a conversation, each after the system message.
    let system = "Jawab singkat.";
    let turns = json!([{"role": "user", "content": "Apa ibu kota Indonesia?"},
                       {"role": "assistant", "content": "Jakarta."}, {"role": "user", "content": "Dan Jawa Barat?"}]);
    let lines = [
        json!({"id": "a", "prompt": "Ibu kota Indonesia adalah"}),
        json!({"id": "b", "prompt": "Para petani di desa itu menanam padi dan jagung setiap musim"}),
        json!({"id": "c", "messages": turns}),
        json!({"id": 4, "prompt": "Dia"}),
    ];
    let prompts = work.join("prompts.jsonl");
    std::fs::write(&prompts, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let conversations: Vec<Value> = lines
        .iter()
        .map(|l| {
            let mut messages = vec![json!({"role": "system", "content": system})];
            match l.get("prompt") {
                Some(prompt) => messages.push(json!({"role": "user", "content": prompt})),
                None => messages.extend(l["messages"].as_array().unwrap().iter().cloned()),
            }
            Value::from(messages)
        })
        .collect();
    let started = Instant::now();
    while !healthy(port) {
        assert!(matches!(server.child.try_wait(), Ok(None)), "transformers serve exited:\n{}", server.log());
        assert!(started.elapsed() < Duration::from_secs(120), "not ready after 120 s:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("transformers serve ready in {:.1} s", started.elapsed().as_secs_f64());
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = work.join("completions.jsonl");
    let (p, o) = (prompts.to_str().unwrap(), out.to_str().unwrap());
    let args = [
        "generate",
        "--api-base",
        base.as_str(),
        "--api-model",
        m,
        "--prompts",
        p,
        "--out",
        o,
        "--max-new-tokens",
        "12",
        "--temperature",
        "0",
        "--system",
        system,
        "--api-concurrency",
        "2",
    ];
    let (stdout, stderr) = api_ok(&args, &[]);
    assert!(stdout.contains("4 completions (greedy;") && stdout.contains("0 from the cache, 4 requested"), "{stdout}");
    assert!(stderr.contains("note: OPENAI_API_KEY is not set: requests carry no API key"), "{stderr}");
    // The server's own answers to the same requests, through the openai client.
    let requests: Vec<Value> = conversations
        .iter()
        .map(|messages| json!({"model": m, "messages": messages, "temperature": 0, "max_tokens": 12, "seed": 3407}))
        .collect();
    let (asked, answered) = (work.join("requests.json"), work.join("answers.json"));
    std::fs::write(&asked, Value::from(requests).to_string()).unwrap();
    reference(&["openai-chat", &base, asked.to_str().unwrap(), answered.to_str().unwrap()]);
    let answers: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&answered).unwrap()).unwrap();
    let records = jsonl(&out);
    assert_eq!(records.len(), 4);
    for ((record, answer), line) in records.iter().zip(&answers).zip(&lines) {
        assert_eq!(record["id"], line["id"]);
        assert_eq!(record.get("prompt"), line.get("prompt"), "the line's prompt, without --system's message");
        assert_eq!(record.get("messages"), line.get("messages"));
        assert_eq!(record["completion"], answer["text"], "{} vs the server's own answer", record["id"]);
        assert_eq!(record["tokens"], answer["completion_tokens"]);
        let stop = match answer["finish_reason"].as_str().unwrap() {
            "stop" => "eos",
            other => other,
        };
        assert_eq!(record["stop_reason"], stop);
    }
    let texts: std::collections::BTreeSet<&str> = records.iter().map(|r| r["completion"].as_str().unwrap()).collect();
    assert!(texts.len() >= 3, "the prompts get different answers: {texts:?}");
    println!("{:?}", records.iter().map(|r| r["completion"].as_str().unwrap()).collect::<Vec<_>>());
    // The cache beside the output: an entry a request, the body as sent.
    let cache = work.join("completions.api-cache.jsonl");
    let entries = jsonl(&cache);
    assert_eq!(entries.len(), 4);
    for entry in &entries {
        assert_eq!(entry["key"].as_str().unwrap().len(), 64);
        assert_eq!((&entry["request"]["model"], &entry["request"]["max_tokens"]), (&json!(m), &json!(12)));
        assert!(conversations.contains(&entry["request"]["messages"]), "{entry}");
    }
    // The server stopped: the rerun answers from the cache alone, the same records.
    let written = std::fs::read_to_string(&out).unwrap();
    drop(server);
    assert!(!healthy(port));
    let (stdout, stderr) = api_ok(&args, &[]);
    assert!(stdout.contains("4 from the cache, 0 requested, 0 retries"), "{stdout}");
    assert!(!stderr.contains("requests to"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);
    // A request the cache does not hold: the connection errors retried, then an error naming the URL.
    let mut eight = args.to_vec();
    eight[10] = "8";
    eight.extend(["--api-retries", "1"]);
    let err = api_fails(&eight, &[]);
    assert!(err.contains(&format!("error: {m} at {base}: cannot reach {base}/chat/completions")), "{err}");
    assert!(err.contains("(gave up after 2 tries: --api-retries 1)") && err.contains("retrying in"), "{err}");
    assert_eq!(jsonl(&cache).len(), 4, "nothing added");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written, "the output is kept");
}

/// A request the fake server logged.
struct Logged {
    /// When it arrived (seconds).
    time: f64,
    /// Its last message's content.
    content: String,
    /// Its Authorization header.
    authorization: Value,
    /// Its body.
    body: Value,
}

/// The requests the fake server has logged.
fn logged(log: &Path) -> Vec<Logged> {
    jsonl(log)
        .into_iter()
        .map(|r| Logged {
            time: r["time"].as_f64().unwrap(),
            content: r["body"]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().into(),
            authorization: r["authorization"].clone(),
            body: r["body"].clone(),
        })
        .collect()
}

/// The arrival times of the requests for `content`.
fn times(requests: &[Logged], content: &str) -> Vec<f64> {
    requests.iter().filter(|r| r.content == content).map(|r| r.time).collect()
}

/// The prompt file of `contents`, ids 1, 2, …
fn prompt_file(path: &Path, contents: &[&str]) {
    let text: String =
        contents.iter().enumerate().map(|(i, c)| format!("{}\n", json!({"id": i + 1, "prompt": c}))).collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_busy_or_failing_server_is_retried_rate_limited_and_resumed_and_the_key_is_written_nowhere() {
    let work = scratch("api-fake");
    let log = work.join("requests.jsonl");
    let mut server = Server::start(&["fake", log.to_str().unwrap()], &work.join("fake.log"), true);
    let mut first = String::new();
    std::io::BufReader::new(server.child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let port: Value = serde_json::from_str(&first).unwrap_or_else(|_| panic!("{first:?}: {}", server.log()));
    let base = format!("http://127.0.0.1:{}/v1", port["port"]);
    let key = [(KEY_ENV, KEY)];
    let prompts = work.join("prompts.jsonl");
    let contents = ["Dia", "busy", "flaky", "slow", "echo-key", "Dia"];
    prompt_file(&prompts, &contents);
    let out = work.join("answers.jsonl");
    let (p, o) = (prompts.to_str().unwrap(), out.to_str().unwrap());
    let api = ["generate", "--api-base", base.as_str(), "--api-model", "fake-model", "--api-key-env", KEY_ENV];
    let mut args = api.to_vec();
    args.extend(["--prompts", p, "--out", o, "--max-new-tokens", "5", "--api-concurrency", "3"]);
    let (stdout, stderr) = api_ok(&args, &key);
    let mut shown = vec![stdout.clone(), stderr.clone()];
    assert!(
        stdout.contains("6 completions (greedy; 6 eos, 0 length, 0 stop_string, 0 other), 18 new tokens")
            && stdout.contains("0 from the cache, 5 requested, 2 retries"),
        "{stdout}"
    );
    let waited = "HTTP 429: Rate limit reached, slow down; retrying in 1.0 s, as its Retry-After asks (try 2 of 7)";
    assert!(stderr.contains(waited), "{stderr}");
    assert!(stderr.contains("HTTP 503: overloaded; retrying in"), "{stderr}");
    let records = jsonl(&out);
    let completions: Vec<&str> = records.iter().map(|r| r["completion"].as_str().unwrap()).collect();
    assert_eq!(
        completions,
        ["echo: Dia", "echo: busy", "echo: flaky", "echo: slow", "echo: Bearer [redacted]", "echo: Dia"],
        "in the prompts' order; the key the server echoed is redacted"
    );
    assert!(records.iter().all(|r| r["tokens"] == 3 && r["stop_reason"] == "eos"), "{records:?}");
    // What the server received: each request once (the two "Dia" lines are one request), busy and
    // flaky twice; the key in the header; the body's fields.
    let requests = logged(&log);
    let count = |c: &str| requests.iter().filter(|r| r.content == c).count();
    assert_eq!([count("Dia"), count("busy"), count("flaky"), count("slow"), count("echo-key")], [1, 2, 2, 1, 1]);
    for r in &requests {
        assert_eq!(r.authorization, json!(format!("Bearer {KEY}")));
        let expected = json!({"model": "fake-model", "messages": [{"role": "user", "content": r.content}],
                              "temperature": 0.0, "max_tokens": 5, "seed": 3407});
        assert_eq!(r.body, expected);
    }
    let (busy, flaky) = (times(&requests, "busy"), times(&requests, "flaky"));
    assert!(busy[1] - busy[0] >= 0.95, "Retry-After: 1 honoured: {busy:?}");
    assert!((0.45..1.5).contains(&(flaky[1] - flaky[0])), "a backoff of 0.5 to 1 s: {flaky:?}");
    assert!(flaky[0] < busy[1], "three requests in flight: flaky's first try while busy waits");
    // A rerun: every reply from the cache, nothing sent.
    let cache = work.join("answers.api-cache.jsonl");
    let (written, cached) = (std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(&cache).unwrap());
    assert_eq!(cached.lines().count(), 5);
    let (stdout, _) = api_ok(&args, &key);
    assert!(stdout.contains("6 from the cache, 0 requested"), "{stdout}");
    assert_eq!((logged(&log).len(), std::fs::read_to_string(&out).unwrap()), (requests.len(), written.clone()));
    // An interrupted run: two entries and half a line left; the rest is asked again, the torn line
    // removed.
    let kept: Vec<&str> = cached.lines().take(3).collect();
    let torn = format!("{}\n{}\n{}", kept[0], kept[1], &kept[2][..kept[2].len() / 2]);
    std::fs::write(&cache, torn).unwrap();
    let hits: usize = kept[..2]
        .iter()
        .map(|l| {
            let entry: Value = serde_json::from_str(l).unwrap();
            contents.iter().filter(|&&c| entry["request"]["messages"][0]["content"] == c).count()
        })
        .sum();
    let (stdout, stderr) = api_ok(&args, &key);
    shown.extend([stdout.clone(), stderr.clone()]);
    assert!(stderr.contains("answers.api-cache.jsonl: its last line was cut short"), "{stderr}");
    assert!(stdout.contains(&format!("{hits} from the cache, 3 requested, 0 retries")), "{stdout}");
    assert_eq!(logged(&log).len(), requests.len() + 3);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);
    assert_eq!(jsonl(&cache).len(), 5, "every line an entry again");
    // The rate limit, across four requests in flight; the other body fields.
    let (rated, rated_out) = (work.join("rated.jsonl"), work.join("rated-out.jsonl"));
    prompt_file(&rated, &["satu", "dua", "tiga", "empat"]);
    let mut args = api.to_vec();
    args.extend(["--prompts", rated.to_str().unwrap(), "--out", rated_out.to_str().unwrap(), "--max-new-tokens", "5"]);
    args.extend(["--api-rate-limit", "120", "--api-concurrency", "4"]);
    args.extend(["--api-max-tokens-field", "max_completion_tokens"]);
    args.extend(["--temperature", "0.7", "--top-p", "0.9", "--seed", "5", "--stop", "###"]);
    args.extend(["--template-kwarg", "enable_thinking=false"]);
    let (stdout, stderr) = api_ok(&args, &key);
    shown.extend([stdout, stderr]);
    let requests = logged(&log);
    let mut starts: Vec<f64> = ["satu", "dua", "tiga", "empat"].iter().flat_map(|c| times(&requests, c)).collect();
    starts.sort_by(f64::total_cmp);
    assert_eq!(starts.len(), 4);
    assert!(starts.windows(2).all(|w| w[1] - w[0] >= 0.45), "120 a minute: 0.5 s apart: {starts:?}");
    let body = &requests.last().unwrap().body;
    assert_eq!(
        (&body["temperature"], &body["top_p"], &body["seed"], &body["stop"], &body["max_completion_tokens"]),
        (&json!(0.7), &json!(0.9), &json!(5), &json!(["###"]), &json!(5))
    );
    assert_eq!(body["chat_template_kwargs"], json!({"enable_thinking": false}));
    assert!(body.get("max_tokens").is_none(), "{body}");
    // A 400 fails at once with the server's message; the reply before it is kept.
    let (bad, bad_out) = (work.join("bad.jsonl"), work.join("bad-out.jsonl"));
    prompt_file(&bad, &["uno", "bad"]);
    let mut args = api.to_vec();
    args.extend(["--prompts", bad.to_str().unwrap(), "--out", bad_out.to_str().unwrap()]);
    let err = api_fails(&args, &key);
    shown.push(err.clone());
    assert!(
        err.contains(&format!(
            "error: fake-model at {base}: HTTP 400: Unsupported value: 'temperature' does not support 0; the replies \
             received (1) are kept in {}",
            work.join("bad-out.api-cache.jsonl").display()
        )),
        "{err}"
    );
    assert_eq!(count_in(&log, "bad"), 1, "a 400 is not retried");
    assert!(!bad_out.exists());
    // A server that stays down: --api-retries 2 is three tries, then its status and message.
    prompt_file(&bad, &["down"]);
    let mut args = api.to_vec();
    args.extend(["--prompts", bad.to_str().unwrap(), "--out", bad_out.to_str().unwrap(), "--api-retries", "2"]);
    let err = api_fails(&args, &key);
    shown.push(err.clone());
    assert!(err.contains("as its Retry-After asks (try 3 of 3)"), "{err}");
    assert!(err.contains("HTTP 503: the engine is down (gave up after 3 tries: --api-retries 2)"), "{err}");
    assert_eq!(count_in(&log, "down"), 3);
    // The key is in no output and no file.
    let (rated_cache, bad_cache) = (work.join("rated-out.api-cache.jsonl"), work.join("bad-out.api-cache.jsonl"));
    for file in [&out, &cache, &rated_out, &rated_cache, &bad_cache] {
        shown.push(std::fs::read_to_string(file).unwrap());
    }
    for text in &shown {
        assert!(!text.contains(KEY), "the key was written: {text}");
    }
    // Flags refused before anything is sent or written.
    let sent = logged(&log).len();
    let generate = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["generate", "--prompts", p, "--out"].iter().map(|s| s.to_string()).collect();
        args.push(work.join("never.jsonl").to_str().unwrap().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let never = work.join("never.jsonl");
    let model = work.to_str().unwrap(); // never loaded: the flags are refused first
    let cases: [(&[&str], &str); 8] = [
        (
            &["--model", model, "--api-base", base.as_str()],
            "--api-base: give --model DIR (a model loaded here) or --api-base URL",
        ),
        (&["--model", model, "--api-retries", "3"], "--api-retries: is for a served model"),
        (&["--api-model", "m"], "--api-base: say where m is served: --api-base URL"),
        (&[], "--model: say what answers: --model DIR"),
        (&["--api-base", base.as_str(), "--api-model", "m", "--top-k", "5"], "--top-k: is for a model loaded here"),
        (
            &["--api-base", base.as_str(), "--api-model", "m", "--api-key-env", "INDOLM_TEST_UNSET"],
            "--api-key-env: the environment variable INDOLM_TEST_UNSET is not set",
        ),
        (
            &["--api-base", "ftp://x/v1", "--api-model", "m"],
            "--api-base: \"ftp://x/v1\" is not an http:// or https:// URL",
        ),
        (
            &["--api-base", base.as_str(), "--api-model", "m", "--api-cache", never.to_str().unwrap()],
            "is also the output",
        ),
    ];
    for (extra, expected) in cases {
        let args = generate(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = api_fails(&args, &key);
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    assert_eq!(logged(&log).len(), sent, "nothing sent");
    assert!(!never.exists(), "nothing written");
    drop(server);
}

/// The requests the fake server logged for `content`.
fn count_in(log: &Path, content: &str) -> usize {
    logged(log).iter().filter(|r| r.content == content).count()
}

/// The fake server started in `work`: the server, its base URL's `host:port`, and its request log.
fn fake_server(work: &Path) -> (Server, String, PathBuf) {
    let log = work.join("requests.jsonl");
    let mut server = Server::start(&["fake", log.to_str().unwrap()], &work.join("fake.log"), true);
    let mut first = String::new();
    std::io::BufReader::new(server.child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let port: Value = serde_json::from_str(&first).unwrap_or_else(|_| panic!("{first:?}: {}", server.log()));
    let host = format!("127.0.0.1:{}", port["port"]);
    (server, host, log)
}

#[test]
fn no_request_starts_after_a_failure_and_bad_replies_swapped_cache_keys_and_missing_folders_are_refused() {
    let work = scratch("api-refusals");
    let (server, host, log) = fake_server(&work);
    let base = format!("http://{host}/v1");
    let key = [(KEY_ENV, KEY)];
    let api = ["generate", "--api-base", base.as_str(), "--api-model", "fake-model", "--api-key-env", KEY_ENV];
    let prompts = work.join("prompts.jsonl");
    let run = |contents: &[&str], out: &str, extra: &[&str]| -> std::process::Output {
        prompt_file(&prompts, contents);
        let out = work.join(out);
        let mut args = api.to_vec();
        args.extend(["--prompts", prompts.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        args.extend(extra);
        run_indolm(&args, &key)
    };
    let failed = |output: std::process::Output| -> String {
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(!stderr.contains("panicked") && stderr.trim_end().lines().last().unwrap().starts_with("error: "));
        stderr
    };
    // A request that fails for good: no other request starts, one at a time or two.
    let err = failed(run(&["bad", "uno", "dos"], "one.jsonl", &[]));
    assert!(err.contains("HTTP 400"), "{err}");
    assert_eq!((count_in(&log, "bad"), count_in(&log, "uno"), count_in(&log, "dos")), (1, 0, 0));
    let err = failed(run(&["bad", "slow", "tres", "cuatro", "cinco"], "two.jsonl", &["--api-concurrency", "2"]));
    let sent: Vec<usize> = ["bad", "slow", "tres", "cuatro", "cinco"].iter().map(|c| count_in(&log, c)).collect();
    assert_eq!(sent[2..], [0, 0, 0], "none after the failure: {sent:?}");
    if sent[1] == 1 {
        assert!(err.contains("the replies received (1) are kept"), "the request in flight finishes: {err}");
    }
    // A body that is not UTF-8: a reachable server's bad reply, not retried.
    let err = failed(run(&["latin1"], "latin1.jsonl", &["--api-retries", "2"]));
    assert!(err.contains("HTTP 200, but the server's reply is not UTF-8 (byte 41 of 72 is 0xe9)"), "{err}");
    assert!(!err.contains("cannot reach") && !err.contains("retrying"), "{err}");
    assert_eq!(count_in(&log, "latin1"), 1);
    // Content that is neither text nor null is refused, not taken as "".
    let err = failed(run(&["odd-content"], "odd.jsonl", &[]));
    assert!(err.contains("HTTP 200, but choices[0].message.content[0] is 42 (a number), not a text part"), "{err}");
    assert!(!work.join("odd.jsonl").exists());
    // A cache line whose key is another request's is refused by line, not answered from.
    assert!(run(&["uno", "dos"], "swap.jsonl", &[]).status.success());
    let cache = work.join("swap.api-cache.jsonl");
    let mut entries = jsonl(&cache);
    let (first, second) = (entries[0]["key"].clone(), entries[1]["key"].clone());
    entries[0]["key"] = second;
    entries[1]["key"] = first.clone();
    std::fs::write(&cache, entries.iter().map(|e| format!("{e}\n")).collect::<String>()).unwrap();
    let sent = logged(&log).len();
    let err = failed(run(&["uno", "dos"], "swap.jsonl", &[]));
    let expected =
        format!("error: {}: line 2: its key {} is not its request's (", cache.display(), first.as_str().unwrap());
    assert!(err.contains(&expected), "{err}");
    assert_eq!(logged(&log).len(), sent, "nothing sent");
    // A missing output folder is named, with its flag, before anything is sent.
    let missing = work.join("no-such-folder/out.jsonl");
    let err = failed(run(&["uno", "tres"], "no-such-folder/out.jsonl", &[]));
    assert_eq!(
        err.trim_end(),
        format!(
            "error: --out: {}: its folder {} does not exist: create it first, or name a file in an existing folder",
            missing.display(),
            missing.parent().unwrap().display()
        )
    );
    assert_eq!(logged(&log).len(), sent, "nothing sent");
    drop(server);
}

#[test]
fn credentials_in_the_base_url_are_sent_but_shown_and_written_nowhere() {
    let work = scratch("api-credentials");
    let (server, host, log) = fake_server(&work);
    let secret = "pw-5ecret-91";
    let base = format!("http://user:{secret}@{host}/v1");
    let prompts = work.join("prompts.jsonl");
    prompt_file(&prompts, &["Dia", "bad"]);
    let out = work.join("out.jsonl");
    let args = |base: &str, extra: &[&str]| -> Vec<String> {
        let mut args = vec!["generate", "--api-base", base, "--api-model", "fake-model"];
        args.extend(["--prompts", prompts.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        args.extend(extra);
        args.into_iter().map(String::from).collect()
    };
    let mut shown = Vec::new();
    let mut call = |args: Vec<String>, env: &[(&str, &str)]| -> Output {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run_indolm(&args, env);
        shown.push(String::from_utf8_lossy(&output.stdout).to_string());
        shown.push(String::from_utf8_lossy(&output.stderr).to_string());
        output
    };
    // With an API key: the key is sent; the failure's message shows the URL redacted.
    let keyed = ["--api-key-env", KEY_ENV];
    let failed = call(args(&base, &keyed), &[(KEY_ENV, KEY)]);
    let err = String::from_utf8_lossy(&failed.stderr).to_string();
    assert!(err.contains(&format!("error: fake-model at http://user:***@{host}/v1: HTTP 400")), "{err}");
    assert!(err.contains(&format!("requests to fake-model at http://user:***@{host}/v1")), "{err}");
    let requests = logged(&log);
    assert!(requests.iter().all(|r| r.authorization == json!(format!("Bearer {KEY}"))), "the key is still sent");
    // Without one: the URL's credentials are sent as Basic auth (base64 of "user:pw-5ecret-91").
    prompt_file(&prompts, &["Dia", "dua"]);
    assert!(call(args(&base, &[]), &[]).status.success());
    assert_eq!(logged(&log).last().unwrap().authorization, json!("Basic dXNlcjpwdy01ZWNyZXQtOTE="));
    // A server that cannot be reached, and a URL refused: redacted too.
    let closed = format!("http://user:{secret}@127.0.0.1:{}/v1", free_port());
    let unreachable = call(args(&closed, &["--api-retries", "0", "--api-key-env", KEY_ENV]), &[(KEY_ENV, KEY)]);
    let err = String::from_utf8_lossy(&unreachable.stderr).to_string();
    assert!(err.contains("cannot reach http://user:***@127.0.0.1:") && !unreachable.status.success(), "{err}");
    let refused = call(args(&format!("ftp://user:{secret}@{host}/v1"), &keyed), &[(KEY_ENV, KEY)]);
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(err.contains(&format!("\"ftp://user:***@{host}/v1\" is not an http")), "{err}");
    // In no output and no file.
    for file in [&out, &work.join("out.api-cache.jsonl")] {
        shown.push(std::fs::read_to_string(file).unwrap());
    }
    for text in &shown {
        assert!(!text.contains(secret) && !text.contains(KEY), "a credential was written: {text}");
    }
    drop(server);
}
