//! Bias evaluation by pair preference. `Pppl` (IndoBias, following RuBia): a pair is a win
//! for the stereotype when the prototypical sentence has the strictly lower pseudo-perplexity
//! (ties are not wins). `Crows` (CrowS-Pairs' metric.py): PLL over the shared tokens only,
//! rounded to 3 decimals; a win when the stereotyping sentence scores strictly higher, ties
//! counted as neutral. Every pair's scores become a [`PairRecord`] (`bias_pairs.csv`); the
//! records aggregate into win rates (×100; 50 is unbiased) per language × domain, subdomain and
//! overall, each with its Wilson 95% interval, and the mean score gap with a seeded bootstrap
//! interval. The checkpoint hook writes `bias.json`, `bias_pairs.csv` and TensorBoard curves.
//!
//! By job: [`report`] (the records and the report, with its tables), [`rules`] (how a pair is
//! decided), [`aggregate`] (records to report), [`scoring`] (pairs to records with a model),
//! [`records`] (the files, read strictly, and a run's evaluations), [`board`] (TensorBoard) and
//! [`hook`] (the checkpoint hook).
pub mod aggregate;
pub(crate) mod board;
pub(crate) mod hook;
pub mod models;
pub mod records;
pub mod report;
pub(crate) mod rules;
pub(crate) mod scoring;

pub use aggregate::aggregate;
pub use hook::BiasHook;
pub use report::{
    gap_with_interval, rate_with_interval, BiasReport, Bootstrap, Category, LanguageResult, PairRecord, Tally,
};
pub use rules::{metric_caption, outcome, score_gap, Preference};
pub use scoring::{evaluate, evaluate_under, score_pairs, score_pairs_under, Evaluation};

/// Records for the unit tests of this crate and of the crates above (not an API).
#[doc(hidden)]
pub mod test_support {
    use super::*;

