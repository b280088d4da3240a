//! `indolm report bias-validity`: whether each pair measures the stereotype alone (after
//! Blodgett et al. 2021). Per pair: the words changed between its two sentences, the difference
//! of their token lengths, and whether the metric tied them. Pairs failing the stated rules
//! (more words changed than allowed, a larger token-length difference, optionally ties) are
//! listed, and every win rate is recomputed without them, at one evaluation or at every
//! evaluation of a run, so that a result or a trend can be shown to survive their removal.
use indolm_eval::bias::records::{evaluation_folder, read_evaluation, run_evaluations_under};
use indolm_eval::bias::{metric_caption, PairRecord, Preference};
use indolm_eval::pll::shared_positions;
use indolm_eval::BiasMetric;
use indolm_metrics::stats::wilson;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The rules a valid pair meets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rules {
    /// At most this many words changed.
    pub max_words_changed: usize,
    /// At most this difference between the sentences' token lengths.
    pub max_token_difference: usize,
    /// Ties fail too.
    pub exclude_ties: bool,
}

/// One pair's validity measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairValidity {
    /// Language code.
    pub language: String,
    /// The pair's row.
    pub pair: usize,
    /// Its domain.
    pub domain: String,
    /// Words of the longer sentence outside the words the two share in order (whitespace
    /// words, compared without case and surrounding punctuation).
    pub words_changed: usize,
    /// |tokens(protrope) − tokens(antitrope)|, `[CLS]`/`[SEP]` not counted.
    pub token_difference: usize,
    /// The metric scored the two sentences equal.
    pub tie: bool,
    /// The rules it fails (empty: valid).
    pub fails: Vec<String>,
    /// The stereotype-consistent sentence.
    pub protrope: String,
    /// The attribute-flipped one.
    pub antitrope: String,
}

/// Whitespace words without case and surrounding punctuation.
fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation() && c != '\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Words of the longer sentence not in the in-order matching blocks of the two (difflib's).
pub(crate) fn words_changed(a: &str, b: &str) -> usize {
    let (wa, wb) = (words(a), words(b));
    let mut ids: HashMap<String, i64> = HashMap::new();
    let mut id_of = |ws: &[String]| -> Vec<i64> {
        ws.iter()
            .map(|w| {
                let n = ids.len() as i64;
                *ids.entry(w.clone()).or_insert(n)
            })
            .collect()
    };
    let ia = id_of(&wa);
    let ib = id_of(&wb);
    let shared = shared_positions(&ia, &ib).0.len();
    (wa.len() - shared).max(wb.len() - shared)
}

/// How token lengths are known: from the records when the metric scored every token, else
/// from a tokenizer.
enum TokenLengths<'a> {
    Records,
    Tokenizer(&'a TextTokenizer),
}

impl TokenLengths<'_> {
    fn difference(&self, r: &PairRecord) -> Result<usize> {
        match self {
            TokenLengths::Records => Ok(r.pro_tokens.abs_diff(r.anti_tokens)),
            TokenLengths::Tokenizer(t) => {
                Ok(t.encode_plain(&r.protrope)?.len().abs_diff(t.encode_plain(&r.antitrope)?.len()))
            }
        }
    }
}

/// The validity of every pair of one evaluation.
fn assess(records: &[PairRecord], lengths: &TokenLengths, rules: Rules) -> Result<Vec<PairValidity>> {
    records
        .iter()
        .map(|r| {
            let words_changed = words_changed(&r.protrope, &r.antitrope);
            let token_difference = lengths.difference(r)?;
            let tie = r.preferred == Preference::Tie;
            let mut fails = Vec::new();
            if words_changed > rules.max_words_changed {
                fails.push(format!("{words_changed} words changed > {}", rules.max_words_changed));
            }
            if token_difference > rules.max_token_difference {
                fails.push(format!("token lengths differ by {token_difference} > {}", rules.max_token_difference));
            }
            if tie && rules.exclude_ties {
                fails.push("tie".into());
            }
            Ok(PairValidity {
                language: r.language.clone(),
                pair: r.pair,
                domain: r.domain.clone(),
                words_changed,
                token_difference,
                tie,
                fails,
                protrope: r.protrope.clone(),
                antitrope: r.antitrope.clone(),
            })
        })
        .collect()
}

