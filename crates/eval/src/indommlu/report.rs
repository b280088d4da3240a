//! The IndoMMLU report, aggregated from the per-question records: accuracy per subject and
//! level, per area (mean of its subjects), the average of the areas, the random baseline from
//! the option counts, pass/fail at 65 (the paper's Table 4), accuracy with and without negation
//! overall and per area (Table 5), the Indonesian-language questions by grade (Fig. 5), the
//! expected calibration error of the confidence (softmax over the options) overall and per
//! area, and the correlation of the subject/levels' mean confidence with their accuracy (Fig. 8).
use super::prompts::PromptTemplate;
use super::questions::{area_of, AREAS, NEGATIONS};
use super::records::QuestionRecord;
use super::setting::Setting;
use crate::IndommluMode;
use indolm_metrics::calibration::{expected_calibration_error, ECE_BINS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The report's file name in a checkpoint or `eval indommlu --out` folder.
pub const REPORT_FILE: &str = "indommlu.json";

/// The paper's pass mark: accuracy (%) a subject and level needs to count as passed.
pub const PASS_MARK: f64 = 65.0;

/// The tally of a group of questions (a subject, a subject and level, with or without negation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Questions in the group.
    pub questions: usize,
    /// Of those, answered right.
    pub correct: usize,
    /// Expected correct answers by chance: Σ 1 / options.
    pub chance: f64,
    /// Σ confidence (the softmax over the options at the prediction).
    #[serde(default)]
    pub confidence: f64,
}

impl Cell {
    fn add(&mut self, correct: bool, options: usize, confidence: f64) {
        self.questions += 1;
        self.correct += correct as usize;
        self.chance += 1.0 / options as f64;
        self.confidence += confidence;
    }
    /// Percentage answered right (0 for an empty group).
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.questions.max(1) as f64
    }
    /// The percentage a random guess would get right, on average.
    pub(crate) fn random(&self) -> f64 {
        100.0 * self.chance / self.questions.max(1) as f64
    }
    /// The mean confidence, as a percentage (0 for an empty group).
    pub fn mean_confidence(&self) -> f64 {
        100.0 * self.confidence / self.questions.max(1) as f64
    }
}

/// One area's questions with and without negation (Table 5 of the paper).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NegationScore {
    /// The area's name, as in [`AREAS`].
    pub area: String,
    /// Its questions with negation (see [`super::Question::negated`]).
    pub negated: Cell,
    /// Its questions without.
    pub not_negated: Cell,
}

/// Pearson's correlation of `xs` with `ys`; `None` for under two points or a constant series.
fn pearson(xs: &[f64], ys: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return None;
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let (vx, vy): (f64, f64) = (xs.iter().map(|x| (x - mx).powi(2)).sum(), ys.iter().map(|y| (y - my).powi(2)).sum());
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// One area's scores (Table 2 of the paper).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AreaScore {
    /// The area's name, as in [`AREAS`].
    pub area: String,
    /// Mean of the subjects' accuracies.
    pub accuracy: f64,
    /// Mean of the subjects' random baselines.
    pub random: f64,
    /// The area's subjects among the questions.
    pub subjects: usize,
    /// Expected calibration error (percentage points) of the area's questions pooled.
    #[serde(default)]
    pub ece: f64,
}

/// The Indonesian-language questions of one grade (Fig. 5 of the paper).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradeScore {
    /// The grade, `1` to `12`, or `UE` for the university entrance exams.
    pub grade: String,
    /// Its questions.
    pub cell: Cell,
}

/// The subject of the paper's per-grade figure.
const GRADED_SUBJECT: &str = "Bahasa Indonesia";

