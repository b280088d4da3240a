//! IndoMMLU: the CSV, masked-LM scoring, and the report. The release is one CSV (`subject,
//! level, kelas, soal, jawaban, kunci`, sometimes `is_for_fewshot`); options are one a line,
//! each starting with its letter; rows marked `is_for_fewshot = 1` are demonstrations for
//! few-shot prompts and are not scored. The paper's prompt: `Ini adalah soal [SUBJECT] untuk
//! [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!`, the question, the options,
//! `Jawaban: `. Two scoring modes for masked LMs: `option-pll` (the mean PLL of the option's
//! tokens, each masked in turn, after the prompt; the question is truncated from the left to
//! fit) and `letter` (one `[MASK]` after `Jawaban:` and the logits of the option letters);
//! causal LMs are scored by [`super::indommlu_causal`]. Accuracy per subject and level, per
//! area (mean of its subjects), the average of the areas, the random baseline from the option
//! counts, pass/fail at 65, accuracy with and without negation, and the expected calibration
//! error of the confidence (softmax over the options) per area. Every evaluation also keeps its
//! per-question records ([`super::indommlu_records`]), and the report is aggregated from them.
use super::calibration::{expected_calibration_error, ECE_BINS};
use super::indommlu_records::{write_question_records, QuestionRecord, RECORDS_FILE};
use super::pll::{PllScorer, ScoringInput};
use crate::data::tokenizer::TextTokenizer;
use crate::device::to_device_queued;
use crate::error::{Error, Result};
use crate::eval::IndommluMode;
use crate::files::{open_csv, write_json};
use crate::hooks::CheckpointHook;
use crate::logger::Logger;
use crate::model::BertForMaskedLM;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// The paper's subject → area mapping (Table 2).
pub const AREAS: &[(&str, &[&str])] = &[
    ("STEM", &["Kimia", "Biologi", "IPA", "Fisika"]),
    ("Social science", &["Geografi", "IPS", "Sosiologi", "Ekonomi", "PPKN"]),
    ("Humanities", &["Sejarah", "Agama Kristen", "Agama Islam", "Agama Hindu", "Kesenian", "Penjaskes"]),
    ("Indonesian language", &["Bahasa Indonesia"]),
    (
        "Local languages and cultures",
        &[
            "Bahasa Lampung",
            "Bahasa Bali",
            "Bahasa Makassar",
            "Bahasa Banjar",
            "Bahasa Madura",
            "Bahasa Sunda",
            "Bahasa Jawa",
            "Bahasa Dayak Ngaju",
            "Budaya Alam Minangkabau",
        ],
    ),
];
/// The report's file name in a checkpoint or `eval indommlu --out` folder.
pub const REPORT_FILE: &str = "indommlu.json";

/// The paper's pass mark: accuracy (%) a subject and level needs to count as passed.
pub const PASS_MARK: f64 = 65.0;
const NEGATIONS: [&str; 3] = ["kecuali", "yang bukan", "yang tidak"];

/// The paper's area of `subject` (case-insensitive), if it has one.
pub fn area_of(subject: &str) -> Option<&'static str> {
    AREAS.iter().find(|(_, subjects)| subjects.iter().any(|s| s.eq_ignore_ascii_case(subject))).map(|(a, _)| *a)
}

/// One multiple-choice question of the CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Its row in the CSV (the header is row 1).
    pub row: usize,
    /// The `subject` column, e.g. `Biologi`.
    pub subject: String,
    /// The `level` column: `SD`, `SMP`, `SMA` or `Seleksi PTN` (university entrance).
    pub level: String,
    /// The `kelas` column: the school year (empty for `Seleksi PTN`).
    pub kelas: String,
    /// The question text (`soal`).
    pub question: String,
    /// (letter, text) in order.
    pub options: Vec<(char, String)>,
    /// The index of the right option (from `kunci`).
    pub answer: usize,
    /// The `soal` field exactly as the CSV holds it (the causal prompt uses it untrimmed, as
    /// IndoMMLU's evaluate.py does).
    pub soal: String,
    /// The `jawaban` field exactly as the CSV holds it: the option lines.
    pub jawaban: String,
    /// Marked `is_for_fewshot = 1`: a demonstration for few-shot prompts, not a test question.
    pub for_fewshot: bool,
}

