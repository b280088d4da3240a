//! IndoMMLU (Koto et al., 2023): multiple-choice questions from Indonesian school exams, by job.
//! [`questions`] reads the CSV; [`masked`], [`causal`] and [`seq2seq`] score the options with a
//! masked LM (zero-shot), a causal LM or an encoder-decoder such as mT0 (zero- or few-shot, as
//! IndoMMLU's own `evaluate.py` and `utils.py`), all reached through the one scoring interface
//! ([`crate::scorer::LmScorer`]); [`records`] keeps a record per question
//! (`indommlu_questions.csv`); [`report`] aggregates them (`indommlu.json`: accuracy per
//! subject, level and area, the random baseline, calibration); [`evaluation`] is one evaluation
//! end to end and [`hook`] the `[eval.indommlu]` checkpoint hook. The layers import downwards
//! only: questions ← masked, causal ← seq2seq, records ← report ← evaluation ← hook.
pub mod causal;
pub mod evaluation;
pub mod hook;
pub mod masked;
pub mod questions;
pub mod records;
pub mod report;
pub mod seq2seq;

pub use evaluation::{evaluate, refuse_to_replace, write_evaluation, Evaluated};
pub use hook::IndommluHook;
pub use questions::{area_of, load, load_all, IndommluData, Question, QuestionSet, AREAS};
pub use records::{read_question_records, write_question_records, QuestionRecord, RECORDS_FILE};
pub use report::{
    aggregate_records, mode_misfit, shots_misfit, AreaScore, Cell, GradeScore, IndommluReport, NegationScore, Setting,
    PASS_MARK, REPORT_FILE,
};
