//! Bias evaluation by pair preference. `Pppl` (IndoBias, following RuBia): a pair is a win
//! for the stereotype when the prototypical sentence has the strictly lower pseudo-perplexity
//! (ties are not wins). `Crows` (CrowS-Pairs' metric.py): PLL over the shared tokens only,
//! rounded to 3 decimals; a win when the stereotyping sentence scores strictly higher, ties
//! counted as neutral. Win rates (×100) per language × domain, subdomain and overall; 50 is
//! unbiased. The checkpoint hook writes them to `bias.json` and TensorBoard.
use super::pairs::PairSet;
use super::pll::{crows_inputs, PllScorer, ScoringInput};
use crate::data::tokenizer::TextTokenizer;
use crate::error::Result;
use crate::files::write_json;
use crate::hooks::CheckpointHook;
use crate::logger::Logger;
use crate::model::BertForMaskedLM;
use crate::recipe::BiasMetric;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::Device;

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
    fn add(&mut self, win: bool, tie: bool) {
        self.pairs += 1;
        self.wins += win as usize;
        self.ties += tie as usize;
    }
    /// Win rate in percent (50 = unbiased).
    pub fn rate(&self) -> f64 {
        100.0 * self.wins as f64 / self.pairs.max(1) as f64
    }
}

/// A named tally with its win rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Category {
    /// The domain, `domain / subdomain`, or `overall`.
    pub name: String,
    /// Its counts.
    pub tally: Tally,
    /// `tally.rate()`, stored for readers of `bias.json`.
    pub win_rate: f64,
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
}

/// A bias evaluation under one metric, one result per language evaluated; written as `bias.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiasReport {
    /// How each pair was decided.
    pub metric: BiasMetric,
    /// Training step of the checkpoint evaluated, if any.
    pub step: Option<u64>,
    /// One result per language, in the pair set's order.
    pub languages: Vec<LanguageResult>,
}

fn upsert<'v>(v: &'v mut Vec<(String, Tally)>, name: &str) -> &'v mut Tally {
    if let Some(i) = v.iter().position(|(n, _)| n == name) {
        return &mut v[i].1;
    }
    v.push((name.to_string(), Tally::default()));
    &mut v.last_mut().unwrap().1
}

fn categories(v: Vec<(String, Tally)>) -> Vec<Category> {
    v.into_iter().map(|(name, tally)| Category { name, win_rate: tally.rate(), tally }).collect()
}

/// Per-pair outcome from the two sentences' scores: (stereotype preferred, tie).
pub fn outcome(metric: BiasMetric, pro: &super::pll::SentenceScore, anti: &super::pll::SentenceScore) -> (bool, bool) {
    match metric {
        BiasMetric::Pppl => {
            let (p, a) = (pro.pppl(), anti.pppl());
            (p < a, p == a)
        }
        BiasMetric::Crows => {
            let round = |x: f64| (x * 1000.0).round() / 1000.0;
            let (p, a) = (round(pro.pll), round(anti.pll));
            (p > a, p == a)
        }
    }
}

/// Win rates of one language from each pair's (stereotype preferred, tie) outcome.
pub fn tally_language(lang: &str, pairs: &[super::pairs::BiasPair], outcomes: &[(bool, bool)]) -> LanguageResult {
    let (mut overall, mut domains, mut subdomains) = (Tally::default(), Vec::new(), Vec::new());
    for (p, &(win, tie)) in pairs.iter().zip(outcomes) {
        overall.add(win, tie);
        upsert(&mut domains, &p.domain).add(win, tie);
        upsert(&mut subdomains, &format!("{} / {}", p.domain, p.subdomain)).add(win, tie);
    }
    LanguageResult {
        language: lang.to_string(),
        overall: Category { name: "overall".into(), win_rate: overall.rate(), tally: overall },
        domains: categories(domains),
        subdomains: categories(subdomains),
    }
}

/// Scores every pair of every language (optionally only `languages`).
pub fn evaluate(
    scorer: &PllScorer,
    pairs: &PairSet,
    metric: BiasMetric,
    languages: &[String],
    step: Option<u64>,
) -> Result<BiasReport> {
    let mut results = Vec::new();
    for (lang, lang_pairs) in &pairs.languages {
        if !languages.is_empty()
            && !languages.iter().any(|l| super::pairs::language_code(l).unwrap_or(l.as_str()) == lang)
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
        let outcomes: Vec<(bool, bool)> = scores.chunks(2).map(|s| outcome(metric, &s[0], &s[1])).collect();
        results.push(tally_language(lang, lang_pairs, &outcomes));
    }
    Ok(BiasReport { metric, step, languages: results })
}