/// The result of one IndoMMLU evaluation; written as `indommlu.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndommluReport {
    /// How the options were scored.
    pub mode: IndommluMode,
    /// Whether the model is a causal LM (else a masked LM).
    #[serde(default)]
    pub causal: bool,
    /// Solved questions in each prompt (0: zero-shot).
    #[serde(default)]
    pub shots: usize,
    /// The checkpoint's training step, when evaluated during pretraining.
    pub step: Option<u64>,
    /// The number of questions scored.
    pub questions: usize,
    /// The scored questions include the rows marked `is_for_fewshot` (`--questions all`, the
    /// paper's zero-shot set); else those rows were left out.
    #[serde(default)]
    pub demonstrations_included: bool,
    /// The model is an encoder-decoder (mT0, mT5), scored as evaluate.py scores mT0 (`causal`
    /// is then true as well: its prompts are the causal LMs').
    #[serde(default)]
    pub encoder_decoder: bool,
    /// The prompt's wrapping: evaluate.py's plain template, or its LoRA instruction template for
    /// a model with a merged adapter (Bactrian-X).
    #[serde(default)]
    pub template: PromptTemplate,
    /// "subject / level" → cell.
    pub subject_level: BTreeMap<String, Cell>,
    /// Subject → cell.
    pub subjects: BTreeMap<String, Cell>,
    /// The areas with at least one subject among the questions, in the paper's order.
    pub areas: Vec<AreaScore>,
    /// Mean over the areas.
    pub average: f64,
    /// Mean over the areas of their random baselines.
    pub random_average: f64,
    /// The questions with negation (see [`Question::negated`]).
    pub negated: Cell,
    /// The questions without.
    pub not_negated: Cell,
    /// With and without negation per area, for the areas with questions, in the paper's order
    /// (its Table 5 shows Indonesian language and Social science).
    #[serde(default)]
    pub negation_by_area: Vec<NegationScore>,
    /// Subjects outside the paper's mapping (scored, not in the averages).
    pub unmapped_subjects: Vec<String>,
    /// The Indonesian-language questions by grade, 1 to 12 then the university entrance exams
    /// (the paper's Fig. 5), for the grades present.
    #[serde(default)]
    pub indonesian_by_grade: Vec<GradeScore>,
    /// Expected calibration error (percentage points, 10 bins) of all the questions: the
    /// confidence is the softmax over the options' scores at the prediction.
    #[serde(default)]
    pub ece: f64,
    /// Pearson's r between the mean confidence and the accuracy of the subject/level groups
    /// (the paper's "64 tasks", Fig. 8); `None` for fewer than two groups or a constant series.
    #[serde(default)]
    pub confidence_accuracy_r: Option<f64>,
}

/// The grade of an Indonesian-language question for Fig. 5: `(order, label)`, 1 to 12 from
/// `kelas` (`10` or `10.0`), `(13, "UE")` for the university entrance exams; `None` when
/// `kelas` is not a whole grade.
fn grade_of(level: &str, kelas: &str) -> Option<(u32, String)> {
    if level.to_lowercase().contains("seleksi") {
        return Some((13, "UE".to_string()));
    }
    let g = kelas.trim().parse::<f64>().ok().filter(|g| g.fract() == 0.0 && (1.0..=12.0).contains(g))?;
    Some((g as u32, (g as u32).to_string()))
}

