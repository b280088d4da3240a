//! `indolm report bias-compare --group NAME=RUN,RUN ...`: data compositions compared with their
//! pretraining seeds as replicates, by the Multi-Bootstrap ([`indolm_metrics::multibootstrap`]).
//! A group is the runs of one composition that differ only by seed. Each run contributes its
//! per-pair outcomes (100 for a stereotype win, else 0) at one step; per language and domain
//! (and averaged over row-aligned languages), each group's estimate is the mean over its seeds
//! of each seed's win rate, with a percentile interval from resampling seeds and pairs. Groups
//! are compared two by two unpaired (each draws its own seeds; the pair sample is shared), or
//! each group's step against another step of the same runs, paired (`--against-step`). The
//! picture draws each group's mean curve with its bootstrap band.
use super::chart::{panels_from_points, write_figure, Figure};
use indolm_core::seeds::{salt, stream_rng};
use indolm_eval::bias::records::{run_evaluation, run_evaluations_under, StepChoice};
use indolm_eval::bias::{metric_caption, PairRecord};
use indolm_eval::BiasMetric;
use indolm_metrics::multibootstrap::{compare, single, ArmEstimate, Comparison};
use indolm_torch::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A group named on the command line: `NAME=RUN,RUN,...` (one composition's seeds).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its name in the tables and the legend.
    pub name: String,
    /// Its run folders, one per pretraining seed.
    pub runs: Vec<PathBuf>,
}

impl std::str::FromStr for Group {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, runs) =
            s.split_once('=').ok_or_else(|| format!("expected NAME=RUN,RUN,... (a group of runs), found {s:?}"))?;
        let runs: Vec<PathBuf> = runs.split(',').filter(|r| !r.is_empty()).map(PathBuf::from).collect();
        if name.is_empty() || runs.is_empty() {
            return Err(format!("expected NAME=RUN,RUN,... with a name and at least one run, found {s:?}"));
        }
        Ok(Group { name: name.to_string(), runs })
    }
}

/// What a group comparison was asked for.
pub struct GroupRequest<'a> {
    /// The groups, at least one (two or more for unpaired comparisons).
    pub groups: &'a [Group],
    /// The step compared (each run's own last with `final`).
    pub step: StepChoice,
    /// Compare each group's `step` with this step of the same runs (paired) instead of the
    /// groups with each other.
    pub against_step: Option<StepChoice>,
    /// The evaluation's metric (`None`: each folder's main evaluation).
    pub metric: Option<BiasMetric>,
    /// Bootstrap replicates.
    pub replicates: usize,
    /// Seed of the replicates.
    pub seed: u64,
    /// The picture, if asked for.
    pub plot: Option<&'a Path>,
}

/// One group's estimate in one category.
#[derive(Debug, Clone, Serialize)]
pub struct GroupEstimate {
    /// The group.
    pub group: String,
    /// Language code, or `all` for the average over languages.
    pub language: String,
    /// `overall` or a domain.
    pub category: String,
    /// Pairs in the category.
    pub pairs: usize,
    /// Its estimate and interval (win rate %).
    pub estimate: ArmEstimate,
}

/// Two arms compared in one category.
#[derive(Debug, Clone, Serialize)]
pub struct ArmComparison {
    /// Language code, or `all`.
    pub language: String,
    /// `overall` or a domain.
    pub category: String,
    /// The base arm (a group, or a group at `--against-step`).
    pub base: String,
    /// The other arm.
    pub expt: String,
    /// The Multi-Bootstrap's result (win rates %).
    pub comparison: Comparison,
}

/// The report's numbers (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct GroupComparison {
    /// The metric of every evaluation compared.
    pub metric: BiasMetric,
    /// Replicates drawn per interval.
    pub replicates: usize,
    /// Their seed.
    pub seed: u64,
    /// Each group's name, runs and the step used of each.
    pub groups: Vec<GroupRuns>,
    /// Each group's estimate per language and category (at `--step`).
    pub estimates: Vec<GroupEstimate>,
    /// Groups two by two (unpaired), or each group's step against `--against-step` (paired).
    pub comparisons: Vec<ArmComparison>,
}

