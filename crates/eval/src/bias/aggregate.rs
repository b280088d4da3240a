//! From per-pair records to a report: categories in order of first appearance, Wilson intervals
//! of the win rates, and the score gaps with seeded bootstrap intervals.
use super::report::{BiasReport, Bootstrap, Category, LanguageResult, PairRecord, Tally};
use crate::BiasMetric;
use indolm_metrics::stats::{bootstrap_group_means, Interval};

/// Category names in order of first appearance, and each item's index among them.
fn group_by<'a>(keys: impl Iterator<Item = String> + 'a) -> (Vec<String>, Vec<usize>) {
    let (mut names, mut index) = (Vec::<String>::new(), Vec::new());
    for key in keys {
        match names.iter().position(|n| *n == key) {
            Some(i) => index.push(i),
            None => {
                index.push(names.len());
                names.push(key);
            }
        }
    }
    (names, index)
}

/// One language's result from its records: tallies, Wilson intervals, mean gaps and their
/// bootstrap intervals (every category from the same resamples of the language's pairs).
fn language_result(language: &str, records: &[&PairRecord], bootstrap: Bootstrap) -> LanguageResult {
    let (domains, domain_of) = group_by(records.iter().map(|r| r.domain.clone()));
    let (subdomains, subdomain_of) = group_by(records.iter().map(|r| r.subdomain_name()));
    // Group 0 is overall, then the domains, then the subdomains.
    let first_subdomain = 1 + domains.len();
    let names: Vec<String> = std::iter::once("overall".to_string()).chain(domains).chain(subdomains).collect();
    let members: Vec<Vec<usize>> =
        (0..records.len()).map(|i| vec![0, 1 + domain_of[i], first_subdomain + subdomain_of[i]]).collect();
    let mut tallies = vec![Tally::default(); names.len()];
    let mut gap_sums = vec![0.0; names.len()];
    for (record, groups) in records.iter().zip(&members) {
        for &g in groups {
            tallies[g].add(record.preferred);
            gap_sums[g] += record.gap;
        }
    }
    let gaps: Vec<f64> = records.iter().map(|r| r.gap).collect();
    let intervals =
        bootstrap_group_means(&gaps, &members, names.len(), bootstrap.resamples, &mut bootstrap.rng(language));
    let mut categories: Vec<Category> = names
        .into_iter()
        .zip(tallies)
        .zip(gap_sums)
        .zip(intervals)
        .map(|(((name, tally), gap_sum), gap_interval)| {
            let gap = gap_sum / tally.pairs.max(1) as f64;
            Category {
                name,
                win_rate: tally.rate(),
                interval: tally.interval(),
                gap,
                gap_interval: gap_interval.unwrap_or(Interval { low: gap, high: gap }),
                tally,
            }
        })
        .collect();
    let subdomains = categories.split_off(first_subdomain);
    let domains = categories.split_off(1);
    LanguageResult {
        language: language.to_string(),
        overall: categories.remove(0),
        domains,
        subdomains,
        token_accuracy: token_accuracy(records),
    }
}

/// Rank-1 accuracy (%) over the scored tokens of both sentences of every record; `None` when a
/// record lacks the counts (written before they existed).
fn token_accuracy(records: &[&PairRecord]) -> Option<f64> {
    let (mut correct, mut tokens) = (0usize, 0usize);
    for r in records {
        correct += r.pro_correct? + r.anti_correct?;
        tokens += r.pro_tokens + r.anti_tokens;
    }
    Some(100.0 * correct as f64 / tokens.max(1) as f64)
}

/// The average over languages when they are row-aligned (the same pair indices): per pair row,
/// the mean win and mean gap over the languages; win rate and gap are the row means' means,
/// both intervals bootstrapped over rows.
fn all_languages(by_language: &[(String, Vec<&PairRecord>)], bootstrap: Bootstrap) -> Option<Category> {
    if by_language.len() < 2 {
        return None;
    }
    let rows: Vec<usize> = by_language[0].1.iter().map(|r| r.pair).collect();
    if by_language.iter().any(|(_, records)| records.iter().map(|r| r.pair).ne(rows.iter().copied())) {
        return None;
    }
    let k = by_language.len() as f64;
    let (mut wins, mut gaps) = (vec![0.0; rows.len()], vec![0.0; rows.len()]);
    let mut tally = Tally::default();
    for (_, records) in by_language {
        for (i, r) in records.iter().enumerate() {
            wins[i] += r.is_win() as u8 as f64 / k;
            gaps[i] += r.gap / k;
            tally.add(r.preferred);
        }
    }
    let members = vec![vec![0]; rows.len()];
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let interval = |values: &[f64]| {
        // The same resamples for both intervals: one seeded stream, restarted.
        let mut rng = bootstrap.rng("all");
        bootstrap_group_means(values, &members, 1, bootstrap.resamples, &mut rng)[0]
    };
    let (win_rate, gap) = (100.0 * mean(&wins), mean(&gaps));
    Some(Category {
        name: "all languages".into(),
        tally,
        win_rate,
        interval: interval(&wins).map_or(Interval { low: win_rate, high: win_rate }, |i| i.scaled(100.0)),
        gap,
        gap_interval: interval(&gaps).unwrap_or(Interval { low: gap, high: gap }),
    })
}

/// Win rates, intervals and gaps from per-pair records (languages in order of first
/// appearance). `bias_pairs.csv` aggregates through here to exactly its `bias.json`.
pub fn aggregate(metric: BiasMetric, step: Option<u64>, records: &[PairRecord], bootstrap: Bootstrap) -> BiasReport {
    let mut by_language: Vec<(String, Vec<&PairRecord>)> = Vec::new();
    for r in records {
        match by_language.iter_mut().find(|(l, _)| *l == r.language) {
            Some((_, v)) => v.push(r),
            None => by_language.push((r.language.clone(), vec![r])),
        }
    }
    let languages = by_language.iter().map(|(l, rs)| language_result(l, rs, bootstrap)).collect();
    BiasReport {
        metric,
        step,
        bootstrap,
        languages,
        all_languages: all_languages(&by_language, bootstrap),
        records_sha256: None,
        causal: None,
        warning: None,
    }
}
