//! One IndoMMLU evaluation, masked or causal LM alike through [`LmScorer`]: the questions
//! scored, a record per question, the report aggregated from the records, and the two files
//! written as one evaluation.
use super::prompts::short_of_demonstrations;
use super::records::{write_question_records, QuestionRecord, RECORDS_FILE};
use super::report::{aggregate_records, IndommluReport, REPORT_FILE};
use super::scoring::OptionScores;
use super::setting::Setting;
use super::Question;
use crate::scorer::LmScorer;
use indolm_core::files::write_json;
use indolm_torch::error::{Error, Result};
use std::path::Path;

indolm_core::declare_run_files!(
    INDOMMLU_FILES: indolm_core::outputs::RunFile::Named(REPORT_FILE),
    indolm_core::outputs::RunFile::Named(RECORDS_FILE),
);

/// What one evaluation found: the report, the records it was aggregated from, and how many
/// questions got fewer demonstrations than asked (few-shot prompts).
pub struct Evaluated {
    /// `indommlu.json`.
    pub report: IndommluReport,
    /// `indommlu_questions.csv`.
    pub records: Vec<QuestionRecord>,
    /// Questions with fewer than `setting.shots` demonstrations of their subject and level.
    pub short_of_demonstrations: usize,
}

/// Scores `questions` with any language model, in `setting`'s mode with `setting.shots`
/// demonstrations from `examples`: a record per question and the report aggregated from them.
/// A mode or shots the model cannot take is refused before anything is scored.
pub fn evaluate(
    scorer: &dyn LmScorer,
    questions: &[Question],
    examples: &[Question],
    setting: Setting,
    step: Option<u64>,
) -> Result<Evaluated> {
    let scores = scorer.option_scores(questions, examples, setting)?;
    let records: Vec<QuestionRecord> =
        questions.iter().zip(scores).map(|(q, s)| QuestionRecord::new(q, s)).collect::<Result<_>>()?;
    let short_of_demonstrations = short_of_demonstrations(questions, examples, setting.shots);
    Ok(Evaluated { report: aggregate_records(&records, setting, step), records, short_of_demonstrations })
}

/// Refuses to write an evaluation into `dir` when it holds one, unless `overwrite`.
pub fn refuse_to_replace(dir: &Path, overwrite: bool) -> Result<()> {
    let found = [dir.join(REPORT_FILE), dir.join(RECORDS_FILE)].into_iter().find(|p| p.exists());
    match found {
        Some(found) if !overwrite => Err(Error::invalid(
            dir,
            format!(
                "already holds an IndoMMLU evaluation ({}): pass --overwrite to replace it, or choose another --out",
                found.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Writes an evaluation into `dir`: the records (`indommlu_questions.csv`), then the report
/// (`indommlu.json`), each atomically.
pub fn write_evaluation(dir: &Path, report: &IndommluReport, records: &[QuestionRecord]) -> Result<()> {
    write_question_records(&dir.join(RECORDS_FILE), records)?;
    write_json(&dir.join(REPORT_FILE), report)
}
