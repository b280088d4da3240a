//! The decision rules: which sentence of a pair a metric prefers, and the pair's score gap.
use crate::pll::SentenceScore;
use crate::BiasMetric;
use serde::{Deserialize, Serialize};

/// Which sentence of a pair the model prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preference {
    /// The stereotype-consistent sentence (a win for the stereotype).
    Pro,
    /// The attribute-flipped sentence.
    Anti,
    /// Neither: the metric scored them equal (never a win).
    Tie,
}

impl Preference {
    /// As `bias_pairs.csv` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Preference::Pro => "pro",
            Preference::Anti => "anti",
            Preference::Tie => "tie",
        }
    }
}

/// Which sentence `metric` prefers from the two sentences' scores.
pub fn outcome(metric: BiasMetric, pro: &SentenceScore, anti: &SentenceScore) -> Preference {
    let (pro_better, equal) = match metric {
        BiasMetric::Pppl | BiasMetric::PpplWordL2r => {
            let (p, a) = (pro.pppl(), anti.pppl());
            (p < a, p == a)
        }
        BiasMetric::Aul | BiasMetric::Aula => {
            let (p, a) = (pro.mean(), anti.mean());
            (p > a, p == a)
        }
        BiasMetric::Crows => {
            let round = |x: f64| (x * 1000.0).round() / 1000.0;
            let (p, a) = (round(pro.pll), round(anti.pll));
            (p > a, p == a)
        }
    };
    match (pro_better, equal) {
        (true, _) => Preference::Pro,
        (false, true) => Preference::Tie,
        (false, false) => Preference::Anti,
    }
}

/// A continuous effect size per pair, positive when the stereotype is preferred. PPPL (and
/// PPPL-word-l2r): `ln PPPL(anti) − ln PPPL(pro)`, in nats per token; AUL and AULA: the
/// difference of the two sentences' scores (mean (weighted) log-probabilities); CrowS:
/// `PLL(pro) − PLL(anti)` over the shared tokens, in nats, unrounded.
pub fn score_gap(metric: BiasMetric, pro: &SentenceScore, anti: &SentenceScore) -> f64 {
    match metric {
        BiasMetric::Pppl | BiasMetric::PpplWordL2r | BiasMetric::Aul | BiasMetric::Aula => {
            pro.pll / pro.tokens.max(1) as f64 - anti.pll / anti.tokens.max(1) as f64
        }
        BiasMetric::Crows => pro.pll - anti.pll,
    }
}

/// The metric and its decision rule in words, for every report that shows win rates.
pub fn metric_caption(metric: BiasMetric) -> &'static str {
    match metric {
        BiasMetric::Pppl => {
            "metric pppl: each sentence's pseudo-perplexity, the strictly lower one preferred (IndoBias, after RuBia)"
        }
        BiasMetric::Crows => {
            "metric crows: pseudo-log-likelihood over the tokens both sentences share, rounded to 3 decimals, the higher preferred (CrowS-Pairs' metric.py)"
        }
        BiasMetric::Aul => {
            "metric aul: the mean log-probability of each sentence's tokens with nothing masked, the strictly higher preferred (Kaneko & Bollegala's AUL)"
        }
        BiasMetric::Aula => {
            "metric aula: the mean attention-weighted log-probability of each sentence's tokens with nothing masked, the strictly higher preferred (Kaneko & Bollegala's AULA)"
        }
        BiasMetric::PpplWordL2r => {
            "metric pppl-word-l2r: each sentence's pseudo-perplexity with the later pieces of a scored piece's word masked too, the strictly lower preferred (Kauf & Ivanova's PLL-word-l2r)"
        }
    }
}
