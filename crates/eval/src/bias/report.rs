//! What a bias evaluation produces: each pair's record (a row of `bias_pairs.csv`), the
//! tallies, win rates with intervals and score gaps per category, the report (`bias.json`), and
//! its Markdown tables.
use super::rules::{outcome, score_gap, Preference};
use crate::pairs::BiasPair;
use crate::pll::SentenceScore;
use crate::BiasMetric;
use indolm_core::seeds::{salt, stream_rng};
use indolm_metrics::stats::{wilson, Interval};
use serde::{Deserialize, Serialize};

/// One pair's scores and outcome: a row of `bias_pairs.csv`, enough to redo any analysis
/// without the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRecord {
    /// Language code.
    pub language: String,
    /// The pair's row in its language's file (from 0); rows are aligned across languages.
    pub pair: usize,
    /// Bias domain.
    pub domain: String,
    /// Bias subdomain (may be empty).
    pub subdomain: String,
    /// Which sentence the metric prefers.
    pub preferred: Preference,
    /// The score gap, positive when the stereotype is preferred (see [`score_gap`]).
    pub gap: f64,
    /// The stereotype-consistent sentence's score summed over its scored tokens: its PLL (AUL:
    /// Σ log-probabilities, AULA: Σ attention-weighted log-probabilities, nothing masked).
    pub pro_pll: f64,
    /// Tokens scored in it.
    pub pro_tokens: usize,
    /// PLL of the attribute-flipped sentence.
    pub anti_pll: f64,
    /// Tokens scored in it.
    pub anti_tokens: usize,
    /// The stereotype-consistent sentence.
    pub protrope: String,
    /// The attribute-flipped sentence.
    pub antitrope: String,
    /// Scored tokens of the stereotype-consistent sentence the model ranks first (absent in
    /// records written before it was counted).
    #[serde(default)]
    pub pro_correct: Option<usize>,
    /// The same for the attribute-flipped sentence.
    #[serde(default)]
    pub anti_correct: Option<usize>,
}

impl PairRecord {
    /// The record of `pair` (row `index` of `language`) from its two sentences' scores.
    pub fn new(
        metric: BiasMetric,
        language: &str,
        index: usize,
        pair: &BiasPair,
        pro: &SentenceScore,
        anti: &SentenceScore,
    ) -> Self {
        PairRecord {
            language: language.to_string(),
            pair: index,
            domain: pair.domain.clone(),
            subdomain: pair.subdomain.clone(),
            preferred: outcome(metric, pro, anti),
            gap: score_gap(metric, pro, anti),
            pro_pll: pro.pll,
            pro_tokens: pro.tokens,
            anti_pll: anti.pll,
            anti_tokens: anti.tokens,
            protrope: pair.pro.clone(),
            antitrope: pair.anti.clone(),
            pro_correct: Some(pro.correct),
            anti_correct: Some(anti.correct),
        }
    }

    /// A win for the stereotype.
    pub fn is_win(&self) -> bool {
        self.preferred == Preference::Pro
    }

    /// The category this record belongs to at the subdomain level: `domain / subdomain`.
    pub(crate) fn subdomain_name(&self) -> String {
        format!("{} / {}", self.domain, self.subdomain)
    }
}

/// Pairs, wins (stereotype preferred) and ties of a category.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Pairs scored.
    pub pairs: usize,
    /// Pairs where the stereotype was preferred.
    pub wins: usize,
    /// Pairs the metric scored equal (never wins).
    pub ties: usize,
}

impl Tally {
    /// Counts one pair with its outcome.
    pub(super) fn add(&mut self, preferred: Preference) {
        self.pairs += 1;
        self.wins += (preferred == Preference::Pro) as usize;
        self.ties += (preferred == Preference::Tie) as usize;
    }
    /// Win rate in percent (50 = unbiased).
    pub(crate) fn rate(&self) -> f64 {
        100.0 * self.wins as f64 / self.pairs.max(1) as f64
    }
    /// Wilson's 95% interval of the win rate, in percent.
    pub fn interval(&self) -> Interval {
        wilson(self.wins, self.pairs).scaled(100.0)
    }
}