/// A group's runs as compared.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRuns {
    /// The group's name.
    pub name: String,
    /// Its run folders.
    pub runs: Vec<String>,
    /// The step of each run's evaluation.
    pub steps: Vec<u64>,
}

/// One category of a group's outcomes: (language, category, rows run × pair).
type CategoryRows = (String, String, Vec<Vec<f64>>);

/// The per-pair outcomes of one group at one step: per language, one row of 0/100 per run.
struct Outcomes {
    metric: BiasMetric,
    steps: Vec<u64>,
    /// (language, rows: run × pair).
    languages: Vec<(String, Vec<Vec<f64>>)>,
    /// (language, each pair's domain), from the first run.
    domains: Vec<(String, Vec<String>)>,
    /// The first run's records, to check other runs score the same pairs.
    first: Vec<PairRecord>,
}

fn win(r: &PairRecord) -> f64 {
    if r.is_win() {
        100.0
    } else {
        0.0
    }
}

/// Reads every run of `group` at `step`, checking they score the same pairs and metric as
/// `reference` (the first group's first run) when given.
fn outcomes(
    group: &Group,
    step: StepChoice,
    metric: Option<BiasMetric>,
    reference: Option<&Outcomes>,
) -> Result<Outcomes> {
    let mut out: Option<Outcomes> = None;
    for run in &group.runs {
        let evaluation = run_evaluation(run, step, metric)?;
        let (report, records) = evaluation.read()?;
        let check_against = out.as_ref().or(reference);
        if let Some(o) = check_against {
            if o.metric != report.metric {
                return Err(Error::data(
                    "report bias-compare",
                    format!(
                        "{} was scored with metric {}, other runs with {}: evaluate every run with the same metric (or choose one with --metric)",
                        evaluation.dir.display(),
                        report.metric,
                        o.metric
                    ),
                ));
            }
            super::bias_diff::match_pairs(&o.first, &records, ("the first run", &run.display().to_string()))?;
        }
        let o = out.get_or_insert_with(|| Outcomes {
            metric: report.metric,
            steps: Vec::new(),
            languages: Vec::new(),
            domains: Vec::new(),
            first: records.clone(),
        });
        o.steps.push(evaluation.step);
        let mut by_language: Vec<(String, Vec<f64>, Vec<String>)> = Vec::new();
        for r in &records {
            match by_language.iter_mut().find(|(l, _, _)| *l == r.language) {
                Some((_, wins, domains)) => {
                    wins.push(win(r));
                    domains.push(r.domain.clone());
                }
                None => by_language.push((r.language.clone(), vec![win(r)], vec![r.domain.clone()])),
            }
        }
        for (language, wins, domains) in by_language {
            match o.languages.iter_mut().find(|(l, _)| *l == language) {
                Some((_, rows)) => rows.push(wins),
                None => {
                    o.languages.push((language.clone(), vec![wins]));
                    o.domains.push((language, domains));
                }
            }
        }
    }
    out.ok_or_else(|| Error::argument("--group", format!("group {} has no runs", group.name)))
}

/// The categories of one group's outcomes: (language, category, pair columns, rows run × pair
/// restricted to those columns); `all` averages the languages per pair row when every language
/// has the same number of pairs (IndoBias-Pairs' rows are translations of each other).
fn categories(o: &Outcomes) -> Vec<CategoryRows> {
    let mut out = Vec::new();
    for ((language, rows), (_, domains)) in o.languages.iter().zip(&o.domains) {
        out.push((language.clone(), "overall".to_string(), rows.clone()));
        let mut names: Vec<&String> = Vec::new();
        for d in domains {
            if !names.contains(&d) {
                names.push(d);
            }
        }
        for name in names {
            let columns: Vec<usize> = (0..domains.len()).filter(|&j| domains[j] == *name).collect();
            let sub = rows.iter().map(|row| columns.iter().map(|&j| row[j]).collect()).collect();
            out.push((language.clone(), name.clone(), sub));
        }
    }
    let n = o.languages.first().map_or(0, |(_, rows)| rows[0].len());
    if o.languages.len() >= 2 && o.languages.iter().all(|(_, rows)| rows[0].len() == n) {
        let runs = o.languages[0].1.len();
        let k = o.languages.len() as f64;
        let rows = (0..runs)
            .map(|s| (0..n).map(|j| o.languages.iter().map(|(_, rows)| rows[s][j]).sum::<f64>() / k).collect())
            .collect();
        out.push(("all".to_string(), "overall".to_string(), rows));
    }
    out
}

