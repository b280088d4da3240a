//! `indolm report bias-curve`: stereotype win rate against training step, one panel per
//! domain (and one for overall), one line per language with its 95% Wilson interval as a band,
//! from every bias evaluation a run keeps (checkpoints and evaluations between them). Other
//! models' evaluations (`--reference`: public models, other runs' final checkpoints) are drawn
//! beside them as flat bands over the run's steps, a line per model and language.
use super::bias_table::{evaluation_of, TableModel};
use super::chart::{panels_from_points, write_figure, Figure, Point};
use indolm_eval::bias::records::read_checked;
use indolm_eval::bias::records::run_evaluations_under;
use indolm_eval::bias::BiasReport;
use indolm_eval::BiasMetric;
use indolm_torch::error::{Error, Result};

use std::path::Path;

/// (step, report) for every bias evaluation of the run under `metric` (`None`: each folder's
/// main one), by step; evaluations of different metrics in one curve are refused.
pub(crate) fn collect_reports(run: &Path, metric: Option<BiasMetric>) -> Result<Vec<(u64, BiasReport)>> {
    let reports: Vec<(u64, BiasReport)> =
        run_evaluations_under(run, metric)?.into_iter().map(|e| Ok((e.step, e.report()?))).collect::<Result<_>>()?;
    let (first_step, first) = (reports[0].0, reports[0].1.metric);
    if let Some((step, other)) = reports.iter().find(|(_, r)| r.metric != first) {
        return Err(Error::data(
            "report bias-curve",
            format!(
                "the evaluation at step {first_step} was scored with metric {first}, the one at step {step} with {}: one curve needs one metric; redo the odd ones with `indolm eval bias --run --metric`",
                other.metric
            ),
        ));
    }
    Ok(reports)
}

/// The figure of a run's reports: a panel per domain, overall last; a line per language (and
/// `all` for the average over languages in the overall panel).
pub fn curve_figure(run_name: &str, reports: &[(u64, BiasReport)]) -> Figure {
    curve_figure_with_references(run_name, reports, &[])
}

/// [`curve_figure`] with each reference model's win rates as flat lines with their bands over
/// the run's steps, labelled `<model> <language>`, in the panels of the run's languages.
pub(crate) fn curve_figure_with_references(
    run_name: &str,
    reports: &[(u64, BiasReport)],
    references: &[(String, BiasReport)],
) -> Figure {
    let mut items = Vec::new();
    for (step, report) in reports {
        for lang in &report.languages {
            for c in lang.domains.iter().chain(std::iter::once(&lang.overall)) {
                let i = c.tally.interval();
                items.push((c.name.clone(), lang.language.clone(), (*step, c.win_rate, Some((i.low, i.high)))));
            }
        }
        if let Some(all) = &report.all_languages {
            let i = all.interval;
            items.push(("overall".to_string(), "all".to_string(), (*step, all.win_rate, Some((i.low, i.high)))));
        }
    }
    // Languages in the pair set's order, the average last.
    let mut legend: Vec<String> = Vec::new();
    for (_, report) in reports {
        for l in &report.languages {
            if !legend.contains(&l.language) {
                legend.push(l.language.clone());
            }
        }
    }
    if reports.iter().any(|(_, r)| r.all_languages.is_some()) {
        legend.push("all".into());
    }
    let steps = (reports.iter().map(|r| r.0).min(), reports.iter().map(|r| r.0).max());
    if let (Some(first), Some(last)) = steps {
        let run_languages = legend.clone();
        for (name, report) in references {
            for lang in report.languages.iter().filter(|l| run_languages.contains(&l.language)) {
                let label = format!("{name} {}", lang.language);
                for c in lang.domains.iter().chain(std::iter::once(&lang.overall)) {
                    let i = c.tally.interval();
                    let flat = |step: u64| -> Point { (step, c.win_rate, Some((i.low, i.high))) };
                    items.push((c.name.clone(), label.clone(), flat(first)));
                    items.push((c.name.clone(), label.clone(), flat(last)));
                }
                legend.push(label);
            }
        }
    }
    let panels = panels_from_points(items);
    Figure {
        title: format!(
            "Stereotype win rate over training (95% interval bands; 50 = no preference; metric {}): {run_name}",
            reports.first().map_or("pppl".to_string(), |(_, r)| r.metric.to_string())
        ),
        panels,
        y_label: "win rate %".into(),
        y_range: (0.0, 100.0),
        reference: Some(50.0),
        legend,
    }
}

