//! `indolm report bias-table MODEL...`: models side by side in the IndoBias paper's Tables 2–3
//! layout. For each language there is one table with a row per model and columns for the
//! overall win rate and each domain's, each with its 95% Wilson interval and pair count. A
//! model is one evaluation: an `eval bias --out` folder, a checkpoint folder, or a run folder
//! (at its last evaluation), named `NAME=PATH` or by its folder. Each row states its metric,
//! because the paper scores decoders by perplexity and encoders by pseudo-perplexity.
use super::bias_compare::{cell, domains_of, languages_of, with_interval};
use indolm_eval::bias::records::{evaluation_under_metric, read_checked, run_evaluation, StepChoice, REPORT_FILE};
use indolm_eval::bias::{BiasReport, Category};
use indolm_eval::BiasMetric;
use indolm_torch::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One row of the tables: a model's evaluation (also `report indommlu-table`'s rows).
#[derive(Debug, Clone, PartialEq)]
pub struct TableModel {
    /// Its name in the tables.
    pub name: String,
    /// An evaluation folder (or its `bias.json`), or a run folder.
    pub path: PathBuf,
}

impl std::str::FromStr for TableModel {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, path) = match s.split_once('=') {
            Some((name, path)) => (name.to_string(), PathBuf::from(path)),
            None => {
                let path = PathBuf::from(s);
                // A report file (`bias.json`, `indommlu.json`) is named by its folder.
                let trimmed = if path.extension().is_some_and(|e| e == "json") {
                    path.parent().map(Path::to_path_buf).unwrap_or_default()
                } else {
                    path.clone()
                };
                let name = trimmed.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                (name, path)
            }
        };
        if name.is_empty() || path.as_os_str().is_empty() {
            return Err(format!("expected PATH or NAME=PATH (an evaluation or run folder), found {s:?}"));
        }
        Ok(TableModel { name, path })
    }
}

/// A loaded row.
struct Row {
    name: String,
    folder: PathBuf,
    report: BiasReport,
}

/// One cell of the JSON: a category's win rate with its interval.
#[derive(Debug, Clone, Serialize)]
pub struct TableCell {
    /// Model name.
    pub model: String,
    /// Language code, or `all` for the average over languages.
    pub language: String,
    /// `overall` or the domain.
    pub category: String,
    /// Win rate of the protrope, %.
    pub win_rate: f64,
    /// 95% Wilson interval, %.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Pairs decided.
    pub pairs: usize,
    /// The evaluation's metric.
    pub metric: BiasMetric,
}

/// The tables (Markdown) and every cell (for `--json`).
pub struct BiasTable {
    /// The report.
    pub markdown: String,
    /// Every cell of it.
    pub cells: Vec<TableCell>,
}

/// The evaluation a command-line path names: the folder holding `bias.json` (under `metric`
/// when asked), or a run folder's last evaluation.
pub(crate) fn evaluation_of(path: &Path, metric: Option<BiasMetric>) -> Result<PathBuf> {
    let dir = if path.is_file() { path.parent().unwrap_or(Path::new(".")).to_path_buf() } else { path.to_path_buf() };
    if dir.join(REPORT_FILE).is_file() {
        let chosen = evaluation_under_metric(dir, metric);
        if !chosen.join(REPORT_FILE).is_file() {
            return Err(Error::MissingFile {
                path: chosen.join(REPORT_FILE),
                hint: "this evaluation has no evaluation under that metric; `eval bias --metric` scores several".into(),
            });
        }
        return Ok(chosen);
    }
    if dir.is_dir() {
        return Ok(run_evaluation(&dir, StepChoice::Final, metric)?.dir);
    }
    Err(Error::MissingFile {
        path: dir.join(REPORT_FILE),
        hint: "expected an evaluation (an `indolm eval bias --out` folder or a checkpoint folder) or a run folder"
            .into(),
    })
}

/// The metric as a row states it: a causal LM's `pppl` is its perplexity, its `crows` the
/// log-likelihood sum.
fn metric_label(report: &BiasReport) -> String {
    match (&report.causal, report.metric) {
        (Some(_), BiasMetric::Pppl) => "perplexity (causal LM)".into(),
        (Some(_), BiasMetric::Crows) => "log-likelihood sum (causal LM)".into(),
        (_, metric) => metric.to_string(),
    }
}

