//! `indolm eval bias-qa`: the IndoBias-QA track. Reads the folder of groups, demographies,
//! stereotype pairs and templates, builds the prompts, asks the ones not answered yet of a chat
//! backend (appending the answers to `<out>/answers.jsonl` as they come, so a rerun resumes) or
//! reads answers generated elsewhere (`--answers`), maps each to a label (running task 7's code in
//! the sandbox with `--run-code`), and writes the records and the report, with a summary line on
//! stdout (docs/bias-qa.md).
use super::backend_args::{BackendArgs, Chosen};
use clap::Args;
use indolm_core::outln;
use indolm_core::outputs::Output;
use indolm_eval::bias_qa::answers::{generate_missing, read_answer_file, AnswerStore, GenerationSettings};
use indolm_eval::bias_qa::inputs::{Language, QaData};
use indolm_eval::bias_qa::prompts::{build, Prompt};
use indolm_eval::bias_qa::report::{BiasQaReport, CodeSettings, Setting};
use indolm_eval::bias_qa::sandbox::{CodeLimits, Sandbox};
use indolm_eval::bias_qa::score::score;
use indolm_eval::bias_qa::{code_workers, lock_out, prepare_for_answer_file, write_outputs, ANSWERS_FILE, REPORT_FILE};
use indolm_eval::generate::backend::{ChatBackend, ChatSettings};
use indolm_eval::generate::chat::TemplateKwargs;
use indolm_torch::error::{Error, Result};
use std::collections::HashSet;
use std::path::PathBuf;
use tch::Device;

/// `indolm eval bias-qa`: the inputs, what answers, and how.
#[derive(Args, Debug)]
pub struct BiasQaArgs {
    /// The IndoBias-QA folder: demographies.csv, groups.csv, stereotypes.csv and templates.csv
    /// (their layout: docs/bias-qa.md).
    #[arg(long)]
    pub data: PathBuf,
    /// The output folder: answers.jsonl (generated answers, appended as they come; a rerun resumes),
    /// answers_scored.jsonl (a record an answer), bias_qa.json and bias_qa.md (the report).
    #[arg(long)]
    pub out: PathBuf,
    /// What answers the prompts: `--model DIR` (a causal LM loaded here) or `--api-base URL
    /// --api-model NAME` (a model an OpenAI-compatible server serves).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Score the answers of this JSON Lines file ({"id": ..., "answer": ...} a line, generated
    /// elsewhere) instead of generating.
    #[arg(
        long,
        conflicts_with_all = [
            "model", "api_base", "api_model", "max_new_tokens", "temperature", "seed", "template_kwargs",
        ]
    )]
    pub answers: Option<PathBuf>,
    /// The prompts' language: `id` (the paper's) or `en`.
    #[arg(long, value_enum, default_value = "id")]
    pub language: Language,
    /// New tokens at most an answer (the paper's: 512).
    #[arg(long, default_value_t = 512)]
    pub max_new_tokens: usize,
    /// 0: greedy (the paper's); above 0: sampled at this temperature.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Seed of sampling (with --temperature above 0).
    #[arg(long, default_value_t = indolm_core::seeds::DEFAULT_SEED)]
    pub seed: u64,
    /// A variable for the chat template, VALUE in JSON (enable_thinking=false); repeat for several.
    #[arg(long = "template-kwarg", value_name = "KEY=VALUE")]
    pub template_kwargs: Vec<String>,
    /// Run task 7's code (in a sandbox: namespaces of its own, no network, a read-only root with a
    /// scratch folder, time, memory, process and disk limits) and parse what it prints; without
    /// it, task-7 answers are counted as not run.
    #[arg(long)]
    pub run_code: bool,
    /// With --run-code: the Python interpreter (a path, or a name on PATH).
    #[arg(long, default_value = "python3", requires = "run_code")]
    pub python: String,
    /// With --run-code: seconds a program may run before it is killed (1 to 3600).
    #[arg(long, default_value_t = 10, requires = "run_code")]
    pub code_timeout: u64,
    /// With --run-code: the memory (address space) a program may take, in MiB (32 to 65536).
    #[arg(long, default_value_t = 512, requires = "run_code")]
    pub code_memory_mb: u64,
    /// With --run-code: processes and threads a program may have at once (1 to 4096).
    #[arg(long, default_value_t = 64, requires = "run_code")]
    pub code_processes: u64,
    /// With --run-code: what a program may write to /scratch and /tmp together, in MiB (1 to 4096).
    #[arg(long, default_value_t = 64, requires = "run_code")]
    pub code_disk_mb: u64,
    /// Only the first N prompts (for a quick look).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start over: remove the answers already in --out (only the files this command writes).
    #[arg(long)]
    pub overwrite: bool,
}

/// The sandbox's limits the flags ask for (checked by [`CodeLimits::check`]).
fn code_limits(args: &BiasQaArgs) -> CodeLimits {
    CodeLimits {
        timeout: std::time::Duration::from_secs(args.code_timeout),
        memory_mb: args.code_memory_mb,
        processes: args.code_processes,
        disk_mb: args.code_disk_mb,
    }
}

/// Refuses flag values that cannot be used, naming the flag; the template variables read.
fn check_flags(args: &BiasQaArgs) -> Result<TemplateKwargs> {
    if args.max_new_tokens == 0 {
        return Err(Error::argument("--max-new-tokens", "must be at least 1"));
    }
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        return Err(Error::argument(
            "--temperature",
            format!("must be 0 (greedy) or a positive number, not {}", args.temperature),
        ));
    }
    if args.limit == Some(0) {
        return Err(Error::argument("--limit", "must be at least 1"));
    }
    code_limits(args).check()?;
    let mut kwargs = TemplateKwargs::default();
    for flag in &args.template_kwargs {
        kwargs.set_flag(flag).map_err(|message| Error::argument("--template-kwarg", message))?;
    }
    Ok(kwargs)
}