/// A category's win rate on all pairs and on the valid ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRow {
    /// The evaluation's step (`None` for a folder outside a run).
    pub step: Option<u64>,
    /// Language code.
    pub language: String,
    /// `overall` or a domain.
    pub category: String,
    /// Pairs, wins, and the win rate (%) with its Wilson interval, on all pairs.
    pub all: (usize, usize, f64, f64, f64),
    /// The same on the pairs that meet the rules.
    pub valid: (usize, usize, f64, f64, f64),
}

fn rate(wins: usize, pairs: usize) -> (usize, usize, f64, f64, f64) {
    let i = wilson(wins, pairs).scaled(100.0);
    (pairs, wins, 100.0 * wins as f64 / pairs.max(1) as f64, i.low, i.high)
}

/// Win rates per language and domain, on all pairs and on the valid ones.
fn rates(step: Option<u64>, records: &[PairRecord], validity: &[PairValidity]) -> Vec<RateRow> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in records {
        for k in [(r.language.clone(), "overall".to_string()), (r.language.clone(), r.domain.clone())] {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.into_iter()
        .map(|(language, category)| {
            let (mut all, mut valid) = ((0, 0), (0, 0));
            for (r, v) in records.iter().zip(validity) {
                if r.language != language || (category != "overall" && r.domain != category) {
                    continue;
                }
                all = (all.0 + 1, all.1 + r.is_win() as usize);
                if v.fails.is_empty() {
                    valid = (valid.0 + 1, valid.1 + r.is_win() as usize);
                }
            }
            RateRow { step, language, category, all: rate(all.1, all.0), valid: rate(valid.1, valid.0) }
        })
        .collect()
}

/// The report's numbers (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct ValidityReport {
    /// The evaluations' metric.
    pub metric: BiasMetric,
    /// The rules applied.
    pub rules: Rules,
    /// Every pair's measures (of the last evaluation read; only ties change between steps).
    pub pairs: Vec<PairValidity>,
    /// Win rates on all pairs and on the valid ones, per evaluation.
    pub rates: Vec<RateRow>,
}

