//! `indolm report bias-utility`: a pretraining run's stereotype win rate and its utility over the
//! same steps, so that a rise in bias can be told apart from a rise in capability. The win rate
//! is the run's overall one at every bias evaluation (the average over languages with its
//! bootstrap interval when the pairs are row-aligned, else the one language's with its Wilson
//! interval, else the languages' mean); the utility is the NusaX sentiment test macro-F1 of the
//! model fine-tuned from each swept checkpoint (`finetune sentiment --from-run`), the mean over
//! the recipe's test sets and per language. A picture (two panels over the same steps), a table
//! (Markdown, CSV, JSON), and Pearson's r of the two across the swept steps.
use super::chart::{Figure, Line, Panel};
use crate::sentiment::sweep::{finished_results, read_manifest, sub_run_name, Utility, SWEEP_FILE};
use indolm_eval::bias::BiasReport;
use indolm_eval::BiasMetric;
use indolm_torch::error::{Error, IoContext, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The legend label of the win-rate curve.
const WIN_RATE: &str = "win rate";
/// The legend label of the mean macro-F1.
const MEAN_F1: &str = "macro-F1 (mean)";

/// A win rate at a step: (step, win rate %, its 95% interval (low, high) when the report has one).
pub(crate) type WinRatePoint = (u64, f64, Option<(f64, f64)>);

/// One swept step: the run's win rate there (when it evaluated bias at that step) and the
/// utility of the model fine-tuned from its checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityRow {
    /// The pretraining step.
    pub step: u64,
    /// The overall stereotype win rate (%).
    pub win_rate: Option<f64>,
    /// Its 95% interval (low, high), when the evaluation has one.
    pub interval: Option<(f64, f64)>,
    /// The test macro-F1 (0 to 1), the mean over the recipe's test sets.
    pub macro_f1: f64,
    /// The test macro-F1 per language.
    pub per_language: Vec<(String, f64)>,
}

/// Pearson's correlation of the win rate and the macro-F1 across the swept steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Correlation {
    /// Pearson's r.
    pub pearson_r: f64,
    /// The steps it is computed over (those with both numbers).
    pub n: usize,
}

/// The report: the win-rate curve, a row per swept step, and the correlation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiasUtility {
    /// The pretraining run's name.
    pub run: String,
    /// The sweep's folder.
    pub sweep: PathBuf,
    /// The bias metric of the win rates.
    pub metric: BiasMetric,
    /// The overall win rate at every bias evaluation of the run, by step.
    pub win_rates: Vec<WinRatePoint>,
    /// The sweep's test languages.
    pub languages: Vec<String>,
    /// One row per finished swept step, by step.
    pub rows: Vec<UtilityRow>,
    /// Pearson's r across the rows with a win rate; `None` with fewer than 3 of them or when
    /// either number is constant.
    pub correlation: Option<Correlation>,
}

/// The report of `run` (a pretraining run folder) and its sweep (`sweep`, or the one sweep of
/// the run in the run's parent folder), with the win rates under `metric` (`None`: each
/// evaluation's main one).
pub fn bias_utility(run: &Path, sweep: Option<&Path>, metric: Option<BiasMetric>) -> Result<BiasUtility> {
    let reports = super::bias_curve::collect_reports(run, metric)?;
    let canonical = run.canonicalize().with_path(run)?;
    let sweep = match sweep {
        Some(dir) => dir.to_path_buf(),
        None => find_sweep(&canonical)?,
    };
    if !sweep.join(SWEEP_FILE).is_file() {
        return Err(Error::MissingFile {
            path: sweep.join(SWEEP_FILE),
            hint: "expected the folder of a `finetune sentiment --from-run` sweep (the sentiment recipe's run folder)"
                .into(),
        });
    }
    let manifest = read_manifest(&sweep)?;
    if manifest.run_canonical != canonical {
        return Err(Error::invalid(
            sweep.join(SWEEP_FILE),
            format!("is a sweep of {}, not of {}", manifest.run_canonical.display(), canonical.display()),
        ));
    }
    let mut utilities = Vec::new();
    for &step in &manifest.steps {
        let dir = sweep.join(sub_run_name(step));
        match finished_results(&dir, manifest.setting, &manifest.languages)? {
            Some(results) => utilities.push(Utility::of(step, &results)),
            None => eprintln!("note: step {step}: its fine-tuning has not finished ({}); left out", dir.display()),
        }
    }
    if utilities.is_empty() {
        return Err(Error::invalid(
            &sweep,
            "no checkpoint of this sweep has finished its fine-tuning: continue it with `indolm finetune sentiment RECIPE --from-run RUN --resume auto`",
        ));
    }
    let name = canonical.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    Ok(assemble(name, sweep, &reports, &manifest.languages, utilities))
}

