//! `indolm report bias-diff A B`: a paired comparison of two bias evaluations of the same
//! pairs (two checkpoints of a run, two runs at one step, two models). Per language, overall
//! and per domain: both win rates, the change with a paired bootstrap 95% interval, the pairs
//! that became or stopped being stereotype wins, and the exact McNemar test on those discordant
//! pairs, Holm-corrected across every row shown.
use indolm_eval::bias::{metric_caption, Bootstrap, PairRecord};
use indolm_eval::BiasMetric;
use indolm_metrics::stats::{bootstrap_group_means, holm, mcnemar_exact, Interval};
use indolm_torch::error::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The comparison of one group (a language overall, or one of its domains).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedRow {
    /// Language code.
    pub language: String,
    /// `overall` or a domain.
    pub group: String,
    /// Pairs in the group.
    pub pairs: usize,
    /// Win rate (%) in A.
    pub rate_a: f64,
    /// Win rate (%) in B.
    pub rate_b: f64,
    /// `rate_b − rate_a`, in points.
    pub change: f64,
    /// Paired bootstrap 95% interval of the change.
    pub change_interval: Interval,
    /// Pairs that are wins in B but not in A.
    pub became_wins: usize,
    /// Pairs that are wins in A but not in B.
    pub stopped_being_wins: usize,
    /// Exact McNemar p-value on the discordant pairs.
    pub p_value: f64,
    /// Holm-adjusted over every row of the comparison.
    pub p_holm: f64,
}

/// A's and B's records of the same pairs, matched by (language, pair); an error naming the
/// first pair that one side lacks or whose sentences differ.
pub(crate) fn match_pairs<'a>(
    a: &'a [PairRecord],
    b: &'a [PairRecord],
    names: (&str, &str),
) -> Result<Vec<(&'a PairRecord, &'a PairRecord)>> {
    let index: HashMap<(&str, usize), &PairRecord> = b.iter().map(|r| ((r.language.as_str(), r.pair), r)).collect();
    let mismatch = |message: String| Error::data(format!("comparing {} with {}", names.0, names.1), message);
    let mut matched = Vec::with_capacity(a.len());
    for ra in a {
        let rb = index.get(&(ra.language.as_str(), ra.pair)).ok_or_else(|| {
            mismatch(format!(
                "pair {} of language {} is in the first but not in the second: evaluate both on the same pairs",
                ra.pair, ra.language
            ))
        })?;
        let differs = if ra.protrope != rb.protrope {
            Some(("protrope", &ra.protrope, &rb.protrope))
        } else if ra.antitrope != rb.antitrope {
            Some(("antitrope", &ra.antitrope, &rb.antitrope))
        } else {
            None
        };
        if let Some((which, sa, sb)) = differs {
            return Err(mismatch(format!(
                "pair {} of language {} has another {which} in each ({sa:?} vs {sb:?}): these are not the same pair sets",
                ra.pair, ra.language
            )));
        }
        matched.push((ra, *rb));
    }
    if b.len() != a.len() {
        return Err(mismatch(format!(
            "the second has {} pairs, the first {}: evaluate both on the same pairs",
            b.len(),
            a.len()
        )));
    }
    Ok(matched)
}

