//! The command line: the global flags and the top-level commands (clap), and the dispatch to
//! the modules that implement them. Each `*_cmds` module defines its own subcommands
//! (`indolm eval …`, `indolm corpus …`) and assembles library parts into a command; this is the
//! only place that may import every layer of the library.
mod backend_args;
mod baseline_cmds;
mod bias_qa_cmds;
mod data_cmds;
mod dist_cmds;
mod eval_cmds;
#[cfg(feature = "test-hooks")]
pub mod fork_server;
mod generate_cmds;
#[cfg(feature = "test-hooks")]
pub mod help_tree;
mod model_cmds;
mod report_cmds;
mod task_cmds;
mod train_cmds;

use clap::{Parser, Subcommand};
use indolm_torch::error::Result;
use indolm_train::engine::TrainOptions;
use std::path::PathBuf;

/// How a training command runs: resume, overwrite, stop, profile, and the data-parallel timeout.
/// The same flags for `train` and every `finetune` command: one engine runs them all.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Continue from `latest`, from a checkpoint directory, or `auto`: from `latest` when the
    /// run has a checkpoint, else start it (one command for a job's first launch and requeues).
    #[arg(long)]
    pub resume: Option<String>,
    /// Resume even if the recipe or the source files changed in ways that matter.
    #[arg(long)]
    pub force: bool,
    /// Start over, deleting this run's earlier checkpoints and logs (only what indolm wrote).
    #[arg(long)]
    pub overwrite: bool,
    /// Checkpoint and stop after this step (the run can be resumed later).
    #[arg(long)]
    pub stop_after: Option<u64>,
    /// Time each phase of every update (batch, forward, backward, all-reduce, optimizer),
    /// synchronizing the device between them, and print the medians at the end (profiling:
    /// the synchronizations cost some speed).
    #[arg(long)]
    pub step_times: bool,
    /// Count the ATen operations of one steady-state update (one that writes no log line,
    /// evaluation or checkpoint) and print them by name, with the host waits among them
    /// (`host syncs per update: N`, 0 when the host never waits for the device inside an
    /// update).
    #[arg(long)]
    pub op_counts: bool,
    /// Under torchrun or srun: the data-parallel timeouts and backend (`--dist-timeout`,
    /// `--rank0-wait-timeout`, `--dist-backend`), handed whole to [`launch`].
    #[command(flatten)]
    pub dist_timeout: DistSettings,
}

/// How a data-parallel training command runs its process group.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct DistSettings {
    /// Under torchrun or srun: seconds every rank may take to join, and each collective, before
    /// the job stops (waits for rank 0's work have their own limit, --rank0-wait-timeout; 300
    /// covers ranks starting and loading at different speeds, and NCCL's set-up).
    #[arg(long = "dist-timeout", default_value_t = 300)]
    pub collective: u64,
    /// Under torchrun or srun: seconds the other ranks wait for rank 0's checkpoint, evaluations
    /// or corpus preparation, through the rendezvous store (a rank lost meanwhile is named
    /// within ten seconds by its heartbeat, whatever this limit).
    #[arg(long, default_value_t = 7200)]
    pub rank0_wait_timeout: u64,
    /// Under torchrun or srun with --device cuda: nccl (one GPU per rank), gloo (CUDA tensors
    /// staged through the host; ranks may share a GPU, as on a one-GPU check), or auto (nccl).
    #[arg(long, value_enum, default_value_t = DistBackend::Auto)]
    pub dist_backend: DistBackend,
    /// Under torchrun or srun: MiB of gradient per bucket, all-reduced during backward as soon as
    /// its gradients are in (DistributedDataParallel's bucket_cap_mb); 0 sums every gradient
    /// after backward.
    #[arg(long, default_value_t = 25.0)]
    pub bucket_mb: f64,
    /// Under torchrun or srun: the dtype the gradients are summed in: fp32 (their own), or bf16
    /// (half the bytes on the wire; each rank's gradients and their sum rounded to bf16, as
    /// DDP's bf16_compress_hook).
    #[arg(long, value_enum, default_value_t = GradReduce::Fp32)]
    pub grad_reduce: GradReduce,
}

/// The dtype data-parallel ranks sum their gradients in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradReduce {
    /// The gradients' own (fp32).
    Fp32,
    /// bf16.
    Bf16,
}

