//! The Liputan6 processed layout: one JSON file per article under a split folder (`train/`,
//! `dev/`, `test/`, and the Xtreme variant's own folders), with `id`, `url`, `clean_article` and
//! `clean_summary` (lists of sentences, each a list of lowercased tokens) and
//! `extractive_summary` (the oracle sentence indices; recomputed when absent).
use indolm_core::files::read_to_string;
use indolm_torch::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

/// One Liputan6 article file.
#[derive(Debug, Clone, PartialEq)]
pub struct Article {
    /// The file's `id` (as text; empty when absent).
    pub id: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// Sentences of tokens.
    pub article: Vec<Vec<String>>,
    /// Reference summary: sentences of lowercased tokens.
    pub summary: Vec<Vec<String>>,
    /// Oracle sentence indices as released, if present.
    pub extractive: Option<Vec<usize>>,
}

fn sentences(path: &Path, value: &serde_json::Value, key: &str) -> Result<Vec<Vec<String>>> {
    let list = value
        .get(key)
        .and_then(|v| v.as_array())
        .ok_or_else(|| Error::field(path, key, "missing or not a list of sentences"))?;
    list.iter()
        .map(|s| {
            let tokens = s.as_array().ok_or_else(|| Error::field(path, key, "a sentence is not a list of tokens"))?;
            Ok(tokens.iter().filter_map(|t| t.as_str().map(|t| t.to_lowercase())).collect())
        })
        .collect()
}

/// Reads one article file (tokens lowercased). An article without tokens, or an
/// `extractive_summary` index past its last sentence, is an error naming the file.
pub fn load_article(path: &Path) -> Result<Article> {
    let value: serde_json::Value = serde_json::from_str(&read_to_string(path)?).map_err(|e| Error::json(path, &e))?;
    let article = sentences(path, &value, "clean_article")?;
    if article.iter().all(|s| s.is_empty()) {
        return Err(Error::invalid(path, "empty article"));
    }
    let summary = sentences(path, &value, "clean_summary")?;
    let extractive = match value.get("extractive_summary") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => {
            let idx: Vec<usize> = v
                .as_array()
                .ok_or_else(|| Error::field(path, "extractive_summary", "not a list of sentence indices"))?
                .iter()
                .map(|i| {
                    i.as_u64()
                        .map(|i| i as usize)
                        .ok_or_else(|| Error::field(path, "extractive_summary", format!("{i} is not a sentence index")))
                })
                .collect::<Result<_>>()?;
            if let Some(&bad) = idx.iter().find(|&&i| i >= article.len()) {
                return Err(Error::field(
                    path,
                    "extractive_summary",
                    format!("index {bad} is out of range: the article has {} sentences", article.len()),
                ));
            }
            Some(idx)
        }
    };
    let id = value.get("id").map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string())).unwrap_or_default();
    Ok(Article { id, path: path.to_path_buf(), article, summary, extractive })
}

/// Every `*.json` article of `<root>/<split>/`, in file-name order.
pub fn load_split(root: &Path, split: &str) -> Result<Vec<Article>> {
    let dir = root.join(split);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_path(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::invalid(&dir, "no .json articles in this folder"));
    }
    files.iter().map(|f| load_article(f)).collect()
}

/// Sentences as one text, tokens and sentences separated by single spaces (for ROUGE).
pub fn join(sentences: &[Vec<String>]) -> String {
    sentences.iter().map(|s| s.join(" ")).collect::<Vec<_>>().join(" ")
}
