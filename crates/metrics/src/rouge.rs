//! ROUGE of summaries, two ways ([`Scorer`]):
//!
//! - `official` (the default): the official ROUGE-1.5.5.pl as the Liputan6 paper ran it, through
//!   PreSumm's pyrouge with `-c 95 -m -r 1000 -n 2 -a`: its reading of PreSumm's summary lines
//!   (sentences separated by `<q>`), WordNet exceptions and Porter stemming (`porter`), n-gram and
//!   summary-level LCS scores with its five-decimal rounding, and its averages and 95% bootstrap
//!   intervals, drawn with perl's own random numbers (`perl_rand`), so every figure is the
//!   script's (`official`);
//! - `rouge-score`: Google's `rouge-score` package without stemming (`rouge_score`), with
//!   intervals from the same resampling.
//!
//! [`evaluate`] scores aligned (prediction, reference) lines ([`evaluate_paths`]: those of two
//! files) into a [`Report`]: each document's
//! figures, and for ROUGE-1, -2 and -L the recall, precision and F1 over the documents with their
//! intervals.
//!
//! ROUGE-L's LCS takes time in the product of a pair's token counts (official: summed over its
//! sentence pairs, the same product) and, for the official traceback, a bit a cell: a pair of more
//! than [`MAX_LCS_CELLS`] (10,000 tokens each) is refused with its line ([`evaluate_files`]),
//! before any table is made.
pub mod official;
mod perl_rand;
pub mod porter;
pub(crate) mod rouge_score;

pub use official::SENTENCE_SEPARATOR;
pub use rouge_score::{mean_f1, rouge_l, score, tokenize, Prf, RougeScores};

use crate::stats::Interval;
use indolm_core::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The most LCS cells ROUGE-L computes for one (prediction, reference) pair: its token counts
/// multiplied, 10,000 tokens each (a summary has tens to hundreds). That many take about a second
/// and, for the official traceback, 12.5 MB.
pub(crate) const MAX_LCS_CELLS: u64 = 100_000_000;

/// A pair with more LCS cells than [`MAX_LCS_CELLS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong {
    /// Its line, from 1 (its index among the pairs, plus one).
    pub line: usize,
    /// The prediction's tokens, as the scorer reads them.
    pub predicted: usize,
    /// The reference's tokens.
    pub reference: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}: {} predicted × {} reference tokens make {} ROUGE-L LCS cells, more than the {MAX_LCS_CELLS} \
             scored for a pair (10,000 tokens each)",
            self.line,
            self.predicted,
            self.reference,
            self.predicted as u128 * self.reference as u128
        )
    }
}

/// Refuses pair `index` past [`MAX_LCS_CELLS`].
fn check_cells(index: usize, predicted: usize, reference: usize) -> std::result::Result<(), TooLong> {
    if predicted as u128 * reference as u128 > u128::from(MAX_LCS_CELLS) {
        return Err(TooLong { line: index + 1, predicted, reference });
    }
    Ok(())
}

/// How ROUGE is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scorer {
    /// ROUGE-1.5.5.pl with the papers' options (PreSumm's pyrouge): `-c 95 -m -r 1000 -n 2 -a`.
    #[default]
    Official,
    /// Google's rouge-score (rouge1, rouge2, rougeL; no stemmer), mean F1 over the pairs.
    RougeScore,
}

impl std::fmt::Display for Scorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scorer::Official => "official",
            Scorer::RougeScore => "rouge-score",
        })
    }
}

/// The official script's resamples (`-r 1000`).
pub const DEFAULT_RESAMPLES: usize = 1000;
/// The official script's confidence level in percent (`-c 95`).
pub(crate) const DEFAULT_CONFIDENCE: f64 = 95.0;

/// What [`evaluate`] is asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RougeOptions {
    /// Which ROUGE.
    pub scorer: Scorer,
    /// Bootstrap resamples (the script's `-r`).
    pub resamples: usize,
    /// The intervals' confidence level in percent (the script's `-c`).
    pub confidence: f64,
    /// Resample i draws from perl's `rand` after `srand(seed · resamples + i)`: 0 is the script's
    /// own `srand(i)`, and with it the official figures are the script's to the last digit.
    pub seed: u64,
}

impl Default for RougeOptions {
    fn default() -> Self {
        RougeOptions { scorer: Scorer::Official, resamples: DEFAULT_RESAMPLES, confidence: DEFAULT_CONFIDENCE, seed: 0 }
    }
}

