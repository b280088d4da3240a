//! `indolm eval bias-qa`: the IndoBias-QA track. Its flags: the folder of groups, demographies,
//! stereotype pairs and templates, what answers the prompts not answered yet (a chat backend,
//! answers appended to `<out>/answers.jsonl` as they come, so a rerun resumes) or answers
//! generated elsewhere (`--answers`), and task 7's sandbox (`--run-code`); the run itself is
//! [`indolm_eval::bias_qa::run`], its summary line printed on stdout (docs/bias-qa.md).
use super::backend_args::{BackendArgs, Chosen};
use clap::Args;
use indolm_core::outln;
use indolm_core::outputs::Output;
use indolm_eval::bias_qa::inputs::Language;
use indolm_eval::bias_qa::sandbox::CodeLimits;
use indolm_eval::bias_qa::{CodeRun, RunSettings, ANSWERS_FILE};
use indolm_eval::generate::backend::{ChatBackend, ChatSettings};
use indolm_eval::generate::chat::TemplateKwargs;
use indolm_torch::error::{Error, Result};
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

/// The backend the flags name, generating as `chat` says: a local model on `device`, or a served
/// model whose response cache defaults to `<out>/answers.api-cache.jsonl` and whose chat template
/// gets the `--template-kwarg` variables.
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

/// `eval bias-qa`: the flags and outputs checked, then the run ([`indolm_eval::bias_qa::run`]):
/// prompts built, answers generated (or read), scored and reported; its summary on stdout.
pub fn run(args: &BiasQaArgs, device: &dyn Fn() -> Result<Device>) -> Result<()> {
    let template_kwargs = check_flags(args)?;
    let cache = args.backend.api_cache.as_deref().map(|c| Output::file("--api-cache", c));
    let outputs: Vec<Output> = std::iter::once(Output::folder("--out", &args.out)).chain(cache).collect();
    let inputs: Vec<&std::path::Path> = std::iter::once(args.data.as_path()).chain(args.answers.as_deref()).collect();
    super::check_outputs(&outputs, &inputs)?;
    let settings = RunSettings {
        data: args.data.clone(),
        out: args.out.clone(),
        answers: args.answers.clone(),
        language: args.language,
        max_new_tokens: args.max_new_tokens,
        temperature: args.temperature,
        seed: args.seed,
        template_kwarg_flags: args.template_kwargs.clone(),
        template_kwargs,
        code: args.run_code.then(|| CodeRun { python: args.python.clone(), limits: code_limits(args) }),
        limit: args.limit,
        overwrite: args.overwrite,
    };
    let summary = indolm_eval::bias_qa::run(&settings, &|chat| open_backend(args, chat, device))?;
    outln!("{summary}");
    Ok(())
}
