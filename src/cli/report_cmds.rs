//! `indolm report …`: pictures and tables made from results already on disk.
use clap::Subcommand;
use indolm::error::Result;
use indolm::eval::bias::records::StepChoice;
use indolm::eval::bias::Bootstrap;
use indolm::files::{write_atomic, write_json};
use indolm::report::bias_compare::{bias_compare, CompareRequest, PanelBy};
use indolm::report::bias_diff::bias_diff;
use indolm::report::chart::write_figure;
use indolm::{out, outln};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Win rate against step per language with 95% interval bands, one panel per domain, from
    /// every bias evaluation of the run.
    BiasCurve {
        /// The run directory (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// Output file: .svg or .png (text needs a TrueType font such as DejaVu Sans).
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
        #[arg(long, default_value_t = indolm::seeds::DEFAULT_SEED)]
        seed: u64,
        /// Bootstrap resamples.
        #[arg(long, default_value_t = indolm::recipe::pretrain::DEFAULT_BOOTSTRAP_RESAMPLES)]
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
    BiasCompare {
        /// Run folders (checkpoints/<run>), at least two.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
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
    /// When a run's pairs settle their preference: changes between consecutive evaluations per
    /// domain, and the share of pairs already keeping their final preference against step.
    BiasFlips {
        /// The run folder (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// Also write the tables (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Draw the settled share against step to this .png or .svg.
        #[arg(long)]
        plot: Option<PathBuf>,
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
}

/// Runs a `report` subcommand.
pub fn run(command: ReportCommand) -> Result<()> {
    match command {
        ReportCommand::BiasCurve { run, out } => {
            let n = indolm::report::bias_curve::write_bias_curve(&run, &out)?;
            outln!("plotted {n} evaluation(s) -> {}", out.display());
        }
        ReportCommand::BiasDiff { a, b, seed, resamples, out, json } => {
            if resamples == 0 {
                return Err(indolm::error::Error::argument("--resamples", "must be > 0"));
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
        ReportCommand::BiasCompare { runs, step, out, plot, by, language } => {
            let request =
                CompareRequest { runs: &runs, step, plot: plot.as_deref(), by, language: language.as_deref() };
            let report = bias_compare(&request)?;
            out!("{report}");
            if let Some(out) = out {
                write_atomic(&out, report.as_bytes())?;
            }
        }
        ReportCommand::BiasFlips { run, out, plot } => {
            let flips = indolm::report::bias_flips::load(&run)?;
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
        ReportCommand::Summarization { results, out } => {
            let table = indolm::tasks::summarization::table_from_results(&results)?;
            out!("{table}");
            if let Some(out) = out {
                write_atomic(&out, table.as_bytes())?;
            }
        }
    }
    Ok(())
}