/// A random stream per (what, language, category), so a category's interval does not depend on
/// which others are computed.
fn rng_for(seed: u64, parts: &[&str]) -> rand_chacha::ChaCha8Rng {
    let stream = parts
        .iter()
        .flat_map(|p| p.bytes().chain(std::iter::once(0)))
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01B3));
    stream_rng(seed, salt::MULTIBOOTSTRAP, stream)
}

fn fmt_estimate(a: &ArmEstimate) -> String {
    format!("{:.1} [{:.1}–{:.1}]", a.estimate, a.interval.low, a.interval.high)
}

/// Compares the groups: the Markdown report and its numbers.
pub fn compare_groups(request: &GroupRequest) -> Result<(String, GroupComparison)> {
    let groups = request.groups;
    if request.replicates == 0 {
        return Err(Error::argument("--replicates", "must be > 0"));
    }
    if request.against_step.is_none() && groups.len() < 2 {
        return Err(Error::argument(
            "--group",
            "give at least two groups to compare, or one with --against-step to compare two steps of its runs",
        ));
    }
    for (i, g) in groups.iter().enumerate() {
        if groups[..i].iter().any(|h| h.name == g.name) {
            return Err(Error::argument("--group", format!("the name {} is given to two groups", g.name)));
        }
    }
    let all_runs: Vec<&PathBuf> = groups.iter().flat_map(|g| &g.runs).collect();
    for (i, run) in all_runs.iter().enumerate() {
        if let Some(same) = all_runs[..i].iter().find(|r| super::bias_diff::same_folder(r, run)) {
            return Err(Error::argument(
                "--group",
                format!("{} and {} are the same run: a run is one seed of one group", same.display(), run.display()),
            ));
        }
    }
    for g in groups {
        // Runs trained with the same seed are one replicate counted twice (a copied run, a seed
        // not passed): the intervals would be too narrow.
        let mut seeds: Vec<(u64, &PathBuf)> = Vec::new();
        for run in &g.runs {
            let Some(seed) = indolm_core::run::checkpoints::recorded_seed(&indolm_core::run::RunLayout::new(run))
            else {
                continue;
            };
            if let Some((_, other)) = seeds.iter().find(|(s, _)| *s == seed) {
                return Err(Error::argument(
                    "--group",
                    format!(
                        "{} and {} of group {} were both trained with seed {seed}: runs of one seed are not replicates; train each run of a group with its own seed (`indolm train RECIPE --seed N`)",
                        other.display(),
                        run.display(),
                        g.name
                    ),
                ));
            }
            seeds.push((seed, run));
        }
    }
    let mut at_step: Vec<Outcomes> = Vec::new();
    for g in groups {
        let o = outcomes(g, request.step, request.metric, at_step.first())?;
        at_step.push(o);
    }
    let metric = at_step[0].metric;
    let mut result = GroupComparison {
        metric,
        replicates: request.replicates,
        seed: request.seed,
        groups: groups
            .iter()
            .zip(&at_step)
            .map(|(g, o)| GroupRuns {
                name: g.name.clone(),
                runs: g.runs.iter().map(|r| r.display().to_string()).collect(),
                steps: o.steps.clone(),
            })
            .collect(),
        estimates: Vec::new(),
        comparisons: Vec::new(),
    };
    let per_group: Vec<Vec<CategoryRows>> = at_step.iter().map(categories).collect();
    for (g, cats) in groups.iter().zip(&per_group) {
        for (language, category, rows) in cats {
            let mut rng = rng_for(request.seed, &["estimate", &g.name, language, category]);
            let estimate = single(rows, request.replicates, &mut rng)?;
            result.estimates.push(GroupEstimate {
                group: g.name.clone(),
                language: language.clone(),
                category: category.clone(),
                pairs: rows[0].len(),
                estimate,
            });
        }
    }
    match request.against_step {
        None => {
            for i in 0..groups.len() {
                for j in i + 1..groups.len() {
                    for ((language, category, base), (_, _, expt)) in per_group[i].iter().zip(&per_group[j]) {
                        let mut rng =
                            rng_for(request.seed, &["unpaired", &groups[i].name, &groups[j].name, language, category]);
                        result.comparisons.push(ArmComparison {
                            language: language.clone(),
                            category: category.clone(),
                            base: groups[i].name.clone(),
                            expt: groups[j].name.clone(),
                            comparison: compare(base, expt, false, request.replicates, &mut rng)?,
                        });
                    }
                }
            }
        }
        Some(against) => {
            for (g, (o, cats)) in groups.iter().zip(at_step.iter().zip(&per_group)) {
                let earlier = outcomes(g, against, request.metric, Some(o))?;
                let base_name = format!("{} @ {}", g.name, steps_label(&earlier.steps));
                let expt_name = format!("{} @ {}", g.name, steps_label(&o.steps));
                for ((language, category, base), (_, _, expt)) in categories(&earlier).iter().zip(cats) {
                    let mut rng = rng_for(request.seed, &["paired", &g.name, language, category]);
                    result.comparisons.push(ArmComparison {
                        language: language.clone(),
                        category: category.clone(),
                        base: base_name.clone(),
                        expt: expt_name.clone(),
                        comparison: compare(base, expt, true, request.replicates, &mut rng)?,
                    });
                }
            }
        }
    }
    let markdown = markdown(&result, groups);
    if let Some(plot) = request.plot {
        write_figure(&curves(request, metric)?, plot, "--plot")?;
    }
    Ok((markdown, result))
}

