//! The IndoMMLU CSV: one file (`subject, level, kelas, soal, jawaban, kunci`, sometimes
//! `is_for_fewshot`); options are one a line, each starting with its letter; rows marked
//! `is_for_fewshot = 1` are demonstrations for few-shot prompts and are not scored. Also the
//! paper's subject → area mapping and the question's prompt parts.
use indolm_core::files::open_csv;
use indolm_torch::error::{Error, Result};
use std::path::Path;

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
/// The phrases that make a question ask for the option that does not hold.
pub(crate) const NEGATIONS: [&str; 3] = ["kecuali", "yang bukan", "yang tidak"];

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
    pub(crate) fn level_phrase(&self) -> String {
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
    pub(crate) fn key_letter(&self) -> char {
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
    pub(crate) fn tail(&self) -> String {
        let options: Vec<String> = self.options.iter().map(|(l, t)| format!("{l}. {t}")).collect();
        format!("{}\nJawaban:", options.join("\n"))
    }
    /// Whether the question asks for the option that does not hold (`kecuali`, `yang bukan`,
    /// `yang tidak`).
    pub(crate) fn negated(&self) -> bool {
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

/// Which of the CSV's rows an evaluation scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum QuestionSet {
    /// The rows not marked `is_for_fewshot = 1` (the release's 14,906): the demonstrations
    /// few-shot prompts show are left out, so zero- and few-shot figures share one set.
    #[default]
    HeldOut,
    /// Every row, the demonstrations included (the release's 14,981), as the paper's zero-shot
    /// tables score them; zero-shot only.
    All,
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

impl IndommluData {
    /// The rows `set` scores, in CSV order.
    pub fn scored(&self, set: QuestionSet) -> Vec<Question> {
        match set {
            QuestionSet::HeldOut => self.questions.clone(),
            QuestionSet::All => {
                let mut all: Vec<Question> = self.questions.iter().chain(&self.examples).cloned().collect();
                all.sort_by_key(|q| q.row);
                all
            }
        }
    }
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
                    indolm_core::files::quoted(&get(jawaban))
                ),
            )
        })?;
        let key = get(kunci).to_uppercase();
        let answer = options.iter().position(|(l, _)| key.len() == 1 && key.starts_with(*l)).ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "row {row}: the key {} is not among the options {}",
                    indolm_core::files::quoted(&key),
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
                    format!("row {row}: is_for_fewshot is {}; expected 0 or 1", indolm_core::files::quoted(other)),
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