impl RougeOptions {
    /// Refuses what the script refuses or cannot do: no resamples, a level outside 0–100.
    pub fn check(&self) -> Result<()> {
        if self.resamples == 0 {
            return Err(Error::argument("--resamples", "must be at least 1 (the script's -r)"));
        }
        if !(0.0..=100.0).contains(&self.confidence) {
            return Err(Error::argument(
                "confidence",
                format!("{} is not a percentage between 0 and 100", self.confidence),
            ));
        }
        Ok(())
    }

    /// The computation in words: the script's options, or rouge-score's settings.
    pub(crate) fn describe(&self) -> String {
        let (c, r) = (self.confidence, self.resamples);
        let seeds = if self.seed == 0 {
            "the script's own resampling seeds".to_string()
        } else {
            format!("resampling seed {}", self.seed)
        };
        match self.scorer {
            Scorer::Official => format!("ROUGE-1.5.5 -c {c} -m -r {r} -n 2 -a on PreSumm's pyrouge input, {seeds}"),
            Scorer::RougeScore => {
                format!(
                    "rouge-score (no stemmer), mean F1; intervals by ROUGE-1.5.5's bootstrap (-c {c} -r {r}), {seeds}"
                )
            }
        }
    }
}

/// One measure over the documents.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Figure {
    /// What is reported: official, the script's `Average_X` (the mean of the resample means,
    /// five decimals); rouge-score, the mean over the pairs.
    pub value: f64,
    /// The mean of the per-document values (official: rounded to five decimals, as the script
    /// computes it without printing it).
    pub mean: f64,
    /// The percentile bootstrap interval at the options' confidence level.
    pub interval: Interval,
}

/// Recall, precision and F1 of one ROUGE variant over the documents.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Measures {
    /// Recall (`Average_R`).
    pub recall: Figure,
    /// Precision (`Average_P`).
    pub precision: Figure,
    /// F1 (`Average_F`: official, the average of the per-document F, each from the document's
    /// rounded P and R).
    pub f1: Figure,
}

/// ROUGE of aligned (prediction, reference) pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Which ROUGE.
    pub scorer: Scorer,
    /// The computation in words ([`RougeOptions::describe`]).
    pub settings: String,
    /// Pairs given.
    pub pairs: usize,
    /// Pairs scored: official leaves out those whose reference is empty, as PreSumm does.
    pub scored: usize,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Confidence level of the intervals, percent.
    pub confidence: f64,
    /// The resampling seed ([`RougeOptions::seed`]).
    pub seed: u64,
    /// ROUGE-1.
    pub rouge1: Measures,
    /// ROUGE-2.
    pub rouge2: Measures,
    /// ROUGE-L (official: summary-level, over the sentences; rouge-score: one LCS of the texts).
    pub rouge_l: Measures,
    /// Each pair's figures (`null` for a pair left out).
    pub documents: Vec<Option<RougeScores>>,
}

impl Report {
    /// `x` (a fraction) as a percentage; an official figure stays the five-decimal number it is.
    pub fn percent(&self, x: f64) -> f64 {
        match self.scorer {
            Scorer::Official => (x * 1e5).round() / 1e3,
            Scorer::RougeScore => 100.0 * x,
        }
    }

