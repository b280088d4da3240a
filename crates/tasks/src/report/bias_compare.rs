//! `indolm report bias-compare RUN...`: several runs (the six IndoBias compositions) side by
//! side at one step: win rates with 95% intervals per run × language and per run × domain,
//! pairwise exact McNemar tests between the runs per language (Holm-corrected over every
//! comparison), and a picture with every run's curve on one chart per language (or per domain
//! of one language) with interval bands.
use super::bias_diff::{format_p, match_pairs, same_folder};
use super::chart::{panels_from_points, write_figure, Figure};
use indolm_eval::bias::records::{run_evaluation, run_evaluations_under, StepChoice};
use indolm_eval::bias::{metric_caption, rate_with_interval, BiasReport, Category, PairRecord};
use indolm_metrics::stats::{holm, mcnemar_exact};
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};

/// One run's evaluation at the chosen step.
struct RunAtStep {
    name: String,
    step: u64,
    report: BiasReport,
    records: Option<Vec<PairRecord>>,
}

/// How the picture is split into panels.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanelBy {
    /// One chart per language (overall win rate), plus the average over languages.
    Language,
    /// One chart per domain of one language (`--language`).
    Domain,
}

/// Short unique names for the runs: their folder names, or their paths where names repeat.
fn run_names(runs: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> =
        runs.iter().map(|r| r.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()).collect();
    names
        .iter()
        .zip(runs)
        .map(|(n, r)| if names.iter().filter(|m| *m == n).count() > 1 { r.display().to_string() } else { n.clone() })
        .collect()
}

/// A category with its Wilson interval, recomputed from the counts when the report lacks it
/// (older bias.json files).
pub(super) fn with_interval(c: &Category) -> Category {
    let mut c = c.clone();
    if c.interval == Default::default() {
        c.interval = c.tally.interval();
    }
    c
}

/// A category's win rate for a table cell: rate, Wilson interval and pairs.
pub(super) fn cell(c: &Category) -> String {
    let c = with_interval(c);
    format!("{} ({})", rate_with_interval(&c), c.tally.pairs)
}

/// The languages of `reports`, in order of first appearance.
pub(super) fn languages_of<'a>(reports: impl IntoIterator<Item = &'a BiasReport>) -> Vec<String> {
    let mut languages: Vec<String> = Vec::new();
    for r in reports {
        for l in &r.languages {
            if !languages.contains(&l.language) {
                languages.push(l.language.clone());
            }
        }
    }
    languages
}

/// The domains `language` has in any of `reports`, in order of first appearance.
pub(super) fn domains_of<'a>(reports: impl IntoIterator<Item = &'a BiasReport>, language: &str) -> Vec<String> {
    let mut domains: Vec<String> = Vec::new();
    for r in reports {
        for d in r.languages.iter().filter(|x| x.language == language).flat_map(|x| &x.domains) {
            if !domains.contains(&d.name) {
                domains.push(d.name.clone());
            }
        }
    }
    domains
}