impl Question {
    /// The prompt's `[LEVEL]`: `<kelas> <level>` (e.g. `4 SD`; a numeric kelas such as `10.0`
    /// truncated to `10`, as evaluate.py does), or `seleksi masuk universitas` for `Seleksi PTN`.
    pub fn level_phrase(&self) -> String {
        if self.level.to_lowercase().contains("seleksi") {
            return "seleksi masuk universitas".into();
        }
        let kelas = match self.kelas.parse::<f64>() {
            Ok(k) if k.is_finite() => format!("{}", k.trunc()),
            _ => self.kelas.clone(),
        };
        format!("{kelas} {}", self.level).trim().to_string()
    }
    /// The letter of the right option.
    pub fn key_letter(&self) -> char {
        self.options[self.answer].0
    }
    /// The prompt's first sentence, naming the subject and level.
    pub fn header(&self) -> String {
        format!(
            "Ini adalah soal {} untuk {}. Pilihlah salah satu jawaban yang dianggap benar!",
            self.subject,
            self.level_phrase()
        )
    }
    /// The options listing and the answer cue that follow the question.
    pub fn tail(&self) -> String {
        let options: Vec<String> = self.options.iter().map(|(l, t)| format!("{l}. {t}")).collect();
        format!("{}\nJawaban:", options.join("\n"))
    }
    /// Whether the question asks for the option that does not hold (`kecuali`, `yang bukan`,
    /// `yang tidak`).
    pub fn negated(&self) -> bool {
        let q = self.question.to_lowercase();
        NEGATIONS.iter().any(|n| q.contains(n))
    }
}

/// Splits `jawaban` into lettered options ("A. ...", "A) ...", "A ...").
fn split_options(text: &str) -> Option<Vec<(char, String)>> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut chars = line.chars();
        let letter = chars.next()?.to_ascii_uppercase();
        let expected = (b'A' + out.len() as u8) as char;
        if letter != expected {
            return None;
        }
        let rest = chars.as_str().trim_start_matches(['.', ')', ':']).trim();
        out.push((letter, rest.to_string()));
    }
    (out.len() >= 2).then_some(out)
}

/// The CSV's rows: the questions to score and the few-shot demonstrations.
#[derive(Debug, Clone, PartialEq)]
pub struct IndommluData {
    /// Rows not marked `is_for_fewshot = 1`, in CSV order.
    pub questions: Vec<Question>,
    /// Rows marked `is_for_fewshot = 1` (the release has 75), in CSV order.
    pub examples: Vec<Question>,
    /// Whether the CSV has the `is_for_fewshot` column.
    pub has_fewshot_column: bool,
}

/// The questions to score in the IndoMMLU CSV (rows not marked `is_for_fewshot = 1`); see
/// [`load_all`].
pub fn load(path: &Path) -> Result<Vec<Question>> {
    Ok(load_all(path)?.questions)
}

/// Reads and checks the IndoMMLU CSV: the columns, every row's options and key, no empty
/// question, `is_for_fewshot` 0 or 1 where present.
pub fn load_all(path: &Path) -> Result<IndommluData> {
    let (mut reader, header) =
        open_csv(&csv::ReaderBuilder::new(), path, "get the CSV with `indolm download indommlu`")?;
    let header: Vec<String> = header.iter().map(|h| h.trim().to_lowercase()).collect();
    let col = |n: &str| {
        header
            .iter()
            .position(|h| h == n)
            .ok_or_else(|| Error::field(path, n, format!("missing column; the header has {header:?}")))
    };
    let (subject, level, kelas, soal, jawaban, kunci) =
        (col("subject")?, col("level")?, col("kelas")?, col("soal")?, col("jawaban")?, col("kunci")?);
    let fewshot = col("is_for_fewshot").ok();
    let (mut questions, mut examples) = (Vec::new(), Vec::new());
    for (i, rec) in reader.records().enumerate() {
        let row = i + 2;
        let rec = rec.map_err(|e| Error::invalid(path, format!("row {row}: {e}")))?;
        let get = |c: usize| rec.get(c).unwrap_or("").trim().to_string();
        let options = split_options(&get(jawaban)).ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "row {row}: cannot split the options {} (one per line, starting A, B, C, ...)",
                    crate::files::quoted(&get(jawaban))
                ),
            )
        })?;
        let key = get(kunci).to_uppercase();
        let answer = options.iter().position(|(l, _)| key.len() == 1 && key.starts_with(*l)).ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "row {row}: the key {} is not among the options {}",
                    crate::files::quoted(&key),
                    options.iter().map(|(l, _)| l.to_string()).collect::<Vec<_>>().join("")
                ),
            )
        })?;
        if get(soal).is_empty() {
            return Err(Error::invalid(path, format!("row {row}: empty question")));
        }
        let for_fewshot = match fewshot.map(get).as_deref() {
            None | Some("" | "0" | "0.0" | "false" | "False") => false,
            Some("1" | "1.0" | "true" | "True") => true,
            Some(other) => {
                return Err(Error::invalid(
                    path,
                    format!("row {row}: is_for_fewshot is {}; expected 0 or 1", crate::files::quoted(other)),
                ))
            }
        };
        let raw = |c: usize| rec.get(c).unwrap_or("").to_string();
        let q = Question {
            row,
            subject: get(subject),
            level: get(level),
            kelas: get(kelas),
            question: get(soal),
            options,
            answer,
            soal: raw(soal),
            jawaban: raw(jawaban),
            for_fewshot,
        };
        if for_fewshot {
            examples.push(q)
        } else {
            questions.push(q)
        }
    }
    if questions.is_empty() {
        return Err(Error::invalid(
            path,
            format!(
                "no question to score ({} row(s), {} of them demonstrations marked is_for_fewshot): expected IndoMMLU's CSV",
                questions.len() + examples.len(),
                examples.len()
            ),
        ));
    }
    Ok(IndommluData { questions, examples, has_fewshot_column: fewshot.is_some() })
}

