//! Summarization on Liputan6 (as the Liputan6 paper, after PreSumm): the data layout
//! (`data`), the extractive baselines Lead-N and Oracle (`oracle`) and their ROUGE table (here:
//! official ROUGE-1.5.5 with the paper's options and its 95% intervals, `indolm_metrics::rouge`),
//! the encoder input (`input`), PreSumm's transformer blocks (`transformer`), BertExt (`ext`),
//! BertAbs/BertExtAbs (`abs`) with beam search (`beam`), using a trained model and scoring its
//! summaries (`inference`), a split read and oracle-labelled once and cached (`prepared`), its
//! token ids for one model encoded once and cached (`encoded`), and their training (`train`).
//! Given a BERTScore scorer, every row also carries BERTScore P/R/F1 (`<q>` read as a space).
//! The command (`indolm finetune summarize`) is [`command`]; [`TASK`] declares the task.
pub mod abs;
pub mod beam;
pub(crate) mod command;
pub mod data;
pub mod encoded;
pub mod ext;
pub mod inference;
pub(crate) mod input;
pub mod oracle;
pub mod prepared;
pub(crate) mod recipe;
pub mod train;
pub(crate) mod transformer;

use data::Article;
use indolm_core::recipe::{OldRecipes, RecipeKind};
use indolm_eval::bertscore::Scorer as BertScorer;
use indolm_metrics::rouge::{evaluate_official, summary_line, Report, SENTENCE_SEPARATOR};
use indolm_metrics::stats::Interval;
use indolm_torch::error::Result;

/// The salts of summarization fine-tuning's random purposes (see [`indolm_core::seeds`]).
pub(crate) mod salt {
    /// libtorch's generator when a summarizer's new layers are initialised.
    pub(crate) const SUMMARIZATION_INIT: u64 = 10;
    /// The order of summarization training articles (stream: the step a new pass starts at).
    pub(crate) const SUMMARIZATION_SHUFFLE: u64 = 11;
    /// libtorch's generator before each summarization step (dropout), see
    /// [`indolm_core::seeds::per_step`].
    pub(crate) const SUMMARIZATION_TORCH: u64 = 12;
}

/// A recipe without `kind` is a summarization recipe when it has a top-level `task`.
fn is_old_summarization_recipe(table: &toml::Table) -> bool {
    table.contains_key("task")
}

/// Liputan6 summarization fine-tuning as the registry knows it: `kind = "summarize"`, run by
/// `indolm finetune summarize`.
pub(crate) const TASK: crate::registry::TaskDeclaration = crate::registry::TaskDeclaration {
    kind: RecipeKind {
        name: "summarize",
        command: "indolm finetune summarize",
        old_recipes: OldRecipes::When(is_old_summarization_recipe),
    },
    about: "Liputan6 summarization (task = \"ext\": BertExt, \"abs\": BertAbs, \"extabs\": BertExtAbs)",
    salts: &[
        crate::registry::Salt { name: "SUMMARIZATION_INIT", value: salt::SUMMARIZATION_INIT },
        crate::registry::Salt { name: "SUMMARIZATION_SHUFFLE", value: salt::SUMMARIZATION_SHUFFLE },
        crate::registry::Salt { name: "SUMMARIZATION_TORCH", value: salt::SUMMARIZATION_TORCH },
    ],
    arguments: <command::SummarizeArgs as clap::Args>::augment_args,
    run: command::run_command,
    check_recipe: command::check_recipe,
    parse_recipe: |path| indolm_core::recipe::parse_toml::<recipe::SummarizeRecipe>(path).map(|_| ()),
};

/// Prediction and reference summary lines, aligned ([`summary_line`]: sentences separated by `<q>`).
pub(crate) type SummaryPairs = Vec<(String, String)>;