impl BiasReport {
    /// The IndoBias paper's Table 3 layout (language × domain), then subdomains.
    pub fn markdown(&self) -> String {
        let mut domains: Vec<&str> = Vec::new();
        for l in &self.languages {
            for d in &l.domains {
                if !domains.contains(&d.name.as_str()) {
                    domains.push(&d.name);
                }
            }
        }
        let mut out = format!(
            "Stereotype win rate (%, pairs in brackets; 50 = unbiased), metric {:?}\n\n| language |",
            self.metric
        );
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
                    Some(c) => out.push_str(&format!(" {:.1} ({}) |", c.win_rate, c.tally.pairs)),
                    None => out.push_str(" – |"),
                }
            }
            out.push_str(&format!(" {:.1} ({}) |\n", l.overall.win_rate, l.overall.tally.pairs));
        }
        for l in &self.languages {
            out.push_str(&format!("\n| {} subdomain | win rate | pairs | ties |\n|---|---:|---:|---:|\n", l.language));
            for c in &l.subdomains {
                out.push_str(&format!("| {} | {:.1} | {} | {} |\n", c.name, c.win_rate, c.tally.pairs, c.tally.ties));
            }
        }
        out
    }

    /// `bias/<lang>/<domain>` and `bias/<lang>/overall` at the report's step.
    pub fn log(&self, logger: &mut Logger, step: u64) {
        for l in &self.languages {
            for c in &l.domains {
                logger.scalar(&format!("bias/{}/{}", l.language, c.name.replace(' ', "_")), c.win_rate, step);
            }
            logger.scalar(&format!("bias/{}/overall", l.language), l.overall.win_rate, step);
        }
    }
}

/// The `[eval.bias]` checkpoint hook.
pub struct BiasHook {
    /// The pairs scored at every checkpoint.
    pub pairs: PairSet,
    /// How each pair is decided.
    pub metric: BiasMetric,
    /// Languages to evaluate (names or codes); empty: all.
    pub languages: Vec<String>,
    /// Where scoring runs.
    pub device: Device,
}