/// `[CLS] header question tail X [SEP]` ids, with the question (then the tail) cut from the
/// left so the whole fits `max_len`; returns the ids and where `X` starts.
pub fn context_ids(tok: &TextTokenizer, q: &Question, extra: &[i64], max_len: usize) -> Result<(Vec<i64>, usize)> {
    let enc = |s: &str| -> Result<Vec<i64>> { Ok(tok.encode_plain(s)?.into_iter().map(i64::from).collect()) };
    let header = enc(&q.header())?;
    let mut middle = enc(&q.question)?;
    middle.extend(enc(&q.tail())?);
    let room = max_len.saturating_sub(2 + header.len() + extra.len());
    if middle.len() > room {
        middle.drain(..middle.len() - room);
    }
    let mut ids = vec![tok.special.cls];
    ids.extend(header);
    ids.extend(middle);
    let start = ids.len();
    ids.extend_from_slice(extra);
    ids.push(tok.special.sep);
    Ok((ids, start))
}

/// One score per option (higher is better) for every question.
pub fn score_questions(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    questions: &[Question],
    mode: IndommluMode,
    device: Device,
) -> Result<Vec<Vec<f64>>> {
    match mode {
        IndommluMode::OptionPll => option_pll_scores(model, tok, questions, device),
        IndommluMode::Letter => letter_scores(model, tok, questions, device),
        IndommluMode::FullAnswer => Err(mode_misfit(false)),
    }
}

/// `option-pll`: each option's PLL per token after the prompt (an option with no tokens is
/// scored as `[UNK]`).
fn option_pll_scores(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    questions: &[Question],
    device: Device,
) -> Result<Vec<Vec<f64>>> {
    let max_len = model.max_positions();
    let scorer = PllScorer::new(model, tok, device);
    let mut inputs = Vec::new();
    for q in questions {
        for (_, text) in &q.options {
            let option: Vec<i64> = tok.encode_plain(text)?.into_iter().map(i64::from).collect();
            let option = if option.is_empty() { vec![tok.special.unk] } else { option };
            let (ids, start) = context_ids(tok, q, &option, max_len)?;
            inputs.push(ScoringInput::one_at_a_time(ids, (start..start + option.len()).collect()));
        }
    }
    let scores = scorer.score(&inputs);
    let mut it = scores.into_iter();
    Ok(questions
        .iter()
        .map(|q| {
            q.options
                .iter()
                .map(|_| {
                    let s = it.next().expect("one score per option");
                    s.pll / s.tokens as f64
                })
                .collect()
        })
        .collect())
}

/// `letter`: the log-probability of each option's letter at the `[MASK]` after `Jawaban:`,
/// 16 questions a batch.
fn letter_scores(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    questions: &[Question],
    device: Device,
) -> Result<Vec<Vec<f64>>> {
    let max_len = model.max_positions();
    let mut out = Vec::new();
    for chunk in questions.chunks(16) {
        let log_probs = answer_log_probs(model, tok, chunk, max_len, device)?;
        for (r, q) in chunk.iter().enumerate() {
            out.push(letter_log_probs(tok, q, &log_probs, r)?);
        }
    }
    Ok(out)
}