/// One row of the results table: system name and ROUGE-1/2/L F1 (×100) as the official
/// ROUGE-1.5.5 script reports them with the Liputan6 paper's options (`Average_F`), and their
/// 95% bootstrap intervals.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The summarizer: `Lead-1`..`Lead-3`, `Oracle`, or a trained model's name (e.g. `BertExt`).
    pub system: String,
    /// ROUGE-1 F1, ×100.
    pub rouge1: f64,
    /// ROUGE-2 F1, ×100.
    pub rouge2: f64,
    /// ROUGE-L F1, ×100.
    pub rouge_l: f64,
    /// The 95% intervals of the three, ×100 (absent from results written before indolm
    /// computed them, whose figures are rouge-score's mean F1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<RowIntervals>,
    /// How the figures were computed ([`indolm_metrics::rouge::RougeOptions::describe`]; absent
    /// from older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rouge: Option<String>,
    /// BERTScore of the same summaries, when a scorer model was given (absent otherwise, and
    /// from older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bertscore: Option<RowBertScore>,
}

/// A row's mean BERTScore precision, recall and F1 ×100 (the Liputan6 paper's BS column is the
/// F1), each summary line read with `<q>` as a space ([`bertscore_text`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RowBertScore {
    /// Mean precision, ×100.
    pub precision: f64,
    /// Mean recall, ×100.
    pub recall: f64,
    /// Mean F1, ×100.
    pub f1: f64,
    /// How they were computed: the model, the layer, no idf, no rescaling (the line under a
    /// table: `BS: BERTScore F1 <how>.`).
    #[serde(default)]
    pub how: String,
}

impl RowBertScore {
    /// The mean BERTScore of (prediction, reference) summary lines with `scorer`, ×100: every pair
    /// scored (an empty prediction or reference scores 0, as in bert-score), `<q>` read as a
    /// space, so that `indolm eval bertscore` on the lines so read gives the same figures.
    pub fn of(scorer: &BertScorer, pairs: &[(String, String)]) -> Result<RowBertScore> {
        let texts: Vec<(String, String)> = pairs.iter().map(|(p, r)| (bertscore_text(p), bertscore_text(r))).collect();
        let mean = indolm_eval::bertscore::mean(&scorer.score(&texts)?);
        Ok(RowBertScore {
            precision: 100.0 * mean.precision,
            recall: 100.0 * mean.recall,
            f1: 100.0 * mean.f1,
            how: describe_bertscore(scorer.settings()),
        })
    }
}

/// A summary line as BERTScore reads it: `<q>` (the sentence separator of PreSumm's files) as a
/// space, so that the sentences are one text.
pub(crate) fn bertscore_text(line: &str) -> String {
    line.replace(SENTENCE_SEPARATOR, " ")
}

/// How a row's BERTScore was computed ([`RowBertScore::how`]).
fn describe_bertscore(s: &indolm_eval::bertscore::Settings) -> String {
    let default = match &s.default_layer_of {
        Some(name) => format!(" (bert-score's default for {name})"),
        None => String::new(),
    };
    format!(
        "×100 as bert-score computes it, with {} at layer {}{default}, {}, {}, `<q>` read as a space",
        s.model.display(),
        s.layer,
        if s.idf { "idf-weighted" } else { "no idf" },
        if s.baseline.is_some() { "rescaled" } else { "not rescaled" },
    )
}

/// The 95% intervals of a row's three figures, ×100.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RowIntervals {
    /// ROUGE-1 F1's.
    pub rouge1: Interval,
    /// ROUGE-2 F1's.
    pub rouge2: Interval,
    /// ROUGE-L F1's.
    pub rouge_l: Interval,
}

impl Row {
    /// `system`'s row from a ROUGE report: each variant's F1 and its interval, ×100.
    pub(crate) fn from_report(system: &str, report: &Report) -> Row {
        let percent = |i: Interval| Interval { low: report.percent(i.low), high: report.percent(i.high) };
        Row {
            system: system.into(),
            rouge1: report.percent(report.rouge1.f1.value),
            rouge2: report.percent(report.rouge2.f1.value),
            rouge_l: report.percent(report.rouge_l.f1.value),
            intervals: Some(RowIntervals {
                rouge1: percent(report.rouge1.f1.interval),
                rouge2: percent(report.rouge2.f1.interval),
                rouge_l: percent(report.rouge_l.f1.interval),
            }),
            rouge: Some(report.settings.clone()),
            bertscore: None,
        }
    }
}