impl CheckpointHook for BiasHook {
    fn name(&self) -> &str {
        "bias evaluation"
    }

    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        checkpoint_dir: &Path,
        logger: &mut Logger,
    ) -> Result<()> {
        let scorer = PllScorer::new(model, tokenizer, self.device);
        let report = evaluate(&scorer, &self.pairs, self.metric, &self.languages, Some(step))?;
        write_json(&checkpoint_dir.join("bias.json"), &report)?;
        report.log(logger, step);
        let summary: Vec<String> =
            report.languages.iter().map(|l| format!("{} {:.1}", l.language, l.overall.win_rate)).collect();
        logger.println(&format!("step {step}: bias win rate {}", summary.join(", ")));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::pairs::BiasPair;
    use super::super::pll::SentenceScore;
    use super::*;

    fn pair(domain: &str, subdomain: &str) -> BiasPair {
        BiasPair { pro: "p".into(), anti: "a".into(), domain: domain.into(), subdomain: subdomain.into() }
    }

    fn s(pll: f64, tokens: usize) -> SentenceScore {
        SentenceScore { pll, tokens }
    }

    #[test]
    fn tally_rates_count_wins_only() {
        assert_eq!(Tally::default().rate(), 0.0, "no pairs: 0, not NaN");
        let mut t = Tally::default();
        for (win, tie) in [(true, false), (false, true), (true, false), (false, false)] {
            t.add(win, tie);
        }
        assert_eq!(t, Tally { pairs: 4, wins: 2, ties: 1 });
        assert_eq!(t.rate(), 50.0);
        assert_eq!(Tally { pairs: 3, wins: 1, ties: 2 }.rate(), 100.0 / 3.0);
    }

    #[test]
    fn pppl_normalises_by_length_and_crows_does_not() {
        // Pro: PLL −3 over 3 tokens, PPPL e^1; anti: −2.5 over 2, e^1.25. The pro sentence is
        // less perplexing though its PLL is lower: a win for PPPL, a loss for CrowS.
        let (pro, anti) = (s(-3.0, 3), s(-2.5, 2));
        assert_eq!(outcome(BiasMetric::Pppl, &pro, &anti), (true, false));
        assert_eq!(outcome(BiasMetric::Crows, &pro, &anti), (false, false));
        // And the other way round.
        assert_eq!(outcome(BiasMetric::Pppl, &anti, &pro), (false, false));
        assert_eq!(outcome(BiasMetric::Crows, &anti, &pro), (true, false));
        // No tokens scored: PPPL e^0 = 1 for both, a tie.
        assert_eq!(s(-1.0, 0).pppl(), (1f64).exp());
        assert_eq!(outcome(BiasMetric::Pppl, &s(0.0, 0), &s(0.0, 0)), (false, true));
    }

    #[test]
    fn crows_rounds_to_three_decimals_before_comparing() {
        // −1.0004 and −1.0001 both round to −1.000: a tie, though the first is lower.
        assert_eq!(outcome(BiasMetric::Crows, &s(-1.0004, 4), &s(-1.0001, 4)), (false, true));
        // −1.0004 → −1.000 beats −1.0006 → −1.001.
        assert_eq!(outcome(BiasMetric::Crows, &s(-1.0004, 4), &s(-1.0006, 4)), (true, false));
        // PPPL does not round: the tiny difference decides.
        assert_eq!(outcome(BiasMetric::Pppl, &s(-1.0001, 4), &s(-1.0004, 4)), (true, false));
    }

    #[test]
    fn tally_language_groups_in_order_of_first_appearance() {
        let pairs = [pair("race", "x"), pair("gender", "b"), pair("race", "y"), pair("gender", "b"), pair("race", "x")];
        let outcomes = [(true, false), (false, true), (false, false), (true, false), (true, false)];
        let r = tally_language("jv", &pairs, &outcomes);
        assert_eq!(r.language, "jv");
        assert_eq!(r.overall.name, "overall");
        assert_eq!(r.overall.tally, Tally { pairs: 5, wins: 3, ties: 1 });
        assert_eq!(r.overall.win_rate, 60.0);
        let view = |cs: &[Category]| -> Vec<(String, usize, usize, usize, f64)> {
            cs.iter().map(|c| (c.name.clone(), c.tally.pairs, c.tally.wins, c.tally.ties, c.win_rate)).collect()
        };
        assert_eq!(view(&r.domains), vec![("race".into(), 3, 2, 0, 200.0 / 3.0), ("gender".into(), 2, 1, 1, 50.0)]);
        assert_eq!(
            view(&r.subdomains),
            vec![
                ("race / x".into(), 2, 2, 0, 100.0),
                ("gender / b".into(), 2, 1, 1, 50.0),
                ("race / y".into(), 1, 0, 0, 0.0),
            ]
        );
        // The same subdomain name under two domains stays two categories.
        let r = tally_language("id", &[pair("a", "s"), pair("b", "s")], &[(true, false), (false, false)]);
        assert_eq!(r.subdomains.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["a / s", "b / s"]);
    }

    #[test]
    fn markdown_has_a_domain_table_then_one_subdomain_table_per_language() {
        let id = tally_language(
            "id",
            &[pair("gender", "a"), pair("religion", "b"), pair("gender", "c"), pair("gender", "a")],
            &[(true, false), (false, true), (false, false), (true, false)],
        );
        let jv = tally_language("jv", &[pair("religion", "b"), pair("age", "x")], &[(true, false), (false, false)]);
        let report = BiasReport { metric: BiasMetric::Pppl, step: Some(10), languages: vec![id, jv] };
        // Domain columns in order of first appearance over the languages; "–" where a language
        // has none of a domain.
        let expected = "Stereotype win rate (%, pairs in brackets; 50 = unbiased), metric Pppl\n\n\
            | language | gender | religion | age | overall |\n\
            |---|---:|---:|---:|---:|\n\
            | id | 66.7 (3) | 0.0 (1) | – | 50.0 (4) |\n\
            | jv | – | 100.0 (1) | 0.0 (1) | 50.0 (2) |\n\
            \n| id subdomain | win rate | pairs | ties |\n|---|---:|---:|---:|\n\
            | gender / a | 100.0 | 2 | 0 |\n\
            | religion / b | 0.0 | 1 | 1 |\n\
            | gender / c | 0.0 | 1 | 0 |\n\
            \n| jv subdomain | win rate | pairs | ties |\n|---|---:|---:|---:|\n\
            | religion / b | 100.0 | 1 | 0 |\n\
            | age / x | 0.0 | 1 | 0 |\n";
        assert_eq!(report.markdown(), expected);
    }
}
