//! Scoring the pairs with a masked LM: each pair's two sentences by pseudo-log-likelihood (or
//! CrowS' shared-token variant, or PLL-word-l2r), or with nothing masked (AUL, AULA), one record
//! per pair, aggregated into a report. Several metrics are scored in one call, AUL and AULA
//! from the same forward passes. A causal LM's sentences are scored by log-likelihood
//! ([`evaluate_causal`]): `pppl` then decides by perplexity, `crows` by the sums.
use super::aggregate::aggregate;
use super::report::{BiasReport, Bootstrap, PairRecord};
use crate::error::{Error, Result};
use crate::eval::aul::UnmaskedScorer;
use crate::eval::causal::CausalScorer;
use crate::eval::pairs::{BiasPair, PairSet};
use crate::eval::pll::{crows_inputs, PllScorer, ScoringInput, SentenceScore};
use crate::eval::BiasMetric;
use std::path::Path;

/// Scores every pair of every language (optionally only `languages`): one record per pair.
pub fn score_pairs(
    scorer: &PllScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
) -> Result<Vec<PairRecord>> {
    Ok(score_pairs_under(scorer, pairs, &[metric], languages)?.remove(0))
}

/// [`score_pairs`] under several metrics in one pass over the pairs: one list of records per
/// metric, in the order given. AUL and AULA share their forward passes.
pub fn score_pairs_under(
    scorer: &PllScorer,
    pairs: &PairSet,
    metrics: &[BiasMetric],
    languages: &[String],
) -> Result<Vec<Vec<PairRecord>>> {
    let mut records = vec![Vec::new(); metrics.len()];
    let unmasked = UnmaskedScorer {
        token_budget: scorer.token_budget,
        ..UnmaskedScorer::new(scorer.model, scorer.tokenizer, scorer.device)
    };
    for (lang, lang_pairs) in &pairs.languages {
        if !wanted(languages, lang) {
            continue;
        }
        // AUL and AULA: one forward pass per sentence for both, if either is asked for.
        let without_masks = if metrics.iter().any(|m| matches!(m, BiasMetric::Aul | BiasMetric::Aula)) {
            let mut sentences = Vec::with_capacity(lang_pairs.len() * 2);
            for p in lang_pairs {
                sentences.push(unmasked.input(&p.pro)?);
                sentences.push(unmasked.input(&p.anti)?);
            }
            unmasked.score(&sentences)
        } else {
            Vec::new()
        };
        for (metric, out) in metrics.iter().zip(records.iter_mut()) {
            let scores: Vec<SentenceScore> = match metric {
                BiasMetric::Aul => without_masks.iter().map(|s| s.aul.clone()).collect(),
                BiasMetric::Aula => without_masks.iter().map(|s| s.aula.clone()).collect(),
                BiasMetric::Pppl | BiasMetric::PpplWordL2r | BiasMetric::Crows => {
                    let mut inputs: Vec<ScoringInput> = Vec::with_capacity(lang_pairs.len() * 2);
                    for p in lang_pairs {
                        match metric {
                            BiasMetric::Crows => {
                                let (a, b) = crows_inputs(scorer.tokenizer, &p.pro, &p.anti)?;
                                inputs.extend([a, b]);
                            }
                            BiasMetric::PpplWordL2r => {
                                inputs.push(scorer.word_l2r_input(&p.pro)?);
                                inputs.push(scorer.word_l2r_input(&p.anti)?);
                            }
                            _ => {
                                inputs.push(scorer.full_input(&p.pro)?);
                                inputs.push(scorer.full_input(&p.anti)?);
                            }
                        }
                    }
                    scorer.score(&inputs)
                }
            };
            require_finite(lang, lang_pairs, &scores)?;
            for (i, (pair, s)) in lang_pairs.iter().zip(scores.chunks(2)).enumerate() {
                out.push(PairRecord::new(*metric, lang, i, pair, &s[0], &s[1]));
            }
        }
    }
    Ok(records)
}

/// Refuses the pairs of `lang` when a sentence's score (`scores`: pro, anti, pair by pair) is
/// not finite, naming the pair and the sentence.
fn require_finite(lang: &str, pairs: &[BiasPair], scores: &[SentenceScore]) -> Result<()> {
    for (i, (pair, s)) in pairs.iter().zip(scores.chunks(2)).enumerate() {
        let what = format!("bias scoring, pair {i} of {lang}");
        s[0].require_finite(&what, &pair.pro)?;
        s[1].require_finite(&what, &pair.anti)?;
    }
    Ok(())
}

