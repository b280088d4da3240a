//! IndoMMLU's per-question records, `indommlu_questions.csv` beside `indommlu.json`: each
//! question's CSV row, subject, level, area and negation, every option's score, the prediction
//! and the key, as lm-evaluation-harness's `--log_samples` keeps its samples. Any analysis
//! (another grouping, a significance test, a calibration) can be redone from them without the
//! model, and the report is aggregated from these records, so the two always agree.
use super::questions::{area_of, Question};
use indolm_core::files::{open_csv, Staging};
use indolm_metrics::metrics::argmax;
use indolm_torch::error::{Error, IoContext, Result};
use std::path::Path;

/// The records' file name, beside `indommlu.json`.
pub const RECORDS_FILE: &str = "indommlu_questions.csv";
/// Score columns written at least (`score_A` … `score_E`: IndoMMLU's questions have 3 to 5
/// options); more when a question has more.
const MIN_SCORE_COLUMNS: usize = 5;
/// The columns before the scores.
const LEADING: [&str; 7] = ["row", "subject", "level", "kelas", "area", "negated", "options"];
/// The columns after the scores.
const TRAILING: [&str; 3] = ["prediction", "key", "correct"];

/// One scored question.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionRecord {
    /// Its row in the IndoMMLU CSV (the header is row 1).
    pub row: usize,
    /// The `subject` column.
    pub subject: String,
    /// The `level` column.
    pub level: String,
    /// The `kelas` column.
    pub kelas: String,
    /// Whether the question asks for the option that does not hold.
    pub negated: bool,
    /// Each option's score in letter order (higher is better).
    pub scores: Vec<f64>,
    /// The option chosen: the best score (the last of equal ones).
    pub prediction: usize,
    /// The right option.
    pub key: usize,
}

impl QuestionRecord {
    /// The record of `question` scored `scores` (one per option); a non-finite score (a model
    /// that gives NaN or infinite log-probabilities) is refused, naming the question, rather
    /// than decided as if it were a number.
    pub fn new(question: &Question, scores: Vec<f64>) -> Result<Self> {
        if let Some((i, s)) = scores.iter().enumerate().find(|(_, s)| !s.is_finite()) {
            return Err(Error::data(
                format!("IndoMMLU row {}", question.row),
                format!(
                    "the model gave option {} a non-finite score ({s}): its weights or config.json produce NaN or infinite log-probabilities (a diverged checkpoint, an impossible configuration value); nothing was written",
                    (b'A' + i as u8) as char
                ),
            ));
        }
        Ok(QuestionRecord {
            row: question.row,
            subject: question.subject.clone(),
            level: question.level.clone(),
            kelas: question.kelas.clone(),
            negated: question.negated(),
            prediction: argmax(&scores),
            scores,
            key: question.answer,
        })
    }
    /// Whether the prediction is the key.
    pub(crate) fn correct(&self) -> bool {
        self.prediction == self.key
    }
    /// The confidence in the prediction: the softmax over the option scores at it.
    pub fn confidence(&self) -> f64 {
        indolm_metrics::calibration::confidence(&self.scores, self.prediction)
    }
}

fn letter(i: usize) -> String {
    char::from(b'A' + i as u8).to_string()
}

fn header(score_columns: usize) -> Vec<String> {
    let scores = (0..score_columns).map(|i| format!("score_{}", letter(i)));
    LEADING.iter().map(|s| s.to_string()).chain(scores).chain(TRAILING.iter().map(|s| s.to_string())).collect()
}

/// Writes `records` to `path` (atomically): a header, then one row a question; an option a
/// question lacks has an empty score.
pub fn write_question_records(path: &Path, records: &[QuestionRecord]) -> Result<()> {
    let columns = records.iter().map(|r| r.scores.len()).max().unwrap_or(0).max(MIN_SCORE_COLUMNS);
    if columns > 26 {
        return Err(Error::invalid(
            path,
            format!("a question has {columns} options; at most 26 (A-Z) can be recorded"),
        ));
    }
    let staging = Staging::new(path);
    let mut writer = csv::Writer::from_path(staging.path()).map_err(|e| Error::invalid(path, e.to_string()))?;
    let csv_error = |e: csv::Error| Error::invalid(path, e.to_string());
    writer.write_record(header(columns)).map_err(csv_error)?;
    for r in records {
        let mut row = vec![
            r.row.to_string(),
            r.subject.clone(),
            r.level.clone(),
            r.kelas.clone(),
            area_of(&r.subject).unwrap_or("").to_string(),
            r.negated.to_string(),
            r.scores.len().to_string(),
        ];
        // `{:?}` prints the shortest text that reads back as the same f64.
        row.extend((0..columns).map(|i| r.scores.get(i).map_or(String::new(), |s| format!("{s:?}"))));
        row.extend([letter(r.prediction), letter(r.key), r.correct().to_string()]);
        writer.write_record(&row).map_err(csv_error)?;
    }
    writer.flush().with_path(path)?;
    drop(writer);
    staging.commit()
}

