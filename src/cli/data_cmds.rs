//! Data subcommands: `tokenizer train`, `corpus prepare|stats` and `download`.
use clap::Subcommand;
use indolm_core::outln;
use indolm_core::seeds::{salt, stream_rng};
use indolm_tasks::pretrain::corpus::{open_mixture, prepare_corpus};
use indolm_tasks::pretrain::PretrainRecipe;
use indolm_torch::data::sources::SourceSpec;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::data::tokenizer_train::{train_wordpiece, TrainOptions};
use indolm_torch::error::{Error, IoContext, Result};
use rand::Rng;
use std::path::{Path, PathBuf};

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
    /// NusaX: sentiment (all 12 languages), the translation corpus (`mt/`) and the bilingual
    /// lexicon (`lexicon/`).
    Nusax,
    /// The IndoMMLU CSV from its authors' repository.
    Indommlu,
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
    /// Read and oracle-label Liputan6 splits once (on every core) and cache them beside the data,
    /// as `finetune summarize` does on its first run; with --model, also tokenize them for that
    /// model and cache the token ids. Prints articles/s.
    Liputan6 {
        /// The Liputan6 folder holding the split folders.
        #[arg(long)]
        data: PathBuf,
        /// Split folders to prepare.
        #[arg(long, num_args = 1.., default_value = "train")]
        split: Vec<String>,
        /// A model directory (the one `finetune summarize` starts from): tokenize for its
        /// tokenizer and positions too.
        #[arg(long)]
        model: Option<PathBuf>,
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
        #[arg(long, default_value_t = indolm_torch::data::tokenizer_train::DEFAULT_VOCAB_SIZE)]
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

/// Paragraphs for tokenizer training: every paragraph of the files, or a seeded sample of
/// the recipe's sources, `sample` paragraphs split by the sources' weights (reservoir
/// sampling within each source).
fn training_paragraphs(files: &[String], recipe: Option<&PretrainRecipe>, sample: usize) -> Result<Vec<String>> {
    let Some(recipe) = recipe else {
        let source = SourceSpec {
            name: "files".into(),
            lang: "id".into(),
            paths: files.to_vec(),
            format: None,
            text_field: "text".into(),
            weight: 1.0,
        };
        let mut paragraphs = Vec::new();
        let stats = source.read_documents(&PathBuf::from("."), |doc| paragraphs.extend(doc))?;
        if stats.invalid_utf8_lines > 0 {
            eprintln!("note: skipped {} line(s) that are not valid UTF-8", stats.invalid_utf8_lines);
        }
        return Ok(paragraphs);
    };
    let total_weight: f64 = recipe.data.sources.iter().map(|s| s.weight).sum();
    let mut out = Vec::new();
    for (i, source) in recipe.data.sources.iter().enumerate() {
        let quota = ((sample as f64) * source.weight / total_weight).round().max(1.0) as usize;
        let mut rng = stream_rng(recipe.seed, salt::TOKENIZER_SAMPLE, i as u64);
        let mut reservoir: Vec<String> = Vec::with_capacity(quota);
        let mut seen = 0usize;
        source.read_documents(&recipe.base_dir, |doc| {
            for paragraph in doc {
                seen += 1;
                if reservoir.len() < quota {
                    reservoir.push(paragraph);
                } else {
                    let j = rng.random_range(0..seen);
                    if j < quota {
                        reservoir[j] = paragraph;
                    }
                }
            }
        })?;
        outln!("source {}: sampled {} of {seen} paragraphs", source.name, reservoir.len());
        out.extend(reservoir);
    }
    Ok(out)
}

/// `tokenizer train`: a WordPiece on files or on a seeded sample of a recipe's mixture.
fn train_tokenizer(
    files: &[String],
    recipe_path: Option<&Path>,
    sample: usize,
    vocab_size: usize,
    min_frequency: u64,
    out: Option<&Path>,
    overwrite: bool,
) -> Result<()> {
    let recipe = recipe_path.map(PretrainRecipe::load).transpose()?;
    let out: PathBuf = match (out, &recipe) {
        (Some(o), _) => o.to_path_buf(),
        (None, Some(r)) => r.resolve(&r.tokenizer.path),
        (None, None) => return Err(Error::argument("tokenizer train", "--out is required with --files")),
    };
    // The files named are read; the folder written must not hold them (checked again on writing).
    let reads: Vec<&Path> = files.iter().map(Path::new).filter(|p| p.exists()).collect();
    let is_tokenizer_file = indolm_torch::data::tokenizer::is_tokenizer_file;
    indolm_core::outputs::check_replaceable(&out, overwrite, &reads, is_tokenizer_file)?;
    let paragraphs = training_paragraphs(files, recipe.as_ref(), sample)?;
    let options = TrainOptions { vocab_size, min_frequency, lowercase: true };
    let tokenizer = train_wordpiece(&paragraphs, &options)?;
    indolm_core::outputs::write_dir(&out, overwrite, &reads, is_tokenizer_file, |dir| {
        std::fs::create_dir_all(dir).with_path(dir)?;
        tokenizer.save(dir)
    })?;
    outln!(
        "trained a WordPiece of {} pieces on {} paragraphs -> {}",
        tokenizer.vocab_size(),
        paragraphs.len(),
        out.display()
    );
    Ok(())
}

/// `download`: the chosen public files into `out`, resumable and checked.
pub fn download(
    what: DownloadCommand,
    out: &Path,
    mirror: Option<String>,
    patience: indolm_torch::data::download::Patience,
) -> Result<()> {
    use indolm_torch::data::download::Downloader;
    let dl = Downloader::with_patience(mirror, patience);
    if let DownloadCommand::Cc100 { lang } | DownloadCommand::Wikipedia { lang, .. } = &what {
        // Each code becomes a file or folder name under `out`.
        if let Some(bad) =
            lang.iter().find(|l| l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(Error::argument(
                "--lang",
                format!("expected a language code such as id, jv or su, found {}", indolm_core::files::quoted(bad)),
            ));
        }
    }
    let files = match what {
        DownloadCommand::Cc100 { lang } => lang.iter().flat_map(|l| dl.cc100(l, out)).collect(),
        DownloadCommand::Wikipedia { lang, date } => {
            lang.iter().map(|l| dl.wikipedia(&date, l, out)).collect::<Result<Vec<_>>>()?.concat()
        }
        DownloadCommand::Nusax => dl.nusax(out),
        DownloadCommand::Indommlu => dl.indommlu(out),
    };
    for spec in &files {
        let n = dl.fetch(spec)?;
        let checks = match (&spec.size, &spec.sha256) {
            (_, Some(_)) => "size, SHA-256 and content checked",
            (Some(_), None) => "size and content checked",
            (None, None) => "content checked",
        };
        if n == 0 {
            outln!("{}: already complete ({checks})", spec.dest.display());
        } else {
            outln!("{}: {n} bytes fetched ({checks})", spec.dest.display());
        }
    }
    Ok(())
}

/// `corpus prepare`: tokenizes every source of the recipe (skipping up-to-date shards).
fn prepare(recipe_path: &Path) -> Result<()> {
    let recipe = PretrainRecipe::load(recipe_path)?;
    let tokenizer = TextTokenizer::from_path(&recipe.resolve(&recipe.tokenizer.path))?;
    prepare_corpus(&recipe, &tokenizer, None, |line| outln!("{line}"))?;
    Ok(())
}

/// `corpus stats`: documents, tokens and `[UNK]` rate per source, and the realised mixture.
fn stats(recipe_path: &Path, sequences: usize) -> Result<()> {
    let recipe = PretrainRecipe::load(recipe_path)?;
    let tokenizer = TextTokenizer::from_path(&recipe.resolve(&recipe.tokenizer.path))?;
    let metas = prepare_corpus(&recipe, &tokenizer, None, |_| {})?;
    outln!("| source | lang | documents | tokens | [UNK] % | invalid UTF-8 lines |");
    outln!("|---|---|---:|---:|---:|---:|");
    for m in &metas {
        outln!(
            "| {} | {} | {} | {} | {:.3} | {} |",
            m.source,
            m.lang,
            m.documents,
            m.tokens,
            100.0 * m.unk_tokens as f64 / m.tokens.max(1) as f64,
            m.read.invalid_utf8_lines
        );
    }
    let mut mixture = open_mixture(&recipe, &tokenizer, None, |_| {})?;
    let mut cursor = mixture.new_cursor();
    mixture.next_sequences(&mut cursor, sequences);
    outln!("\n| source | requested | realised over {sequences} sequences | epochs |");
    outln!("|---|---:|---:|---:|");
    for (((name, w), n), e) in
        mixture.names().iter().zip(mixture.weights()).zip(&cursor.per_source).zip(mixture.epochs(&cursor))
    {
        outln!("| {name} | {:.3} | {:.3} | {e:.2} |", w, *n as f64 / sequences as f64);
    }
    // The data loader's own speed: batches of the recipe's size, drawn and masked.
    let masker = indolm_tasks::pretrain::masking::Masker::new(recipe.masking.clone(), &tokenizer, recipe.seed);
    let batch = recipe.optimizer.batch_size;
    let started = std::time::Instant::now();
    let mut batches = 0u64;
    while started.elapsed().as_secs_f64() < 1.0 {
        let seqs = mixture.next_sequences(&mut cursor, batch);
        std::hint::black_box(masker.mask(&seqs, batches));
        batches += 1;
    }
    outln!(
        "\ndata loader: {:.0} batches/s (batch {batch}, seq_len {}, sampled and masked, one thread)",
        batches as f64 / started.elapsed().as_secs_f64(),
        recipe.data.seq_len
    );
    Ok(())
}

/// Runs a `tokenizer` subcommand.
pub fn run_tokenizer(command: TokenizerCommand) -> Result<()> {
    match command {
        TokenizerCommand::Train { files, recipe, sample_paragraphs, vocab_size, min_frequency, out, overwrite } => {
            train_tokenizer(
                &files,
                recipe.as_deref(),
                sample_paragraphs,
                vocab_size,
                min_frequency,
                out.as_deref(),
                overwrite,
            )
        }
    }
}

/// Runs a `corpus` subcommand.
pub fn run_corpus(command: CorpusCommand) -> Result<()> {
    match command {
        CorpusCommand::Prepare { recipe } => prepare(&recipe),
        CorpusCommand::Stats { recipe, sequences } => stats(&recipe, sequences),
        CorpusCommand::Liputan6 { data, split, model } => liputan6(&data, &split, model.as_deref()),
    }
}

/// `corpus liputan6`: each split read and labelled (or found in its cache), then tokenized for
/// `model` (or found in its cache), with the rates.
fn liputan6(data: &Path, splits: &[String], model: Option<&Path>) -> Result<()> {
    use indolm_tasks::summarization::encoded::encode_split;
    use indolm_tasks::summarization::prepared::prepare_split;
    let encoder = match model {
        Some(dir) => {
            let tokenizer = indolm_torch::data::tokenizer::TextTokenizer::from_dir(dir)?;
            let config = indolm_torch::model::BertConfig::from_file(&dir.join("config.json"))?;
            Some((tokenizer, config.max_position_embeddings as usize))
        }
        None => None,
    };
    for split in splits {
        let prepared = prepare_split(data, split, &|n| eprintln!("{n}"))?;
        let n = prepared.articles.len();
        outln!(
            "{split}: {n} articles {} in {:.2}s ({:.0} articles/s)",
            if prepared.from_cache {
                "read from the cache"
            } else {
                "read and oracle-labelled on every core, then cached,"
            },
            prepared.seconds,
            n as f64 / prepared.seconds.max(1e-9)
        );
        if let Some((tokenizer, max_positions)) = &encoder {
            let encoded = encode_split(data, split, &prepared, tokenizer, *max_positions, &|n| eprintln!("{n}"))?;
            if encoded.from_cache {
                outln!("{split}: {} tokens mapped from the cache in {:.2}s", encoded.tokens(), encoded.seconds);
            } else {
                outln!(
                    "{split}: {} tokens tokenized on every core, then cached, in {:.2}s ({:.0} articles/s)",
                    encoded.tokens(),
                    encoded.seconds,
                    n as f64 / encoded.seconds.max(1e-9)
                );
            }
        }
    }
    Ok(())
}