/// The rows of a paired comparison: per language, overall then each domain (in order of first
/// appearance), Holm-adjusted together.
pub(crate) fn paired_rows(matched: &[(&PairRecord, &PairRecord)], bootstrap: Bootstrap) -> Vec<PairedRow> {
    let mut languages: Vec<&str> = Vec::new();
    for (a, _) in matched {
        if !languages.contains(&a.language.as_str()) {
            languages.push(&a.language);
        }
    }
    let mut rows = Vec::new();
    for language in languages {
        let pairs: Vec<&(&PairRecord, &PairRecord)> = matched.iter().filter(|(a, _)| a.language == language).collect();
        let mut groups: Vec<String> = vec!["overall".into()];
        let members: Vec<Vec<usize>> = pairs
            .iter()
            .map(|(a, _)| {
                let g = match groups.iter().position(|g| *g == a.domain) {
                    Some(g) => g,
                    None => {
                        groups.push(a.domain.clone());
                        groups.len() - 1
                    }
                };
                vec![0, g]
            })
            .collect();
        let changes: Vec<f64> =
            pairs.iter().map(|(a, b)| 100.0 * (b.is_win() as u8 as f64 - a.is_win() as u8 as f64)).collect();
        let mut rng = bootstrap.rng(&format!("paired {language}"));
        let intervals = bootstrap_group_means(&changes, &members, groups.len(), bootstrap.resamples, &mut rng);
        for (g, group) in groups.iter().enumerate() {
            let in_group: Vec<&&(&PairRecord, &PairRecord)> =
                pairs.iter().zip(&members).filter(|(_, m)| m.contains(&g)).map(|(p, _)| p).collect();
            let n = in_group.len();
            let wins = |pick: fn(&(&PairRecord, &PairRecord)) -> bool| in_group.iter().filter(|p| pick(p)).count();
            let (wins_a, wins_b) = (wins(|p| p.0.is_win()), wins(|p| p.1.is_win()));
            let became = wins(|p| !p.0.is_win() && p.1.is_win());
            let stopped = wins(|p| p.0.is_win() && !p.1.is_win());
            let (rate_a, rate_b) = (100.0 * wins_a as f64 / n as f64, 100.0 * wins_b as f64 / n as f64);
            let change = rate_b - rate_a;
            rows.push(PairedRow {
                language: language.to_string(),
                group: group.clone(),
                pairs: n,
                rate_a,
                rate_b,
                change,
                change_interval: intervals[g].unwrap_or(Interval { low: change, high: change }),
                became_wins: became,
                stopped_being_wins: stopped,
                p_value: mcnemar_exact(became, stopped),
                p_holm: 0.0,
            });
        }
    }
    let adjusted = holm(&rows.iter().map(|r| r.p_value).collect::<Vec<_>>());
    for (row, p) in rows.iter_mut().zip(adjusted) {
        row.p_holm = p;
    }
    rows
}

/// A p-value for a table: 4 significant digits, scientific below 0.001.
pub(crate) fn format_p(p: f64) -> String {
    if p < 1e-3 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

/// The comparison as a Markdown table, under its metric.
pub fn markdown(rows: &[PairedRow], names: (&str, &str), metric: BiasMetric, bootstrap: Bootstrap) -> String {
    let mut out = format!(
        "Paired comparison of stereotype win rates (%): A = {}, B = {}; {}\n\n\
         change = B − A in points with a paired bootstrap 95% interval ({} resamples, seed {}); \
         McNemar: exact test on the pairs whose win changed; Holm: adjusted over the {} rows.\n\n\
         | language | group | pairs | A | B | change [95% interval] | became wins | stopped being wins | McNemar p | Holm p |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        names.0,
        names.1,
        metric_caption(metric),
        bootstrap.resamples,
        bootstrap.seed,
        rows.len()
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:+.1} [{:+.1}, {:+.1}] | {} | {} | {} | {}{} |\n",
            r.language,
            r.group,
            r.pairs,
            r.rate_a,
            r.rate_b,
            r.change,
            r.change_interval.low,
            r.change_interval.high,
            r.became_wins,
            r.stopped_being_wins,
            format_p(r.p_value),
            format_p(r.p_holm),
            if r.p_holm < 0.05 { " *" } else { "" }
        ));
    }
    out.push_str("\n`*`: significant at 0.05 after Holm's correction.\n");
    out
}

/// What `report bias-diff` found: the metric both evaluations share, and the rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiasDiff {
    /// The metric of both evaluations.
    pub metric: BiasMetric,
    /// Evaluation A, as named.
    pub a: String,
    /// Evaluation B, as named.
    pub b: String,
    /// Per language, overall then each domain.
    pub rows: Vec<PairedRow>,
}

