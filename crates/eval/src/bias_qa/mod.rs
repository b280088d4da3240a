//! The IndoBias-QA track (the IndoBias paper's generation track, after Shrawgi et al.'s LLM
//! Stereotype Index): prompts built from four pivots (demography, demographic group, stereotype
//! pair, task) in seven task formats, answered by any chat backend, each answer mapped to the
//! pair's positive or negative label by the first label it mentions, and stereotype polarity
//! reported per task, group and demography with SP_σ. By job: [`inputs`] reads and checks the
//! folder of four CSV files; [`prompts`] builds the prompts with stable ids; [`answers`] keeps the
//! answers (generated and appended as they come, resumable, or read from a file); [`parse`] is the
//! label rule; [`sandbox`] runs task 7's code isolated; [`score`] maps every answer; [`report`]
//! aggregates; [`run`] is one run end to end (`indolm eval bias-qa`). The guide is
//! docs/bias-qa.md.
pub(crate) mod answers;
pub mod inputs;
pub(crate) mod parse;
pub mod prompts;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod score;

pub use run::{run, BackendOpener, CodeRun, RunSettings, Summary};

use indolm_torch::error::{Error, IoContext, Result};
use std::path::Path;

/// The report, as JSON.
pub const REPORT_FILE: &str = "bias_qa.json";
/// The report, as Markdown.
pub(crate) const MARKDOWN_FILE: &str = "bias_qa.md";
/// One record a scored answer.
pub(crate) const SCORED_FILE: &str = "answers_scored.jsonl";
/// The generated answers, appended as they come.
pub const ANSWERS_FILE: &str = "answers.jsonl";
/// The settings the answers were generated with, and their fingerprint.
pub(crate) const SETTINGS_FILE: &str = "answers_settings.json";

indolm_core::declare_run_files!(
    BIAS_QA_FILES: indolm_core::outputs::RunFile::Named(REPORT_FILE),
    indolm_core::outputs::RunFile::Named(MARKDOWN_FILE),
    indolm_core::outputs::RunFile::Named(SCORED_FILE),
    indolm_core::outputs::RunFile::Named(ANSWERS_FILE),
    indolm_core::outputs::RunFile::Named(SETTINGS_FILE),
);

/// Makes the output folder `out` and holds it against a second indolm writing there.
pub fn lock_out(out: &Path) -> Result<indolm_core::files::DirLock> {
    if out.exists() && !out.is_dir() {
        return Err(Error::invalid(out, "exists and is not a folder: name a folder for the output"));
    }
    std::fs::create_dir_all(out).with_path(out)?;
    indolm_core::files::DirLock::acquire(out)
}

/// Before scoring answers generated elsewhere into `out`: a folder holding generated answers
/// (answers.jsonl) is refused, unless `overwrite` (which removes them and their settings) or the
/// answers file is that very file.
pub(crate) fn prepare_for_answer_file(out: &Path, answers: &Path, overwrite: bool) -> Result<()> {
    let stored = out.join(ANSWERS_FILE);
    if !stored.exists() {
        return Ok(());
    }
    let same = match (stored.canonicalize(), answers.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Ok(());
    }
    if !overwrite {
        return Err(Error::invalid(
            out,
            format!(
                "holds generated answers ({ANSWERS_FILE}); scoring {} there would mix two sources: pass --overwrite \
                 to remove them, or choose another --out",
                answers.display()
            ),
        ));
    }
    for file in [stored, out.join(SETTINGS_FILE)] {
        if file.exists() {
            std::fs::remove_file(&file).with_path(&file)?;
        }
    }
    Ok(())
}

/// Writes the records (answers_scored.jsonl) and the report (bias_qa.json, bias_qa.md) into
/// `out`, each atomically.
pub(crate) fn write_outputs(out: &Path, report: &report::BiasQaReport, records: &[score::ScoredAnswer]) -> Result<()> {
    indolm_core::files::write_atomic(&out.join(SCORED_FILE), score::records_jsonl(records).as_bytes())?;
    indolm_core::files::write_json(&out.join(REPORT_FILE), report)?;
    indolm_core::files::write_atomic(&out.join(MARKDOWN_FILE), report.markdown().as_bytes())
}

/// Programs run at a time: the cores, at most 8.
pub(crate) fn code_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}
