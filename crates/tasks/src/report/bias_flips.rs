//! `indolm report bias-flips --run R`: when pretraining fixes a preference. From the per-pair
//! records of every evaluation of a run: how many pairs change the sentence they prefer
//! (protrope, antitrope or tie) between consecutive evaluations, per domain; from which
//! evaluation on each pair keeps the preference it has at the last one ("settled"); and a
//! picture of the share of pairs already settled against step, per language and domain. By
//! construction every pair is settled at the last evaluation.
use super::chart::{Figure, Line, Panel};
use indolm_eval::bias::records::run_evaluations_under;
use indolm_eval::bias::{metric_caption, PairRecord, Preference};
use indolm_eval::BiasMetric;
use indolm_torch::error::{Error, Result};
use std::path::Path;

/// One pair's preference at every evaluation.
struct PairHistory {
    language: String,
    domain: String,
    preferences: Vec<Preference>,
}

impl PairHistory {
    /// The first evaluation (index) from which the preference never changes again.
    fn settled_from(&self) -> usize {
        let last = *self.preferences.last().expect("at least two evaluations");
        self.preferences.iter().rposition(|p| *p != last).map_or(0, |i| i + 1)
    }
}

/// The analysis of one run.
pub struct Flips {
    /// The steps evaluated (with records), in order.
    pub steps: Vec<u64>,
    histories: Vec<PairHistory>,
    /// Domains in order of first appearance.
    pub domains: Vec<String>,
    /// Languages in order of first appearance.
    pub languages: Vec<String>,
    /// The metric every evaluation was scored with.
    pub metric: BiasMetric,
}

impl Flips {
    /// Lines up the records of successive evaluations pair by pair (by language and pair row).
    pub fn new(evaluations: Vec<(u64, Vec<PairRecord>)>, metric: BiasMetric) -> Result<Self> {
        if evaluations.len() < 2 {
            return Err(Error::data(
                "bias-flips",
                format!(
                    "needs at least two evaluations with per-pair records (bias_pairs.csv); this run has {}",
                    evaluations.len()
                ),
            ));
        }
        let (first_step, first) = &evaluations[0];
        let mut histories: Vec<PairHistory> = first
            .iter()
            .map(|r| PairHistory {
                language: r.language.clone(),
                domain: r.domain.clone(),
                preferences: vec![r.preferred],
            })
            .collect();
        let index: std::collections::HashMap<(&str, usize), usize> =
            first.iter().enumerate().map(|(i, r)| ((r.language.as_str(), r.pair), i)).collect();
        for (step, records) in &evaluations[1..] {
            if records.len() != first.len() {
                return Err(Error::data(
                    "bias-flips",
                    format!("step {step} scored {} pairs but step {first_step} scored {}: evaluations of one run must use the same pairs", records.len(), first.len()),
                ));
            }
            for r in records {
                let i = index.get(&(r.language.as_str(), r.pair)).ok_or_else(|| {
                    Error::data(
                        "bias-flips",
                        format!("step {step} has pair {} of {} that step {first_step} lacks", r.pair, r.language),
                    )
                })?;
                let f = &first[*i];
                for (which, here, there) in
                    [("protrope", &r.protrope, &f.protrope), ("antitrope", &r.antitrope, &f.antitrope)]
                {
                    if here != there {
                        return Err(Error::data(
                            "bias-flips",
                            format!(
                                "pair {} of {} has another {which} at step {step} ({here:?}) than at step {first_step} ({there:?}): evaluations of one run must use the same pairs",
                                r.pair, r.language
                            ),
                        ));
                    }
                }
                histories[*i].preferences.push(r.preferred);
            }
        }
        let mut domains: Vec<String> = Vec::new();
        let mut languages: Vec<String> = Vec::new();
        for h in &histories {
            if !domains.contains(&h.domain) {
                domains.push(h.domain.clone());
            }
            if !languages.contains(&h.language) {
                languages.push(h.language.clone());
            }
        }
        Ok(Flips { steps: evaluations.iter().map(|(s, _)| *s).collect(), histories, domains, languages, metric })
    }