/// Reads an `indommlu_questions.csv` strictly: its columns, every field of its type, every
/// score finite, the prediction the best score, the key among the options and `correct` as
/// they say. Errors name the row and the column.
pub fn read_question_records(path: &Path) -> Result<Vec<QuestionRecord>> {
    let hint = "`indolm eval indommlu --out DIR` and the [eval.indommlu] hook write it";
    let (mut reader, found) = open_csv(&csv::ReaderBuilder::new(), path, hint)?;
    let columns = found.len().saturating_sub(LEADING.len() + TRAILING.len());
    let expected = header(columns);
    if found != expected || columns == 0 {
        return Err(Error::invalid(
            path,
            format!("the header is {found:?}; expected {:?} with score_A, score_B, ... between", LEADING),
        ));
    }
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| Error::invalid(path, format!("line {line}: {e}")))?;
        let bad =
            |column: &str, message: String| Error::invalid(path, format!("line {line}, column {column}: {message}"));
        let field = |c: usize| rec.get(c).unwrap_or("");
        let number = |c: usize| -> Result<usize> {
            field(c).parse().map_err(|_| bad(&expected[c], format!("{:?} is not a count", field(c))))
        };
        let options = number(6)?;
        if !(2..=columns).contains(&options) {
            return Err(bad("options", format!("{options} options; expected 2 to {columns}")));
        }
        let mut scores = Vec::with_capacity(options);
        for c in 0..columns {
            let text = field(LEADING.len() + c);
            let name = &expected[LEADING.len() + c];
            match (c < options, text.is_empty()) {
                (true, true) => return Err(bad(name, "empty, but the question has this option".into())),
                (false, false) => return Err(bad(name, format!("{text:?}, but the question has {options} options"))),
                (false, true) => {}
                (true, false) => {
                    let s: f64 = text.parse().map_err(|_| bad(name, format!("{text:?} is not a number")))?;
                    if !s.is_finite() {
                        return Err(bad(name, format!("{s} is not finite")));
                    }
                    scores.push(s);
                }
            }
        }
        let base = LEADING.len() + columns;
        let option_letter = |c: usize| -> Result<usize> {
            let t = field(c);
            (0..options).find(|&i| letter(i) == t).ok_or_else(|| {
                bad(&expected[c], format!("{t:?} is not one of the question's letters A-{}", letter(options - 1)))
            })
        };
        let (prediction, key) = (option_letter(base)?, option_letter(base + 1)?);
        if prediction != argmax(&scores) {
            return Err(bad("prediction", format!("{} is not the best score's option", letter(prediction))));
        }
        let correct: bool = field(base + 2)
            .parse()
            .map_err(|_| bad("correct", format!("{:?} is not true or false", field(base + 2))))?;
        if correct != (prediction == key) {
            return Err(bad(
                "correct",
                format!("{correct}, but the prediction is {} and the key {}", letter(prediction), letter(key)),
            ));
        }
        let negated: bool =
            field(5).parse().map_err(|_| bad("negated", format!("{:?} is not true or false", field(5))))?;
        out.push(QuestionRecord {
            row: number(0)?,
            subject: field(1).to_string(),
            level: field(2).to_string(),
            kelas: field(3).to_string(),
            negated,
            scores,
            prediction,
            key,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(row: usize, scores: Vec<f64>, key: usize) -> QuestionRecord {
        QuestionRecord {
            row,
            subject: "Biologi".into(),
            level: "SMA".into(),
            kelas: "10".into(),
            negated: row.is_multiple_of(2),
            prediction: argmax(&scores),
            scores,
            key,
        }
    }

    #[test]
    fn records_read_back_exactly() {
        let dir = std::env::temp_dir().join(format!("indolm-indommlu-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(RECORDS_FILE);
        let records = vec![
            record(2, vec![-1.25, 0.1, -3.0], 1),
            record(3, vec![0.5, 0.5, -2.0, 1e-17, -7.5], 0),
            record(4, vec![-2.0, -1.0, -1.0, -4.0], 3),
        ];
        write_question_records(&path, &records).unwrap();
        assert_eq!(read_question_records(&path).unwrap(), records);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(
            "row,subject,level,kelas,area,negated,options,score_A,score_B,score_C,score_D,score_E,prediction,key,correct\n"
        ));
        assert!(text.contains("2,Biologi,SMA,10,STEM,true,3,-1.25,0.1,-3.0,,,B,B,true\n"), "{text}");

        // A prediction that is not the best score, and a score for a missing option, are refused.
        std::fs::write(&path, text.replace("-1.25,0.1,-3.0,,,B,B", "-1.25,0.1,-3.0,,,A,B")).unwrap();
        let err = read_question_records(&path).unwrap_err().to_string();
        assert!(err.contains("line 2, column prediction"), "{err}");
        std::fs::write(&path, text.replace("-1.25,0.1,-3.0,,,B", "-1.25,0.1,-3.0,4.0,,B")).unwrap();
        let err = read_question_records(&path).unwrap_err().to_string();
        assert!(err.contains("column score_D") && err.contains("3 options"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