/// Aggregates per-question records (read back from `indommlu_questions.csv`, say): the report
/// the evaluation that wrote them wrote.
pub fn aggregate_records(records: &[QuestionRecord], setting: Setting, step: Option<u64>) -> IndommluReport {
    let (mut subject_level, mut subjects) = (BTreeMap::<String, Cell>::new(), BTreeMap::<String, Cell>::new());
    let (mut negated, mut not_negated) = (Cell::default(), Cell::default());
    // Area -> (with negation, without).
    let mut negation = BTreeMap::<&str, (Cell, Cell)>::new();
    // (grade as a number, 13 for the entrance exams; its label) -> cell.
    let mut grades = BTreeMap::<(u32, String), Cell>::new();
    for r in records {
        let (ok, n, c) = (r.correct(), r.scores.len(), r.confidence());
        if r.subject == GRADED_SUBJECT {
            if let Some(grade) = grade_of(&r.level, &r.kelas) {
                grades.entry(grade).or_default().add(ok, n, c);
            }
        }
        subject_level.entry(format!("{} / {}", r.subject, r.level)).or_default().add(ok, n, c);
        subjects.entry(r.subject.to_string()).or_default().add(ok, n, c);
        if r.negated { &mut negated } else { &mut not_negated }.add(ok, n, c);
        if let Some(area) = area_of(&r.subject) {
            let (with, without) = negation.entry(area).or_default();
            if r.negated { with } else { without }.add(ok, n, c);
        }
    }
    let ece = |area: Option<&str>| {
        let answers: Vec<(f64, bool)> = records
            .iter()
            .filter(|r| area.is_none() || area_of(&r.subject) == area)
            .map(|r| (r.confidence(), r.correct()))
            .collect();
        100.0 * expected_calibration_error(&answers, ECE_BINS)
    };
    let mut areas = Vec::new();
    for (area, _) in AREAS {
        let cells: Vec<&Cell> = subjects.iter().filter(|(s, _)| area_of(s) == Some(area)).map(|(_, c)| c).collect();
        if cells.is_empty() {
            continue;
        }
        let mean = |f: &dyn Fn(&Cell) -> f64| cells.iter().map(|c| f(c)).sum::<f64>() / cells.len() as f64;
        areas.push(AreaScore {
            area: area.to_string(),
            accuracy: mean(&|c| c.accuracy()),
            random: mean(&|c| c.random()),
            subjects: cells.len(),
            ece: ece(Some(area)),
        });
    }
    let n = areas.len().max(1) as f64;
    let unmapped_subjects = subjects.keys().filter(|s| area_of(s).is_none()).cloned().collect();
    let negation_by_area = AREAS
        .iter()
        .filter_map(|(area, _)| {
            let (negated, not_negated) = negation.remove(area)?;
            Some(NegationScore { area: area.to_string(), negated, not_negated })
        })
        .collect();
    let (confidences, accuracies): (Vec<f64>, Vec<f64>) =
        subject_level.values().map(|c| (c.mean_confidence(), c.accuracy())).unzip();
    IndommluReport {
        mode: setting.mode,
        causal: setting.causal,
        shots: setting.shots,
        step,
        questions: records.len(),
        demonstrations_included: false,
        encoder_decoder: false,
        template: PromptTemplate::Plain,
        average: areas.iter().map(|a| a.accuracy).sum::<f64>() / n,
        random_average: areas.iter().map(|a| a.random).sum::<f64>() / n,
        areas,
        subject_level,
        subjects,
        negated,
        not_negated,
        negation_by_area,
        unmapped_subjects,
        indonesian_by_grade: grades.into_iter().map(|((_, grade), cell)| GradeScore { grade, cell }).collect(),
        ece: ece(None),
        confidence_accuracy_r: pearson(&confidences, &accuracies),
    }
}

impl IndommluReport {
    /// The kind of model and its prompting: `masked LM`, `causal LM, 2-shot`,
    /// `encoder-decoder LM, 0-shot`, with `, LoRA instruction prompt` for an adapter.
    pub(crate) fn model_setting(&self) -> String {
        let mut out = match (self.encoder_decoder, self.causal) {
            (true, _) => format!("encoder-decoder LM, {}-shot", self.shots),
            (false, true) => format!("causal LM, {}-shot", self.shots),
            (false, false) => "masked LM".into(),
        };
        if self.template == PromptTemplate::LoraInstruct {
            out.push_str(", LoRA instruction prompt");
        }
        out
    }

