//! IndoMMLU (Koto et al., 2023): multiple-choice questions from Indonesian school exams, by job.
//! [`questions`] reads the CSV; [`prompts`] writes evaluate.py's prompts; [`setting`] is what an
//! evaluation is asked and what a kind of model refuses; [`masked`], [`causal`] and [`seq2seq`]
//! make the inputs of a masked LM (zero-shot), a causal LM or an encoder-decoder such as mT0
//! (zero- or few-shot, as IndoMMLU's own `evaluate.py` and `utils.py`) and score them through the
//! general scoring interface ([`crate::scorer::LmScorer`]: contexts and continuations),
//! [`scoring`] choosing among them by the model ([`OptionScores`]); [`records`] keeps a record per
//! question (`indommlu_questions.csv`); [`report`] aggregates them (`indommlu.json`: accuracy per
//! subject, level and area, the random baseline, calibration); [`evaluation`] is one evaluation
//! end to end (of a model folder: [`evaluate_model`]) and [`hook`] the `[eval.indommlu]`
//! checkpoint hook. The layers import downwards only: questions ← prompts, setting, records;
//! those ← masked, causal ← seq2seq ← scoring, and ← report; scoring, report ← evaluation ← hook.
pub mod causal;
pub(crate) mod evaluation;
pub(crate) mod hook;
pub(crate) mod masked;
pub mod prompts;
pub(crate) mod questions;
pub mod records;
pub mod report;
pub(crate) mod scoring;
pub mod seq2seq;
pub(crate) mod setting;

pub use evaluation::{evaluate, evaluate_model, refuse_to_replace, write_evaluation, Evaluated, ModelRequest};
pub use hook::IndommluHook;
pub use questions::{area_of, load, load_all, IndommluData, Question, QuestionSet, AREAS};
pub use records::{read_question_records, write_question_records, QuestionRecord, RECORDS_FILE};
pub use report::{
    aggregate_records, AreaScore, Cell, GradeScore, IndommluReport, NegationScore, PASS_MARK, REPORT_FILE,
};
pub use scoring::OptionScores;
pub use setting::{mode_misfit, shots_misfit, Setting};