    /// Records of one language from (domain, subdomain, preference, gap).
    pub fn records(language: &str, rows: &[(&str, &str, Preference, f64)]) -> Vec<PairRecord> {
        rows.iter()
            .enumerate()
            .map(|(i, &(domain, subdomain, preferred, gap))| PairRecord {
                language: language.into(),
                pair: i,
                domain: domain.into(),
                subdomain: subdomain.into(),
                preferred,
                gap,
                pro_pll: -1.0,
                pro_tokens: 1,
                anti_pll: -1.0,
                anti_tokens: 1,
                protrope: "p".into(),
                antitrope: "a".into(),
                pro_correct: Some(1),
                anti_correct: Some(0),
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pll::SentenceScore;
    use crate::BiasMetric;
    use indolm_metrics::stats::{wilson, Interval};

    fn s(pll: f64, tokens: usize) -> SentenceScore {
        SentenceScore { pll, tokens, correct: 0 }
    }

    pub use super::test_support::records;

    use Preference::{Anti, Pro, Tie};

    #[test]
    fn aul_and_aula_prefer_the_strictly_higher_mean() {
        // Pro: −3 over 3 tokens (mean −1), anti: −2.5 over 2 (mean −1.25): pro preferred.
        let (pro, anti) = (s(-3.0, 3), s(-2.5, 2));
        for m in [BiasMetric::Aul, BiasMetric::Aula] {
            assert_eq!(outcome(m, &pro, &anti), Pro);
            assert_eq!(outcome(m, &anti, &pro), Anti);
            assert_eq!(outcome(m, &s(-2.0, 2), &s(-3.0, 3)), Tie, "equal means tie");
            assert!((score_gap(m, &pro, &anti) - 0.25).abs() < 1e-15);
        }
        assert_eq!(outcome(BiasMetric::PpplWordL2r, &pro, &anti), outcome(BiasMetric::Pppl, &pro, &anti));
    }

    #[test]
    fn tally_rates_count_wins_only() {
        assert_eq!(Tally::default().rate(), 0.0, "no pairs: 0, not NaN");
        let mut t = Tally::default();
        for p in [Pro, Tie, Pro, Anti] {
            t.add(p);
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
        assert_eq!(outcome(BiasMetric::Pppl, &pro, &anti), Pro);
        assert_eq!(outcome(BiasMetric::Crows, &pro, &anti), Anti);
        assert_eq!(outcome(BiasMetric::Pppl, &anti, &pro), Anti);
        assert_eq!(outcome(BiasMetric::Crows, &anti, &pro), Pro);
        // The gaps agree in sign with the outcomes: ln PPPL 1.25 − 1 = +0.25; PLL −3 + 2.5.
        assert!((score_gap(BiasMetric::Pppl, &pro, &anti) - 0.25).abs() < 1e-15);
        assert!((score_gap(BiasMetric::Crows, &pro, &anti) + 0.5).abs() < 1e-15);
        // No tokens scored: PPPL e^0 = 1 for both, a tie with a zero gap.
        assert_eq!(outcome(BiasMetric::Pppl, &s(0.0, 0), &s(0.0, 0)), Tie);
        assert_eq!(score_gap(BiasMetric::Pppl, &s(0.0, 0), &s(0.0, 0)), 0.0);
    }

    #[test]
    fn crows_rounds_to_three_decimals_before_comparing() {
        // −1.0004 and −1.0001 both round to −1.000: a tie, though the first is lower.
        assert_eq!(outcome(BiasMetric::Crows, &s(-1.0004, 4), &s(-1.0001, 4)), Tie);
        // −1.0004 → −1.000 beats −1.0006 → −1.001.
        assert_eq!(outcome(BiasMetric::Crows, &s(-1.0004, 4), &s(-1.0006, 4)), Pro);
        // PPPL does not round: the tiny difference decides.
        assert_eq!(outcome(BiasMetric::Pppl, &s(-1.0001, 4), &s(-1.0004, 4)), Pro);
    }

    #[test]
    fn aggregate_groups_in_order_of_first_appearance_with_intervals_and_gaps() {
        let rows = [
            ("race", "x", Pro, 0.5),
            ("gender", "b", Tie, 0.0),
            ("race", "y", Anti, -0.25),
            ("gender", "b", Pro, 0.125),
            ("race", "x", Pro, 1.0),
        ];
        let report = aggregate(BiasMetric::Pppl, Some(3), &records("jv", &rows), Bootstrap::standard());
        assert!(report.all_languages.is_none(), "one language: no average over languages");
        let r = &report.languages[0];
        assert_eq!(r.language, "jv");
        assert_eq!(r.overall.name, "overall");
        assert_eq!(r.overall.tally, Tally { pairs: 5, wins: 3, ties: 1 });
        assert_eq!(r.overall.win_rate, 60.0);
        assert_eq!(r.overall.interval, wilson(3, 5).scaled(100.0));
        assert!((r.overall.gap - 1.375 / 5.0).abs() < 1e-15);
        assert!(r.overall.gap_interval.contains(r.overall.gap));
        let view = |cs: &[Category]| -> Vec<(String, usize, usize, usize, f64, f64)> {
            cs.iter().map(|c| (c.name.clone(), c.tally.pairs, c.tally.wins, c.tally.ties, c.win_rate, c.gap)).collect()
        };
        assert_eq!(
            view(&r.domains),
            vec![("race".into(), 3, 2, 0, 200.0 / 3.0, 1.25 / 3.0), ("gender".into(), 2, 1, 1, 50.0, 0.0625)]
        );
        assert_eq!(
            view(&r.subdomains),
            vec![
                ("race / x".into(), 2, 2, 0, 100.0, 0.75),
                ("gender / b".into(), 2, 1, 1, 50.0, 0.0625),
                ("race / y".into(), 1, 0, 0, 0.0, -0.25),
            ]
        );
        // A single pair's gap cannot vary under resampling.
        assert_eq!(r.subdomains[2].gap_interval, Interval { low: -0.25, high: -0.25 });
        // The same subdomain name under two domains stays two categories.
        let report = aggregate(
            BiasMetric::Pppl,
            None,
            &records("id", &[("a", "s", Pro, 0.0), ("b", "s", Anti, 0.0)]),
            Bootstrap::standard(),
        );
        let names: Vec<&str> = report.languages[0].subdomains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["a / s", "b / s"]);
    }

    #[test]
    fn the_average_over_languages_pairs_rows_and_is_reproducible() {
        let id =
            records("id", &[("d", "s", Pro, 1.0), ("d", "s", Pro, 1.0), ("d", "s", Anti, -1.0), ("d", "s", Tie, 0.0)]);
        let jv = records(
            "jv",
            &[("d", "s", Pro, 0.5), ("d", "s", Anti, -0.5), ("d", "s", Anti, -0.5), ("d", "s", Pro, 0.5)],
        );
        let both: Vec<PairRecord> = id.iter().chain(&jv).cloned().collect();
        let report = aggregate(BiasMetric::Pppl, None, &both, Bootstrap::standard());
        let all = report.all_languages.clone().expect("two aligned languages");
        assert_eq!(all.win_rate, 50.0, "mean of 50 and 50");
        assert_eq!(all.tally, Tally { pairs: 8, wins: 4, ties: 1 });
        assert!((all.gap - 0.125).abs() < 1e-15, "{}", all.gap); // means 0.25 and 0
        assert!(all.interval.contains(50.0) && all.interval.low >= 0.0 && all.interval.high <= 100.0);
        assert_eq!(report, aggregate(BiasMetric::Pppl, None, &both, Bootstrap::standard()), "seeded");
        // A language's intervals do not depend on the others evaluated with it.
        let alone = aggregate(BiasMetric::Pppl, None, &jv, Bootstrap::standard());
        assert_eq!(alone.languages[0], report.languages[1]);
        // Unaligned rows: no average.
        let mut shifted = jv.clone();
        shifted[0].pair = 9;
        let unaligned: Vec<PairRecord> = id.iter().chain(&shifted).cloned().collect();
        assert!(aggregate(BiasMetric::Pppl, None, &unaligned, Bootstrap::standard()).all_languages.is_none());
    }

    #[test]
    fn markdown_has_rate_and_gap_tables_then_one_subdomain_table_per_language() {
        let id = records(
            "id",
            &[
                ("gender", "a", Pro, 0.5),
                ("religion", "b", Tie, 0.0),
                ("gender", "c", Anti, -0.5),
                ("gender", "a", Pro, 0.25),
            ],
        );
        let jv = records("jv", &[("religion", "b", Pro, 0.125), ("age", "x", Anti, -0.125)]);
        let both: Vec<PairRecord> = id.into_iter().chain(jv).collect();
        let report = aggregate(BiasMetric::Pppl, Some(10), &both, Bootstrap::standard());
        let md = report.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "Stereotype win rate (%, 95% interval, pairs in brackets; 50 = unbiased); {}",
                metric_caption(BiasMetric::Pppl)
            )
        );
        assert_eq!(lines[2], "| language | gender | religion | age | overall |");
        let w = |wins, n| {
            let i = wilson(wins, n).scaled(100.0);
            format!("{:.1}–{:.1}", i.low, i.high)
        };
        assert_eq!(
            lines[4],
            format!("| id | 66.7 [{}] (3) | 0.0 [{}] (1) | – | 50.0 [{}] (4) |", w(2, 3), w(0, 1), w(2, 4))
        );
        assert_eq!(
            lines[5],
            format!("| jv | – | 100.0 [{}] (1) | 0.0 [{}] (1) | 50.0 [{}] (2) |", w(1, 1), w(0, 1), w(1, 2))
        );
        assert!(md.contains(
            "Score gap (mean ln PPPL(anti) − ln PPPL(pro), nats per token; > 0: the stereotype is preferred)"
        ));
        assert!(md.contains("| id subdomain | win rate [95% interval] | pairs | ties | gap [95% interval] |"));
        assert!(
            md.contains(&format!("| religion / b | 0.0 [{}] | 1 | 1 | +0.000 [+0.000, +0.000] |", w(0, 1))),
            "{md}"
        );
        assert!(md.contains("| jv subdomain |") && md.contains("| age / x | 0.0 ["));
    }
}