    /// Pairs of `domain` (all when `None`) whose preference changed between evaluation `k − 1`
    /// and `k`, and the pairs counted.
    pub(crate) fn changes(&self, k: usize, domain: Option<&str>) -> (usize, usize) {
        let pairs: Vec<&PairHistory> = self.histories.iter().filter(|h| domain.is_none_or(|d| h.domain == d)).collect();
        (pairs.iter().filter(|h| h.preferences[k] != h.preferences[k - 1]).count(), pairs.len())
    }

    /// The share (%) of the selected pairs settled at each evaluation.
    pub(crate) fn settled_share(&self, language: Option<&str>, domain: Option<&str>) -> Vec<f64> {
        let pairs: Vec<&PairHistory> = self
            .histories
            .iter()
            .filter(|h| language.is_none_or(|l| h.language == l) && domain.is_none_or(|d| h.domain == d))
            .collect();
        (0..self.steps.len())
            .map(|k| 100.0 * pairs.iter().filter(|h| h.settled_from() <= k).count() as f64 / pairs.len().max(1) as f64)
            .collect()
    }

    /// The first step at which at least `share` % of the selected pairs are settled.
    fn step_settling(&self, language: Option<&str>, domain: Option<&str>, share: f64) -> u64 {
        let shares = self.settled_share(language, domain);
        let k = shares.iter().position(|s| *s >= share).unwrap_or(self.steps.len() - 1);
        self.steps[k]
    }

    /// The tables: changes between consecutive evaluations per domain, then when each language
    /// × domain settles.
    pub fn markdown(&self, run_name: &str) -> String {
        let mut out = format!(
            "# When the preferences of {run_name} settle\n\n\
             {} evaluations with per-pair records, steps {}…{}; {} pairs ({} languages); {}.\n\n\
             ## Pairs that changed preference since the previous evaluation (count, % of the domain's pairs; all languages)\n\n| step |",
            self.steps.len(),
            self.steps[0],
            self.steps.last().unwrap(),
            self.histories.len(),
            self.languages.len(),
            metric_caption(self.metric)
        );
        for d in &self.domains {
            out.push_str(&format!(" {d} |"));
        }
        out.push_str(" all |\n|---|");
        out.push_str(&"---:|".repeat(self.domains.len() + 1));
        out.push('\n');
        for k in 1..self.steps.len() {
            out.push_str(&format!("| {} → {} |", self.steps[k - 1], self.steps[k]));
            for d in self.domains.iter().map(|d| Some(d.as_str())).chain(std::iter::once(None)) {
                let (changed, n) = self.changes(k, d);
                out.push_str(&format!(" {changed} ({:.1}) |", 100.0 * changed as f64 / n.max(1) as f64));
            }
            out.push('\n');
        }
        out.push_str(
            "\n## Settling: a pair is settled from the evaluation on which it keeps its final preference\n\n\
             | language | domain | pairs | settled at the first evaluation (%) | 50% settled by step | 90% settled by step |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for l in &self.languages {
            for d in self.domains.iter().map(|d| Some(d.as_str())).chain(std::iter::once(None)) {
                let n = self.histories.iter().filter(|h| h.language == *l && d.is_none_or(|d| h.domain == d)).count();
                if n == 0 {
                    continue;
                }
                out.push_str(&format!(
                    "| {l} | {} | {n} | {:.1} | {} | {} |\n",
                    d.unwrap_or("overall"),
                    self.settled_share(Some(l), d)[0],
                    self.step_settling(Some(l), d, 50.0),
                    self.step_settling(Some(l), d, 90.0)
                ));
            }
        }
        out
    }

