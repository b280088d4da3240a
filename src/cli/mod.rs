//! Command-line definitions (clap) and dispatch to the subcommands' implementations.
mod data_cmds;
mod model_cmds;

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
pub enum TokenizerCommand {
    /// Train an uncased BERT WordPiece on text files and write tokenizer.json and vocab.txt.
    Train {
        /// Files, directories or globs (.txt, .txt.gz, .txt.xz, .jsonl, .conllu, .csv with a `text` column).
        #[arg(long, num_args = 1.., required = true)]
        files: Vec<String>,
        /// Vocabulary size (IndoBERT: 31,923).
        #[arg(long, default_value_t = indolm::data::tokenizer_train::DEFAULT_VOCAB_SIZE)]
        vocab_size: usize,
        /// Minimum frequency of a merged piece.
        #[arg(long, default_value_t = 2)]
        min_frequency: u64,
        /// The directory to write.
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        overwrite: bool,
    },
}

pub fn run(cli: Cli) -> Result<()> {
    indolm::device::set_threads(cli.threads)?;
    let device = || indolm::device::parse_device(&cli.device);
    match cli.command {
        Command::ImportHf { hf_dir, out_dir, overwrite } => model_cmds::convert(&hf_dir, &out_dir, overwrite, "imported"),
        Command::ExportHf { checkpoint_dir, out_dir, overwrite } => model_cmds::convert(&checkpoint_dir, &out_dir, overwrite, "exported"),
        Command::Init { config, tokenizer, out, seed, overwrite } => model_cmds::init(&config, &tokenizer, &out, seed, overwrite),
        Command::Info { model } => model_cmds::info(&model),
        Command::Tokenizer(TokenizerCommand::Train { files, vocab_size, min_frequency, out, overwrite }) => {
            data_cmds::train_tokenizer(&files, vocab_size, min_frequency, &out, overwrite)
        }
        Command::Tokenize { tokenizer, text } => model_cmds::tokenize(&tokenizer, &text),
        Command::FillMask { model, text, top_k } => model_cmds::fill_mask(&model, &text, top_k, device()?),
    }
}