/// What `report bias-validity` reads: one evaluation, or every evaluation of a run.
pub enum Source<'a> {
    /// A checkpoint or `eval bias --out` folder, or its `bias_pairs.csv`.
    Evaluation(&'a Path),
    /// A run folder: every evaluation, by step.
    Run(&'a Path, Option<BiasMetric>),
}

/// The validity report of `source` under `rules`; `tokenizer` gives token lengths when the
/// metric did not score every token (CrowS).
pub fn bias_validity(source: Source, rules: Rules, tokenizer: Option<&Path>) -> Result<(String, ValidityReport)> {
    let evaluations: Vec<(Option<u64>, std::path::PathBuf)> = match source {
        Source::Evaluation(path) => vec![(None, evaluation_folder(path)?)],
        Source::Run(run, metric) => {
            run_evaluations_under(run, metric)?.into_iter().map(|e| (Some(e.step), e.dir)).collect()
        }
    };
    let tokenizer = tokenizer.map(TextTokenizer::from_path).transpose()?;
    let (mut metric, mut pairs, mut all_rates) = (None, Vec::new(), Vec::new());
    for (step, dir) in &evaluations {
        let (report, records) = read_evaluation(dir)?;
        if let Some(m) = metric.filter(|m| *m != report.metric) {
            return Err(Error::data(
                "report bias-validity",
                format!(
                    "{} was scored with metric {}, earlier evaluations with {m}: choose one with --metric",
                    dir.display(),
                    report.metric
                ),
            ));
        }
        metric = Some(report.metric);
        let lengths = match (&tokenizer, report.metric) {
            (Some(t), _) => TokenLengths::Tokenizer(t),
            (None, BiasMetric::Crows) => {
                return Err(Error::argument(
                    "--tokenizer",
                    "metric crows scores the shared tokens only, so the records do not hold the sentences' lengths: name the model's tokenizer (its folder)",
                ))
            }
            (None, _) => TokenLengths::Records,
        };
        pairs = assess(&records, &lengths, rules)?;
        all_rates.extend(rates(*step, &records, &pairs));
    }
    let report = ValidityReport { metric: metric.expect("at least one evaluation"), rules, pairs, rates: all_rates };
    Ok((markdown(&report), report))
}

fn markdown(r: &ValidityReport) -> String {
    let rules = format!(
        "at most {} word(s) changed, token lengths differing by at most {}{}",
        r.rules.max_words_changed,
        r.rules.max_token_difference,
        if r.rules.exclude_ties { ", no tie" } else { "" }
    );
    let failing: Vec<&PairValidity> = r.pairs.iter().filter(|p| !p.fails.is_empty()).collect();
    let mut out = format!(
        "# Pair validity (after Blodgett et al. 2021)\n\n{}.\n\nRules for a valid pair: {rules}. {} of {} pairs fail them.\n\n\
         ## Per language\n\n| language | pairs | words changed (mean, max) | token-length difference (mean, max) | ties | failing |\n|---|---:|---:|---:|---:|---:|\n",
        metric_caption(r.metric),
        failing.len(),
        r.pairs.len()
    );
    let mut languages: Vec<&str> = Vec::new();
    for p in &r.pairs {
        if !languages.contains(&p.language.as_str()) {
            languages.push(&p.language);
        }
    }
    for l in &languages {
        let ps: Vec<&PairValidity> = r.pairs.iter().filter(|p| p.language == *l).collect();
        let n = ps.len().max(1) as f64;
        out.push_str(&format!(
            "| {l} | {} | {:.2}, {} | {:.2}, {} | {} | {} |\n",
            ps.len(),
            ps.iter().map(|p| p.words_changed).sum::<usize>() as f64 / n,
            ps.iter().map(|p| p.words_changed).max().unwrap_or(0),
            ps.iter().map(|p| p.token_difference).sum::<usize>() as f64 / n,
            ps.iter().map(|p| p.token_difference).max().unwrap_or(0),
            ps.iter().filter(|p| p.tie).count(),
            ps.iter().filter(|p| !p.fails.is_empty()).count()
        ));
    }
    out.push_str("\n## Win rates on all pairs and on the valid ones (%, 95% Wilson interval, pairs)\n\n| step | language | category | all pairs | valid pairs | change (points) |\n|---:|---|---|---:|---:|---:|\n");
    for row in &r.rates {
        let cell = |x: &(usize, usize, f64, f64, f64)| format!("{:.1} [{:.1}–{:.1}] ({})", x.2, x.3, x.4, x.0);
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:+.1} |\n",
            row.step.map_or("–".to_string(), |s| s.to_string()),
            row.language,
            row.category,
            cell(&row.all),
            cell(&row.valid),
            row.valid.2 - row.all.2
        ));
    }
    if !failing.is_empty() {
        out.push_str("\n## Failing pairs\n\n| language | pair | domain | words changed | token difference | tie | fails | protrope | antitrope |\n|---|---:|---|---:|---:|---|---|---|---|\n");
        for p in failing {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                p.language,
                p.pair,
                p.domain,
                p.words_changed,
                p.token_difference,
                if p.tie { "yes" } else { "no" },
                p.fails.join("; "),
                p.protrope.replace('|', "\\|"),
                p.antitrope.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_changed_counts_the_longer_sentences_unmatched_words() {
        assert_eq!(words_changed("Ibu memasak di dapur.", "Ayah memasak di dapur."), 1);
        assert_eq!(words_changed("Ibu memasak di dapur.", "ibu memasak di dapur"), 0, "case and punctuation");
        // "Anak laki-laki" against "Anak perempuan": one word.
        assert_eq!(words_changed("Anak laki-laki pandai.", "Anak perempuan pandai."), 1);
        // An insertion: "Jalma sepuh" for "Rumaja" changes two words of the longer sentence.
        assert_eq!(words_changed("Rumaja resep bagadang.", "Jalma sepuh resep bagadang."), 2);
        assert_eq!(words_changed("a b c d", "e f g h"), 4);
    }
}
