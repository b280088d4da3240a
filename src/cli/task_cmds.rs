//! Task subcommands: `finetune sentiment` and `predict sentiment`.
use indolm::error::{read_to_string, Error, Result};
use indolm::tasks::classifier::SequenceClassifier;
use indolm::tasks::sentiment::{run, SentimentRecipe};
use std::path::Path;
use tch::Device;

pub fn finetune_sentiment(recipe_path: &Path, init: Option<&Path>, device: Device) -> Result<()> {
    let recipe = SentimentRecipe::load(recipe_path)?;
    let init = init
        .map(Path::to_path_buf)
        .or_else(|| recipe.init.clone())
        .ok_or_else(|| Error::field(recipe_path, "init", "no model to start from: set `init` in the recipe or pass --init"))?;
    let results = run(&recipe, &init, device)?;
    println!("\n{}", results.markdown());
    println!("models and results.{{json,md}} in {}", recipe.output_dir.join(&recipe.name).display());
    Ok(())
}

pub fn predict_sentiment(model_dir: &Path, texts: &[String], file: Option<&Path>, device: Device) -> Result<()> {
    let config_path = model_dir.join("config.json");
    let config: serde_json::Value = serde_json::from_str(&read_to_string(&config_path)?).map_err(|e| Error::json(&config_path, &e))?;
    let id2label = config["id2label"].as_object().ok_or_else(|| Error::field(&config_path, "id2label", "missing: is this a fine-tuned classification model?"))?;
    let mut labels: Vec<(usize, String)> = id2label.iter().filter_map(|(k, v)| Some((k.parse().ok()?, v.as_str()?.to_string()))).collect();
    labels.sort();
    let labels: Vec<String> = labels.into_iter().map(|(_, l)| l).collect();
    let (mut model, notes) = SequenceClassifier::load(model_dir, &labels, device)?;
    if let Some(note) = notes.iter().find(|n| n.contains("no classifier") || n.contains("no pooler")) {
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
        let best = p.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
        let all: Vec<String> = labels.iter().zip(&p).map(|(l, v)| format!("{l} {v:.3}")).collect();
        println!("{}\t{}\t{text}", labels[best], all.join(" "));
    }
    Ok(())
}