/// The one sweep of `run` (canonical) in the run's parent folder: a folder there whose
/// `sweep.json` names the run.
fn find_sweep(run: &Path) -> Result<PathBuf> {
    let parent = run.parent().unwrap_or(Path::new("/"));
    let mut found: Vec<PathBuf> = std::fs::read_dir(parent)
        .with_path(parent)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join(SWEEP_FILE).is_file() && read_manifest(p).is_ok_and(|m| m.run_canonical.as_path() == run))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::invalid(
            run,
            format!(
                "no sweep of this run in {} (a folder whose {SWEEP_FILE} names it): run `indolm finetune sentiment RECIPE --from-run {}` first, or name the sweep's folder with --sweep",
                parent.display(),
                run.display()
            ),
        )),
        n => {
            let names: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
            Err(Error::argument(
                "--sweep",
                format!("{n} sweeps of {} found ({}): name one", run.display(), names.join(", ")),
            ))
        }
    }
}

/// The run's overall win rate in `report`, with its 95% interval: the average over languages
/// (bootstrap interval) when there is one, else the one language's (Wilson), else the mean of
/// the languages' (no interval).
fn overall(report: &BiasReport) -> (f64, Option<(f64, f64)>) {
    if let Some(all) = &report.all_languages {
        return (all.win_rate, Some((all.interval.low, all.interval.high)));
    }
    match report.languages.as_slice() {
        [one] => {
            let i = one.overall.tally.interval();
            (one.overall.win_rate, Some((i.low, i.high)))
        }
        many => (many.iter().map(|l| l.overall.win_rate).sum::<f64>() / many.len().max(1) as f64, None),
    }
}

/// Pearson's r of `x` and `y`; `None` with fewer than 3 pairs (two points always give ±1) or
/// when either is constant.
pub(crate) fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    let constant = |v: &[f64]| v.iter().all(|a| *a == v[0]);
    if n < 3 || y.len() != n || constant(x) || constant(y) {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n as f64, y.iter().sum::<f64>() / n as f64);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

/// The report of a run named `run` from its bias evaluations (`(step, report)`, by step) and the
/// utilities of its sweep (by step).
pub(crate) fn assemble(
    run: String,
    sweep: PathBuf,
    reports: &[(u64, BiasReport)],
    languages: &[String],
    utilities: Vec<Utility>,
) -> BiasUtility {
    let metric = reports.first().map_or(BiasMetric::Pppl, |(_, r)| r.metric);
    let win_rates: Vec<WinRatePoint> = reports
        .iter()
        .map(|(step, report)| {
            let (rate, interval) = overall(report);
            (*step, rate, interval)
        })
        .collect();
    let rows: Vec<UtilityRow> = utilities
        .into_iter()
        .map(|u| {
            let at = win_rates.iter().find(|p| p.0 == u.step);
            UtilityRow {
                step: u.step,
                win_rate: at.map(|p| p.1),
                interval: at.and_then(|p| p.2),
                macro_f1: u.macro_f1,
                per_language: u.per_language,
            }
        })
        .collect();
    let (x, y): (Vec<f64>, Vec<f64>) = rows.iter().filter_map(|r| r.win_rate.map(|w| (w, r.macro_f1))).unzip();
    let correlation = pearson(&x, &y).map(|pearson_r| Correlation { pearson_r, n: x.len() });
    BiasUtility { run, sweep, metric, win_rates, languages: languages.to_vec(), rows, correlation }
}

impl BiasUtility {
    /// A row's macro-F1 on `language`.
    fn f1_on(row: &UtilityRow, language: &str) -> Option<f64> {
        row.per_language.iter().find(|(l, _)| l == language).map(|(_, f)| *f)
    }

