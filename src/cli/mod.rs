//! Command-line definitions (clap) and dispatch to the subcommands' implementations.
mod data_cmds;
mod eval_cmds;
mod model_cmds;
mod task_cmds;
mod train_cmds;

use clap::{Parser, Subcommand};
use indolm::error::Result;
use std::path::PathBuf;

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
    /// Convert an HF BERT directory (config.json, model.safetensors, vocab.txt or tokenizer.json) into an indolm model directory.
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
        #[arg(long, default_value_t = 3407)]
        seed: u64,
        #[arg(long)]
        overwrite: bool,
    },
    /// Describe a model directory: configuration, parameter count, tokenizer, loading notes.
    Info {
        #[arg(long)]
        model: PathBuf,
    },
    /// Pretrain a masked LM from a recipe (checkpoints, TensorBoard logs, evaluations).
    Train {
        /// The recipe (TOML).
        recipe: PathBuf,
        /// Continue from `latest` or a checkpoint directory.
        #[arg(long)]
        resume: Option<String>,
        /// Resume even if the recipe changed in fields that matter.
        #[arg(long)]
        force: bool,
        /// Start over, deleting this run's earlier checkpoints and logs.
        #[arg(long)]
        overwrite: bool,
        /// Checkpoint and stop after this step (the run can be resumed later).
        #[arg(long)]
        stop_after: Option<u64>,
    },
    /// Evaluate masked LMs: pseudo-log-likelihoods and bias win rates.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Pictures of a run's evaluations.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Download public sources (CC-100, Wikipedia parquet, NusaX) with resume and checks.
    Download {
        #[command(subcommand)]
        what: DownloadCommand,
        /// Where the files go.
        #[arg(long, global = true, default_value = "corpora/downloads")]
        out: PathBuf,
        /// Fetch from this base URL instead of the public hosts (`<mirror>/<host>/<path>`).
        #[arg(long, global = true)]
        mirror: Option<String>,
    },
    /// Fine-tune a pretrained model on a task.
    #[command(subcommand)]
    Finetune(FinetuneCommand),
    /// Use a fine-tuned model.
    #[command(subcommand)]
    Predict(PredictCommand),
    /// Summarize an article with a fine-tuned BertExt model.
    Summarize {
        #[arg(long)]
        model: PathBuf,
        /// The article as plain text.
        #[arg(long)]
        file: PathBuf,
    },
    /// Validate recipes.
    #[command(subcommand)]
    Recipe(RecipeCommand),
    /// Prepare corpora (tokenized shards) and show their statistics.
    #[command(subcommand)]
    Corpus(CorpusCommand),
    /// Train a WordPiece tokenizer.
    #[command(subcommand)]
    Tokenizer(TokenizerCommand),
    /// Show the word pieces and ids of a text.
    Tokenize {
        /// A model directory, tokenizer.json or vocab.txt.
        #[arg(long)]
        tokenizer: PathBuf,
        /// The text (a second --text makes a pair).
        #[arg(long, num_args = 1..=2, required = true)]
        text: Vec<String>,
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

#[derive(Subcommand, Debug)]
pub enum EvalCommand {
    /// Pseudo-log-likelihood of each sentence of a file (one per line): PLL, scored tokens, PPPL.
    Pll {
        #[arg(long)]
        model: PathBuf,
        /// One sentence a line (with --metric crows: two tab-separated sentences a line).
        #[arg(long)]
        text: PathBuf,
        /// `pll`: every token; `crows`: only the tokens the two sentences of a line share.
        #[arg(long, value_enum, default_value = "pll")]
        metric: PllMetric,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Stereotype win rates on IndoBias-Pairs (or CrowS-Pairs) per language, domain and subdomain.
    Bias {
        /// A model directory.
        #[arg(long, required_unless_present = "run", conflicts_with = "run")]
        model: Option<PathBuf>,
        /// Evaluate every checkpoint (with weights) of a run directory after the fact.
        #[arg(long)]
        run: Option<PathBuf>,
        /// The IndoBias `pair/` folder (or its parent, or a file), or the CrowS-Pairs CSV.
        #[arg(long)]
        pairs: PathBuf,
        /// Restrict to these languages (codes or names).
        #[arg(long, num_args = 1..)]
        languages: Vec<String>,
        /// `pppl` (IndoBias/RuBia) or `crows` (CrowS-Pairs metric.py); default: pppl, crows for CrowS-Pairs.
        #[arg(long, value_enum)]
        metric: Option<indolm::eval::bias::Metric>,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// With --run: TensorBoard folder for the curves (default runs/<run>/eval-bias).
        #[arg(long)]
        logdir: Option<PathBuf>,
    },
    /// ROUGE-1/2/L F1 (as rouge-score computes them) of predicted summaries against references.
    Rouge {
        /// One predicted summary a line.
        #[arg(long)]
        pred: PathBuf,
        /// One reference summary a line, aligned with --pred.
        #[arg(long = "ref")]
        reference: PathBuf,
    },
    /// Lead-1/2/3 and Oracle ROUGE on a Liputan6 split (the extractive baselines of the paper's Table 4).
    SummarizationBaselines {
        /// The Liputan6 folder holding the split folders.
        #[arg(long)]
        data: PathBuf,
        /// Split folders to evaluate (e.g. test, or the Xtreme test folder).
        #[arg(long, num_args = 1.., default_value = "test")]
        split: Vec<String>,
    },
    /// IndoMMLU zero-shot accuracy per subject, level and area, with the random baseline.
    Indommlu {
        #[arg(long)]
        model: PathBuf,
        /// The IndoMMLU CSV (`indolm download indommlu`).
        #[arg(long)]
        data: PathBuf,
        #[arg(long, value_enum, default_value = "option-pll")]
        mode: indolm::eval::indommlu::Mode,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum FinetuneCommand {
    /// NusaX sentiment (negative/neutral/positive): monolingual, multilingual, leave-one-out or cross-lingual.
    Sentiment {
        /// The fine-tuning recipe (TOML).
        recipe: PathBuf,
        /// Start from this model directory (overrides the recipe's `init`).
        #[arg(long)]
        init: Option<PathBuf>,
    },
    /// Liputan6 summarization (task = "ext": BertExt, "abs": BertAbs, "extabs": BertExtAbs).
    Summarize {
        /// The fine-tuning recipe (TOML).
        recipe: PathBuf,
        /// Start from this model directory (overrides the recipe's `init`).
        #[arg(long)]
        init: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PredictCommand {
    /// Sentiment labels with probabilities.
    Sentiment {
        /// A fine-tuned sentiment model directory.
        #[arg(long)]
        model: PathBuf,
        /// Texts to classify.
        #[arg(long, num_args = 1.., required_unless_present = "file", conflicts_with = "file")]
        text: Vec<String>,
        /// A file with one text a line.
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum DownloadCommand {
    /// CC-100 `<lang>.txt.xz` (one paragraph a line, documents separated by blank lines).
    Cc100 {
        /// Language codes, e.g. id jv su.
        #[arg(long, num_args = 1.., required = true)]
        lang: Vec<String>,
    },
    /// Wikipedia dump shards as parquet (the `wikimedia/wikipedia` data set on the HF hub).
    Wikipedia {
        #[arg(long, num_args = 1.., required = true)]
        lang: Vec<String>,
        #[arg(long, default_value = "20231101")]
        date: String,
    },
    /// NusaX sentiment, all 12 languages.
    Nusax,
    /// The IndoMMLU CSV from its authors' repository.
    Indommlu,
}

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Win rate against step per language, one panel per domain, from the run's bias.json files.
    BiasCurve {
        /// The run directory (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// Output file: .svg or .png (text needs a TrueType font such as DejaVu Sans).
        #[arg(long)]
        out: PathBuf,
    },
    /// The Liputan6 paper's Table 4 from `finetune summarize` runs: Lead-1/2/3, Oracle and each
    /// run's system, ROUGE-1/2/L per test split (canonical and Xtreme side by side).
    Summarization {
        /// results.json files of the runs (checkpoints/<name>/results.json).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Also write the table (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PllMetric {
    Pll,
    Crows,
}

#[derive(Subcommand, Debug)]
pub enum RecipeCommand {
    /// Parse and validate a recipe, then print its resolved values.
    Check { recipe: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum CorpusCommand {
    /// Tokenize every source of a recipe into memory-mapped shards (skips up-to-date ones).
    Prepare { recipe: PathBuf },
    /// Documents, tokens and [UNK] rate per source, and the realised mixture proportions.
    Stats {
        recipe: PathBuf,
        /// Sequences to draw when measuring the mixture's proportions.
        #[arg(long, default_value_t = 10_000)]
        sequences: usize,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenizerCommand {
    /// Train an uncased BERT WordPiece on files or on a seeded sample of a recipe's mixture,
    /// and write tokenizer.json and vocab.txt.
    Train {
        /// Files, directories or globs (.txt, .txt.gz, .txt.xz, .jsonl, .conllu, .csv with a `text` column).
        #[arg(long, num_args = 1.., required_unless_present = "recipe", conflicts_with = "recipe")]
        files: Vec<String>,
        /// Train on a sample of this recipe's sources (by their weights); writes to the recipe's tokenizer path unless --out.
        #[arg(long)]
        recipe: Option<PathBuf>,
        /// Paragraphs sampled from the recipe's mixture.
        #[arg(long, default_value_t = 1_000_000)]
        sample_paragraphs: usize,
        /// Vocabulary size (IndoBERT: 31,923).
        #[arg(long, default_value_t = indolm::data::tokenizer_train::DEFAULT_VOCAB_SIZE)]
        vocab_size: usize,
        /// Minimum frequency of a merged piece.
        #[arg(long, default_value_t = 2)]
        min_frequency: u64,
        /// The directory to write.
        #[arg(long, required_unless_present = "recipe")]
        out: Option<PathBuf>,
        #[arg(long)]
        overwrite: bool,
    },
}

pub fn run(cli: Cli) -> Result<()> {
    indolm::device::set_threads(cli.threads)?;
    let device = || indolm::device::parse_device(&cli.device);
    match cli.command {
        Command::ImportHf { hf_dir, out_dir, overwrite } => {
            model_cmds::convert(&hf_dir, &out_dir, overwrite, "imported")
        }
        Command::ExportHf { checkpoint_dir, out_dir, overwrite } => {
            model_cmds::convert(&checkpoint_dir, &out_dir, overwrite, "exported")
        }
        Command::Init { config, tokenizer, out, seed, overwrite } => {
            model_cmds::init(&config, &tokenizer, &out, seed, overwrite)
        }
        Command::Info { model } => model_cmds::info(&model),
        Command::Tokenizer(TokenizerCommand::Train {
            files,
            recipe,
            sample_paragraphs,
            vocab_size,
            min_frequency,
            out,
            overwrite,
        }) => data_cmds::train_tokenizer(
            &files,
            recipe.as_deref(),
            sample_paragraphs,
            vocab_size,
            min_frequency,
            out.as_deref(),
            overwrite,
        ),
        Command::Train { recipe, resume, force, overwrite, stop_after } => {
            let opts = indolm::train::trainer::TrainOptions { device: device()?, resume, force, overwrite, stop_after };
            train_cmds::train(&recipe, &opts)
        }
        Command::Eval(EvalCommand::Pll { model, text, metric, json }) => {
            eval_cmds::pll(&model, &text, metric, json, device()?)
        }
        Command::Eval(EvalCommand::SummarizationBaselines { data, split }) => {
            for s in &split {
                let articles = indolm::tasks::summarization::data::load_split(&data, s)?;
                let rows = indolm::tasks::summarization::baselines(&articles);
                println!(
                    "{}",
                    indolm::tasks::summarization::markdown(&format!("{s} ({} articles)", articles.len()), &rows)
                );
            }
            Ok(())
        }
        Command::Eval(EvalCommand::Rouge { pred, reference }) => eval_cmds::rouge(&pred, &reference),
        Command::Eval(EvalCommand::Indommlu { model, data, mode, json }) => {
            eval_cmds::indommlu(&model, &data, mode, json.as_deref(), device()?)
        }
        Command::Eval(EvalCommand::Bias { model, run, pairs, languages, metric, json, logdir }) => eval_cmds::bias(
            model.as_deref(),
            run.as_deref(),
            &pairs,
            &languages,
            metric,
            json.as_deref(),
            logdir.as_deref(),
            device()?,
        ),
        Command::Finetune(FinetuneCommand::Sentiment { recipe, init }) => {
            task_cmds::finetune_sentiment(&recipe, init.as_deref(), device()?)
        }
        Command::Finetune(FinetuneCommand::Summarize { recipe, init }) => {
            task_cmds::finetune_summarize(&recipe, init.as_deref(), device()?)
        }
        Command::Summarize { model, file } => task_cmds::summarize(&model, &file, device()?),
        Command::Predict(PredictCommand::Sentiment { model, text, file }) => {
            task_cmds::predict_sentiment(&model, &text, file.as_deref(), device()?)
        }
        Command::Download { what, out, mirror } => data_cmds::download(what, &out, mirror),
        Command::Report(ReportCommand::BiasCurve { run, out }) => {
            let n = indolm::report::bias_curve::write_bias_curve(&run, &out)?;
            println!("plotted {n} checkpoint(s) -> {}", out.display());
            Ok(())
        }
        Command::Report(ReportCommand::Summarization { results, out }) => {
            let table = indolm::tasks::summarization::table_from_results(&results)?;
            print!("{table}");
            if let Some(out) = out {
                indolm::error::write_atomic(&out, table.as_bytes())?;
            }
            Ok(())
        }
        Command::Recipe(RecipeCommand::Check { recipe }) => train_cmds::check_recipe(&recipe),
        Command::Corpus(CorpusCommand::Prepare { recipe }) => data_cmds::prepare(&recipe),
        Command::Corpus(CorpusCommand::Stats { recipe, sequences }) => data_cmds::stats(&recipe, sequences),
        Command::Tokenize { tokenizer, text } => model_cmds::tokenize(&tokenizer, &text),
        Command::FillMask { model, text, top_k } => model_cmds::fill_mask(&model, &text, top_k, device()?),
    }
}
