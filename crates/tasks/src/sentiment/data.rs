//! NusaX sentiment data (`<root>/<language>/{train,valid,test}.csv`, columns `text` and `label`
//! in negative/neutral/positive), read and checked; and the scores of a classifier on it
//! (macro-F1, accuracy, confusion matrix).
use crate::classifier::SequenceClassifier;
use indolm_metrics::metrics::argmax;
use indolm_metrics::metrics::{accuracy, confusion_matrix, macro_f1};
use indolm_torch::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The three NusaX labels, in the order of the classifier's outputs.
pub const LABELS: [&str; 3] = ["negative", "neutral", "positive"];
/// The 12 NusaX languages (folder names), used when a recipe names none.
pub const NUSAX_LANGUAGES: [&str; 12] = indolm_torch::data::download::NUSAX_LANGUAGES;

/// One labelled text.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// The text, trimmed.
    pub text: String,
    /// The index of its label in [`LABELS`].
    pub label: usize,
}

/// One split of one language, checked: the folder, the columns, every label and text.
pub fn load_split(root: &Path, language: &str, split: &str) -> Result<Vec<Example>> {
    let dir = root.join(language);
    if !dir.is_dir() {
        let available: Vec<String> = std::fs::read_dir(root)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().to_string()).collect())
            .unwrap_or_default();
        return Err(Error::MissingFile {
            path: dir,
            hint: format!("no folder for language `{language}` (found: {})", available.join(", ")),
        });
    }
    let path = dir.join(format!("{split}.csv"));
    let (mut reader, header) = indolm_core::files::open_csv(&csv::ReaderBuilder::new(), &path, "")?;
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| Error::field(&path, name, format!("missing column; the header has {header:?}")))
    };
    let (text_col, label_col) = (col("text")?, col("label")?);
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let row = i + 2;
        let rec = rec.map_err(|e| Error::invalid(&path, format!("row {row}: {e}")))?;
        let text = rec.get(text_col).unwrap_or("").trim();
        if text.is_empty() {
            return Err(Error::invalid(&path, format!("row {row}: empty text")));
        }
        let raw = rec.get(label_col).unwrap_or("").trim();
        let label = LABELS.iter().position(|l| *l == raw.to_lowercase()).ok_or_else(|| {
            Error::invalid(
                &path,
                format!("row {row}: unknown label {}, expected one of {LABELS:?}", indolm_core::files::quoted(raw)),
            )
        })?;
        out.push(Example { text: text.to_string(), label });
    }
    Ok(out)
}

/// Scores of one evaluation: macro-F1, accuracy, confusion matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Scores {
    /// The mean of the three labels' F1 (0 to 1).
    pub macro_f1: f64,
    /// The share of texts labelled right (0 to 1).
    pub accuracy: f64,
    /// Counts by gold label (rows) and predicted label (columns), in [`LABELS`] order.
    pub confusion: Vec<Vec<usize>>,
    /// The number of texts scored.
    pub n: usize,
}

/// Classifies `data` (texts cut to `max_len` tokens) and scores the predictions, which it also
/// returns.
pub fn score(model: &SequenceClassifier, data: &[Example], max_len: usize) -> Result<(Scores, Vec<usize>)> {
    let texts: Vec<&str> = data.iter().map(|e| e.text.as_str()).collect();
    let probs = model.predict(&texts, max_len)?;
    let pred: Vec<usize> = probs.iter().map(|p| argmax(p)).collect();
    let gold: Vec<usize> = data.iter().map(|e| e.label).collect();
    Ok((
        Scores {
            macro_f1: macro_f1(&gold, &pred, LABELS.len()),
            accuracy: accuracy(&gold, &pred),
            confusion: confusion_matrix(&gold, &pred, LABELS.len()),
            n: data.len(),
        },
        pred,
    ))
}

/// The `split` of every language in `langs`, one after another.
pub(crate) fn concat(root: &Path, langs: &[String], split: &str) -> Result<Vec<Example>> {
    let mut out = Vec::new();
    for l in langs {
        out.extend(load_split(root, l, split)?);
    }
    Ok(out)
}