impl DistSettings {
    /// The gradient reduction these flags ask for, or an error for a negative or non-finite size.
    pub fn reduction(&self) -> Result<indolm_train::data_parallel::Reduction> {
        if !self.bucket_mb.is_finite() || self.bucket_mb < 0.0 {
            return Err(indolm_torch::error::Error::argument(
                "--bucket-mb",
                format!(
                    "expected a size in MiB of 0 or more (0: every gradient summed after backward), found {}",
                    self.bucket_mb
                ),
            ));
        }
        Ok(indolm_train::data_parallel::Reduction {
            bucket_bytes: (self.bucket_mb * (1u64 << 20) as f64) as usize,
            bf16: self.grad_reduce == GradReduce::Bf16,
        })
    }
}

/// The c10d backend of a data-parallel run's collectives.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistBackend {
    /// NCCL on CUDA, Gloo on the CPU.
    Auto,
    /// NCCL: one GPU per rank.
    Nccl,
    /// Gloo: CPU tensors, or CUDA tensors staged through the host.
    Gloo,
}

impl From<DistBackend> for indolm_torch::distributed::Backend {
    fn from(backend: DistBackend) -> Self {
        match backend {
            DistBackend::Auto => indolm_torch::distributed::Backend::Auto,
            DistBackend::Nccl => indolm_torch::distributed::Backend::Nccl,
            DistBackend::Gloo => indolm_torch::distributed::Backend::Gloo,
        }
    }
}

impl RunArgs {
    /// The engine's options on `device`.
    pub fn options(&self, device: tch::Device) -> Result<TrainOptions> {
        Ok(TrainOptions {
            device,
            resume: self.resume.clone(),
            force: self.force,
            overwrite: self.overwrite,
            stop_after: self.stop_after,
            step_times: self.step_times,
            op_counts: self.op_counts,
            reduction: self.dist_timeout.reduction()?,
        })
    }
}

/// How a training command starts the task's run: its flags and `--device`.
pub struct RunLauncher<'a> {
    /// The shared flags of training commands.
    pub args: &'a RunArgs,
    /// `--device`.
    pub device: tch::Device,
}

impl indolm_tasks::registry::Launcher for RunLauncher<'_> {
    fn launch(&self, deterministic: bool) -> Result<(tch::Device, Option<indolm_torch::distributed::ProcessGroup>)> {
        launch(self.device, self.args.dist_timeout, deterministic)
    }

    fn options(&self, device: tch::Device) -> Result<TrainOptions> {
        self.args.options(device)
    }
}

/// Refuses, before any work, what a command is asked to write (`--out`, `--json`, `--plot`) when a
/// file's folder is missing or cannot be written, a folder cannot be created, or a file is a
/// folder, one of its `inputs`, a file indolm keeps inside an input folder, or another output
/// ([`indolm_core::outputs::check_outputs`] with the names runs and evaluations hold). Every command
/// that writes calls it first.
pub fn check_outputs(outputs: &[indolm_core::outputs::Output], inputs: &[&std::path::Path]) -> Result<()> {
    indolm_core::outputs::check_outputs(outputs, inputs, indolm_core::run::ownership::written_by_indolm)
}

/// Joins the data-parallel group when torchrun or srun launched this process, as the flags ask
/// ([`indolm_torch::distributed::join_if_launched`]), after asking for deterministic algorithms
/// when `deterministic`. Returns the device to train on and the group.
pub fn launch(
    device: tch::Device,
    dist: DistSettings,
    deterministic: bool,
) -> Result<(tch::Device, Option<indolm_torch::distributed::ProcessGroup>)> {
    let settings = indolm_torch::distributed::JoinSettings {
        backend: dist.dist_backend.into(),
        collective_timeout: std::time::Duration::from_secs(dist.collective),
        rank0_wait_timeout: std::time::Duration::from_secs(dist.rank0_wait_timeout),
        deterministic,
    };
    indolm_torch::distributed::join_if_launched(device, settings)
}

