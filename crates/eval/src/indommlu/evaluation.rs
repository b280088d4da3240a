//! One IndoMMLU evaluation, masked or causal LM alike through [`LmScorer`]: the questions
//! scored, a record per question, the report aggregated from the records, and the two files
//! written as one evaluation; [`evaluate_model`] is `indolm eval indommlu`'s: a model folder
//! of any kind, its default mode, and what the report says of the model.
use super::prompts::short_of_demonstrations;
use super::questions::{load_all, QuestionSet};
use super::records::{write_question_records, QuestionRecord, RECORDS_FILE};
use super::report::{aggregate_records, IndommluReport, REPORT_FILE};
use super::scoring::OptionScores;
use super::setting::Setting;
use super::Question;
use crate::scorer::{LmScorer, LoadedLm};
use crate::IndommluMode;
use indolm_core::files::write_json;
use indolm_torch::error::{Error, Result};
use std::path::Path;
use tch::Device;

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

/// What one model is asked (`indolm eval indommlu`).
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest {
    /// How the options are scored; `None`: the model's kind's default (`letter` for causal LMs,
    /// the paper's reported setting; `option-pll` for masked LMs).
    pub mode: Option<IndommluMode>,
    /// Solved questions before each question (causal LMs).
    pub shots: usize,
    /// Which rows are scored.
    pub questions: QuestionSet,
}

/// Scores the IndoMMLU CSV `data` with the model folder `model` (masked, causal or
/// encoder-decoder) on `device` as `request` asks: the mode defaulted for the model's kind and
/// checked against the data before anything is scored, and the report saying what was scored
/// (demonstrations included or not, an encoder-decoder, a causal LM's prompt template). Notes on
/// the model and the questions go to stderr.
pub fn evaluate_model(model: &Path, data: &Path, request: ModelRequest, device: Device) -> Result<Evaluated> {
    let all = request.questions == QuestionSet::All;
    let loaded = load_all(data)?;
    let lm = LoadedLm::load(model, device)?;
    let scorer = lm.scorer(device)?;
    let causal = scorer.is_causal();
    let mode = request.mode.unwrap_or(if causal { IndommluMode::Letter } else { IndommluMode::OptionPll });
    let setting = Setting { mode, causal, shots: request.shots };
    setting.check(&loaded, data)?;
    for note in lm.notes() {
        eprintln!("note: {note}");
    }
    let questions = loaded.scored(request.questions);
    let mut evaluated = evaluate(scorer.as_ref(), &questions, &loaded.examples, setting, None)?;
    let report = &mut evaluated.report;
    report.demonstrations_included = all;
    report.encoder_decoder = matches!(lm, LoadedLm::Seq2Seq(_));
    if let LoadedLm::Causal(causal) = &lm {
        report.template = super::causal::PromptTemplate::of(causal);
    }
    let short = evaluated.short_of_demonstrations;
    if short > 0 {
        eprintln!(
            "note: {short} of {} questions had fewer than {} demonstrations of their subject and level",
            questions.len(),
            request.shots
        );
    }
    if !loaded.examples.is_empty() && all {
        eprintln!(
            "note: every row scored, the {} marked is_for_fewshot included (the paper's zero-shot set): {} questions",
            loaded.examples.len(),
            questions.len()
        );
    } else if !loaded.examples.is_empty() {
        eprintln!(
            "note: {} rows marked is_for_fewshot are demonstrations, not scored; {} questions (--questions all scores them too, as the paper's zero-shot tables do)",
            loaded.examples.len(),
            questions.len()
        );
    }
    Ok(evaluated)
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
