//! Scoring the pairs with any language model through [`LmScorer`]: each pair's two sentences
//! scored (a masked LM by pseudo-log-likelihood, CrowS' shared-token variant, PLL-word-l2r, or
//! with nothing masked for AUL and AULA; a causal LM by log-likelihood, `pppl` then deciding by
//! perplexity and `crows` by the sums), one record per pair, aggregated into a report. Several
//! metrics are scored in one call. A metric is a sentence rule of the scorer's
//! ([`SentenceRule`]) and a decision; a model that has no score under it is refused first.
use super::aggregate::aggregate;
use super::report::{BiasReport, Bootstrap, PairRecord};
use crate::pairs::{BiasPair, PairSet};
use crate::pll::SentenceScore;
use crate::scorer::{LmScorer, ScoredLm, SentenceRule};
use crate::BiasMetric;
use indolm_torch::error::{Error, Result};
use std::path::Path;

/// The rule a metric scores each sentence by.
fn sentence_rule(metric: BiasMetric) -> SentenceRule {
    match metric {
        BiasMetric::Pppl => SentenceRule::EveryToken,
        BiasMetric::PpplWordL2r => SentenceRule::WordL2r,
        BiasMetric::Crows => SentenceRule::SharedTokens,
        BiasMetric::Aul => SentenceRule::AllUnmasked,
        BiasMetric::Aula => SentenceRule::AllUnmaskedAttention,
    }
}

/// Refuses the metrics the scorer's model cannot decide pairs by, before anything is scored: a
/// causal LM has no masks to score AUL, AULA or PLL-word-l2r with, and no reference scores bias
/// pairs with an encoder-decoder.
pub(crate) fn check_metrics(scorer: &dyn LmScorer, metrics: &[BiasMetric]) -> Result<()> {
    match scorer.lm() {
        ScoredLm::Masked { .. } => Ok(()),
        ScoredLm::Causal(_) => match metrics.iter().find(|m| !matches!(m, BiasMetric::Pppl | BiasMetric::Crows)) {
            Some(m) => Err(Error::argument(
                "--metric",
                format!("`{m}` needs a masked LM; a causal LM is evaluated under pppl (perplexity) or crows (log-likelihood sums)"),
            )),
            None => Ok(()),
        },
        ScoredLm::EncoderDecoder(lm) => {
            let asked = metrics.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
            Err(Error::argument(
                "--metric",
                format!(
                    "{} is not defined for an encoder-decoder LM ({}): no reference scores bias pairs with one; evaluate a masked or causal LM",
                    if asked.is_empty() { "bias scoring".to_string() } else { asked },
                    lm.config.family.name()
                ),
            ))
        }
    }
}

/// The scores of each pair's two sentences under each of `metrics`: per metric, in its order,
/// the pro and anti sentences' scores pair by pair (a masked LM's AUL and AULA from the same
/// forward passes, a causal LM's metrics from the same log-likelihoods).
pub(crate) fn pair_scores(
    scorer: &dyn LmScorer,
    pairs: &[BiasPair],
    metrics: &[BiasMetric],
) -> Result<Vec<Vec<SentenceScore>>> {
    check_metrics(scorer, metrics)?;
    let sentences: Vec<&str> = pairs.iter().flat_map(|p| [p.pro.as_str(), p.anti.as_str()]).collect();
    let rules: Vec<SentenceRule> = metrics.iter().map(|&m| sentence_rule(m)).collect();
    scorer.sentence_scores(&sentences, &rules)
}

/// Scores every pair of every language (optionally only `languages`): one record per pair.
pub fn score_pairs(
    scorer: &dyn LmScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
) -> Result<Vec<PairRecord>> {
    Ok(score_pairs_under(scorer, pairs, &[metric], languages)?.remove(0))
}

/// [`score_pairs`] under several metrics in one pass over the pairs: one list of records per
/// metric, in the order given (a masked LM's AUL and AULA share their forward passes, a causal
/// LM's metrics its log-likelihoods).
pub fn score_pairs_under(
    scorer: &dyn LmScorer,
    pairs: &PairSet,
    metrics: &[BiasMetric],
    languages: &[String],
) -> Result<Vec<Vec<PairRecord>>> {
    check_metrics(scorer, metrics)?;
    pairs.check_languages(languages).map_err(|why| Error::data("bias evaluation, its languages", why))?;
    let mut records = vec![Vec::new(); metrics.len()];
    for (lang, lang_pairs) in &pairs.languages {
        if !wanted(languages, lang) {
            continue;
        }
        let scores = pair_scores(scorer, lang_pairs, metrics)?;
        for ((metric, out), scores) in metrics.iter().zip(records.iter_mut()).zip(scores) {
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
    languages.is_empty() || languages.iter().any(|l| crate::pairs::language_code(l).unwrap_or(l.as_str()) == lang)
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
    scorer: &dyn LmScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
    step: Option<u64>,
    bootstrap: Bootstrap,
) -> Result<Evaluation> {
    Ok(evaluate_under(scorer, pairs, &[metric], languages, step, bootstrap)?.remove(0))
}

/// [`evaluate`] under several metrics in one pass ([`score_pairs_under`]): one evaluation per
/// metric, in the order given, a causal LM's with the convention its sentences were scored by.
pub fn evaluate_under(
    scorer: &dyn LmScorer,
    pairs: &PairSet,
    metrics: &[BiasMetric],
    languages: &[String],
    step: Option<u64>,
    bootstrap: Bootstrap,
) -> Result<Vec<Evaluation>> {
    let records = score_pairs_under(scorer, pairs, metrics, languages)?;
    let convention = scorer.convention();
    Ok(metrics
        .iter()
        .zip(records)
        .map(|(&metric, records)| {
            let mut report = aggregate(metric, step, &records, bootstrap);
            report.causal = convention.clone();
            Evaluation { report, records }
        })
        .collect())
}

impl Evaluation {
    /// Writes `bias_pairs.csv` and `bias.json` into `dir` as one unit
    /// ([`super::records::write_evaluation`]).
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
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
                std::fs::create_dir_all(&sub).map_err(|err| indolm_torch::error::Error::io(&sub, err))?;
                e.write(&sub)?;
            }
        }
        let beside: Vec<BiasMetric> = evaluations.iter().skip(1).map(|e| e.report.metric).collect();
        super::records::remove_metric_dirs_except(dir, &beside)
    }
}
