//! The bias curves in TensorBoard, laid out to be read: one TensorBoard run per language under
//! the training run's folder (`runs/<run>/bias-<lang>/`, and `bias-all` for the average over
//! languages), each with the tags `bias/<domain>` and `bias/overall`. One chart per domain then
//! overlays the languages in colour, and the same charts overlay other recipes' runs (filter
//! the runs by `bias-id` to compare compositions in one language). The 95% intervals go under
//! `bias_interval/<domain>/low|high`, the mean score gaps under `bias_gap/<domain>` (intervals
//! `bias_gap_interval/<domain>/low|high`), the rank-1 token accuracy under
//! `fluency/token_accuracy`. Every run also carries a custom-scalars layout:
//! margin charts drawing each curve inside its interval band. Each tag's first point carries a
//! description saying what the number is.
use super::report::{BiasReport, Category};
use crate::BiasMetric;
use indolm_core::logger::Logger;
use std::path::PathBuf;
use tensorboard_proto::layout::{
    Category as LayoutCategory, Chart, Layout, MarginChartContent, MarginChartContent_Series, MultilineChartContent,
};

/// The TensorBoard run (a folder under the training run's) of one language's curves.
pub(crate) fn language_run(language: &str) -> String {
    format!("bias-{language}")
}

/// A domain name as a tag component (`Gender and Age` → `Gender_and_Age`).
pub(crate) fn tag_name(category: &str) -> String {
    category.replace(' ', "_")
}

/// The TensorBoard writers of a run's bias curves, one per language, created at first use.
pub struct BiasBoard {
    /// `runs/<run>` (or the folder `eval bias --run` writes to).
    root: PathBuf,
    /// (language, its writer).
    loggers: Vec<(String, Logger)>,
    /// After a writer could not be created (one warning): nothing more is written.
    off: bool,
}

impl BiasBoard {
    /// Curves under `root`, one subfolder per language.
    pub fn new(root: PathBuf) -> Self {
        BiasBoard { root, loggers: Vec::new(), off: false }
    }

    /// Writes `report`'s win rates, intervals and gaps at `step`, then flushes. A write
    /// failure costs one warning and the curves, never the run.
    pub(crate) fn log(&mut self, report: &BiasReport, step: u64) {
        let mut results: Vec<(&str, Vec<&Category>)> = report
            .languages
            .iter()
            .map(|l| (l.language.as_str(), l.domains.iter().chain(std::iter::once(&l.overall)).collect()))
            .collect();
        if let Some(all) = &report.all_languages {
            results.push(("all", vec![all]));
        }
        for (language, categories) in results {
            let Some(logger) = self.logger(language, report) else { return };
            for c in categories {
                let name = if c.name == "all languages" { "overall".to_string() } else { tag_name(&c.name) };
                let what = describe(report.metric, language, &c.name);
                logger.scalar_described(&format!("bias/{name}"), c.win_rate, step, &what.win_rate);
                for (end, value) in [("low", c.interval.low), ("high", c.interval.high)] {
                    let description = format!("The {end} end of the 95% interval of `bias/{name}` (win rate %).");
                    logger.scalar_described(&format!("bias_interval/{name}/{end}"), value, step, &description);
                }
                logger.scalar_described(&format!("bias_gap/{name}"), c.gap, step, &what.gap);
                for (end, value) in [("low", c.gap_interval.low), ("high", c.gap_interval.high)] {
                    let description = format!("The {end} end of the 95% bootstrap interval of `bias_gap/{name}`.");
                    logger.scalar_described(&format!("bias_gap_interval/{name}/{end}"), value, step, &description);
                }
            }
        }
        for l in &report.languages {
            let (Some(accuracy), Some(logger)) = (l.token_accuracy, self.logger(&l.language, report)) else { continue };
            let description = format!(
                "Rank-1 token accuracy (%) on the pairs of language `{}`: the share of scored tokens the model ranks \
                 first, a fluency control to read beside the win rates.",
                l.language
            );
            logger.scalar_described("fluency/token_accuracy", accuracy, step, &description);
        }
        for (_, logger) in self.loggers.iter_mut() {
            logger.flush();
        }
    }

    /// The writer of `language`, created (with the layout) on first use.
    fn logger(&mut self, language: &str, report: &BiasReport) -> Option<&mut Logger> {
        if self.off {
            return None;
        }
        if let Some(i) = self.loggers.iter().position(|(l, _)| l == language) {
            return Some(&mut self.loggers[i].1);
        }
        match Logger::with_unit(&self.root.join(language_run(language)), 0, 0, "step") {
            Ok(mut logger) => {
                logger.custom_scalars_layout(&layout(report));
                self.loggers.push((language.to_string(), logger));
                self.loggers.last_mut().map(|(_, l)| l)
            }
            Err(e) => {
                eprintln!("warning: the bias curves are no longer written to TensorBoard ({e}); bias.json and bias_pairs.csv still are");
                self.off = true;
                None
            }
        }
    }
}

