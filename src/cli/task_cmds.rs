//! Fine-tuning and using the task heads: `finetune sentiment|summarize`, `predict sentiment` and
//! `summarize`.
use clap::Subcommand;
use indolm::error::{Error, Result};
use indolm::eval::metrics::argmax;
use indolm::files::read_to_string;
use indolm::model::Component;
use indolm::outln;
use indolm::tasks::classifier::SequenceClassifier;
use indolm::tasks::sentiment::{run, SentimentRecipe};
use std::path::{Path, PathBuf};
use tch::Device;

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

/// The model to start from: `--init`, else the recipe's `init`.
fn resolve_init(recipe_path: &Path, cli: Option<&Path>, recipe: Option<&Path>) -> Result<std::path::PathBuf> {
    cli.or(recipe).map(Path::to_path_buf).ok_or_else(|| {
        Error::field(recipe_path, "init", "no model to start from: set `init` in the recipe or pass --init")
    })
}

/// `finetune sentiment`: the recipe's NusaX setting, then its results table.
fn finetune_sentiment(recipe_path: &Path, init: Option<&Path>, device: Device) -> Result<()> {
    let recipe = SentimentRecipe::load(recipe_path)?;
    let init = resolve_init(recipe_path, init, recipe.init.as_deref())?;
    let results = run(&recipe, &init, device)?;
    outln!("\n{}", results.markdown());
    outln!("models and results.{{json,md}} in {}", recipe.output_dir.join(&recipe.name).display());
    Ok(())
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
    model.set_precision(indolm::device::default_precision(device));
    let lines: Vec<String> = match file {
        Some(f) => read_to_string(f)?.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect(),
        None => texts.to_vec(),
    };
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let probs = model.predict(&refs, 512.min(model.config.max_position_embeddings as usize), 32)?;
    for (text, p) in lines.iter().zip(probs) {
        let best = argmax(&p);
        let all: Vec<String> = labels.iter().zip(&p).map(|(l, v)| format!("{l} {v:.3}")).collect();
        outln!("{}\t{}\t{text}", labels[best], all.join(" "));
    }
    Ok(())
}

/// `finetune summarize`: a BertExt, BertAbs or BertExtAbs, then its Table 4 rows.
fn finetune_summarize(recipe_path: &Path, init: Option<&Path>, device: Device) -> Result<()> {
    use indolm::tasks::summarization::train::{run, SummarizeRecipe};
    let recipe = SummarizeRecipe::load(recipe_path)?;
    let init = resolve_init(recipe_path, init, recipe.init.as_deref())?;
    let results = run(&recipe, &init, device)?;
    let dir = recipe.output_dir.join(&recipe.name);
    outln!(
        "dev ROUGE-1/2/L before training {:.2}/{:.2}/{:.2}, best (step {}) {:.2}/{:.2}/{:.2}",
        results.dev_before.rouge1,
        results.dev_before.rouge2,
        results.dev_before.rouge_l,
        results.best_step,
        results.dev_best.rouge1,
        results.dev_best.rouge2,
        results.dev_best.rouge_l
    );
    outln!("{}", read_to_string(&dir.join("results.md"))?);
    outln!("model in {}", dir.join("best").display());
    Ok(())
}

/// `indolm summarize`: the summary of the plain-text article in `file`, one sentence a line.
pub fn summarize(model_dir: &Path, file: &Path, device: Device) -> Result<()> {
    use indolm::tasks::summarization::inference::{sentences_of, Summarizer};
    let model = Summarizer::load_trained(model_dir, device)?;
    let article = sentences_of(&read_to_string(file)?);
    if article.is_empty() {
        return Err(Error::invalid(file, "empty article"));
    }
    for sentence in &model.summarize(&[article.as_slice()])?[0] {
        outln!("{}", sentence.join(" "));
    }
    Ok(())
}

/// Runs a `finetune` subcommand.
pub fn run_finetune(command: FinetuneCommand, device: Device) -> Result<()> {
    match command {
        FinetuneCommand::Sentiment { recipe, init } => finetune_sentiment(&recipe, init.as_deref(), device),
        FinetuneCommand::Summarize { recipe, init } => finetune_summarize(&recipe, init.as_deref(), device),
    }
}

/// Runs a `predict` subcommand.
pub fn run_predict(command: PredictCommand, device: Device) -> Result<()> {
    match command {
        PredictCommand::Sentiment { model, text, file } => predict_sentiment(&model, &text, file.as_deref(), device),
    }
}
