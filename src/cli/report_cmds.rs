//! `indolm report …`: pictures and tables made from results already on disk.
use clap::Subcommand;
use indolm_core::files::{write_atomic, write_json};
use indolm_core::outputs::Output;
use indolm_core::{out, outln};
use indolm_eval::bias::records::StepChoice;
use indolm_eval::bias::Bootstrap;
use indolm_tasks::report::bias_compare::{bias_compare, CompareRequest, PanelBy};
use indolm_tasks::report::bias_diff::bias_diff;
use indolm_tasks::report::bias_groups::{compare_groups, Group, GroupRequest};
use indolm_tasks::report::chart::write_figure;
use indolm_torch::error::Result;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Win rate against step per language with 95% interval bands, one panel per domain, from
    /// every bias evaluation of the run.
    BiasCurve {
        /// The run directory (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// The evaluations under this metric (when the run scored several; default: each
        /// checkpoint's main evaluation).
        #[arg(long, value_enum)]
        metric: Option<indolm_eval::BiasMetric>,
        /// Output file: .svg or .png (text needs a TrueType font such as DejaVu Sans).
        #[arg(long)]
        out: PathBuf,
        /// Other models' evaluations drawn beside the run as flat bands (public models, other
        /// runs' last evaluations): `eval bias --out`, checkpoint or run folders, as PATH or
        /// NAME=PATH.
        #[arg(long, num_args = 1..)]
        reference: Vec<indolm_tasks::report::bias_table::TableModel>,
    },
    /// Stereotype win rate and NusaX sentiment macro-F1 over a pretraining run's steps, side by
    /// side: from the run's bias evaluations and a `finetune sentiment --from-run` sweep of it, a
    /// picture, a table, and the Pearson correlation of the two across the swept steps.
    BiasUtility {
        /// The pretraining run folder (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// The sweep's folder (the sentiment recipe's run folder); default: the one sweep of the
        /// run in the run's parent folder.
        #[arg(long)]
        sweep: Option<PathBuf>,
        /// The evaluations under this metric (when the run scored several; default: each
        /// checkpoint's main evaluation).
        #[arg(long, value_enum)]
        metric: Option<indolm_eval::BiasMetric>,
        /// Output file: .svg or .png.
        #[arg(long)]
        out: PathBuf,
        /// Also write the table as CSV here.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Also write every number (the win-rate curve, the rows, the correlation) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// NusaX's Fig. 2 from fine-tuning: the cross-lingual matrix of each `finetune sentiment` run
    /// (results.json of the cross-lingual setting: test macro-F1 ×100, rows the training language)
    /// as a heatmap, one panel a run, titled by the run's folder.
    SentimentHeatmap {
        /// Each run's results.json, or its run folder (repeat for several panels).
        #[arg(required = true, num_args = 1..)]
        results: Vec<PathBuf>,
        /// Output file: .png or .svg.
        #[arg(long)]
        out: PathBuf,
    },
    /// A paired comparison of two bias evaluations of the same pairs (two checkpoints, two runs at
    /// a step, two models): change in win rate with a paired bootstrap interval and an exact
    /// McNemar test per language and domain, Holm-corrected.
    BiasDiff {
        /// The first evaluation: a checkpoint folder (step-N or evals/step-N), an `eval bias
        /// --out` folder, or its bias_pairs.csv.
        a: PathBuf,
        /// The second evaluation, on the same pairs.
        b: PathBuf,
        /// Seed of the paired bootstrap.
        #[arg(long, default_value_t = indolm_core::seeds::DEFAULT_SEED)]
        seed: u64,
        /// Bootstrap resamples.
        #[arg(long, default_value_t = indolm_eval::settings::DEFAULT_BOOTSTRAP_RESAMPLES)]
        resamples: usize,
        /// Also write the table (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write the rows as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Several runs side by side at one step: win rates with intervals per run × language and
    /// domain, pairwise McNemar tests between runs (Holm), and every run's curve on one chart.
    /// With `--group`: data compositions compared with their pretraining seeds as replicates
    /// (the Multi-Bootstrap), and each group's mean curve with its bootstrap band.
    BiasCompare {
        /// Run folders (checkpoints/<run>), at least two (or use --group).
        #[arg(required_unless_present = "group", conflicts_with = "group")]
        runs: Vec<PathBuf>,
        /// A group of runs differing only by seed: NAME=RUN,RUN,... (repeat for each
        /// composition). Groups are compared two by two, unpaired.
        #[arg(long)]
        group: Vec<Group>,
        /// With --group: compare each group's --step with this step of the same runs instead
        /// (paired: the same seeds in both arms).
        #[arg(long, requires = "group")]
        against_step: Option<StepChoice>,
        /// With --group: Multi-Bootstrap replicates.
        #[arg(long, default_value_t = 2000)]
        replicates: usize,
        /// With --group: seed of the replicates.
        #[arg(long, default_value_t = indolm_core::seeds::DEFAULT_SEED)]
        seed: u64,
        /// Also write the numbers as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The evaluations under this metric (when a run scored several; default: each
        /// checkpoint's main evaluation).
        #[arg(long, value_enum)]
        metric: Option<indolm_eval::BiasMetric>,
        /// The step compared: a number, or `final` for each run's last evaluation.
        #[arg(long, default_value = "final")]
        step: StepChoice,
        /// Also write the report (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Draw every run's curve with interval bands to this .png or .svg.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Panels of the picture: one per language, or one per domain of --language.
        #[arg(long, value_enum, default_value = "language")]
        by: PanelBy,
        /// The language of `--by domain` (default: the first).
        #[arg(long)]
        language: Option<String>,
    },
    /// Whether each pair measures the stereotype alone (after Blodgett et al. 2021): words
    /// changed, token-length difference and ties per pair; the pairs failing the rules, and
    /// every win rate recomputed without them (at one evaluation, or at every step of a run).
    BiasValidity {
        /// One evaluation: a checkpoint folder, an `eval bias --out` folder, or its bias_pairs.csv.
        #[arg(required_unless_present = "run", conflicts_with = "run")]
        evaluation: Option<PathBuf>,
        /// Every evaluation of this run folder instead (does a trend survive?).
        #[arg(long)]
        run: Option<PathBuf>,
        /// With --run: the evaluations under this metric (default: each checkpoint's main one).
        #[arg(long, value_enum, requires = "run")]
        metric: Option<indolm_eval::BiasMetric>,
        /// A valid pair changes at most this many words.
        #[arg(long, default_value_t = 3)]
        max_words_changed: usize,
        /// A valid pair's sentences differ by at most this many tokens.
        #[arg(long, default_value_t = 2)]
        max_token_difference: usize,
        /// Ties fail too.
        #[arg(long)]
        exclude_ties: bool,
        /// The model's tokenizer (a folder or tokenizer.json), for token lengths when the
        /// metric did not score every token (crows); default: the records' token counts.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every pair's measures and the win rates as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// When a run's pairs settle their preference: changes between consecutive evaluations per
    /// domain, and the share of pairs already keeping their final preference against step.
    BiasFlips {
        /// The run folder (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// The evaluations under this metric (when the run scored several; default: each
        /// checkpoint's main evaluation).
        #[arg(long, value_enum)]
        metric: Option<indolm_eval::BiasMetric>,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Draw the settled share against step to this .png or .svg.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Models side by side as the IndoBias paper's Tables 2-3: per language, a row per model
    /// with the overall and per-domain win rates, their 95% intervals and pairs.
    BiasTable {
        /// Evaluations: `eval bias --out` folders, checkpoint folders or run folders (their last
        /// evaluation), each as PATH or NAME=PATH.
        #[arg(required = true)]
        models: Vec<indolm_tasks::report::bias_table::TableModel>,
        /// The evaluations under this metric (when one scored several; default: the main one).
        #[arg(long, value_enum)]
        metric: Option<indolm_eval::BiasMetric>,
        /// Only these languages (codes as in bias.json).
        #[arg(long, num_args = 1..)]
        language: Vec<String>,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every cell (model, language, category, win rate, interval, pairs) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// IndoMMLU results side by side as the paper's tables: a row per model with its accuracy per
    /// area, the average and the calibration error, then the random baseline.
    IndommluTable {
        /// Evaluations: `eval indommlu --out` folders, checkpoint folders or indommlu.json files,
        /// each as PATH or NAME=PATH.
        #[arg(required = true)]
        models: Vec<indolm_tasks::report::bias_table::TableModel>,
        /// Also write the table (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every row (model, setting, questions, areas, average, ECE) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The Liputan6 paper's Table 4 from `finetune summarize` runs: Lead-1/2/3, Oracle and each
    /// run's system, ROUGE-1/2/L per test split (canonical and Xtreme side by side).
    Summarization {
        /// results.json files of the runs (checkpoints/<name>/results.json).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Also write the table (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The Liputan6 paper's dataset statistics from the release's layout: articles, words,
    /// sentences and vocabulary per split, novel n-grams of the summaries (n = 1..4) per split and
    /// per variant's dev+test (Table 1) and train+dev+test (Table 3), and per chronological fifth
    /// (Fig. 2), with the paper's figures beside them when the data is the full release.
    #[command(name = "liputan6-stats")]
    Liputan6Stats {
        /// The data folder: the release's (canonical/ and xtreme/) or one variant's (train/, dev/, test/).
        #[arg(long)]
        data: PathBuf,
        /// Split folders under --data (default: every train, dev and test folder found).
        #[arg(long, num_args = 1..)]
        split: Vec<String>,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every figure as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw Fig. 2 (novel n-grams per chronological fifth) to this .png or .svg.
        #[arg(long)]
        png: Option<PathBuf>,
    },
    /// The Liputan6 paper's Fig. 4: where in the article the sentences the Oracle and extractive
    /// runs pick stand, as a histogram (% of the picked sentences per position).
    ExtractionPositions {
        /// Extractive runs: `finetune summarize` folders (their `<split>.candidate`) or .candidate
        /// files, as PATH or NAME=PATH (none: the Oracle alone).
        #[arg(value_name = "RUN_OR_FILE")]
        picks: Vec<indolm_tasks::report::liputan6_stats::PicksSource>,
        /// The data folder (the recipe's `[data] root`).
        #[arg(long)]
        data: PathBuf,
        /// The split folder under --data that the summaries are of.
        #[arg(long, default_value = "test")]
        split: String,
        /// Positions 1..N get a bar each; later ones share the last.
        #[arg(long, default_value_t = 10)]
        positions: usize,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every figure as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw the histogram (Fig. 4) to this .png or .svg.
        #[arg(long)]
        png: Option<PathBuf>,
    },
}

/// The files a report writes (each with its flag) and the files and folders it reads, for
/// [`indolm_core::outputs::check_outputs`].
fn outputs_and_inputs(command: &ReportCommand) -> (Vec<Output<'_>>, Vec<&Path>) {
    fn opt<'a>(flag: &'static str, p: &'a Option<PathBuf>) -> Vec<Output<'a>> {
        p.as_deref().map(|p| Output::file(flag, p)).into_iter().collect()
    }
    fn one<'a>(flag: &'static str, p: &'a Path) -> Vec<Output<'a>> {
        vec![Output::file(flag, p)]
    }
    fn read(p: &Option<PathBuf>) -> Vec<&Path> {
        p.as_deref().into_iter().collect()
    }
    fn models(m: &[indolm_tasks::report::bias_table::TableModel]) -> Vec<&Path> {
        m.iter().map(|m| m.path.as_path()).collect()
    }
    match command {
        ReportCommand::BiasCurve { run, out, reference, .. } => {
            (one("--out", out), [vec![run.as_path()], models(reference)].concat())
        }
        ReportCommand::BiasUtility { run, sweep, out, csv, json, .. } => (
            [one("--out", out), opt("--csv", csv), opt("--json", json)].concat(),
            [vec![run.as_path()], read(sweep)].concat(),
        ),
        ReportCommand::BiasDiff { a, b, out, json, .. } => {
            ([opt("--out", out), opt("--json", json)].concat(), vec![a, b])
        }
        ReportCommand::SentimentHeatmap { results, out } => {
            (one("--out", out), results.iter().map(PathBuf::as_path).collect())
        }
        ReportCommand::BiasCompare { runs, group, json, out, plot, .. } => (
            [opt("--json", json), opt("--out", out), opt("--plot", plot)].concat(),
            runs.iter()
                .map(PathBuf::as_path)
                .chain(group.iter().flat_map(|g| g.runs.iter().map(PathBuf::as_path)))
                .collect(),
        ),
        ReportCommand::BiasValidity { evaluation, run, tokenizer, out, json, .. } => {
            ([opt("--out", out), opt("--json", json)].concat(), [read(evaluation), read(run), read(tokenizer)].concat())
        }
        ReportCommand::BiasFlips { run, out, plot, .. } => {
            ([opt("--out", out), opt("--plot", plot)].concat(), vec![run.as_path()])
        }
        ReportCommand::BiasTable { models: m, out, json, .. }
        | ReportCommand::IndommluTable { models: m, out, json } => {
            ([opt("--out", out), opt("--json", json)].concat(), models(m))
        }
        ReportCommand::Summarization { results, out } => {
            (opt("--out", out), results.iter().map(PathBuf::as_path).collect())
        }
        ReportCommand::Liputan6Stats { data, out, json, png, .. } => {
            ([opt("--out", out), opt("--json", json), opt("--png", png)].concat(), vec![data.as_path()])
        }
        ReportCommand::ExtractionPositions { picks, data, out, json, png, .. } => (
            [opt("--out", out), opt("--json", json), opt("--png", png)].concat(),
            std::iter::once(data.as_path()).chain(picks.iter().map(|p| p.path.as_path())).collect(),
        ),
    }
}

/// Runs a `report` subcommand.
pub fn run(command: ReportCommand) -> Result<()> {
    let (outputs, inputs) = outputs_and_inputs(&command);
    super::check_outputs(&outputs, &inputs)?;
    match command {
        ReportCommand::BiasCurve { run, metric, out, reference } => {
            let n = indolm_tasks::report::bias_curve::write_bias_curve(&run, &out, metric, &reference)?;
            outln!("plotted {n} evaluation(s) -> {}", out.display());
        }
        ReportCommand::SentimentHeatmap { results, out } => {
            use indolm_tasks::report::heatmap::{write_heatmaps, Heatmap};
            use indolm_tasks::sentiment::SentimentResults;
            let mut panels = Vec::with_capacity(results.len());
            for given in &results {
                let path = if given.is_dir() { given.join("results.json") } else { given.clone() };
                let text = indolm_core::files::read_to_string(&path)?;
                let read: SentimentResults =
                    serde_json::from_str(&text).map_err(|e| indolm_torch::error::Error::json(&path, &e))?;
                let folder = path.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().to_string());
                let title = folder.unwrap_or_else(|| path.display().to_string());
                panels.push(
                    Heatmap::from_sentiment_results(&read, &title)
                        .map_err(|e| indolm_torch::error::Error::invalid(&path, e.to_string()))?,
                );
            }
            write_heatmaps(
                &panels,
                "NusaX cross-lingual test macro-F1 (rows: trained on, columns: tested on)",
                &out,
                "--out",
            )?;
            outln!(
                "{} cross-lingual matri{} -> {}",
                panels.len(),
                if panels.len() == 1 { "x" } else { "ces" },
                out.display()
            );
        }
        ReportCommand::BiasUtility { run, sweep, metric, out, csv, json } => {
            let report = indolm_tasks::report::bias_utility::bias_utility(&run, sweep.as_deref(), metric)?;
            out!("{}", report.markdown());
            write_figure(&report.figure(), &out, "--out")?;
            if let Some(csv) = csv {
                write_atomic(&csv, report.csv().as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &report)?;
            }
            outln!(
                "\nwin rate ({} evaluations) and macro-F1 ({} swept steps) of {} -> {}",
                report.win_rates.len(),
                report.rows.len(),
                report.run,
                out.display()
            );
        }
        ReportCommand::BiasDiff { a, b, seed, resamples, out, json } => {
            if resamples == 0 {
                return Err(indolm_torch::error::Error::argument("--resamples", "must be > 0"));
            }
            let (diff, table) = bias_diff(&a, &b, Bootstrap { seed, resamples })?;
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &diff)?;
            }
        }
        ReportCommand::BiasCompare {
            runs,
            group,
            against_step,
            replicates,
            seed,
            json,
            metric,
            step,
            out,
            plot,
            by,
            language,
        } => {
            let report = if group.is_empty() {
                if json.is_some() {
                    return Err(indolm_torch::error::Error::argument("--json", "is written for --group comparisons"));
                }
                let request = CompareRequest {
                    runs: &runs,
                    step,
                    plot: plot.as_deref(),
                    by,
                    language: language.as_deref(),
                    metric,
                };
                bias_compare(&request)?
            } else {
                let request = GroupRequest {
                    groups: &group,
                    step,
                    against_step,
                    metric,
                    replicates,
                    seed,
                    plot: plot.as_deref(),
                };
                let (report, numbers) = compare_groups(&request)?;
                if let Some(json) = json {
                    write_json(&json, &numbers)?;
                }
                report
            };
            out!("{report}");
            if let Some(out) = out {
                write_atomic(&out, report.as_bytes())?;
            }
            if let Some(plot) = plot {
                if !group.is_empty() {
                    outln!("\nCurves: {}", plot.display());
                }
            }
        }
        ReportCommand::BiasFlips { run, metric, out, plot } => {
            let flips = indolm_tasks::report::bias_flips::load(&run, metric)?;
            let name = run.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let table = flips.markdown(&name);
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
            if let Some(plot) = plot {
                write_figure(&flips.figure(&name), &plot, "--plot")?;
                outln!("\nsettled share against step -> {}", plot.display());
            }
        }
        ReportCommand::BiasValidity {
            evaluation,
            run,
            metric,
            max_words_changed,
            max_token_difference,
            exclude_ties,
            tokenizer,
            out,
            json,
        } => {
            use indolm_tasks::report::bias_validity::{bias_validity, Rules, Source};
            let source = match (&evaluation, &run) {
                (Some(e), _) => Source::Evaluation(e),
                (None, Some(r)) => Source::Run(r, metric),
                (None, None) => unreachable!("clap requires EVALUATION or --run"),
            };
            let rules = Rules { max_words_changed, max_token_difference, exclude_ties };
            let (table, numbers) = bias_validity(source, rules, tokenizer.as_deref())?;
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &numbers)?;
            }
        }
        ReportCommand::BiasTable { models, metric, language, out, json } => {
            let table = indolm_tasks::report::bias_table::bias_table(&models, metric, &language)?;
            out!("{}", table.markdown);
            if let Some(out) = out {
                write_atomic(&out, table.markdown.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &table.cells)?;
            }
        }
        ReportCommand::IndommluTable { models, out, json } => {
            let table = indolm_tasks::report::indommlu_table::indommlu_table(&models)?;
            out!("{}", table.markdown);
            if let Some(out) = out {
                write_atomic(&out, table.markdown.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &table.rows)?;
            }
        }
        ReportCommand::Summarization { results, out } => {
            let table = indolm_tasks::summarization::table_from_results(&results)?;
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
        }
        ReportCommand::Liputan6Stats { data, split, out, json, png } => {
            use indolm_tasks::report::liputan6_stats::{chart_format, liputan6_stats, write_bar_chart};
            if let Some(png) = &png {
                chart_format(png, "--png")?;
            }
            let stats = liputan6_stats(&data, &split)?;
            let chart = png.as_ref().map(|_| stats.fifths_chart()).transpose()?;
            let table = stats.markdown();
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &stats)?;
            }
            if let (Some(png), Some(chart)) = (png, chart) {
                write_bar_chart(&chart, &png, "--png")?;
                outln!("\nFig. 2 -> {}", png.display());
            }
        }
        ReportCommand::ExtractionPositions { picks, data, split, positions, out, json, png } => {
            use indolm_tasks::report::liputan6_stats::{chart_format, extraction_positions, write_bar_chart};
            if let Some(png) = &png {
                chart_format(png, "--png")?;
            }
            let report = extraction_positions(&data, &split, &picks, positions)?;
            let table = report.markdown();
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
            if let Some(json) = json {
                write_json(&json, &report)?;
            }
            if let Some(png) = png {
                write_bar_chart(&report.chart(), &png, "--png")?;
                outln!("\nFig. 4 -> {}", png.display());
            }
        }
    }
    Ok(())
}