/// The row of `system` for (prediction, reference) summary lines ([`summary_line`]): official
/// ROUGE-1.5.5 as the Liputan6 paper ran it (PreSumm's pyrouge, `-c 95 -m -r 1000 -n 2 -a`),
/// with the script's own resampling, so that every figure is the script's.
pub(crate) fn rouge_row(system: &str, pairs: &[(String, String)]) -> Row {
    Row::from_report(system, &evaluate_official(pairs))
}

/// The row of `system` for (prediction, reference) summary lines: official ROUGE
/// ([`rouge_row`]), and BERTScore with `bertscore` when given ([`RowBertScore::of`]).
pub(crate) fn scored_row(system: &str, pairs: &[(String, String)], bertscore: Option<&BertScorer>) -> Result<Row> {
    let mut row = rouge_row(system, pairs);
    row.bertscore = bertscore.map(|scorer| RowBertScore::of(scorer, pairs)).transpose()?;
    Ok(row)
}

/// The summary lines of the extractive summaries `pick` makes of `articles` (sentence indices
/// of each), paired with the references.
fn extract(articles: &[Article], pick: impl Fn(&Article) -> Vec<usize>) -> SummaryPairs {
    articles
        .iter()
        .map(|a| {
            // In document order: an Oracle label lists its sentences in selection order.
            let mut picked = pick(a);
            picked.sort_unstable();
            let chosen: Vec<Vec<String>> = picked.into_iter().map(|i| a.article[i].clone()).collect();
            (summary_line(&chosen), summary_line(&a.summary))
        })
        .collect()
}

/// Lead-1, Lead-2, Lead-3 and Oracle's summaries of `articles` (Oracle: the released labels,
/// else the Liputan6 oracle), each with its system name.
fn baseline_pairs(articles: &[Article]) -> Vec<(String, SummaryPairs)> {
    let mut out: Vec<(String, SummaryPairs)> =
        (1..=3).map(|n| (format!("Lead-{n}"), extract(articles, |a| oracle::lead(&a.article, n)))).collect();
    let oracle =
        extract(articles, |a| a.extractive.clone().unwrap_or_else(|| oracle::oracle_liputan6(&a.article, &a.summary)));
    out.push(("Oracle".into(), oracle));
    out
}

/// Lead-1, Lead-2, Lead-3 and Oracle (released labels, else the Liputan6 oracle).
pub fn baselines(articles: &[Article]) -> Vec<Row> {
    baseline_pairs(articles).iter().map(|(system, pairs)| rouge_row(system, pairs)).collect()
}

/// [`baselines`], each row with BERTScore too when `bertscore` is given.
pub fn baselines_scored(articles: &[Article], bertscore: Option<&BertScorer>) -> Result<Vec<Row>> {
    baseline_pairs(articles).iter().map(|(system, pairs)| scored_row(system, pairs, bertscore)).collect()
}

/// A markdown table of `rows` headed by the split's name, scores with two decimals (BERTScore
/// F1 ×100 as `BS` after ROUGE-L when a row has it, as the Liputan6 paper's Table 4), then
/// their 95% intervals (`–` where a row has none), and the lines saying how they were computed.
pub fn markdown(split: &str, rows: &[Row]) -> String {
    let bs = rows.iter().any(|r| r.bertscore.is_some());
    let (bs_head, bs_rule) = if bs { (" BS |", "---:|") } else { ("", "") };
    let mut out = format!(
        "| {split} | ROUGE-1 | ROUGE-2 | ROUGE-L |{bs_head} R1 95% CI | R2 95% CI | RL 95% CI |\n\
         |---|---:|---:|---:|{bs_rule}---:|---:|---:|\n"
    );
    for r in rows {
        out.push_str(&format!("| {} | {:.2} | {:.2} | {:.2} |", r.system, r.rouge1, r.rouge2, r.rouge_l));
        if bs {
            out.push_str(&bs_cell(r));
        }
        match &r.intervals {
            Some(ci) => {
                for i in [ci.rouge1, ci.rouge2, ci.rouge_l] {
                    out.push_str(&format!(" {:.2}–{:.2} |", i.low, i.high));
                }
            }
            None => out.push_str(" – | – | – |"),
        }
        out.push('\n');
    }
    let rouge = rows.iter().find_map(|r| r.rouge.as_deref());
    if let Some(how) = rouge {
        out.push_str(&format!("\nF1 ×100: {how}.\n"));
    }
    if let Some(how) = rows.iter().find_map(|r| r.bertscore.as_ref().map(|b| b.how.as_str())) {
        // A paragraph of its own after the table, or a line of the ROUGE one.
        let gap = if rouge.is_some() { "" } else { "\n" };
        out.push_str(&format!("{gap}BS: BERTScore F1 {how}.\n"));
    }
    out
}

