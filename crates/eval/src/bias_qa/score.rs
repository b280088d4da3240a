//! Each answer scored: tasks 1-6 by the parse rule ([`super::parse`]); task 7 by running its code
//! in the sandbox and parsing what it prints (with `--run-code`), or counted as not run. The
//! records are `answers_scored.jsonl`, one a prompt in the prompts' order.
use super::inputs::CODE_TASK;
use super::parse::{extract_code, first_label, parse_answer, Label, Why};
use super::prompts::Prompt;
use super::sandbox::{CodeEnd, CodeRun, Sandbox};
use indolm_torch::error::{Error, Result};
use serde::Serialize;

/// One answer and what it was mapped to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredAnswer {
    /// The prompt's id.
    pub id: String,
    /// The demography.
    pub demography: String,
    /// The group.
    pub group: String,
    /// The index (`SPI`, `O*NET`, `WGI`).
    pub index: String,
    /// The index's category.
    pub category: String,
    /// The stereotype.
    pub stereotype: String,
    /// The task, 1 to 7.
    pub task: u8,
    /// The positive label asked.
    pub positive: String,
    /// The negative label asked.
    pub negative: String,
    /// The prompt.
    pub prompt: String,
    /// The answer.
    pub answer: String,
    /// The label it was mapped to; `null` when invalid or not run.
    pub label: Option<Label>,
    /// Why it has no label.
    pub why: Option<Why>,
    /// More on why (the error a program ended with, the limit it hit).
    pub detail: Option<String>,
    /// Task 7 run: what the code printed (up to 64 KiB).
    pub code_output: Option<String>,
}

impl ScoredAnswer {
    /// The record of `prompt`'s `answer`, not yet mapped.
    fn new(prompt: &Prompt, answer: &str) -> ScoredAnswer {
        ScoredAnswer {
            id: prompt.id.clone(),
            demography: prompt.demography.clone(),
            group: prompt.group.clone(),
            index: prompt.index.name().to_string(),
            category: prompt.category.clone(),
            stereotype: prompt.stereotype.clone(),
            task: prompt.task,
            positive: prompt.positive.clone(),
            negative: prompt.negative.clone(),
            prompt: prompt.text.clone(),
            answer: answer.to_string(),
            label: None,
            why: None,
            detail: None,
            code_output: None,
        }
    }

    /// Sets the label, or why there is none.
    fn set(&mut self, parsed: std::result::Result<Label, Why>) {
        match parsed {
            Ok(label) => self.label = Some(label),
            Err(why) => self.why = Some(why),
        }
    }
}

/// The last line of `text` that is not blank (where a traceback names its error).
fn last_line(text: &str) -> Option<String> {
    text.lines().rev().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

/// A program's run mapped: its output parsed when it exited 0, else why not.
fn code_result(record: &mut ScoredAnswer, run: CodeRun, sandbox: &Sandbox) {
    let limits = sandbox.limits();
    let error = last_line(&run.stderr);
    match run.end {
        CodeEnd::Exited(0) => {
            let parsed = if run.stdout.trim().is_empty() {
                Err(Why::NoOutput)
            } else {
                first_label(&run.stdout, &record.positive, &record.negative)
            };
            record.set(parsed);
            if run.stdout_truncated {
                record.detail = Some("the output was cut at 64 KiB".into());
            }
        }
        CodeEnd::TimedOut => {
            record.why = Some(Why::CodeTimeout);
            record.detail = Some(format!("killed after {} s (--code-timeout)", limits.timeout.as_secs_f64()));
        }
        CodeEnd::Signal(libc::SIGXCPU) => {
            record.why = Some(Why::CodeTimeout);
            record.detail = Some("its CPU time ran out (SIGXCPU)".into());
        }
        _ if error.as_deref().is_some_and(|e| e.starts_with("MemoryError")) => {
            record.why = Some(Why::CodeMemory);
            record.detail = Some(format!("MemoryError under the {} MiB limit (--code-memory-mb)", limits.memory_mb));
        }
        CodeEnd::Exited(code) => {
            record.why = Some(Why::CodeFailed);
            record.detail = Some(format!("exit status {code}: {}", error.unwrap_or_default()));
        }
        CodeEnd::Signal(signal) => {
            record.why = Some(Why::CodeFailed);
            record.detail = Some(format!("ended by signal {signal}: {}", error.unwrap_or_default()));
        }
    }
    record.code_output = Some(run.stdout);
}

/// Programs run: the index of each one's record, and what it did.
type Runs = Vec<(usize, CodeRun)>;

/// Runs `programs` (record index, code) in `sandbox`, `workers` at a time.
fn run_programs(sandbox: &Sandbox, programs: &[(usize, String)], workers: usize) -> Result<Runs> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let run_some = || -> Result<Runs> {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some((record, code)) = programs.get(i) else { return Ok(done) };
            done.push((*record, sandbox.run(code)?));
        }
    };
    let per_worker: Vec<Result<Runs>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for _ in 0..workers.max(1) {
            handles.push(scope.spawn(run_some));
        }
        let panicked = || -> Result<Runs> { Err(Error::system("--run-code", "a sandbox worker panicked")) };
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| panicked())).collect()
    });
    let mut runs = Vec::with_capacity(programs.len());
    for done in per_worker {
        runs.extend(done?);
    }
    Ok(runs)
}

/// Scores `answers` (one a prompt): tasks 1-6 parsed; task 7 run in `sandbox` when given, else
/// not run. `workers` programs run at a time.
pub fn score(
    prompts: &[Prompt],
    answers: &[String],
    sandbox: Option<&Sandbox>,
    workers: usize,
) -> Result<Vec<ScoredAnswer>> {
    let mut records = Vec::with_capacity(prompts.len());
    let mut programs = Vec::new();
    for (prompt, answer) in prompts.iter().zip(answers) {
        let mut record = ScoredAnswer::new(prompt, answer);
        if prompt.task != CODE_TASK {
            record.set(parse_answer(answer, &prompt.positive, &prompt.negative));
        } else if sandbox.is_none() {
            record.why = Some(Why::NotRun);
        } else {
            match extract_code(answer) {
                Ok(code) => programs.push((records.len(), code)),
                Err(why) => record.why = Some(why),
            }
        }
        records.push(record);
    }
    if let Some(sandbox) = sandbox {
        for (i, run) in run_programs(sandbox, &programs, workers)? {
            code_result(&mut records[i], run, sandbox);
        }
    }
    Ok(records)
}

/// The records as JSON Lines.
pub(crate) fn records_jsonl(records: &[ScoredAnswer]) -> String {
    records.iter().map(|r| serde_json::to_string(r).expect("records serialize to JSON") + "\n").collect()
}