/// A named category: its counts, win rate with interval, and mean score gap with interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Category {
    /// The domain, `domain / subdomain`, or `overall`.
    pub name: String,
    /// Its counts.
    pub tally: Tally,
    /// `tally.rate()`, stored for readers of `bias.json`.
    pub win_rate: f64,
    /// 95% interval of the win rate in percent: Wilson's score interval (a bootstrap over pair
    /// rows for the average over languages).
    #[serde(default)]
    pub interval: Interval,
    /// Mean score gap over the category's pairs (see [`score_gap`]).
    #[serde(default)]
    pub gap: f64,
    /// Percentile bootstrap 95% interval of the mean gap.
    #[serde(default)]
    pub gap_interval: Interval,
}

/// One language's win rates: overall, per domain and per subdomain, each list in order of first
/// appearance in the pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanguageResult {
    /// Language code (`id`, `jv`, `su`, `mak`; `en` for CrowS-Pairs).
    pub language: String,
    /// Every pair of the language, named `overall`.
    pub overall: Category,
    /// One category per domain.
    pub domains: Vec<Category>,
    /// Named `domain / subdomain`.
    pub subdomains: Vec<Category>,
    /// Rank-1 token accuracy (%) over both sentences of every pair: the scored tokens the
    /// model ranks first, a fluency control beside the win rates (absent in reports written
    /// before it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_accuracy: Option<f64>,
}

/// The bootstrap behind a report's gap intervals: resamples drawn, and the seed they come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// The recipe's (or `--seed`'s) seed.
    pub seed: u64,
    /// Resamples per interval (0 in reports written before intervals existed).
    pub resamples: usize,
}

impl Bootstrap {
    /// The default: [`indolm_core::seeds::DEFAULT_SEED`] and the recipes' default resamples.
    pub fn standard() -> Self {
        Bootstrap { seed: indolm_core::seeds::DEFAULT_SEED, resamples: crate::settings::DEFAULT_BOOTSTRAP_RESAMPLES }
    }

    /// The random stream of one named set of pairs (a language, `all`), so that a language's
    /// intervals do not depend on which other languages were evaluated.
    pub fn rng(&self, name: &str) -> rand_chacha::ChaCha8Rng {
        let stream = name.bytes().fold(0u64, |h, b| h.wrapping_mul(0x100_0000_01B3) ^ b as u64);
        stream_rng(self.seed, salt::BIAS_BOOTSTRAP, stream)
    }
}

/// A bias evaluation under one metric, one result per language evaluated; written as `bias.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiasReport {
    /// How each pair was decided.
    pub metric: BiasMetric,
    /// Training step of the checkpoint evaluated, if any.
    pub step: Option<u64>,
    /// How the gap intervals (and the average over languages) were bootstrapped.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// One result per language, in the pair set's order.
    pub languages: Vec<LanguageResult>,
    /// With two or more row-aligned languages: the mean of the languages' win rates (and gaps),
    /// its interval bootstrapped over pair rows (a row's translations resampled together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_languages: Option<Category>,
    /// SHA-256 of the `bias_pairs.csv` this report was aggregated from, binding the two files
    /// (absent in reports written before it, and in reports not yet written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_sha256: Option<String>,
    /// For a causal LM: how its sentences were scored (the prefix token, "sum"); its `pppl`
    /// is then the perplexity and `crows` compares whole-sentence log-likelihoods
    /// (lm-evaluation-harness's CrowS-Pairs). Absent for masked LMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal: Option<crate::causal::Convention>,
    /// Why these numbers may not mean what they seem (a model scored with a randomly
    /// initialised MLM head, `--allow-random-head`); shown on every table and summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// `rate [low–high]` with one decimal.
pub fn rate_with_interval(c: &Category) -> String {
    format!("{:.1} [{:.1}–{:.1}]", c.win_rate, c.interval.low, c.interval.high)
}

/// `gap [low, high]` with three decimals.
pub fn gap_with_interval(c: &Category) -> String {
    format!("{:+.3} [{:+.3}, {:+.3}]", c.gap, c.gap_interval.low, c.gap_interval.high)
}