#[derive(Parser, Debug)]
#[command(name = "indolm", version, about = "Pretrain, fine-tune and bias-evaluate Indonesian BERT models on libtorch")]
pub struct Cli {
    /// Where to run: auto (CUDA when present), cpu, cuda, cuda:N.
    #[arg(long, global = true, default_value = "auto")]
    pub device: String,
    /// CPU threads for libtorch (default: all cores).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write any model directory indolm reads (weights as model.safetensors, pytorch_model.bin, or shards of either) as one with model.safetensors; the configuration and tokenizer files are copied.
    Convert {
        /// The model directory.
        model_dir: PathBuf,
        /// The directory to write.
        out_dir: PathBuf,
        /// Replace `out_dir` if it exists (only files a converted directory holds).
        #[arg(long)]
        overwrite: bool,
    },
    /// Convert an HF masked-LM directory (BERT, RoBERTa, XLM-R: config.json, model.safetensors, vocab.txt or tokenizer.json) into an indolm model directory.
    ImportHf {
        /// The HF model directory.
        hf_dir: PathBuf,
        /// The indolm directory to write.
        out_dir: PathBuf,
        /// Replace `out_dir` if it exists.
        #[arg(long)]
        overwrite: bool,
    },
    /// Write an indolm checkpoint as an HF directory that transformers' BertForMaskedLM and AutoTokenizer load.
    ExportHf {
        /// The indolm checkpoint (or any model directory).
        checkpoint_dir: PathBuf,
        /// The HF directory to write.
        out_dir: PathBuf,
        /// Replace `out_dir` if it exists.
        #[arg(long)]
        overwrite: bool,
    },
    /// Create a randomly initialised BERT masked LM from a config.json and a tokenizer.
    Init {
        /// HF-style config.json (vocab_size must cover the tokenizer).
        #[arg(long)]
        config: PathBuf,
        /// A tokenizer: a directory, tokenizer.json or vocab.txt.
        #[arg(long)]
        tokenizer: PathBuf,
        /// The model directory to write.
        #[arg(long)]
        out: PathBuf,
        /// Seed of the initialisation.
        #[arg(long, default_value_t = indolm_core::seeds::DEFAULT_SEED)]
        seed: u64,
        #[arg(long)]
        overwrite: bool,
    },
    /// Describe a model directory (configuration, parameter count, tokenizer, loading notes),
    /// this build (the torch, CUDA and NCCL it was made against), or the attention kernels
    /// libtorch picks for the decoders' grouped-query shapes on --device.
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["model", "build", "attention"])))]
    Info {
        /// A model directory to describe.
        #[arg(long)]
        model: Option<PathBuf>,
        /// The versions this binary was built against: torch, the CUDA that torch was built
        /// for, and the NCCL headers of its c10d shim.
        #[arg(long)]
        build: bool,
        /// The kernel libtorch's scaled_dot_product_attention picks on --device for the
        /// decoders' attention at --attention-shape, without a mask and with their boolean and
        /// additive padding masks, the grouped key/value heads read in place and expanded, and
        /// which of the two the decoders use.
        #[arg(long)]
        attention: bool,
        /// With --attention: batch,query heads,key/value heads,tokens,head dim (default:
        /// Llama-3-8B-like at 512 tokens).
        #[arg(long, default_value = "4,32,8,512,128", requires = "attention")]
        attention_shape: String,
        /// With --attention: the dtype of queries, keys and values.
        #[arg(long, value_enum, default_value_t = model_cmds::AttentionDtype::Bf16, requires = "attention")]
        attention_dtype: model_cmds::AttentionDtype,
    },
    // The training commands at the top (`train`), as the tasks declare them.
    #[command(flatten)]
    Train(train_cmds::TaskCommand<false>),
    /// Evaluate masked and causal LMs: (pseudo-)log-likelihoods, bias win rates, IndoMMLU, ROUGE.
    #[command(subcommand)]
    Eval(eval_cmds::EvalCommand),
    /// Complete prompts with a causal LM (a JSON Lines file in and out): greedy or sampled, stopping at EOS, a stop string or a length.
    Generate(generate_cmds::GenerateArgs),
    /// Reports of evaluations: bias curves, diffs, comparisons, seed groups, flips, validity, and models side by side (bias, IndoMMLU, Liputan6).
    #[command(subcommand)]
    Report(report_cmds::ReportCommand),
    /// The papers' non-neural baselines, trained and scored without a model: NusaX Table 3's naive Bayes, SVM and logistic regression.
    #[command(subcommand)]
    Baseline(baseline_cmds::BaselineCommand),
    /// Download public sources (CC-100, Wikipedia parquet, NusaX, IndoMMLU) with resume and checks.
    Download {
        #[command(subcommand)]
        what: data_cmds::DownloadCommand,
        /// Where the files go.
        #[arg(long, global = true, default_value = "corpora/downloads")]
        out: PathBuf,
        /// Fetch from this base URL instead of the public hosts (`<mirror>/<host>/<path>`).
        #[arg(long, global = true)]
        mirror: Option<String>,
        /// Seconds to wait to connect, for an answer, and for each read, before giving up on
        /// an attempt.
        #[arg(long, global = true, default_value_t = 60)]
        timeout: u64,
        /// Attempts after a failed one (each resumes where the last stopped).
        #[arg(long, global = true, default_value_t = 5)]
        retries: u32,
    },
    /// Fine-tune a pretrained model on a task.
    #[command(subcommand)]
    Finetune(train_cmds::TaskCommand<true>),
    /// Use a fine-tuned model.
    #[command(subcommand)]
    Predict(task_cmds::PredictCommand),
    /// Summarize articles with a fine-tuned summarizer (BertExt: extractive; BertAbs or
    /// BertExtAbs: generated, many articles at once by batched beam search).
    Summarize(task_cmds::SummarizeArgs),
    /// Validate recipes.
    #[command(subcommand)]
    Recipe(train_cmds::RecipeCommand),
    /// Prepare corpora (tokenized shards) and show their statistics.
    #[command(subcommand)]
    Corpus(data_cmds::CorpusCommand),
    /// Train a WordPiece tokenizer.
    #[command(subcommand)]
    Tokenizer(data_cmds::TokenizerCommand),
    /// Show the word pieces and ids of a text.
    Tokenize {
        /// A model directory, tokenizer.json or vocab.txt.
        #[arg(long)]
        tokenizer: PathBuf,
        /// The text (a second --text makes a pair).
        #[arg(long, num_args = 1..=2, required = true)]
        text: Vec<String>,
    },
    /// Check a data-parallel launch before a long job: run it under torchrun or srun like
    /// training; every rank joins the c10d process group (Gloo on CPU; NCCL with --device cuda,
    /// each rank on the GPU of its local rank), checks all-reduce, broadcast and barrier, and
    /// rank 0 reports the all-reduce bandwidth.
    DistCheck {
        /// Megabytes all-reduced per timed round.
        #[arg(long, default_value_t = 16)]
        megabytes: usize,
        /// Seconds every rank may take to join, and each collective to finish.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// With --device cuda: nccl (one GPU per rank), gloo (CUDA tensors staged through the
        /// host; ranks may share a GPU), or auto (nccl).
        #[arg(long, value_enum, default_value_t = DistBackend::Auto)]
        backend: DistBackend,
    },
    /// Predict the tokens at the [MASK] positions of a text.
    FillMask {
        #[arg(long)]
        model: PathBuf,
        /// Text with one or more [MASK] tokens.
        #[arg(long)]
        text: String,
        /// How many candidates to show per mask.
        #[arg(long, default_value_t = 5)]
        top_k: i64,
    },
}

