//! Summarization on Liputan6 (as the Liputan6 paper, after PreSumm): the data layout
//! (`data`), the extractive baselines Lead-N and Oracle (`oracle`) and their ROUGE table (here),
//! the encoder input (`input`), PreSumm's transformer blocks (`transformer`), BertExt (`ext`),
//! BertAbs/BertExtAbs (`abs`) with beam search (`beam`), using a trained model and scoring its
//! summaries (`inference`), a split read and oracle-labelled once and cached (`prepared`), its
//! token ids for one model encoded once and cached (`encoded`), and their training (`train`).
pub mod abs;
pub mod beam;
pub mod data;
pub mod encoded;
pub mod ext;
pub mod inference;
pub mod input;
pub mod oracle;
pub mod prepared;
pub mod recipe;
pub mod train;
pub mod transformer;

use crate::eval::rouge::mean_f1;
use data::{join, Article};

/// One row of the results table: system name and mean ROUGE-1/2/L F1 (×100).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The summarizer: `Lead-1`..`Lead-3`, `Oracle`, or a trained model's name (e.g. `BertExt`).
    pub system: String,
    /// Mean ROUGE-1 F1, ×100.
    pub rouge1: f64,
    /// Mean ROUGE-2 F1, ×100.
    pub rouge2: f64,
    /// Mean ROUGE-L F1, ×100.
    pub rouge_l: f64,
}

fn row(system: &str, articles: &[Article], pick: impl Fn(&Article) -> Vec<usize>) -> Row {
    let pairs: Vec<(String, String)> = articles
        .iter()
        .map(|a| {
            // In document order: an Oracle label lists its sentences in selection order.
            let mut picked = pick(a);
            picked.sort_unstable();
            let chosen: Vec<Vec<String>> = picked.into_iter().map(|i| a.article[i].clone()).collect();
            (join(&chosen), join(&a.summary))
        })
        .collect();
    let (rouge1, rouge2, rouge_l) = mean_f1(&pairs);
    Row { system: system.into(), rouge1, rouge2, rouge_l }
}

/// Lead-1, Lead-2, Lead-3 and Oracle (released labels, else the Liputan6 oracle).
pub fn baselines(articles: &[Article]) -> Vec<Row> {
    let mut rows: Vec<Row> =
        (1..=3).map(|n| row(&format!("Lead-{n}"), articles, |a| oracle::lead(&a.article, n))).collect();
    rows.push(row("Oracle", articles, |a| {
        a.extractive.clone().unwrap_or_else(|| oracle::oracle_liputan6(&a.article, &a.summary))
    }));
    rows
}

/// A markdown table of `rows` headed by the split's name, scores with two decimals.
pub fn markdown(split: &str, rows: &[Row]) -> String {
    let mut out = format!("| {split} | ROUGE-1 | ROUGE-2 | ROUGE-L |\n|---|---:|---:|---:|\n");
    for r in rows {
        out.push_str(&format!("| {} | {:.2} | {:.2} | {:.2} |\n", r.system, r.rouge1, r.rouge2, r.rouge_l));
    }
    out
}

/// Table 4 of the Liputan6 paper from the `results.json` of `finetune summarize` runs: the
/// Lead-N and Oracle rows (from the first run that has them for a split) and every run's
/// system, ROUGE-1/2/L for each test split side by side (e.g. canonical and Xtreme).
pub fn table_from_results(paths: &[std::path::PathBuf]) -> crate::error::Result<String> {
    use crate::error::Error;
    use crate::files::read_to_string;
    #[derive(serde::Deserialize)]
    struct Results {
        test: Vec<(String, Vec<Row>)>,
    }
    let mut splits: Vec<String> = Vec::new();
    let mut systems: Vec<String> = Vec::new();
    let mut cells: std::collections::HashMap<(String, String), Row> = Default::default();
    for path in paths {
        let results: Results = serde_json::from_str(&read_to_string(path)?).map_err(|e| Error::json(path, &e))?;
        for (split, rows) in results.test {
            if !splits.contains(&split) {
                splits.push(split.clone());
            }
            for row in rows {
                let baseline = row.system.starts_with("Lead-") || row.system == "Oracle";
                let key = (row.system.clone(), split.clone());
                if baseline && cells.contains_key(&key) {
                    continue;
                }
                if !systems.contains(&row.system) {
                    systems.push(row.system.clone());
                }
                cells.insert(key, row);
            }
        }
    }
    let mut out = String::from("| System |");
    let mut rule = String::from("|---|");
    for split in &splits {
        out.push_str(&format!(" {split} R1 | R2 | RL |"));
        rule.push_str("---:|---:|---:|");
    }
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for system in &systems {
        out.push_str(&format!("| {system} |"));
        for split in &splits {
            match cells.get(&(system.clone(), split.clone())) {
                Some(r) => out.push_str(&format!(" {:.2} | {:.2} | {:.2} |", r.rouge1, r.rouge2, r.rouge_l)),
                None => out.push_str(" – | – | – |"),
            }
        }
        out.push('\n');
    }
    Ok(out)
}