    /// The share settled against step: a panel per language, a line per domain and overall.
    pub fn figure(&self, run_name: &str) -> Figure {
        let panels = self
            .languages
            .iter()
            .map(|l| Panel {
                title: l.clone(),
                lines: self
                    .domains
                    .iter()
                    .map(|d| Some(d.as_str()))
                    .chain(std::iter::once(None))
                    .filter(|d| self.histories.iter().any(|h| h.language == *l && d.is_none_or(|d| h.domain == d)))
                    .map(|d| Line {
                        label: d.unwrap_or("overall").to_string(),
                        points: self
                            .steps
                            .iter()
                            .zip(self.settled_share(Some(l), d))
                            .map(|(s, v)| (*s, v, None))
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        let mut legend = self.domains.clone();
        legend.push("overall".into());
        Figure {
            title: format!("Share of pairs that keep their final preference from each step on: {run_name}"),
            panels,
            y_label: "settled %".into(),
            y_range: (0.0, 100.0),
            reference: None,
            legend,
        }
    }
}

/// Reads every evaluation of `run` that has per-pair records (each report with its records,
/// checked as one); evaluations of different metrics are refused.
pub fn load(run: &Path, under: Option<BiasMetric>) -> Result<Flips> {
    let mut evaluations = Vec::new();
    let mut metric: Option<(u64, BiasMetric)> = None;
    for e in run_evaluations_under(run, under)? {
        if e.has_records() {
            let (report, records) = e.read()?;
            match metric {
                None => metric = Some((e.step, report.metric)),
                Some((step, m)) if m != report.metric => {
                    return Err(Error::data(
                        "report bias-flips",
                        format!(
                            "the evaluation at step {step} was scored with metric {m}, the one at step {} with {}: preferences of different metrics are not comparable",
                            e.step, report.metric
                        ),
                    ))
                }
                Some(_) => {}
            }
            evaluations.push((e.step, records));
        }
    }
    Flips::new(evaluations, metric.map_or(BiasMetric::Pppl, |(_, m)| m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_eval::bias::test_support::records;
    use indolm_eval::bias::Preference::{Anti, Pro, Tie};

    #[test]
    fn changes_and_settling_by_hand() {
        // Pair 0: pro, anti, pro, pro → settled from evaluation 2.
        // Pair 1: anti throughout → settled from 0. Pair 2 (domain y): tie, pro, anti, anti → from 2.
        let at =
            |p: [Preference; 3]| records("id", &[("x", "s", p[0], 0.0), ("x", "s", p[1], 0.0), ("y", "s", p[2], 0.0)]);
        let flips = Flips::new(
            vec![
                (10, at([Pro, Anti, Tie])),
                (20, at([Anti, Anti, Pro])),
                (30, at([Pro, Anti, Anti])),
                (40, at([Pro, Anti, Anti])),
            ],
            BiasMetric::Pppl,
        )
        .unwrap();
        assert_eq!(flips.changes(1, None), (2, 3));
        assert_eq!(flips.changes(2, Some("x")), (1, 2));
        assert_eq!(flips.changes(3, None), (0, 3));
        let third = 100.0 / 3.0;
        assert_eq!(flips.settled_share(None, None), vec![third, third, 100.0, 100.0]);
        assert_eq!(flips.settled_share(Some("id"), Some("x")), vec![50.0, 50.0, 100.0, 100.0]);
        assert_eq!(flips.step_settling(None, None, 50.0), 30);
        let md = flips.markdown("r");
        assert!(md.contains("| 10 → 20 | 1 (50.0) | 1 (100.0) | 2 (66.7) |"), "{md}");
        assert!(md.contains("| id | overall | 3 | 33.3 | 30 | 30 |"), "{md}");
        let figure = flips.figure("r");
        assert_eq!(figure.panels.len(), 1);
        assert_eq!(figure.legend, vec!["x", "y", "overall"]);
        assert!(Flips::new(vec![(10, at([Pro, Pro, Pro]))], BiasMetric::Pppl).is_err());
    }
}