/// Runs the parsed command. `--device` is parsed only by the commands that use a model.
pub fn run(cli: Cli) -> Result<()> {
    indolm_torch::device::set_threads(cli.threads)?;
    indolm_torch::device::warm_up_cpu_math();
    let device = || indolm_torch::device::parse_device(&cli.device);
    match cli.command {
        Command::Convert { model_dir, out_dir, overwrite } => {
            model_cmds::to_safetensors(&model_dir, &out_dir, overwrite)
        }
        Command::ImportHf { hf_dir, out_dir, overwrite } => {
            model_cmds::convert(&hf_dir, &out_dir, overwrite, "imported")
        }
        Command::ExportHf { checkpoint_dir, out_dir, overwrite } => {
            model_cmds::convert(&checkpoint_dir, &out_dir, overwrite, "exported")
        }
        Command::Init { config, tokenizer, out, seed, overwrite } => {
            model_cmds::init(&config, &tokenizer, &out, seed, overwrite)
        }
        Command::Info { model, build, attention, attention_shape, attention_dtype } => {
            if build {
                model_cmds::build_info();
            }
            if attention {
                model_cmds::attention_kernels(&attention_shape, attention_dtype, device()?)?;
            }
            model.map_or(Ok(()), |model| model_cmds::info(&model))
        }
        Command::Tokenize { tokenizer, text } => model_cmds::tokenize(&tokenizer, &text),
        Command::FillMask { model, text, top_k } => model_cmds::fill_mask(&model, &text, top_k, device()?),
        Command::Train(command) => command.run(device()?),
        Command::Recipe(command) => train_cmds::run_recipe(command),
        Command::Tokenizer(command) => data_cmds::run_tokenizer(command),
        Command::Corpus(command) => data_cmds::run_corpus(command),
        Command::Download { what, out, mirror, timeout, retries } => {
            let patience =
                indolm_torch::data::download::Patience { timeout: std::time::Duration::from_secs(timeout), retries };
            data_cmds::download(what, &out, mirror, patience)
        }
        Command::Eval(command) => eval_cmds::run(command, &device),
        Command::Generate(args) => generate_cmds::run(&args, device()?),
        Command::Report(command) => report_cmds::run(command),
        Command::Baseline(command) => baseline_cmds::run(command),
        Command::Finetune(command) => command.run(device()?),
        Command::Predict(command) => task_cmds::run_predict(command, device()?),
        Command::Summarize(args) => task_cmds::summarize(&args, device()?),
        Command::DistCheck { megabytes, timeout, backend } => {
            dist_cmds::check(megabytes, std::time::Duration::from_secs(timeout), device()?, backend)
        }
    }
}