/// `step N`, or the steps of the runs when they differ.
fn steps_label(steps: &[u64]) -> String {
    if steps.iter().all(|s| *s == steps[0]) {
        format!("step {}", steps[0])
    } else {
        format!("steps {}", steps.iter().map(u64::to_string).collect::<Vec<_>>().join("/"))
    }
}

fn markdown(result: &GroupComparison, groups: &[Group]) -> String {
    let mut out = format!(
        "# Bias of {} group(s) compared, pretraining seeds as replicates (Multi-Bootstrap)\n\n{}.\n\n\
         Each group's estimate is the mean over its runs (seeds) of each run's win rate (%). Intervals are 95% \
         percentile intervals of {} Multi-Bootstrap replicates (seed {}): each replicate resamples the seeds with \
         replacement and the pairs with replacement (one pair sample shared by the arms compared), averaging within \
         a seed, then across seeds. p is the share of replicates whose difference is ≤ 0; `*` marks a difference \
         whose 95% interval excludes 0.\n\n",
        groups.len(),
        metric_caption(result.metric),
        result.replicates,
        result.seed
    );
    for g in &result.groups {
        out.push_str(&format!(
            "- **{}**: {} run(s) at {}: {}\n",
            g.name,
            g.runs.len(),
            steps_label(&g.steps),
            g.runs.join(", ")
        ));
    }
    let single_seed: Vec<&str> = result.groups.iter().filter(|g| g.runs.len() == 1).map(|g| g.name.as_str()).collect();
    if !single_seed.is_empty() {
        out.push_str(&format!(
            "\n**Note:** {} has a single run: its intervals cover the sampling of pairs only, not the noise of the pretraining seed. Train more seeds (`indolm train RECIPE --seed N`) for a comparison that accounts for it.\n",
            single_seed.join(", ")
        ));
    }
    out.push_str("\n## Estimates (win rate %, 95% interval)\n\n| language | category | pairs |");
    for g in &result.groups {
        out.push_str(&format!(" {} |", g.name));
    }
    out.push_str("\n|---|---|---:|");
    out.push_str(&"---:|".repeat(result.groups.len()));
    out.push('\n');
    let first = &result.groups[0].name;
    for e in result.estimates.iter().filter(|e| e.group == *first) {
        out.push_str(&format!("| {} | {} | {} |", e.language, e.category, e.pairs));
        for g in &result.groups {
            let cell = result
                .estimates
                .iter()
                .find(|x| x.group == g.name && x.language == e.language && x.category == e.category)
                .map_or("–".to_string(), |x| fmt_estimate(&x.estimate));
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    let paired = result.comparisons.first().is_some_and(|c| c.comparison.paired);
    out.push_str(&format!(
        "\n## Differences ({})\n\n| language | category | A | B | A estimate | B estimate | B − A (points) | 95% interval | p |\n|---|---|---|---|---:|---:|---:|---:|---:|\n",
        if paired { "paired: two steps of the same runs, one seed sample for both" } else { "unpaired: each group draws its own seeds" }
    ));
    for c in &result.comparisons {
        let k = &c.comparison;
        let excludes_zero = k.difference_interval.low > 0.0 || k.difference_interval.high < 0.0;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:+.1} | [{:+.1}, {:+.1}] | {:.3}{} |\n",
            c.language,
            c.category,
            c.base,
            c.expt,
            fmt_estimate(&k.base),
            fmt_estimate(&k.expt),
            k.difference,
            k.difference_interval.low,
            k.difference_interval.high,
            k.p,
            if excludes_zero { " *" } else { "" }
        ));
    }
    out
}