/// The log-probabilities over the vocabulary at the answer `[MASK]` of each question, in one
/// padded batch: `[questions, vocab]`, double precision, on the CPU.
fn answer_log_probs(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    chunk: &[Question],
    max_len: usize,
    device: Device,
) -> Result<Tensor> {
    let mut rows = Vec::new();
    let mut positions = Vec::new();
    for q in chunk {
        let (ids, start) = context_ids(tok, q, &[tok.special.mask], max_len)?;
        positions.push(start);
        rows.push(ids);
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let flat: Vec<i64> = rows
        .iter()
        .flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(tok.special.pad, width - r.len())))
        .collect();
    let mask: Vec<i64> = rows
        .iter()
        .flat_map(|r| std::iter::repeat_n(1i64, r.len()).chain(std::iter::repeat_n(0, width - r.len())))
        .collect();
    let flat_pos: Vec<i64> = positions.iter().enumerate().map(|(r, &p)| (r * width + p) as i64).collect();
    let shape = [rows.len() as i64, width as i64];
    Ok(tch::no_grad(|| {
        let ids = to_device_queued(&flat, &shape, device);
        let m = to_device_queued(&mask, &shape, device);
        let hidden = model.bert.forward(&ids, None, Some(&m), false);
        model
            .logits_at(&hidden, &to_device_queued(&flat_pos, &[flat_pos.len() as i64], device))
            .log_softmax(-1, Kind::Double)
            .to_device(Device::Cpu)
    }))
}

/// Row `r` of `log_probs` at each of `q`'s option letters (lowercased when the tokenizer
/// lowercases).
fn letter_log_probs(tok: &TextTokenizer, q: &Question, log_probs: &Tensor, r: usize) -> Result<Vec<f64>> {
    let mut scores = Vec::new();
    for (letter, _) in &q.options {
        let token = if tok.lowercase { letter.to_ascii_lowercase() } else { *letter }.to_string();
        let id = tok.token_to_id(&token).ok_or_else(|| Error::Tokenizer {
            path: tok.source.clone(),
            message: format!("no token for the option letter {token:?}"),
        })?;
        scores.push(log_probs.double_value(&[r as i64, id as i64]));
    }
    Ok(scores)
}

/// The tally of a group of questions (a subject, a subject and level, with or without negation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Questions in the group.
    pub questions: usize,
    /// Of those, answered right.
    pub correct: usize,
    /// Expected correct answers by chance: Σ 1 / options.
    pub chance: f64,
}

impl Cell {
    fn add(&mut self, correct: bool, options: usize) {
        self.questions += 1;
        self.correct += correct as usize;
        self.chance += 1.0 / options as f64;
    }
    /// Percentage answered right (0 for an empty group).
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.questions.max(1) as f64
    }
    /// The percentage a random guess would get right, on average.
    pub fn random(&self) -> f64 {
        100.0 * self.chance / self.questions.max(1) as f64
    }
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

/// How an evaluation answered its questions, recorded in its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// How the options were scored.
    pub mode: IndommluMode,
    /// Whether the model is a causal LM (else a masked LM).
    pub causal: bool,
    /// Solved questions in each prompt (causal LMs; 0 for zero-shot).
    pub shots: usize,
}

impl Setting {
    /// A masked LM, zero-shot, scored with `mode`.
    pub fn masked(mode: IndommluMode) -> Self {
        Setting { mode, causal: false, shots: 0 }
    }

    /// Refuses what the model cannot do: a mode of the other kind of model ([`mode_misfit`]),
    /// shots for a masked LM, or shots from `data`, a CSV without the `is_for_fewshot` column.
    pub fn check(&self, data: &IndommluData, path: &Path) -> Result<()> {
        match (self.causal, self.mode) {
            (true, IndommluMode::OptionPll) | (false, IndommluMode::FullAnswer) => Err(mode_misfit(self.causal)),
            (false, _) if self.shots > 0 => Err(Error::Argument {
                flag: "--shots".into(),
                message: "few-shot prompts are for causal LMs; a masked LM is scored zero-shot".into(),
            }),
            (true, _) if self.shots > 0 && !data.has_fewshot_column => Err(Error::invalid(
                path,
                "no is_for_fewshot column: few-shot prompts take their solved questions from the rows marked 1",
            )),
            _ => Ok(()),
        }
    }
}

/// The refusal of a mode the kind of model cannot be scored with: `full-answer` for a masked
/// LM, `option-pll` for a causal one.
pub fn mode_misfit(causal: bool) -> Error {
    let message = if causal {
        "option-pll masks tokens, which a causal LM cannot score; use letter or full-answer"
    } else {
        "full-answer scores a causal LM's answer text; a masked LM takes option-pll or letter"
    };
    Error::Argument { flag: "--mode".into(), message: message.into() }
}

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
    /// Subjects outside the paper's mapping (scored, not in the averages).
    pub unmapped_subjects: Vec<String>,
    /// Expected calibration error (percentage points, 10 bins) of all the questions: the
    /// confidence is the softmax over the options' scores at the prediction.
    #[serde(default)]
    pub ece: f64,
}

