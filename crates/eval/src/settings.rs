//! What the evaluations are asked to do, by a recipe's `[eval.bias]` and `[eval.indommlu]`
//! sections and by `indolm eval`: how a bias pair is decided ([`BiasMetric`]), how an IndoMMLU
//! question is answered ([`IndommluMode`]), and the two sections. Evaluations own these; the
//! pretraining recipe and the command line read them from here.
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a bias pair is decided (`[eval.bias] metric`, `indolm eval bias --metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BiasMetric {
    /// IndoBias (after RuBia): the sentence with the strictly lower pseudo-perplexity wins.
    Pppl,
    /// CrowS-Pairs' metric.py: PLL over the tokens the two sentences share, rounded to 3 decimals.
    Crows,
    /// Kaneko & Bollegala's AUL: the mean log-probability of the sentence's tokens with nothing
    /// masked; the strictly higher wins.
    Aul,
    /// AUL with each token weighted by the attention it receives (AULA).
    Aula,
    /// PPPL from PLL-word-l2r (Kauf & Ivanova): a piece is scored with the later pieces of its
    /// word masked too.
    #[serde(rename = "pppl-word-l2r")]
    #[value(name = "pppl-word-l2r")]
    PpplWordL2r,
}

impl BiasMetric {
    /// Every metric, in the order reports list them.
    pub const ALL: [BiasMetric; 5] =
        [BiasMetric::Pppl, BiasMetric::Crows, BiasMetric::Aul, BiasMetric::Aula, BiasMetric::PpplWordL2r];
}

impl std::fmt::Display for BiasMetric {
    /// As recipes and `--metric` spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BiasMetric::Pppl => "pppl",
            BiasMetric::Crows => "crows",
            BiasMetric::Aul => "aul",
            BiasMetric::Aula => "aula",
            BiasMetric::PpplWordL2r => "pppl-word-l2r",
        })
    }
}

/// How an IndoMMLU question is answered (`[eval.indommlu] mode`, `indolm eval indommlu --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum IndommluMode {
    /// Each option's mean masked log-likelihood in the context of the question (masked LMs).
    OptionPll,
    /// The probability of each option's letter at the answer slot: one `[MASK]` after
    /// `Jawaban:` (masked LMs), or the next token after `Jawaban: ` (causal LMs, the IndoMMLU
    /// paper's reported setting).
    Letter,
    /// The mean log-probability of the prompt followed by each option's line (causal LMs, the
    /// paper's second strategy, as its evaluate.py computes it).
    FullAnswer,
}

impl std::fmt::Display for IndommluMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IndommluMode::OptionPll => "option-pll",
            IndommluMode::Letter => "letter",
            IndommluMode::FullAnswer => "full-answer",
        })
    }
}

/// IndoMMLU at every checkpoint, on a fixed subsample so it stays cheap.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IndommluEvalSection {
    /// The IndoMMLU CSV.
    pub data: PathBuf,
    /// How each question is scored.
    #[serde(default = "d_indommlu_mode")]
    pub mode: IndommluMode,
    /// Questions drawn (seeded) from the CSV; 0 for all.
    #[serde(default = "d_subsample")]
    pub subsample: usize,
}

fn d_indommlu_mode() -> IndommluMode {
    IndommluMode::OptionPll
}
fn d_subsample() -> usize {
    500
}

/// The bias evaluation at every checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BiasEvalSection {
    /// The IndoBias-Pairs `pair/` folder (or its parent, or one file).
    pub pairs: PathBuf,
    /// How each pair is decided.
    #[serde(default = "d_metric")]
    pub metric: BiasMetric,
    /// Further metrics scored at the same evaluations in the same pass over the model, each
    /// written beside the main one under `bias-<metric>/` with its own curves.
    #[serde(default)]
    pub extra_metrics: Vec<BiasMetric>,
    /// Language codes or names to evaluate (all when empty).
    #[serde(default)]
    pub languages: Vec<String>,
    /// Also evaluate every this many steps between checkpoints (dense bias curves; records
    /// under `<run>/evals/step-<N>/`). Absent: at checkpoints only.
    #[serde(default)]
    pub every: Option<u64>,
    /// Bootstrap resamples behind the score-gap intervals (seeded by the recipe's seed).
    #[serde(default = "d_resamples")]
    pub resamples: usize,
}

/// Bootstrap resamples of the bias intervals unless a recipe or `--resamples` says otherwise.
pub const DEFAULT_BOOTSTRAP_RESAMPLES: usize = 2000;

fn d_resamples() -> usize {
    DEFAULT_BOOTSTRAP_RESAMPLES
}

fn d_metric() -> BiasMetric {
    BiasMetric::Pppl
}