/// Each group's mean curve per language (overall, and the average over languages) with its
/// Multi-Bootstrap band, at the steps every run of the group has.
fn curves(request: &GroupRequest, metric: BiasMetric) -> Result<Figure> {
    let mut items = Vec::new();
    for g in request.groups {
        let mut per_run = Vec::new();
        for run in &g.runs {
            per_run.push(run_evaluations_under(run, request.metric)?);
        }
        let steps: Vec<u64> = per_run[0]
            .iter()
            .map(|e| e.step)
            .filter(|s| per_run.iter().all(|evals| evals.iter().any(|e| e.step == *s)))
            .collect();
        for step in steps {
            let o = outcomes(g, StepChoice::At(step), request.metric, None)?;
            if o.metric != metric {
                continue;
            }
            for (language, category, rows) in categories(&o) {
                if category != "overall" {
                    continue;
                }
                let mut rng = rng_for(request.seed, &["curve", &g.name, &language, &step.to_string()]);
                let a = single(&rows, request.replicates, &mut rng)?;
                let panel = if language == "all" { "all languages".to_string() } else { language };
                items.push((panel, g.name.clone(), (step, a.estimate, Some((a.interval.low, a.interval.high)))));
            }
        }
    }
    let mut panels = panels_from_points(items);
    panels.sort_by_key(|p| p.title == "all languages");
    Ok(Figure {
        title: "Stereotype win rate over training: each group's mean over seeds (Multi-Bootstrap 95% bands; 50 = no preference)"
            .into(),
        panels,
        y_label: "win rate %".into(),
        y_range: (0.0, 100.0),
        reference: Some(50.0),
        legend: request.groups.iter().map(|g| g.name.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_from_name_and_runs() {
        let g: Group = "cc100=a/x,b/y".parse().unwrap();
        assert_eq!((g.name.as_str(), g.runs.len()), ("cc100", 2));
        assert!("cc100".parse::<Group>().is_err());
        assert!("=a".parse::<Group>().is_err());
        assert!("x=".parse::<Group>().is_err());
    }
}