fn win_rate_tables(runs: &[RunAtStep]) -> String {
    let languages = languages_of(runs.iter().map(|r| &r.report));
    let with_all = runs.iter().any(|r| r.report.all_languages.is_some());
    let mut out = String::from("## Overall win rate per language (%, 95% interval, pairs)\n\n| run | step |");
    for l in &languages {
        out.push_str(&format!(" {l} |"));
    }
    if with_all {
        out.push_str(" all languages |");
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---:|".repeat(languages.len() + with_all as usize));
    out.push('\n');
    for r in runs {
        out.push_str(&format!("| {} | {} |", r.name, r.step));
        for l in &languages {
            match r.report.languages.iter().find(|x| x.language == *l) {
                Some(x) => out.push_str(&format!(" {} |", cell(&x.overall))),
                None => out.push_str(" – |"),
            }
        }
        if with_all {
            out.push_str(&format!(" {} |", r.report.all_languages.as_ref().map_or("–".to_string(), cell)));
        }
        out.push('\n');
    }
    for l in &languages {
        let domains = domains_of(runs.iter().map(|r| &r.report), l);
        out.push_str(&format!("\n## {l}: win rate per domain (%, 95% interval, pairs)\n\n| run |"));
        for d in &domains {
            out.push_str(&format!(" {d} |"));
        }
        out.push_str("\n|---|");
        out.push_str(&"---:|".repeat(domains.len()));
        out.push('\n');
        for r in runs {
            out.push_str(&format!("| {} |", r.name));
            let lang = r.report.languages.iter().find(|x| x.language == *l);
            for d in &domains {
                match lang.and_then(|x| x.domains.iter().find(|c| c.name == *d)) {
                    Some(c) => out.push_str(&format!(" {} |", cell(c))),
                    None => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
    }
    out
}

/// Every pair of runs, per language: the change in overall win rate and the exact McNemar
/// p-value on the pairs whose outcome differs, Holm-adjusted over all comparisons.
fn pairwise_tests(runs: &[RunAtStep]) -> Result<String> {
    struct Comparison {
        language: String,
        a: usize,
        b: usize,
        change: f64,
        discordant: (usize, usize),
        p: f64,
    }
    let mut comparisons = Vec::new();
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            let (Some(ra), Some(rb)) = (&runs[i].records, &runs[j].records) else { continue };
            let matched = match_pairs(ra, rb, (&runs[i].name, &runs[j].name))?;
            let mut languages: Vec<&str> = Vec::new();
            for (a, _) in &matched {
                if !languages.contains(&a.language.as_str()) {
                    languages.push(&a.language);
                }
            }
            for language in languages {
                let pairs: Vec<_> = matched.iter().filter(|(a, _)| a.language == language).collect();
                let b_only = pairs.iter().filter(|(a, b)| !a.is_win() && b.is_win()).count();
                let a_only = pairs.iter().filter(|(a, b)| a.is_win() && !b.is_win()).count();
                comparisons.push(Comparison {
                    language: language.to_string(),
                    a: i,
                    b: j,
                    change: 100.0 * (b_only as f64 - a_only as f64) / pairs.len() as f64,
                    discordant: (a_only, b_only),
                    p: mcnemar_exact(a_only, b_only),
                });
            }
        }
    }
    if comparisons.is_empty() {
        return Ok(String::new());
    }
    let adjusted = holm(&comparisons.iter().map(|c| c.p).collect::<Vec<_>>());
    let mut out = format!(
        "\n## Pairwise tests between runs (overall win rate per language)\n\n\
         Exact McNemar test on the pairs whose outcome differs between the two runs; Holm-adjusted over the {} comparisons.\n\n\
         | language | run A | run B | B − A (points) | wins only in A | wins only in B | McNemar p | Holm p |\n\
         |---|---|---|---:|---:|---:|---:|---:|\n",
        comparisons.len()
    );
    for (c, p_holm) in comparisons.iter().zip(adjusted) {
        out.push_str(&format!(
            "| {} | {} | {} | {:+.1} | {} | {} | {} | {}{} |\n",
            c.language,
            runs[c.a].name,
            runs[c.b].name,
            c.change,
            c.discordant.0,
            c.discordant.1,
            format_p(c.p),
            format_p(p_holm),
            if p_holm < 0.05 { " *" } else { "" }
        ));
    }
    out.push_str("\n`*`: significant at 0.05 after Holm's correction.\n");
    Ok(out)
}

/// Every run's curve: a panel per language (overall win rate) or per domain of `language`.
fn curves_figure(request: &CompareRequest, names: &[String]) -> Result<Figure> {
    let (by, language) = (request.by, request.language);
    let mut items = Vec::new();
    for (run, name) in request.runs.iter().zip(names) {
        for evaluation in run_evaluations_under(run, request.metric)? {
            let report = evaluation.report()?;
            let step = evaluation.step;
            let point = |c: &Category| {
                let i = c.tally.interval();
                (step, c.win_rate, Some((i.low, i.high)))
            };
            match by {
                PanelBy::Language => {
                    for l in &report.languages {
                        items.push((l.language.clone(), name.clone(), point(&l.overall)));
                    }
                    if let Some(all) = &report.all_languages {
                        let i = all.interval;
                        items.push((
                            "all languages".to_string(),
                            name.clone(),
                            (step, all.win_rate, Some((i.low, i.high))),
                        ));
                    }
                }
                PanelBy::Domain => {
                    let wanted =
                        language.unwrap_or_else(|| report.languages.first().map_or("", |l| l.language.as_str()));
                    for l in report.languages.iter().filter(|l| l.language == wanted) {
                        for c in l.domains.iter().chain(std::iter::once(&l.overall)) {
                            items.push((c.name.clone(), name.clone(), point(c)));
                        }
                    }
                }
            }
        }
    }
    let mut panels = panels_from_points(items);
    panels.sort_by_key(|p| p.title == "all languages");
    if panels.is_empty() {
        return Err(Error::argument(
            "--language",
            format!("no run has evaluations of language {:?}", language.unwrap_or("")),
        ));
    }
    let what = match by {
        PanelBy::Language => "overall, per language".to_string(),
        PanelBy::Domain => format!("per domain of {}", language.unwrap_or("the first language")),
    };
    Ok(Figure {
        title: format!("Stereotype win rate over training, {what} (95% interval bands; 50 = no preference)"),
        panels,
        y_label: "win rate %".into(),
        y_range: (0.0, 100.0),
        reference: Some(50.0),
        legend: names.to_vec(),
    })
}

/// What `report bias-compare` was asked for.
pub struct CompareRequest<'a> {
    /// Run folders (checkpoints/<run>).
    pub runs: &'a [PathBuf],
    /// Which evaluation of each run the tables use.
    pub step: StepChoice,
    /// The picture, if asked for.
    pub plot: Option<&'a Path>,
    /// How the picture is split.
    pub by: PanelBy,
    /// The language of `--by domain`.
    pub language: Option<&'a str>,
    /// The evaluations' metric (`None`: each folder's main evaluation).
    pub metric: Option<indolm_eval::BiasMetric>,
}

/// The Markdown report (tables and tests), after drawing the picture when asked.
pub fn bias_compare(request: &CompareRequest) -> Result<String> {
    if request.runs.len() < 2 {
        return Err(Error::argument("RUN", "give at least two run folders to compare"));
    }
    for (i, a) in request.runs.iter().enumerate() {
        if let Some(b) = request.runs[i + 1..].iter().find(|b| same_folder(a, b)) {
            return Err(Error::argument(
                "RUN",
                format!("{} and {} are the same run: give each run once", a.display(), b.display()),
            ));
        }
    }
    let names = run_names(request.runs);
    let mut runs = Vec::new();
    for (run, name) in request.runs.iter().zip(&names) {
        let evaluation = run_evaluation(run, request.step, request.metric)?;
        let (report, records) = indolm_eval::bias::records::read_checked(&evaluation.dir)?;
        runs.push(RunAtStep { name: name.clone(), step: evaluation.step, report, records });
    }
    let metric = runs[0].report.metric;
    if let Some(other) = runs.iter().find(|r| r.report.metric != metric) {
        return Err(Error::data(
            "report bias-compare",
            format!(
                "{} was scored with metric {}, {} with {}: win rates of different metrics are not comparable; evaluate every run with the same metric",
                runs[0].name, metric, other.name, other.report.metric
            ),
        ));
    }
    let mut out = format!(
        "# Bias of {} runs compared\n\n{}.\n\nEach run is one pretraining seed: the intervals and tests below account for the sampling of pairs, not for the noise of the seed. To compare data compositions, train several seeds of each (`indolm train RECIPE --seed N`) and compare them as groups (`--group NAME=RUN,RUN,...`, the Multi-Bootstrap).\n\n",
        runs.len(),
        metric_caption(metric)
    );
    out.push_str(&win_rate_tables(&runs));
    out.push_str(&pairwise_tests(&runs)?);
    let missing: Vec<&str> = runs.iter().filter(|r| r.records.is_none()).map(|r| r.name.as_str()).collect();
    if !missing.is_empty() {
        out.push_str(&format!(
            "\nNo per-pair records (bias_pairs.csv) for {}: left out of the pairwise tests; `indolm eval bias --run` writes them.\n",
            missing.join(", ")
        ));
    }
    if let Some(plot) = request.plot {
        write_figure(&curves_figure(request, &names)?, plot, "--plot")?;
        out.push_str(&format!("\nCurves: {}\n", plot.display()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_fall_back_to_paths_when_folder_names_repeat() {
        let runs = [PathBuf::from("a/x"), PathBuf::from("b/x"), PathBuf::from("b/y")];
        assert_eq!(run_names(&runs), vec!["a/x", "b/x", "y"]);
    }
}