/// A row's BS cell: its BERTScore F1 ×100, `–` when it has none.
fn bs_cell(r: &Row) -> String {
    match &r.bertscore {
        Some(b) => format!(" {:.2} |", b.f1),
        None => " – |".into(),
    }
}

/// Table 4 of the Liputan6 paper from the `results.json` of `finetune summarize` runs: the
/// Lead-N and Oracle rows (from the first run that has them for a split) and every run's
/// system, ROUGE-1/2/L for each test split side by side (e.g. canonical and Xtreme), with the
/// BS column (BERTScore F1 ×100) of a split where a row has it.
pub fn table_from_results(paths: &[std::path::PathBuf]) -> indolm_torch::error::Result<String> {
    use indolm_core::files::read_to_string;
    use indolm_torch::error::Error;
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
    // A split has a BS column when one of its rows has BERTScore.
    let with_bs: Vec<bool> =
        splits.iter().map(|s| cells.iter().any(|((_, split), r)| split == s && r.bertscore.is_some())).collect();
    let mut out = String::from("| System |");
    let mut rule = String::from("|---|");
    for (split, &bs) in splits.iter().zip(&with_bs) {
        out.push_str(&format!(" {split} R1 | R2 | RL |"));
        rule.push_str("---:|---:|---:|");
        if bs {
            out.push_str(" BS |");
            rule.push_str("---:|");
        }
    }
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for system in &systems {
        out.push_str(&format!("| {system} |"));
        for (split, &bs) in splits.iter().zip(&with_bs) {
            let cell = cells.get(&(system.clone(), split.clone()));
            match cell {
                Some(r) => out.push_str(&format!(" {:.2} | {:.2} | {:.2} |", r.rouge1, r.rouge2, r.rouge_l)),
                None => out.push_str(" – | – | – |"),
            }
            if bs {
                out.push_str(&cell.map_or_else(|| " – |".to_string(), bs_cell));
            }
        }
        out.push('\n');
    }
    // The paper's caption states the widest interval ("at most ±0.3"): the same here, the
    // farthest end of any interval from its figure.
    let reaches = cells.values().filter_map(|r| {
        let i = r.intervals?;
        let ends = [(r.rouge1, i.rouge1), (r.rouge2, i.rouge2), (r.rouge_l, i.rouge_l)];
        ends.iter().map(|(v, i)| (i.high - v).max(v - i.low)).reduce(f64::max)
    });
    let mut paragraph = false; // whether a paragraph follows the table
    if let Some(widest) = reaches.reduce(f64::max) {
        paragraph = true;
        let without = cells.values().filter(|r| r.intervals.is_none()).count();
        out.push_str(&format!(
            "\n{} a 95% confidence interval of at most ±{widest:.2}, as ROUGE-1.5.5 computes it.\n",
            if without == 0 { "Every ROUGE figure has" } else { "Every ROUGE figure with an interval has" }
        ));
        if without > 0 {
            let rows = if without == 1 { "row has" } else { "rows have" };
            out.push_str(&format!(
                "{without} {rows} none: results written before indolm computed them (rouge-score's mean F1).\n"
            ));
        }
    }
    // How BS was computed, once for each way the runs computed it (in the table's order).
    let mut hows: Vec<&str> = Vec::new();
    for key in systems.iter().flat_map(|system| splits.iter().map(move |split| (system.clone(), split.clone()))) {
        if let Some(b) = cells.get(&key).and_then(|r| r.bertscore.as_ref()) {
            if !hows.contains(&b.how.as_str()) {
                hows.push(&b.how);
            }
        }
    }
    if !hows.is_empty() && !paragraph {
        out.push('\n');
    }
    for how in hows {
        out.push_str(&format!("BS: BERTScore F1 {how}.\n"));
    }
    Ok(out)
}
