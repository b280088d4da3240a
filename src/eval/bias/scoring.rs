//! Scoring the pairs with a masked LM: each pair's two sentences by pseudo-log-likelihood (or
//! CrowS' shared-token variant), one record per pair, aggregated into a report.
use super::aggregate::aggregate;
use super::report::{BiasReport, Bootstrap, PairRecord};
use crate::error::Result;
use crate::eval::pairs::PairSet;
use crate::eval::pll::{crows_inputs, PllScorer, ScoringInput};
use crate::recipe::BiasMetric;
use std::path::Path;

/// Scores every pair of every language (optionally only `languages`): one record per pair.
pub fn score_pairs(
    scorer: &PllScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
) -> Result<Vec<PairRecord>> {
    let mut records = Vec::new();
    for (lang, lang_pairs) in &pairs.languages {
        if !languages.is_empty()
            && !languages.iter().any(|l| crate::eval::pairs::language_code(l).unwrap_or(l.as_str()) == lang)
        {
            continue;
        }
        let mut inputs: Vec<ScoringInput> = Vec::with_capacity(lang_pairs.len() * 2);
        for p in lang_pairs {
            match metric {
                BiasMetric::Pppl => {
                    inputs.push(scorer.full_input(&p.pro)?);
                    inputs.push(scorer.full_input(&p.anti)?);
                }
                BiasMetric::Crows => {
                    let (a, b) = crows_inputs(scorer.tokenizer, &p.pro, &p.anti)?;
                    inputs.push(a);
                    inputs.push(b);
                }
            }
        }
        let scores = scorer.score(&inputs);
        for (i, (pair, s)) in lang_pairs.iter().zip(scores.chunks(2)).enumerate() {
            records.push(PairRecord::new(metric, lang, i, pair, &s[0], &s[1]));
        }
    }
    Ok(records)
}

/// A bias evaluation: its report and the per-pair records it was aggregated from.
pub struct Evaluation {
    /// Win rates, intervals and gaps (`bias.json`).
    pub report: BiasReport,
    /// One record per pair (`bias_pairs.csv`).
    pub records: Vec<PairRecord>,
}

/// Scores every pair and aggregates the records.
pub fn evaluate(
    scorer: &PllScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
    step: Option<u64>,
    bootstrap: Bootstrap,
) -> Result<Evaluation> {
    let records = score_pairs(scorer, pairs, metric, languages)?;
    Ok(Evaluation { report: aggregate(metric, step, &records, bootstrap), records })
}

impl Evaluation {
    /// Writes `bias_pairs.csv` and `bias.json` into `dir` as one unit
    /// ([`super::records::write_evaluation`]).
    pub fn write(&self, dir: &Path) -> Result<()> {
        super::records::write_evaluation(dir, &self.report, &self.records)
    }
}