    /// The report as markdown: the area table with the average, the subject/level table with
    /// pass or fail, negation, and subjects outside the mapping.
    pub fn markdown(&self) -> String {
        let model = self.model_setting();
        let set = if self.demonstrations_included {
            "every row, the is_for_fewshot demonstrations included"
        } else {
            "the rows not marked is_for_fewshot"
        };
        let mut out = format!(
            "IndoMMLU, mode {}, {model}, {} questions ({set}): accuracy % (random baseline), expected calibration error of the confidence (softmax over the options)\n\n| area | accuracy | random | ECE | subjects |\n|---|---:|---:|---:|---:|\n",
            self.mode, self.questions
        );
        for a in &self.areas {
            out.push_str(&format!(
                "| {} | {:.1} | {:.1} | {:.1} | {} |\n",
                a.area, a.accuracy, a.random, a.ece, a.subjects
            ));
        }
        out.push_str(&format!(
            "| **average** | **{:.1}** | {:.1} | {:.1} (all questions) | |\n",
            self.average, self.random_average, self.ece
        ));
        out.push_str(&format!(
            "\n| subject / level | accuracy | random | questions | pass ({PASS_MARK}) |\n|---|---:|---:|---:|:-:|\n"
        ));
        for (k, c) in &self.subject_level {
            out.push_str(&format!(
                "| {k} | {:.1} | {:.1} | {} | {} |\n",
                c.accuracy(),
                c.random(),
                c.questions,
                if c.accuracy() >= PASS_MARK { "pass" } else { "fail" }
            ));
        }
        out.push_str(&format!(
            "\nwith negation ({}): {:.1} ({} questions); without: {:.1} ({} questions)\n",
            NEGATIONS.join(", "),
            self.negated.accuracy(),
            self.negated.questions,
            self.not_negated.accuracy(),
            self.not_negated.questions
        ));
        if !self.negation_by_area.is_empty() {
            out.push_str("\n| area | with negation | without | questions with / without |\n|---|---:|---:|---:|\n");
            for a in &self.negation_by_area {
                out.push_str(&format!(
                    "| {} | {:.1} | {:.1} | {} / {} |\n",
                    a.area,
                    a.negated.accuracy(),
                    a.not_negated.accuracy(),
                    a.negated.questions,
                    a.not_negated.questions
                ));
            }
        }
        if !self.indonesian_by_grade.is_empty() {
            let grades: Vec<String> = self
                .indonesian_by_grade
                .iter()
                .map(|g| format!("{} {:.1} ({})", g.grade, g.cell.accuracy(), g.cell.questions))
                .collect();
            out.push_str(&format!("Indonesian language by grade (accuracy, questions): {}\n", grades.join(", ")));
        }
        if let Some(r) = self.confidence_accuracy_r {
            out.push_str(&format!(
                "mean confidence against accuracy over the {} subject/level groups: Pearson r {r:.3}\n",
                self.subject_level.len()
            ));
        }
        if !self.unmapped_subjects.is_empty() {
            out.push_str(&format!(
                "subjects outside the paper's area mapping (not averaged): {}\n",
                self.unmapped_subjects.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_is_one_for_a_line_minus_one_reversed_and_none_when_undefined() {
        assert!((pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
        // By hand: means 2 and 5/3; cov = (-1)(-2/3) + 0 + (1)(1/3) = 1; var x = 2, var y = 2/3.
        let r = pearson(&[1.0, 2.0, 3.0], &[1.0, 2.0, 2.0]).unwrap();
        assert!((r - 1.0 / (2.0f64 * 2.0 / 3.0).sqrt()).abs() < 1e-12, "{r}");
        assert_eq!(pearson(&[1.0, 2.0], &[5.0, 5.0]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
    }

    #[test]
    fn grades_come_from_whole_kelas_values_and_the_entrance_exams() {
        assert_eq!(grade_of("SMA", "10"), Some((10, "10".into())));
        assert_eq!(grade_of("SMA", "10.0"), Some((10, "10".into())));
        assert_eq!(grade_of("Seleksi PTN", ""), Some((13, "UE".into())));
        assert_eq!(grade_of("SD", "2.5"), None);
        assert_eq!(grade_of("SD", ""), None);
    }
}
