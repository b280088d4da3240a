//! Using the task heads: `predict sentiment` and `summarize` (fine-tuning them is the tasks' own
//! commands, built from their declarations in `train_cmds`).
use clap::Subcommand;
use indolm_core::files::read_to_string;
use indolm_core::outln;
use indolm_metrics::metrics::argmax;
use indolm_tasks::classifier::SequenceClassifier;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::Component;
use std::path::{Path, PathBuf};
use tch::Device;

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

/// `predict sentiment`: a label and every label's probability for each text.
fn predict_sentiment(model_dir: &Path, texts: &[String], file: Option<&Path>, device: Device) -> Result<()> {
    let config_path = model_dir.join("config.json");
    let config: serde_json::Value =
        serde_json::from_str(&read_to_string(&config_path)?).map_err(|e| Error::json(&config_path, &e))?;
    let id2label = config["id2label"]
        .as_object()
        .ok_or_else(|| Error::field(&config_path, "id2label", "missing: is this a fine-tuned classification model?"))?;
    let mut labels: Vec<(usize, String)> =
        id2label.iter().filter_map(|(k, v)| Some((k.parse().ok()?, v.as_str()?.to_string()))).collect();
    labels.sort();
    let labels: Vec<String> = labels.into_iter().map(|(_, l)| l).collect();
    let (mut model, notes) = SequenceClassifier::load(model_dir, &labels, device)?;
    if let Some(note) = notes.iter().find(|n| n.initialises(Component::Classifier) || n.initialises(Component::Pooler))
    {
        return Err(Error::invalid(model_dir, format!("not a fine-tuned classifier: {note}")));
    }
    model.set_precision(indolm_torch::device::default_precision(device));
    let lines: Vec<String> = match file {
        Some(f) => {
            let lines: Vec<String> =
                read_to_string(f)?.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect();
            if lines.is_empty() {
                return Err(Error::invalid(f, "no text to classify: the file is empty or has only blank lines"));
            }
            lines
        }
        None => {
            if let Some(i) = texts.iter().position(|t| t.trim().is_empty()) {
                return Err(Error::argument("--text", format!("text {} is empty: give the text to classify", i + 1)));
            }
            texts.to_vec()
        }
    };
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let probs = model.predict(&refs, 512.min(model.config.max_position_embeddings as usize))?;
    for (text, p) in lines.iter().zip(probs) {
        let best = argmax(&p);
        let all: Vec<String> = labels.iter().zip(&p).map(|(l, v)| format!("{l} {v:.3}")).collect();
        outln!("{}\t{}\t{text}", labels[best], all.join(" "));
    }
    Ok(())
}

/// `indolm summarize`: what to summarize and how.
#[derive(clap::Args, Debug)]
pub struct SummarizeArgs {
    /// A model directory from `finetune summarize`.
    #[arg(long)]
    pub model: PathBuf,
    /// Plain text: one article (or, with --per-line, one article a line).
    #[arg(long, required_unless_present = "liputan6", conflicts_with = "liputan6")]
    pub file: Option<PathBuf>,
    /// Every non-empty line of --file is an article.
    #[arg(long, requires = "file")]
    pub per_line: bool,
    /// A Liputan6 split folder (one JSON file per article): its articles, in file-name order.
    #[arg(long)]
    pub liputan6: Option<PathBuf>,
    /// Articles decoded together (default: the model's `decode_batch`, 16).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Also write the summaries here, one a line.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `indolm summarize`: one article's summary one sentence a line; several articles' summaries
/// one a line (sentences joined), in input order.
pub fn summarize(args: &SummarizeArgs, device: Device) -> Result<()> {
    use indolm_tasks::summarization::data::{join, load_split};
    use indolm_tasks::summarization::inference::{sentences_of, Summarizer};
    let inputs: Vec<&Path> =
        [Some(args.model.as_path()), args.file.as_deref(), args.liputan6.as_deref()].into_iter().flatten().collect();
    let outputs: Vec<indolm_core::outputs::Output> =
        args.out.as_deref().map(|o| indolm_core::outputs::Output::file("--out", o)).into_iter().collect();
    super::check_outputs(&outputs, &inputs)?;
    let mut model = Summarizer::load_trained(&args.model, device)?;
    model.set_precision(indolm_torch::device::default_precision(device));
    let articles: Vec<Vec<Vec<String>>> = match (&args.file, &args.liputan6) {
        (Some(file), _) if args.per_line => {
            read_to_string(file)?.lines().filter(|l| !l.trim().is_empty()).map(sentences_of).collect()
        }
        (Some(file), _) => vec![sentences_of(&read_to_string(file)?)],
        (None, Some(folder)) => {
            let parent = folder.parent().unwrap_or(Path::new("."));
            let split = folder.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            load_split(parent, &split)?.into_iter().map(|a| a.article).collect()
        }
        (None, None) => unreachable!("clap requires --file or --liputan6"),
    };
    let source = args.file.as_deref().or(args.liputan6.as_deref()).expect("one of them");
    if articles.is_empty() || articles.iter().all(|a| a.is_empty()) {
        return Err(Error::invalid(source, "no article text"));
    }
    if let Some(i) = articles.iter().position(|a| a.is_empty()) {
        return Err(Error::invalid(source, format!("article {} is empty", i + 1)));
    }
    // Say how much of each article the encoder reads: what does not fit its positions is cut.
    let mut cut = 0;
    for (i, article) in articles.iter().enumerate() {
        let r = model.reading(article)?;
        if r.kept_tokens < r.tokens {
            cut += 1;
            if cut <= 5 {
                eprintln!(
                    "note: article {}: {} tokens in {} sentences; the model reads the first {} tokens ({} sentences, its {} positions) and the rest is cut",
                    i + 1,
                    r.tokens,
                    r.sentences,
                    r.kept_tokens,
                    r.kept_sentences,
                    model.max_positions()
                );
            }
        }
    }
    if cut > 5 {
        eprintln!("note: {cut} of {} articles are cut to the model's positions in all", articles.len());
    }
    let refs: Vec<&[Vec<String>]> = articles.iter().map(Vec::as_slice).collect();
    let started = std::time::Instant::now();
    let summaries = model.summarize(&refs, args.batch_size.unwrap_or_else(|| model.default_batch_size()))?;
    let lines: Vec<String> = summaries.iter().map(|s| join(s)).collect();
    if summaries.len() == 1 && !args.per_line && args.liputan6.is_none() {
        for sentence in &summaries[0] {
            outln!("{}", sentence.join(" "));
        }
    } else {
        for line in &lines {
            outln!("{line}");
        }
        eprintln!(
            "summarized {} articles in {:.1}s ({:.2} articles/s)",
            lines.len(),
            started.elapsed().as_secs_f64(),
            lines.len() as f64 / started.elapsed().as_secs_f64().max(1e-9)
        );
    }
    if let Some(out) = &args.out {
        indolm_core::files::write_atomic(out, (lines.join("\n") + "\n").as_bytes())?;
    }
    Ok(())
}

/// Runs a `predict` subcommand.
pub fn run_predict(command: PredictCommand, device: Device) -> Result<()> {
    match command {
        PredictCommand::Sentiment { model, text, file } => predict_sentiment(&model, &text, file.as_deref(), device),
    }
}