    /// The three variants with their names as the script prints them.
    pub(crate) fn variants(&self) -> [(&'static str, &Measures); 3] {
        [("ROUGE-1", &self.rouge1), ("ROUGE-2", &self.rouge2), ("ROUGE-L", &self.rouge_l)]
    }

    /// Markdown: F1 ×100 of each variant with its interval, then every figure as the script
    /// prints it (five decimals) with its interval.
    pub fn markdown(&self) -> String {
        let c = self.confidence;
        let mut out = format!(
            "| pairs | ROUGE-1 | {c}% CI | ROUGE-2 | {c}% CI | ROUGE-L | {c}% CI |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n"
        );
        out.push_str(&format!("| {} |", self.scored));
        for (_, m) in self.variants() {
            let i = m.f1.interval;
            out.push_str(&format!(
                " {:.2} | {:.2}–{:.2} |",
                self.percent(m.f1.value),
                self.percent(i.low),
                self.percent(i.high)
            ));
        }
        out.push_str(&format!(
            "\n\n| {} | Average_R | {c}% CI | Average_P | {c}% CI | Average_F | {c}% CI |\n\
             |---|---:|---:|---:|---:|---:|---:|\n",
            self.scorer
        ));
        for (name, m) in self.variants() {
            out.push_str(&format!("| {name} |"));
            for f in [m.recall, m.precision, m.f1] {
                let (v, l, h) = (f.value, f.interval.low, f.interval.high);
                out.push_str(&format!(
                    " {} | {} - {} |",
                    official::format5(v),
                    official::format5(l),
                    official::format5(h)
                ));
            }
            out.push('\n');
        }
        out.push_str(&format!("\n{}", self.settings));
        if self.scored < self.pairs {
            out.push_str(&format!(
                "; {} of {} pairs left out: their reference is empty (PreSumm does not score them)",
                self.pairs - self.scored,
                self.pairs
            ));
        }
        out.push('\n');
        out
    }
}

/// Sentences of words as one summary line of PreSumm's files: words joined by spaces, sentences
/// by `<q>` (what the official scorer splits them at again).
pub fn summary_line(sentences: &[Vec<String>]) -> String {
    sentences.iter().map(|s| s.join(" ")).collect::<Vec<_>>().join(SENTENCE_SEPARATOR)
}

/// ROUGE-1, -2 and -L of aligned (prediction, reference) lines, sentences separated by `<q>`.
/// Official: each pair read and scored as the script does, pairs with an empty reference left
/// out, the averages and intervals the script's; rouge-score: `<q>` read as a space, every pair
/// scored, the means, with intervals from the same resampling of the pairs.
/// A pair past [`MAX_LCS_CELLS`] is an error naming its line.
pub fn evaluate(pairs: &[(String, String)], options: &RougeOptions) -> Result<Report> {
    options.check()?;
    evaluate_with(pairs, options, check_cells).map_err(|e| Error::data("ROUGE", e.to_string()))
}

/// [`evaluate`] of the lines of the files `predictions` and `references`: a pair past
/// [`MAX_LCS_CELLS`] is an error naming the predictions' file and the line, in one line.
pub(crate) fn evaluate_files(
    predictions: &Path,
    references: &Path,
    pairs: &[(String, String)],
    options: &RougeOptions,
) -> Result<Report> {
    options.check()?;
    evaluate_with(pairs, options, check_cells).map_err(|e| {
        Error::invalid(predictions, format!("{e}; the reference is line {} of {}", e.line, references.display()))
    })
}

/// [`evaluate_files`] of the files `predictions` and `references` themselves: their lines read
/// and checked as every summary metric checks them ([`crate::summaries::read_aligned`]), and
/// refused when no pair is left to score (every reference empty).
pub fn evaluate_paths(predictions: &Path, references: &Path, options: &RougeOptions) -> Result<Report> {
    let pairs = crate::summaries::read_aligned(predictions, references)?;
    let report = evaluate_files(predictions, references, &pairs, options)?;
    if report.scored == 0 {
        return Err(Error::invalid(references, "no pair to score: every reference line is empty"));
    }
    Ok(report)
}

/// Official ROUGE of aligned (prediction, reference) lines with the papers' options and the
/// script's own resampling seeds ([`RougeOptions::default`]): the figures the script prints. The
/// summarization tasks' own summaries and the corpus's references: no bound on their length.
pub fn evaluate_official(pairs: &[(String, String)]) -> Report {
    let unbounded = |_: usize, _: usize, _: usize| Ok::<(), std::convert::Infallible>(());
    match evaluate_with(pairs, &RougeOptions::default(), unbounded) {
        Ok(report) => report,
        Err(never) => match never {},
    }
}

/// [`evaluate`] with options already checked, each pair's (index, predicted tokens, reference
/// tokens) passed to `check` before it is scored.
fn evaluate_with<E>(
    pairs: &[(String, String)],
    options: &RougeOptions,
    check: impl Fn(usize, usize, usize) -> std::result::Result<(), E>,
) -> std::result::Result<Report, E> {
    let (documents, order): (Vec<Option<RougeScores>>, Vec<usize>) = match options.scorer {
        Scorer::Official => {
            let mut reader = official::ScriptReader::new(true);
            let mut documents: Vec<Option<RougeScores>> = Vec::with_capacity(pairs.len());
            for (index, (prediction, reference)) in pairs.iter().enumerate() {
                if official::is_blank(reference) {
                    documents.push(None);
                    continue;
                }
                let (peer, model) = (reader.summary(prediction), reader.summary(reference));
                let count = |summary: &[Vec<String>]| summary.iter().map(Vec::len).sum::<usize>();
                check(index, count(&peer), count(&model))?;
                documents.push(Some(official::score_summaries(&peer, &model)));
            }
            let kept: Vec<usize> = (0..pairs.len()).filter(|&i| documents[i].is_some()).collect();
            (documents, official::script_order(&kept))
        }
        Scorer::RougeScore => {
            let plain = |line: &str| tokenize(&line.replace(SENTENCE_SEPARATOR, " "));
            let mut documents = Vec::with_capacity(pairs.len());
            for (index, (prediction, reference)) in pairs.iter().enumerate() {
                let (p, r) = (plain(prediction), plain(reference));
                check(index, p.len(), r.len())?;
                documents.push(Some(rouge_score::score_tokens(&p, &r)));
            }
            (documents, (0..pairs.len()).collect())
        }
    };
    // Nine series in the script's order of the documents: R, P and F of ROUGE-1, -2 and -L.
    let pick = |d: &RougeScores, k: usize| -> f64 {
        let prf = [d.rouge1, d.rouge2, d.rouge_l][k / 3];
        [prf.recall, prf.precision, prf.f1][k % 3]
    };
    let series: Vec<Vec<f64>> =
        (0..9).map(|k| order.iter().filter_map(|&i| documents[i].as_ref()).map(|d| pick(d, k)).collect()).collect();
    let mut means = official::bootstrap(&series, options.resamples, options.seed);
    let official = options.scorer == Scorer::Official;
    let figures: Vec<Figure> = series
        .iter()
        .zip(means.iter_mut())
        .map(|(values, resampled)| {
            let s = official::summarize(values, resampled, options.confidence, official);
            Figure {
                value: if official { s.resample_mean } else { s.mean },
                mean: s.mean,
                interval: Interval { low: s.low, high: s.high },
            }
        })
        .collect();
    let measures =
        |v: usize| Measures { recall: figures[3 * v], precision: figures[3 * v + 1], f1: figures[3 * v + 2] };
    Ok(Report {
        scorer: options.scorer,
        settings: options.describe(),
        pairs: pairs.len(),
        scored: order.len(),
        resamples: options.resamples,
        confidence: options.confidence,
        seed: options.seed,
        rouge1: measures(0),
        rouge2: measures(1),
        rouge_l: measures(2),
        documents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(p, r)| (p.to_string(), r.to_string())).collect()
    }

    #[test]
    fn official_figures_of_one_pair_are_its_own_with_a_zero_width_interval() {
        let report = evaluate(&pairs(&[("a b c d e", "d e f g")]), &RougeOptions::default()).unwrap();
        // R1: P 2/5, R 2/4, F 0.44444; R2: P 1/4, R 1/3, F from the rounded two, 0.28571.
        assert_eq!(
            report.rouge1.f1,
            Figure { value: 0.44444, mean: 0.44444, interval: Interval { low: 0.44444, high: 0.44444 } }
        );
        assert_eq!(
            (report.rouge2.recall.value, report.rouge2.precision.value, report.rouge2.f1.value),
            (0.33333, 0.25, 0.28571)
        );
        assert_eq!(report.percent(report.rouge1.f1.value), 44.444);
        assert_eq!((report.pairs, report.scored), (1, 1));
    }

    #[test]
    fn empty_references_are_left_out_by_official_only() {
        let list = pairs(&[("satu dua", "satu dua"), ("tiga", "  "), ("", "empat lima")]);
        let official = evaluate(&list, &RougeOptions::default()).unwrap();
        assert_eq!((official.pairs, official.scored), (3, 2));
        assert!(official.documents[1].is_none());
        assert_eq!(official.rouge1.f1.mean, 0.5);
        let google = evaluate(&list, &RougeOptions { scorer: Scorer::RougeScore, ..RougeOptions::default() }).unwrap();
        assert_eq!(google.scored, 3);
        assert!((google.rouge1.f1.value - 1.0 / 3.0).abs() < 1e-12, "{:?}", google.rouge1);
        // rouge-score reads <q> as a space.
        let q = evaluate(
            &pairs(&[("a b<q>c", "a b c")]),
            &RougeOptions { scorer: Scorer::RougeScore, ..RougeOptions::default() },
        );
        assert_eq!(q.unwrap().rouge2.f1.value, 1.0);
    }

    #[test]
    fn intervals_are_seeded_and_cover_the_value() {
        let list: Vec<(String, String)> =
            (0..40).map(|i| (format!("a b c d {}", "x ".repeat(i % 7)), "a b c d e f".to_string())).collect();
        let run = |seed| evaluate(&list, &RougeOptions { seed, ..RougeOptions::default() }).unwrap();
        let a = run(0);
        assert_eq!(a, run(0), "the same seed gives the same figures");
        assert_ne!(a, run(1), "another seed draws other resamples");
        for m in [a.rouge1, a.rouge2, a.rouge_l] {
            for f in [m.recall, m.precision, m.f1] {
                assert!(f.interval.low <= f.value && f.value <= f.interval.high, "{f:?}");
                assert!((f.value - f.mean).abs() < 0.01, "{f:?}");
            }
        }
    }

    #[test]
    fn pairs_past_the_lcs_cells_are_refused_by_line_and_those_within_are_scored() {
        // Two lines of 1 MB (200,000 tokens each): 4·10^10 cells, a 28.9 GB table for the
        // official traceback and hours for rouge-score's LCS; refused at once, by line.
        let long = "kata ".repeat(200_000);
        let list = pairs(&[("a b", "a b"), (long.as_str(), long.as_str())]);
        for scorer in [Scorer::Official, Scorer::RougeScore] {
            let start = std::time::Instant::now();
            let err = evaluate(&list, &RougeOptions { scorer, ..RougeOptions::default() }).unwrap_err().to_string();
            assert!(
                err.contains("line 2: 200000 predicted × 200000 reference tokens make 40000000000 ROUGE-L LCS cells, more than the 100000000"),
                "{scorer}: {err}"
            );
            assert!(start.elapsed().as_secs() < 5, "{scorer}: {:?}", start.elapsed());
        }
        let err = evaluate_files(Path::new("pred.txt"), Path::new("ref.txt"), &list, &RougeOptions::default());
        let err = err.unwrap_err().to_string();
        assert!(err.contains("pred.txt") && err.contains("line 2: ") && err.contains("line 2 of ref.txt"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        // At the bound (5,000 × 20,000 tokens, in sentences for the official scorer): scored,
        // in a bounded table, with the figures a hand count gives.
        let prediction = vec!["satu dua tiga empat lima"; 4_000].join(" ");
        let reference = vec!["satu dua tiga empat lima"; 1_000].join("<q>");
        let list = pairs(&[(prediction.as_str(), reference.as_str())]);
        let official = evaluate(&list, &RougeOptions::default()).unwrap();
        // Every reference token is on an LCS: R 1, P 5,000/20,000.
        assert_eq!((official.rouge_l.precision.value, official.rouge_l.recall.value), (0.25, 1.0));
        let google = evaluate(&list, &RougeOptions { scorer: Scorer::RougeScore, ..RougeOptions::default() }).unwrap();
        assert_eq!((google.rouge_l.precision.value, google.rouge_l.recall.value), (0.25, 1.0));
    }

    #[test]
    fn bad_options_are_refused() {
        let list = pairs(&[("a", "a")]);
        let err = evaluate(&list, &RougeOptions { resamples: 0, ..RougeOptions::default() }).unwrap_err();
        assert!(err.to_string().contains("--resamples"), "{err}");
        assert!(evaluate(&list, &RougeOptions { confidence: 101.0, ..RougeOptions::default() }).is_err());
    }

    #[test]
    fn the_table_shows_each_figure_with_its_interval() {
        let report = evaluate(&pairs(&[("a b c d e", "d e f g"), ("x", "")]), &RougeOptions::default()).unwrap();
        let md = report.markdown();
        assert!(md.contains("| 1 | 44.44 | 44.44–44.44 | 28.57 | 28.57–28.57 | 44.44 | 44.44–44.44 |"), "{md}");
        assert!(
            md.contains("| ROUGE-2 | 0.33333 | 0.33333 - 0.33333 | 0.25000 | 0.25000 - 0.25000 | 0.28571 |"),
            "{md}"
        );
        assert!(md.contains("1 of 2 pairs left out"), "{md}");
        assert_eq!(summary_line(&[vec!["a".into(), "b".into()], vec!["c".into()]]), "a b<q>c");
    }
}