/// Builds the tables for `models`, restricted to `languages` when any are given.
pub fn bias_table(models: &[TableModel], metric: Option<BiasMetric>, languages: &[String]) -> Result<BiasTable> {
    if models.is_empty() {
        return Err(Error::argument("MODEL", "name at least one evaluation"));
    }
    let mut rows = Vec::new();
    for m in models {
        if rows.iter().any(|r: &Row| r.name == m.name) {
            return Err(Error::argument("MODEL", format!("two models are named {:?}; name them NAME=PATH", m.name)));
        }
        let folder = evaluation_of(&m.path, metric)?;
        let (report, _) = read_checked(&folder)?;
        rows.push(Row { name: m.name.clone(), folder, report });
    }
    let order: Vec<String> = languages_of(rows.iter().map(|r| &r.report))
        .into_iter()
        .filter(|l| languages.is_empty() || languages.contains(l))
        .collect();
    if order.is_empty() {
        return Err(Error::argument("--language", format!("none of {languages:?} is in the evaluations")));
    }

    let mut md = String::from(
        "# IndoBias-Pairs: models side by side\n\nWin rate of the protrope (%; 50 = no preference), its 95% Wilson interval and the pairs decided, per language and domain.\n\n| model | metric | step | evaluation |\n|---|---|---:|---|\n",
    );
    for r in &rows {
        let step = r.report.step.map_or("–".to_string(), |s| s.to_string());
        md.push_str(&format!("| {} | {} | {} | `{}` |\n", r.name, metric_label(&r.report), step, r.folder.display()));
    }
    let metrics: Vec<String> = rows.iter().map(|r| metric_label(&r.report)).collect();
    if metrics.iter().any(|m| *m != metrics[0]) {
        md.push_str(
            "\nThe rows use different metrics: a win rate is comparable across them as the share of pairs whose protrope the model prefers, not as a score.\n",
        );
    }
    let mut cells = Vec::new();
    let mut push = |md: &mut String, r: &Row, language: &str, category: &str, c: &Category| {
        let c = with_interval(c);
        md.push_str(&format!(" {} |", cell(&c)));
        cells.push(TableCell {
            model: r.name.clone(),
            language: language.to_string(),
            category: category.to_string(),
            win_rate: c.win_rate,
            low: c.interval.low,
            high: c.interval.high,
            pairs: c.tally.pairs,
            metric: r.report.metric,
        });
    };
    for language in &order {
        let domains = domains_of(rows.iter().map(|r| &r.report), language);
        md.push_str(&format!("\n## {language}\n\n| model | overall |"));
        for d in &domains {
            md.push_str(&format!(" {d} |"));
        }
        md.push_str("\n|---|---:|");
        md.push_str(&"---:|".repeat(domains.len()));
        md.push('\n');
        let mut pair_counts = Vec::new();
        for r in &rows {
            md.push_str(&format!("| {} |", r.name));
            match r.report.languages.iter().find(|l| l.language == *language) {
                Some(l) => {
                    pair_counts.push((r.name.as_str(), l.overall.tally.pairs));
                    push(&mut md, r, language, "overall", &l.overall);
                    for d in &domains {
                        match l.domains.iter().find(|c| c.name == *d) {
                            Some(c) => push(&mut md, r, language, d, c),
                            None => md.push_str(" – |"),
                        }
                    }
                }
                None => md.push_str(&" – |".repeat(domains.len() + 1)),
            }
            md.push('\n');
        }
        if pair_counts.iter().any(|(_, n)| *n != pair_counts[0].1) {
            let counts: Vec<String> = pair_counts.iter().map(|(m, n)| format!("{m} {n}")).collect();
            md.push_str(&format!("\nThe models decided different numbers of pairs here ({}).\n", counts.join(", ")));
        }
    }
    if rows.iter().any(|r| r.report.all_languages.is_some()) {
        md.push_str("\n## All languages (the average over languages)\n\n| model | overall |\n|---|---:|\n");
        for r in &rows {
            md.push_str(&format!("| {} |", r.name));
            match &r.report.all_languages {
                Some(c) => push(&mut md, r, "all", "overall", c),
                None => md.push_str(" – |"),
            }
            md.push('\n');
        }
        // Each row averages the languages its own evaluation scored, whatever --language shows.
        let sets: Vec<(&str, Vec<&str>)> = rows
            .iter()
            .filter(|r| r.report.all_languages.is_some())
            .map(|r| (r.name.as_str(), r.report.languages.iter().map(|l| l.language.as_str()).collect()))
            .collect();
        let differ = sets.iter().any(|(_, s)| *s != sets[0].1);
        let restricted = sets.iter().any(|(_, s)| s.iter().any(|l| !order.iter().any(|o| o == l)));
        if differ || restricted {
            let listed: Vec<String> = sets.iter().map(|(m, s)| format!("{m}: {}", s.join(", "))).collect();
            md.push_str(&format!(
                "\n{}Each model's average is over the languages its evaluation scored ({}), not over the languages shown above.\n",
                if differ { "The models were scored on different languages, so these averages are not comparable. " } else { "" },
                listed.join("; ")
            ));
        }
    }
    Ok(BiasTable { markdown: md, cells })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_named_by_their_folder_or_explicitly() {
        let m: TableModel = "out/xlmr-base".parse().unwrap();
        assert_eq!((m.name.as_str(), m.path.as_path()), ("xlmr-base", Path::new("out/xlmr-base")));
        let m: TableModel = "out/gemma/bias.json".parse().unwrap();
        assert_eq!(m.name, "gemma");
        let m: TableModel = "Gemma 2 9B=out/g".parse().unwrap();
        assert_eq!((m.name.as_str(), m.path.as_path()), ("Gemma 2 9B", Path::new("out/g")));
        assert!("=out/g".parse::<TableModel>().is_err());
    }
}
