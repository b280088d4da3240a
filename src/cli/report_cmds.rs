//! `indolm report …`: pictures and tables made from results already on disk.
use clap::Subcommand;
use indolm::error::Result;
use indolm::files::write_atomic;
use indolm::{out, outln};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Win rate against step per language, one panel per domain, from the run's bias.json files.
    BiasCurve {
        /// The run directory (checkpoints/<run>).
        #[arg(long)]
        run: PathBuf,
        /// Output file: .svg or .png (text needs a TrueType font such as DejaVu Sans).
        #[arg(long)]
        out: PathBuf,
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
            outln!("plotted {n} checkpoint(s) -> {}", out.display());
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