/// `report bias-diff`: reads both evaluations (each report with its records, checked as one)
/// and compares them; refuses one evaluation given twice and evaluations of different metrics.
pub fn bias_diff(a: &Path, b: &Path, bootstrap: Bootstrap) -> Result<(BiasDiff, String)> {
    use indolm_eval::bias::records::{evaluation_folder, read_evaluation};
    let (dir_a, dir_b) = (evaluation_folder(a)?, evaluation_folder(b)?);
    let names = (a.display().to_string(), b.display().to_string());
    if same_folder(&dir_a, &dir_b) {
        return Err(Error::argument(
            "B",
            format!("{} and {} are the same evaluation: give two evaluations to compare", names.0, names.1),
        ));
    }
    let ((report_a, records_a), (report_b, records_b)) = (read_evaluation(&dir_a)?, read_evaluation(&dir_b)?);
    if report_a.metric != report_b.metric {
        return Err(Error::data(
            format!("comparing {} with {}", names.0, names.1),
            format!(
                "A was scored with metric {}, B with {}: their win rates decide pairs differently and are not comparable; evaluate both with the same --metric",
                report_a.metric, report_b.metric
            ),
        ));
    }
    let matched = match_pairs(&records_a, &records_b, (&names.0, &names.1))?;
    let rows = paired_rows(&matched, bootstrap);
    let table = markdown(&rows, (&names.0, &names.1), report_a.metric, bootstrap);
    Ok((BiasDiff { metric: report_a.metric, a: names.0, b: names.1, rows }, table))
}

/// Whether two paths name one folder (after resolving links and `..`).
pub(crate) fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_eval::bias::test_support::records;
    use indolm_eval::bias::Preference::{Anti, Pro, Tie};

    #[test]
    fn discordant_pairs_changes_and_holm_per_language_and_domain() {
        let a =
            records("id", &[("x", "s", Pro, 0.0), ("x", "s", Pro, 0.0), ("y", "s", Anti, 0.0), ("y", "s", Tie, 0.0)]);
        let b =
            records("id", &[("x", "s", Pro, 0.0), ("x", "s", Anti, 0.0), ("y", "s", Pro, 0.0), ("y", "s", Pro, 0.0)]);
        let matched = match_pairs(&a, &b, ("a", "b")).unwrap();
        let rows = paired_rows(&matched, Bootstrap::standard());
        let view: Vec<(&str, usize, f64, f64, usize, usize)> = rows
            .iter()
            .map(|r| (r.group.as_str(), r.pairs, r.rate_a, r.rate_b, r.became_wins, r.stopped_being_wins))
            .collect();
        assert_eq!(
            view,
            vec![("overall", 4, 50.0, 75.0, 2, 1), ("x", 2, 100.0, 50.0, 0, 1), ("y", 2, 0.0, 100.0, 2, 0)]
        );
        assert_eq!(rows[0].p_value, mcnemar_exact(2, 1));
        assert_eq!(rows[2].p_value, 0.5);
        let holm_expected = holm(&[rows[0].p_value, rows[1].p_value, rows[2].p_value]);
        assert_eq!(rows.iter().map(|r| r.p_holm).collect::<Vec<_>>(), holm_expected);
        assert!(rows[0].change_interval.contains(25.0));
        let md = markdown(&rows, ("a", "b"), BiasMetric::Pppl, Bootstrap::standard());
        assert!(md.contains("metric pppl: each sentence's pseudo-perplexity"), "{md}");
        assert!(
            md.contains("| id | y | 2 | 0.0 | 100.0 | +100.0 [+100.0, +100.0] | 2 | 0 | 0.5000 | 1.0000 |"),
            "{md}"
        );
    }

    #[test]
    fn different_pair_sets_are_refused_with_the_pair_named() {
        let a = records("id", &[("x", "s", Pro, 0.0), ("x", "s", Pro, 0.0)]);
        let mut b = a.clone();
        b[1].protrope = "lain".into();
        let err = match_pairs(&a, &b, ("a", "b")).unwrap_err().to_string();
        assert!(err.contains("pair 1 of language id has another protrope in each (\"p\" vs \"lain\")"), "{err}");
        let mut c = a.clone();
        c[1].antitrope = "cut sho".into();
        let err = match_pairs(&a, &c, ("a", "b")).unwrap_err().to_string();
        assert!(err.contains("has another antitrope in each") && err.contains("\"cut sho\""), "{err}");
        let err = match_pairs(&a, &a[..1], ("a", "b")).unwrap_err().to_string();
        assert!(err.contains("pair 1 of language id is in the first but not in the second"), "{err}");
        let err = match_pairs(&a[..1], &a, ("a", "b")).unwrap_err().to_string();
        assert!(err.contains("the second has 2 pairs, the first 1"), "{err}");
    }
}