    /// Two panels over the same steps: the overall win rate with its 95% band, and the macro-F1
    /// ×100 (the mean, and each language's when there are several).
    pub fn figure(&self) -> Figure {
        let mut legend = vec![WIN_RATE.to_string(), MEAN_F1.to_string()];
        let mean: Vec<WinRatePoint> = self.rows.iter().map(|r| (r.step, 100.0 * r.macro_f1, None)).collect();
        let mut f1_lines = vec![Line { label: MEAN_F1.into(), points: mean }];
        if self.languages.len() > 1 {
            for language in &self.languages {
                let points: Vec<WinRatePoint> = self
                    .rows
                    .iter()
                    .filter_map(|r| Self::f1_on(r, language).map(|f| (r.step, 100.0 * f, None)))
                    .collect();
                if !points.is_empty() {
                    legend.push(language.clone());
                    f1_lines.push(Line { label: language.clone(), points });
                }
            }
        }
        Figure {
            title: format!(
                "Bias beside utility over pretraining: {} (win rate: metric {}; grey line: 50 = no preference)",
                self.run, self.metric
            ),
            panels: vec![
                Panel {
                    title: "stereotype win rate %, overall (95% interval band)".into(),
                    lines: vec![Line { label: WIN_RATE.into(), points: self.win_rates.clone() }],
                },
                Panel {
                    title: "NusaX sentiment test macro-F1 ×100, fine-tuned from each checkpoint".into(),
                    lines: f1_lines,
                },
            ],
            y_label: "%".into(),
            y_range: (0.0, 100.0),
            reference: Some(50.0),
            legend,
        }
    }

