//! `indolm report indommlu-table MODEL...`: models side by side in the IndoMMLU paper's layout,
//! a row per model with its accuracy per area, the average over areas and the expected
//! calibration error, then the random baseline. A model is one IndoMMLU evaluation: an `eval
//! indommlu --out` folder, a checkpoint folder, or an `indommlu.json`, named `NAME=PATH` or by
//! its folder. Each row states how it was scored (masked, causal or encoder-decoder LM, mode,
//! shots, the LoRA prompt), and models that scored different questions are pointed out, since
//! their accuracies are not comparable.
use super::bias_table::TableModel;
use indolm_core::files::read_to_string;
use indolm_eval::indommlu::{read_question_records, RECORDS_FILE};
use indolm_eval::indommlu::{IndommluReport, AREAS, REPORT_FILE};
use indolm_torch::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One row of the JSON: a model's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IndommluRow {
    /// Model name.
    pub model: String,
    /// How it was scored, e.g. `causal LM, letter, 2-shot`.
    pub setting: String,
    /// Questions scored.
    pub questions: usize,
    /// (area, accuracy %) in the paper's order, for the areas it scored.
    pub areas: Vec<(String, f64)>,
    /// Mean over the areas, %.
    pub average: f64,
    /// Expected calibration error over all its questions, percentage points.
    pub ece: f64,
}

/// The table (Markdown) and its rows (for `--json`).
pub struct IndommluTable {
    /// The report.
    pub markdown: String,
    /// Every model's row.
    pub rows: Vec<IndommluRow>,
}

/// The `indommlu.json` a command-line path names: the file itself, or the one in the folder.
fn report_path(path: &Path) -> Result<PathBuf> {
    let file = if path.is_dir() { path.join(REPORT_FILE) } else { path.to_path_buf() };
    if !file.is_file() {
        return Err(Error::MissingFile {
            path: file,
            hint: "expected an IndoMMLU evaluation: an `indolm eval indommlu --out` folder or a checkpoint folder"
                .into(),
        });
    }
    Ok(file)
}

fn setting(r: &IndommluReport) -> String {
    let mut out = match (r.encoder_decoder, r.causal) {
        (true, _) => format!("encoder-decoder LM, {}, {}-shot", r.mode, r.shots),
        (false, true) => format!("causal LM, {}, {}-shot", r.mode, r.shots),
        (false, false) => format!("masked LM, {}", r.mode),
    };
    if r.template == indolm_eval::indommlu::causal::PromptTemplate::LoraInstruct {
        out.push_str(", LoRA instruction prompt");
    }
    out
}

/// Builds the table for `models`.
pub fn indommlu_table(models: &[TableModel]) -> Result<IndommluTable> {
    if models.is_empty() {
        return Err(Error::argument("MODEL", "name at least one evaluation"));
    }
    let mut loaded: Vec<(String, PathBuf, IndommluReport)> = Vec::new();
    for m in models {
        if loaded.iter().any(|(n, _, _)| *n == m.name) {
            return Err(Error::argument("MODEL", format!("two models are named {:?}; name them NAME=PATH", m.name)));
        }
        let file = report_path(&m.path)?;
        let report: IndommluReport =
            serde_json::from_str(&read_to_string(&file)?).map_err(|e| Error::json(&file, &e))?;
        loaded.push((m.name.clone(), file, report));
    }
    let areas: Vec<&str> = AREAS
        .iter()
        .map(|(a, _)| *a)
        .filter(|a| loaded.iter().any(|(_, _, r)| r.areas.iter().any(|x| x.area == *a)))
        .collect();
    let mut md = String::from(
        "# IndoMMLU: models side by side\n\nAccuracy (%) per area (the mean of its subjects), the average over areas, and the expected calibration error of the confidence (ECE, points).\n\n| model | setting | questions |",
    );
    for a in &areas {
        md.push_str(&format!(" {a} |"));
    }
    md.push_str(" average | ECE |\n|---|---|---:|");
    md.push_str(&"---:|".repeat(areas.len() + 2));
    md.push('\n');
    let mut rows = Vec::new();
    for (name, _, r) in &loaded {
        md.push_str(&format!("| {name} | {} | {} |", setting(r), r.questions));
        for a in &areas {
            match r.areas.iter().find(|x| x.area == *a) {
                Some(x) => md.push_str(&format!(" {:.1} |", x.accuracy)),
                None => md.push_str(" – |"),
            }
        }
        md.push_str(&format!(" **{:.1}** | {:.1} |\n", r.average, r.ece));
        rows.push(IndommluRow {
            model: name.clone(),
            setting: setting(r),
            questions: r.questions,
            areas: r.areas.iter().map(|x| (x.area.clone(), x.accuracy)).collect(),
            average: r.average,
            ece: r.ece,
        });
    }
    let first = &loaded[0].2;
    md.push_str(&format!("| random | (by option counts) | {} |", first.questions));
    for a in &areas {
        match first.areas.iter().find(|x| x.area == *a) {
            Some(x) => md.push_str(&format!(" {:.1} |", x.random)),
            None => md.push_str(" – |"),
        }
    }
    md.push_str(&format!(" {:.1} | |\n", first.random_average));
    // The same questions? By the records' CSV rows where both keep them, else by the counts.
    let asked: Vec<Option<Vec<usize>>> = loaded
        .iter()
        .map(|(_, file, _)| {
            let records = file.parent().map(|d| d.join(RECORDS_FILE)).filter(|p| p.is_file())?;
            Some(read_question_records(&records).ok()?.iter().map(|q| q.row).collect())
        })
        .collect();
    let same = |i: usize| match (&asked[0], &asked[i]) {
        (Some(a), Some(b)) => a == b,
        _ => loaded[0].2.questions == loaded[i].2.questions,
    };
    let differing: Vec<&str> = (1..loaded.len()).filter(|&i| !same(i)).map(|i| loaded[i].0.as_str()).collect();
    if !differing.is_empty() {
        md.push_str(&format!(
            "\nNot the same questions as {0}: {1} (accuracies over different questions are not comparable; the random row is {0}'s).\n",
            loaded[0].0,
            differing.join(", "),
        ));
    }
    Ok(IndommluTable { markdown: md, rows })
}