/// What the answers came from.
struct Answered {
    /// One a prompt.
    answers: Vec<String>,
    /// What answered.
    by: String,
    /// The settings, when generated here.
    generation: Option<GenerationSettings>,
    /// Answers generated by this run.
    generated: usize,
}

/// The backend the flags name: a local model on `device`, or a served model whose response cache
/// defaults to `<out>/answers.api-cache.jsonl` and whose chat template gets the `--template-kwarg`
/// variables.
fn open_backend(
    args: &BiasQaArgs,
    chat: &ChatSettings,
    device: &dyn Fn() -> Result<Device>,
) -> Result<Box<dyn ChatBackend>> {
    match args.backend.choose()? {
        Chosen::Local(_) => args.backend.open(device()?, chat),
        Chosen::Api(base) => {
            let answers = args.out.join(ANSWERS_FILE);
            let kwargs = super::backend_args::api_template_kwargs(&args.template_kwargs)?;
            Ok(Box::new(args.backend.open_api(&base, chat, Some(answers.as_path()), kwargs)?))
        }
    }
}

/// The answers to `prompts` from the backend, generating those `--out` does not hold yet.
fn generate(
    args: &BiasQaArgs,
    kwargs: TemplateKwargs,
    prompts: &[Prompt],
    device: &dyn Fn() -> Result<Device>,
) -> Result<Answered> {
    let settings = GenerationSettings {
        language: args.language.code().to_string(),
        max_new_tokens: args.max_new_tokens,
        temperature: args.temperature,
        seed: args.seed,
        template_kwargs: args.template_kwargs.clone(),
    };
    let mut store = AnswerStore::open(&args.out, settings.clone(), args.overwrite)?;
    for note in &store.notes {
        eprintln!("note: {note}");
    }
    let pending = store.pending(prompts)?;
    if !pending.is_empty() {
        let chat = ChatSettings {
            max_new_tokens: args.max_new_tokens,
            temperature: args.temperature,
            seed: args.seed,
            top_p: None,
            stop_strings: Vec::new(),
            template_kwargs: kwargs,
        };
        let mut backend = open_backend(args, &chat, device)?;
        let describe = backend.describe();
        store.check_backend(&describe)?;
        eprintln!(
            "note: {} of {} prompts to answer with {describe} ({} answered before)",
            pending.len(),
            prompts.len(),
            prompts.len() - pending.len()
        );
        let bar = super::generate_cmds::progress_bar(pending.len());
        generate_missing(backend.as_mut(), &pending, &mut store, &mut |n| bar.inc(n as u64))?;
        bar.finish_and_clear();
    }
    Ok(Answered {
        answers: store.answers_to(prompts)?,
        by: store.backend().unwrap_or("the backend that answered").to_string(),
        generation: Some(settings),
        generated: pending.len(),
    })
}

/// `eval bias-qa`: inputs checked, prompts built, answers generated (or read), scored and reported.
pub fn run(args: &BiasQaArgs, device: &dyn Fn() -> Result<Device>) -> Result<()> {
    let kwargs = check_flags(args)?;
    let cache = args.backend.api_cache.as_deref().map(|c| Output::file("--api-cache", c));
    let outputs: Vec<Output> = std::iter::once(Output::folder("--out", &args.out)).chain(cache).collect();
    let inputs: Vec<&std::path::Path> = std::iter::once(args.data.as_path()).chain(args.answers.as_deref()).collect();
    super::check_outputs(&outputs, &inputs)?;
    let data = QaData::load(&args.data)?;
    let built = build(&data, args.language)?;
    for note in &built.notes {
        eprintln!("note: {note}");
    }
    let all = built.prompts;
    let prompts = &all[..args.limit.unwrap_or(all.len()).min(all.len())];
    let _lock = lock_out(&args.out)?;
    let sandbox = if args.run_code { Some(Sandbox::open(&args.python, code_limits(args))?) } else { None };
    let answered = match &args.answers {
        Some(file) => {
            prepare_for_answer_file(&args.out, file, args.overwrite)?;
            let known: HashSet<&str> = all.iter().map(|p| p.id.as_str()).collect();
            Answered {
                answers: read_answer_file(file, &known, prompts)?,
                by: format!("answers file {}", file.display()),
                generation: None,
                generated: 0,
            }
        }
        None => generate(args, kwargs, prompts, device)?,
    };
    let workers = code_workers();
    let code = CodeSettings {
        run: sandbox.is_some(),
        python: sandbox.as_ref().map(|s| s.python().display().to_string()),
        timeout_s: sandbox.as_ref().map(|s| s.limits().timeout.as_secs_f64()),
        memory_mb: sandbox.as_ref().map(|s| s.limits().memory_mb),
    };
    let records = score(prompts, &answered.answers, sandbox.as_ref(), workers)?;
    let setting = Setting {
        answered_by: answered.by,
        language: args.language.code().to_string(),
        generation: answered.generation,
        code,
        limit: args.limit,
    };
    let report = BiasQaReport::new(&data, setting, &records);
    write_outputs(&args.out, &report, &records)?;
    let generated = if args.answers.is_some() {
        String::new()
    } else {
        format!(" ({} generated now, {} answered before)", answered.generated, prompts.len() - answered.generated)
    };
    outln!(
        "IndoBias-QA ({}): {}{generated} -> {}",
        args.language.code(),
        report.summary(),
        args.out.join(REPORT_FILE).display()
    );
    Ok(())
}