/// What a win-rate tag and a gap tag mean, for TensorBoard's tag descriptions.
struct Descriptions {
    win_rate: String,
    gap: String,
}

fn describe(metric: BiasMetric, language: &str, category: &str) -> Descriptions {
    let pairs = match category {
        "overall" => format!("all pairs of language `{language}`"),
        "all languages" => "all pairs, averaged over the languages".to_string(),
        domain => format!("the {domain} pairs of language `{language}`"),
    };
    let (preference, gap) = match metric {
        BiasMetric::Pppl => {
            ("has the lower pseudo-perplexity (PPPL)", "ln PPPL(antitrope) − ln PPPL(protrope), in nats per token")
        }
        BiasMetric::Crows => (
            "has the higher pseudo-log-likelihood over the shared tokens (CrowS-Pairs' metric)",
            "PLL(protrope) − PLL(antitrope) over the shared tokens, in nats",
        ),
        BiasMetric::PpplWordL2r => (
            "has the lower pseudo-perplexity under PLL-word-l2r (later pieces of a scored piece's word masked too)",
            "ln PPPL(antitrope) − ln PPPL(protrope) under PLL-word-l2r, in nats per token",
        ),
        BiasMetric::Aul => (
            "has the higher mean log-probability of its tokens with nothing masked (AUL)",
            "AUL(protrope) − AUL(antitrope), in nats per token",
        ),
        BiasMetric::Aula => (
            "has the higher mean attention-weighted log-probability of its tokens with nothing masked (AULA)",
            "AULA(protrope) − AULA(antitrope), attention-weighted nats per token",
        ),
    };
    let interval =
        if category == "all languages" { "a percentile bootstrap over pair rows" } else { "Wilson's score interval" };
    Descriptions {
        win_rate: format!(
            "Stereotype win rate (%) on {pairs}: the share of pairs whose stereotype-consistent sentence {preference}. \
             50 = no preference; above 50 the model prefers the stereotype. The 95% interval ({interval}) is under \
             `bias_interval/`, drawn as a band in the Custom Scalars dashboard."
        ),
        gap: format!(
            "Mean score gap on {pairs}: {gap}; positive when the stereotype is preferred, 0 = no preference. \
             A continuous effect size that moves before the win rate does; its 95% percentile-bootstrap interval \
             is under `bias_gap_interval/`."
        ),
    }
}

/// A regular expression matching exactly `tag` (the custom-scalars charts take regexes).
fn exact(tag: &str) -> String {
    let mut out = String::from("^");
    for c in tag.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

fn margin_chart(title: &str, value: &str, interval: &str) -> Chart {
    let mut series = MarginChartContent_Series::new();
    series.set_value(value.to_string());
    series.set_lower(format!("{interval}/low"));
    series.set_upper(format!("{interval}/high"));
    let mut margin = MarginChartContent::new();
    margin.set_series(vec![series].into());
    let mut chart = Chart::new();
    chart.set_title(title.to_string());
    chart.set_margin(margin);
    chart
}

fn category(title: &str, charts: Vec<Chart>, closed: bool) -> LayoutCategory {
    let mut c = LayoutCategory::new();
    c.set_title(title.to_string());
    c.set_chart(charts.into());
    c.set_closed(closed);
    c
}

/// The custom-scalars layout for `report`'s domains: win rates with interval bands, the
/// languages overlaid per domain, and the score gaps with interval bands.
pub fn layout(report: &BiasReport) -> Layout {
    let mut names = vec!["overall".to_string()];
    names.extend(report.domain_names());
    let margins: Vec<Chart> = names
        .iter()
        .map(|n| {
            let t = tag_name(n);
            margin_chart(
                &format!("{n}: win rate % (95% interval; 50 = no preference)"),
                &format!("bias/{t}"),
                &format!("bias_interval/{t}"),
            )
        })
        .collect();
    let overlays: Vec<Chart> = names
        .iter()
        .map(|n| {
            let mut lines = MultilineChartContent::new();
            lines.set_tag(vec![exact(&format!("bias/{}", tag_name(n)))].into());
            let mut chart = Chart::new();
            chart.set_title(format!("{n}: win rate %, every language"));
            chart.set_multiline(lines);
            chart
        })
        .collect();
    let gaps: Vec<Chart> = names
        .iter()
        .map(|n| {
            let t = tag_name(n);
            margin_chart(
                &format!("{n}: mean score gap (95% interval; > 0: stereotype preferred)"),
                &format!("bias_gap/{t}"),
                &format!("bias_gap_interval/{t}"),
            )
        })
        .collect();
    let mut layout = Layout::new();
    layout.set_category(
        vec![
            category("Bias: stereotype win rate with its 95% interval", margins, false),
            category("Bias: win rate per domain, languages overlaid", overlays, false),
            category("Bias: mean score gap with its 95% interval", gaps, true),
        ]
        .into(),
    );
    layout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_escapes_regex_characters() {
        assert_eq!(exact("bias/Gender_(work)"), "^bias/Gender_\\(work\\)$");
        assert_eq!(exact("bias/a.b"), "^bias/a\\.b$");
    }
}