/// Aggregates per-question records (read back from `indommlu_questions.csv`, say): the report
/// the evaluation that wrote them wrote.
pub fn aggregate_records(records: &[QuestionRecord], setting: Setting, step: Option<u64>) -> IndommluReport {
    let (mut subject_level, mut subjects) = (BTreeMap::<String, Cell>::new(), BTreeMap::<String, Cell>::new());
    let (mut negated, mut not_negated) = (Cell::default(), Cell::default());
    for r in records {
        let (ok, n) = (r.correct(), r.scores.len());
        subject_level.entry(format!("{} / {}", r.subject, r.level)).or_default().add(ok, n);
        subjects.entry(r.subject.to_string()).or_default().add(ok, n);
        if r.negated {
            negated.add(ok, n)
        } else {
            not_negated.add(ok, n)
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
    IndommluReport {
        mode: setting.mode,
        causal: setting.causal,
        shots: setting.shots,
        step,
        questions: records.len(),
        average: areas.iter().map(|a| a.accuracy).sum::<f64>() / n,
        random_average: areas.iter().map(|a| a.random).sum::<f64>() / n,
        areas,
        subject_level,
        subjects,
        negated,
        not_negated,
        unmapped_subjects,
        ece: ece(None),
    }
}

/// Scores the questions: their records, and the report aggregated from them.
pub fn evaluate(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    questions: &[Question],
    mode: IndommluMode,
    device: Device,
    step: Option<u64>,
) -> Result<(IndommluReport, Vec<QuestionRecord>)> {
    let scores = score_questions(model, tok, questions, mode, device)?;
    let records: Vec<QuestionRecord> =
        questions.iter().zip(scores).map(|(q, s)| QuestionRecord::new(q, s)).collect::<Result<_>>()?;
    Ok((aggregate_records(&records, Setting::masked(mode), step), records))
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

impl IndommluReport {
    /// The report as markdown: the area table with the average, the subject/level table with
    /// pass or fail, negation, and subjects outside the mapping.
    pub fn markdown(&self) -> String {
        let model = if self.causal { format!("causal LM, {}-shot", self.shots) } else { "masked LM".into() };
        let mut out = format!(
            "IndoMMLU, mode {}, {model}, {} questions: accuracy % (random baseline), expected calibration error of the confidence (softmax over the options)\n\n| area | accuracy | random | ECE | subjects |\n|---|---:|---:|---:|---:|\n",
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
        if !self.unmapped_subjects.is_empty() {
            out.push_str(&format!(
                "subjects outside the paper's area mapping (not averaged): {}\n",
                self.unmapped_subjects.join(", ")
            ));
        }
        out
    }
}

/// The `[eval.indommlu]` checkpoint hook: a fixed, seeded subsample of the questions.
pub struct IndommluHook {
    /// The questions scored at every checkpoint, in CSV order.
    pub questions: Vec<Question>,
    /// How the options are scored.
    pub mode: IndommluMode,
    /// Where the model runs.
    pub device: Device,
}

impl IndommluHook {
    /// Loads the questions from `path` and keeps `subsample` of them (all when 0 or more than
    /// there are), drawn with `seed`.
    pub fn new(path: &Path, mode: IndommluMode, subsample: usize, seed: u64, device: Device) -> Result<Self> {
        use rand::seq::SliceRandom;
        let mut questions = load(path)?;
        if subsample > 0 && subsample < questions.len() {
            questions.shuffle(&mut crate::seeds::stream_rng(seed, crate::seeds::salt::INDOMMLU_SUBSAMPLE, 0));
            questions.truncate(subsample);
            questions.sort_by_key(|q| q.row);
        }
        Ok(IndommluHook { questions, mode, device })
    }
}

impl CheckpointHook for IndommluHook {
    fn name(&self) -> &str {
        "IndoMMLU evaluation"
    }
    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        dir: &Path,
        logger: &mut Logger,
    ) -> Result<()> {
        let (report, records) = evaluate(model, tokenizer, &self.questions, self.mode, self.device, Some(step))?;
        write_evaluation(dir, &report, &records)?;
        for a in &report.areas {
            logger.scalar(&format!("indommlu/{}", a.area.replace(' ', "_")), a.accuracy, step);
        }
        logger.scalar("indommlu/average", report.average, step);
        logger.scalar("indommlu/ece", report.ece, step);
        logger.println(&format!(
            "step {step}: IndoMMLU average {:.1} (random {:.1})",
            report.average, report.random_average
        ));
        Ok(())
    }
}