/// Writes the curves of `run` to `out` (`.svg` or `.png`), with `references` beside them;
/// returns the evaluations plotted.
pub fn write_bias_curve(
    run: &Path,
    out: &Path,
    metric: Option<BiasMetric>,
    references: &[TableModel],
) -> Result<usize> {
    let reports = collect_reports(run, metric)?;
    let name = run.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut loaded = Vec::new();
    for r in references {
        let (report, _) = read_checked(&evaluation_of(&r.path, metric)?)?;
        loaded.push((r.name.clone(), report));
    }
    write_figure(&curve_figure_with_references(&name, &reports, &loaded), out, "--out")?;
    Ok(reports.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_eval::bias::test_support::records;
    use indolm_eval::bias::{aggregate, Bootstrap, PairRecord, Preference};
    use indolm_eval::BiasMetric;

    fn report(step: u64, languages: &[(&str, &[&str], &[bool])]) -> (u64, BiasReport) {
        let mut all: Vec<PairRecord> = Vec::new();
        for (code, domains, wins) in languages {
            let rows: Vec<(&str, &str, Preference, f64)> = domains
                .iter()
                .zip(wins.iter())
                .map(|(d, &w)| (*d, "s", if w { Preference::Pro } else { Preference::Anti }, 0.0))
                .collect();
            all.extend(records(code, &rows));
        }
        (step, aggregate(BiasMetric::Pppl, Some(step), &all, Bootstrap::standard()))
    }

    #[test]
    fn panels_in_order_of_first_appearance_with_overall_last_and_wilson_bands() {
        let reports = [
            report(100, &[("id", &["gender", "religion"], &[true, false]), ("jv", &["religion"], &[true])]),
            report(200, &[("id", &["gender", "religion"], &[true, true]), ("jv", &["age"], &[false])]),
        ];
        let figure = curve_figure("r", &reports);
        let titles: Vec<&str> = figure.panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, vec!["gender", "religion", "age", "overall"]);
        assert_eq!(figure.legend, vec!["id", "jv"]);
        let line = |panel: usize, label: &str| -> Vec<(u64, f64)> {
            figure.panels[panel]
                .lines
                .iter()
                .find(|l| l.label == label)
                .unwrap()
                .points
                .iter()
                .map(|p| (p.0, p.1))
                .collect()
        };
        assert_eq!(line(1, "id"), vec![(100, 0.0), (200, 100.0)]);
        assert_eq!(line(1, "jv"), vec![(100, 100.0)]);
        assert_eq!(line(2, "jv"), vec![(200, 0.0)]);
        assert!(figure.panels[2].lines.iter().all(|l| l.label != "id"));
        assert_eq!(line(3, "id"), vec![(100, 50.0), (200, 100.0)]);
        let band = figure.panels[3].lines[0].points[0].2.unwrap();
        let w = indolm_metrics::stats::wilson(1, 2).scaled(100.0);
        assert_eq!(band, (w.low, w.high));
    }

    #[test]
    fn reference_models_are_flat_bands_over_the_run_s_steps_in_its_languages() {
        let reports = [
            report(100, &[("id", &["gender", "religion"], &[true, false])]),
            report(300, &[("id", &["gender", "religion"], &[true, true])]),
        ];
        // A public model scored on id and su: su is not the run's, so it is left out.
        let public = report(0, &[("id", &["gender", "religion"], &[false, true]), ("su", &["gender"], &[true])]).1;
        let figure = curve_figure_with_references("r", &reports, &[("xlmr".to_string(), public)]);
        assert_eq!(figure.legend, vec!["id", "xlmr id"]);
        let gender = &figure.panels[0];
        let flat = gender.lines.iter().find(|l| l.label == "xlmr id").unwrap();
        let w = indolm_metrics::stats::wilson(0, 1).scaled(100.0);
        assert_eq!(flat.points, vec![(100, 0.0, Some((w.low, w.high))), (300, 0.0, Some((w.low, w.high)))]);
        let overall = figure.panels.iter().find(|p| p.title == "overall").unwrap();
        let flat = overall.lines.iter().find(|l| l.label == "xlmr id").unwrap();
        assert_eq!((flat.points[0].1, flat.points[1].1), (50.0, 50.0));
    }
}