/// Whether a pair set's language `lang` is among `languages` (all when empty).
fn wanted(languages: &[String], lang: &str) -> bool {
    languages.is_empty() || languages.iter().any(|l| crate::eval::pairs::language_code(l).unwrap_or(l.as_str()) == lang)
}

/// Scores every pair with a causal LM (each sentence's log-likelihood after the prefix token)
/// and aggregates under each metric: `pppl` prefers the sentence with the strictly lower
/// perplexity, `crows` the higher log-likelihood sum (lm-evaluation-harness's CrowS-Pairs rule,
/// with the existing rounding to 3 decimals); the other metrics need a masked LM and are refused.
pub fn evaluate_causal(
    scorer: &CausalScorer,
    pairs: &PairSet,
    metrics: &[BiasMetric],
    languages: &[String],
    step: Option<u64>,
    bootstrap: Bootstrap,
) -> Result<Vec<Evaluation>> {
    if let Some(m) = metrics.iter().find(|m| !matches!(m, BiasMetric::Pppl | BiasMetric::Crows)) {
        return Err(Error::argument(
            "--metric",
            format!("`{m}` needs a masked LM; a causal LM is evaluated under pppl (perplexity) or crows (log-likelihood sums)"),
        ));
    }
    let mut records = vec![Vec::new(); metrics.len()];
    for (lang, lang_pairs) in &pairs.languages {
        if !wanted(languages, lang) {
            continue;
        }
        let mut ids = Vec::with_capacity(lang_pairs.len() * 2);
        for p in lang_pairs {
            ids.push(scorer.encode(&p.pro)?);
            ids.push(scorer.encode(&p.anti)?);
        }
        let scores: Vec<SentenceScore> = scorer.score_ids(&ids).iter().map(|s| s.as_sentence_score()).collect();
        require_finite(lang, lang_pairs, &scores)?;
        for (metric, out) in metrics.iter().zip(records.iter_mut()) {
            for (i, (pair, s)) in lang_pairs.iter().zip(scores.chunks(2)).enumerate() {
                out.push(PairRecord::new(*metric, lang, i, pair, &s[0], &s[1]));
            }
        }
    }
    let convention = scorer.convention();
    Ok(metrics
        .iter()
        .zip(records)
        .map(|(&metric, records)| {
            let mut report = aggregate(metric, step, &records, bootstrap);
            report.causal = Some(convention.clone());
            Evaluation { report, records }
        })
        .collect())
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
    Ok(evaluate_under(scorer, pairs, &[metric], languages, step, bootstrap)?.remove(0))
}

/// [`evaluate`] under several metrics in one pass ([`score_pairs_under`]): one evaluation per
/// metric, in the order given.
pub fn evaluate_under(
    scorer: &PllScorer,
    pairs: &PairSet,
    metrics: &[BiasMetric],
    languages: &[String],
    step: Option<u64>,
    bootstrap: Bootstrap,
) -> Result<Vec<Evaluation>> {
    let records = score_pairs_under(scorer, pairs, metrics, languages)?;
    Ok(metrics
        .iter()
        .zip(records)
        .map(|(&metric, records)| Evaluation { report: aggregate(metric, step, &records, bootstrap), records })
        .collect())
}

impl Evaluation {
    /// Writes `bias_pairs.csv` and `bias.json` into `dir` as one unit
    /// ([`super::records::write_evaluation`]).
    pub fn write(&self, dir: &Path) -> Result<()> {
        super::records::write_evaluation(dir, &self.report, &self.records)
    }

    /// Writes the evaluations of one pass under several metrics: the first into `dir`, each
    /// other into its [`super::records::metric_dir`] under `dir`. They replace whatever bias
    /// evaluation `dir` held, all of it: once they are written, no `bias-<metric>/` folder of an
    /// earlier one stays beside them (callers refuse to replace one unless asked). Until then
    /// the earlier files stay, so a write that fails (a full disk) never leaves less than before.
    pub fn write_all(evaluations: &[Evaluation], dir: &Path) -> Result<()> {
        for (i, e) in evaluations.iter().enumerate() {
            if i == 0 {
                e.write(dir)?;
            } else {
                let sub = super::records::metric_dir(dir, e.report.metric);
                std::fs::create_dir_all(&sub).map_err(|err| crate::error::Error::io(&sub, err))?;
                e.write(&sub)?;
            }
        }
        let beside: Vec<BiasMetric> = evaluations.iter().skip(1).map(|e| e.report.metric).collect();
        super::records::remove_metric_dirs_except(dir, &beside)
    }
}