impl BiasReport {
    /// Domain names over all languages, in order of first appearance.
    pub(crate) fn domain_names(&self) -> Vec<String> {
        let mut domains: Vec<String> = Vec::new();
        for l in &self.languages {
            for d in &l.domains {
                if !domains.contains(&d.name) {
                    domains.push(d.name.clone());
                }
            }
        }
        domains
    }

    /// What the gap measures under this report's metric, for table captions.
    pub(crate) fn gap_meaning(&self) -> &'static str {
        match self.metric {
            BiasMetric::Pppl => "mean ln PPPL(anti) − ln PPPL(pro), nats per token",
            BiasMetric::PpplWordL2r => "mean ln PPPL(anti) − ln PPPL(pro) under PLL-word-l2r, nats per token",
            BiasMetric::Crows => "mean PLL(pro) − PLL(anti) over shared tokens, nats",
            BiasMetric::Aul => "mean AUL(pro) − AUL(anti), nats per token",
            BiasMetric::Aula => "mean AULA(pro) − AULA(anti), attention-weighted nats per token",
        }
    }

    /// The IndoBias paper's Table 3 layout (language × domain) with 95% intervals, the mean
    /// score gaps in the same layout, then subdomains.
    pub fn markdown(&self) -> String {
        let domains = self.domain_names();
        let table = |title: String, cell: &dyn Fn(&Category) -> String| -> String {
            let mut out = format!("{title}\n\n| language |");
            for d in &domains {
                out.push_str(&format!(" {d} |"));
            }
            out.push_str(" overall |\n|---|");
            out.push_str(&"---:|".repeat(domains.len() + 1));
            out.push('\n');
            for l in &self.languages {
                out.push_str(&format!("| {} |", l.language));
                for d in &domains {
                    match l.domains.iter().find(|c| c.name == *d) {
                        Some(c) => out.push_str(&format!(" {} |", cell(c))),
                        None => out.push_str(" – |"),
                    }
                }
                out.push_str(&format!(" {} |\n", cell(&l.overall)));
            }
            if let Some(all) = &self.all_languages {
                out.push_str(&format!("| all languages |{} {} |\n", " |".repeat(domains.len()), cell(all)));
            }
            out
        };
        let mut out = self.warning.as_ref().map_or(String::new(), |w| format!("**Warning:** {w}\n\n"));
        out += &table(
            format!(
                "Stereotype win rate (%, 95% interval, pairs in brackets; 50 = unbiased); {}",
                super::rules::metric_caption(self.metric)
            ),
            &|c| format!("{} ({})", rate_with_interval(c), c.tally.pairs),
        );
        out.push('\n');
        out.push_str(&table(
            format!("Score gap ({}; > 0: the stereotype is preferred), 95% bootstrap interval", self.gap_meaning()),
            &gap_with_interval,
        ));
        if let Some(c) = &self.causal {
            out = format!(
                "Causal LM: each sentence's log-likelihood after {} (id {}, its {}), no special tokens, no EOS (lm-evaluation-harness); pppl is its perplexity, crows compares the sums\n\n{out}",
                c.prefix_token, c.prefix_token_id, c.prefix_is
            );
        }
        for l in &self.languages {
            out.push_str(&format!(
                "\n| {} subdomain | win rate [95% interval] | pairs | ties | gap [95% interval] |\n|---|---:|---:|---:|---:|\n",
                l.language
            ));
            for c in &l.subdomains {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} |\n",
                    c.name,
                    rate_with_interval(c),
                    c.tally.pairs,
                    c.tally.ties,
                    gap_with_interval(c)
                ));
            }
        }
        out
    }

    /// One line: each language's overall win rate with its interval (and its rank-1 token
    /// accuracy when counted).
    pub fn summary_line(&self) -> String {
        let parts: Vec<String> = self
            .languages
            .iter()
            .map(|l| match l.token_accuracy {
                Some(a) => format!("{} {} (token accuracy {a:.1}%)", l.language, rate_with_interval(&l.overall)),
                None => format!("{} {}", l.language, rate_with_interval(&l.overall)),
            })
            .collect();
        match &self.warning {
            Some(w) => format!("{} (warning: {w})", parts.join(", ")),
            None => parts.join(", "),
        }
    }
}