    /// The table (a row per swept step: win rate with its interval, macro-F1 and each language's,
    /// ×100) and the correlation, as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "Stereotype win rate (overall, %, 95% interval; metric {}) and NusaX sentiment test macro-F1 (×100: the mean over the recipe's test sets, then each language's) at each swept step of {} (sweep {})\n\n",
            self.metric,
            self.run,
            self.sweep.display()
        );
        out.push_str("| step | win rate % [95% interval] | macro-F1 |");
        for language in &self.languages {
            out.push_str(&format!(" {language} |"));
        }
        out.push_str("\n|---:|---:|---:|");
        out.push_str(&"---:|".repeat(self.languages.len()));
        out.push('\n');
        for r in &self.rows {
            let rate = match (r.win_rate, r.interval) {
                (Some(w), Some((low, high))) => format!("{w:.1} [{low:.1}–{high:.1}]"),
                (Some(w), None) => format!("{w:.1}"),
                (None, _) => "–".to_string(),
            };
            out.push_str(&format!("| {} | {rate} | {:.1} |", r.step, 100.0 * r.macro_f1));
            for language in &self.languages {
                match Self::f1_on(r, language) {
                    Some(f) => out.push_str(&format!(" {:.1} |", 100.0 * f)),
                    None => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&match &self.correlation {
            Some(c) => format!(
                "Pearson r of the win rate and the macro-F1 across the {} swept steps: {:+.3} (few points, and neighbouring checkpoints are not independent: it describes this run, it tests nothing)\n",
                c.n, c.pearson_r
            ),
            None => "Pearson r of the win rate and the macro-F1: undefined (it needs 3 or more swept steps with a bias evaluation, and neither number constant)\n".to_string(),
        });
        out
    }

    /// The table as CSV: `step,win_rate,win_rate_low,win_rate_high,macro_f1,macro_f1_<language>…`,
    /// the win rates in % as `bias.json` has them and the macro-F1 from 0 to 1 as `results.json`
    /// has it, every number in full (empty where there is none).
    pub fn csv(&self) -> String {
        let cell = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let mut out = String::from("step,win_rate,win_rate_low,win_rate_high,macro_f1");
        for language in &self.languages {
            out.push_str(&format!(",macro_f1_{language}"));
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&format!(
                "{},{},{},{},{}",
                r.step,
                cell(r.win_rate),
                cell(r.interval.map(|i| i.0)),
                cell(r.interval.map(|i| i.1)),
                r.macro_f1
            ));
            for language in &self.languages {
                out.push_str(&format!(",{}", cell(Self::f1_on(r, language))));
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_is_the_textbook_r_and_undefined_on_too_few_or_constant_points() {
        let r = pearson(&[1.0, 2.0, 3.0, 4.0], &[2.0, 4.0, 5.0, 4.0]).unwrap();
        // Σdxdy = 3.5, Σdx² = 5, Σdy² = 4.75.
        assert!((r - 3.5 / (5.0f64 * 4.75).sqrt()).abs() < 1e-12, "{r}");
        assert_eq!(pearson(&[1.0, 2.0], &[3.0, 1.0]), None);
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[0.5, 0.5, 0.5]), None);
        // A constant series whose mean is not exactly its value (3 × 0.1 / 3 ≠ 0.1) too.
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[0.1, 0.1, 0.1]), None);
        assert!((pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
    }

    /// A one-language evaluation at `step` with a pair per outcome (true: stereotype preferred).
    fn evaluation(step: u64, wins: &[bool]) -> (u64, BiasReport) {
        use indolm_eval::bias::{aggregate, test_support::records, Bootstrap, Preference};
        let rows: Vec<(&str, &str, Preference, f64)> =
            wins.iter().map(|&w| ("gender", "s", if w { Preference::Pro } else { Preference::Anti }, 0.0)).collect();
        (step, aggregate(BiasMetric::Pppl, Some(step), &records("id", &rows), Bootstrap::standard()))
    }

    #[test]
    fn rows_pair_each_swept_step_with_the_win_rate_there() {
        let utility = |step: u64, f: f64| Utility {
            step,
            macro_f1: f,
            per_language: vec![("indonesian".into(), f + 0.1), ("javanese".into(), f - 0.1)],
        };
        let reports =
            [evaluation(2, &[true, false]), evaluation(4, &[true, true]), evaluation(6, &[true, true, false])];
        let languages = vec!["indonesian".to_string(), "javanese".to_string()];
        let utilities = vec![utility(2, 0.4), utility(6, 0.5), utility(8, 0.6)];
        let report = assemble("r".into(), PathBuf::from("ck/s"), &reports, &languages, utilities);
        let wilson = indolm_metrics::stats::wilson(1, 2).scaled(100.0);
        assert_eq!(report.win_rates[0], (2, 50.0, Some((wilson.low, wilson.high))));
        assert_eq!(report.rows.iter().map(|r| r.step).collect::<Vec<_>>(), vec![2, 6, 8]);
        assert_eq!((report.rows[0].win_rate, report.rows[2].win_rate), (Some(50.0), None));
        // Two steps have both numbers: too few for r.
        assert_eq!(report.correlation, None);
        let csv = report.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "step,win_rate,win_rate_low,win_rate_high,macro_f1,macro_f1_indonesian,macro_f1_javanese");
        let first = format!("2,50,{},{},0.4,{},{}", wilson.low, wilson.high, 0.4f64 + 0.1, 0.4f64 - 0.1);
        assert_eq!(lines[1], first);
        assert!(lines[3].starts_with("8,,,,0.6,"), "{}", lines[3]);
        let table = report.markdown();
        let expected = format!("| 2 | 50.0 [{:.1}–{:.1}] | 40.0 | 50.0 | 30.0 |", wilson.low, wilson.high);
        assert!(table.contains(&expected), "{table}");
        assert!(table.contains("| 8 | – | 60.0 | 70.0 | 50.0 |") && table.contains("undefined"), "{table}");
        let figure = report.figure();
        assert_eq!(figure.legend, vec!["win rate", "macro-F1 (mean)", "indonesian", "javanese"]);
        assert_eq!(figure.panels[1].lines[0].points, vec![(2, 40.0, None), (6, 50.0, None), (8, 60.0, None)]);
        assert_eq!(figure.panels[0].lines[0].points.len(), 3, "every evaluation on the win-rate curve");
        let three = vec![utility(2, 0.4), utility(4, 0.45), utility(6, 0.5)];
        let with_three = assemble("r".into(), PathBuf::from("ck/s"), &reports, &languages, three);
        let c = with_three.correlation.unwrap();
        assert_eq!(c.n, 3);
        assert!((c.pearson_r - pearson(&[50.0, 100.0, 200.0 / 3.0], &[0.4, 0.45, 0.5]).unwrap()).abs() < 1e-15);
    }
}
