//! The translation baselines that need no model, as the NusaX paper runs them: Copy (the source
//! sentence as its translation) and word substitution with the NusaX lexicon, over every
//! direction of Tables 4 and 6, scored with SacreBLEU and chrF as the `sacrebleu` package
//! computes them, and laid out as the tables are, the paper's figure beside each of ours.
use super::data::{code, Direction, ParallelSplit, Table};
use super::lexicon::Lexicon;
use super::paper::{self, System};
use indolm_metrics::bleu::{corpus_bleu, BleuOptions};
use indolm_metrics::chrf::{corpus_chrf, ChrfOptions};
use indolm_torch::error::{Error, IoContext, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The systems `baseline nusax-mt` runs.
pub const SYSTEMS: [System; 2] = [System::Copy, System::WordSubstitution];

/// One direction's scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionScore {
    /// `ace-ind`.
    pub direction: String,
    /// Corpus BLEU (SacreBLEU's default settings).
    pub bleu: f64,
    /// The BLEU line as sacrebleu prints it (n-gram precisions, brevity penalty, lengths).
    pub bleu_detail: String,
    /// Corpus chrF (sacrebleu's default chrF2).
    pub chrf: f64,
    /// The paper's BLEU for this system and direction, where it reports one.
    pub paper_bleu: Option<f64>,
}

/// One system's row of one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemRow {
    /// The system.
    pub system: System,
    /// The table.
    pub table: Table,
    /// One score per column, in column order.
    pub directions: Vec<DirectionScore>,
    /// The mean BLEU of the columns.
    pub average_bleu: f64,
    /// The mean chrF of the columns.
    pub average_chrf: f64,
    /// The paper's printed average.
    pub paper_average: Option<f64>,
}

/// What `baseline nusax-mt` computed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineReport {
    /// The split scored (`train`, `valid` or `test`).
    pub split: String,
    /// The number of sentences of each direction.
    pub sentences: usize,
    /// SacreBLEU's signature of the BLEU figures.
    pub bleu_signature: String,
    /// SacreBLEU's signature of the chrF figures.
    pub chrf_signature: String,
    /// Every (table, system) row, tables first.
    pub rows: Vec<SystemRow>,
}

/// A sentence on one line: line breaks inside a cell (a few rows of the release have them)
/// become spaces, so hypotheses and references can be written one per line and scored again
/// from the files with `eval bleu`.
pub fn one_line(text: &str) -> String {
    text.replace("\r\n", " ").replace(['\n', '\r'], " ")
}

/// Runs `systems` over the directions of `tables` on `split` of the NusaX folder `root`
/// (`<root>/mt/<split>.csv`, and `<root>/lexicon/` for word substitution); writes each
/// system's translations to `<hypotheses>/<system>/<direction>.txt` when asked. `progress`
/// hears each finished row.
pub fn run(
    root: &Path,
    split: &str,
    tables: &[Table],
    systems: &[System],
    hypotheses: Option<&Path>,
    mut progress: impl FnMut(&SystemRow),
) -> Result<BaselineReport> {
    let corpus = ParallelSplit::load(root, split)?;
    // Each lexicon is read once, whichever tables and directions use it.
    let mut lexicons: HashMap<&'static str, Lexicon> = HashMap::new();
    let mut rows = Vec::new();
    let mut signatures = (String::new(), String::new());
    for &table in tables {
        for &system in systems {
            let mut directions = Vec::new();
            for direction in table.directions() {
                let source: Vec<String> = corpus.column(direction.source)?.into_iter().map(one_line).collect();
                let references: Vec<String> = corpus.column(direction.target)?.into_iter().map(one_line).collect();
                let translations = translate(root, &mut lexicons, system, direction, &source)?;
                if let Some(dir) = hypotheses {
                    let folder = dir.join(system.name());
                    std::fs::create_dir_all(&folder).with_path(&folder)?;
                    let text: String = translations.iter().map(|t| format!("{t}\n")).collect();
                    indolm_core::files::write_atomic(
                        &folder.join(format!("{}.txt", direction.name())),
                        text.as_bytes(),
                    )?;
                }
                let bleu = corpus_bleu(&translations, &[&references], &BleuOptions::default())?;
                let chrf = corpus_chrf(&translations, &[&references], &ChrfOptions::default())?;
                signatures = (bleu.signature(), chrf.signature());
                directions.push(DirectionScore {
                    direction: direction.name(),
                    bleu: bleu.score,
                    bleu_detail: bleu.to_string(),
                    chrf: chrf.score,
                    paper_bleu: paper::figure(table, system, table.column(&direction)),
                });
            }
            let n = directions.len() as f64;
            let row = SystemRow {
                system,
                table,
                average_bleu: directions.iter().map(|d| d.bleu).sum::<f64>() / n,
                average_chrf: directions.iter().map(|d| d.chrf).sum::<f64>() / n,
                directions,
                paper_average: paper::row(table, system).map(|(_, a)| a),
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(BaselineReport {
        split: split.to_string(),
        sentences: corpus.rows.len(),
        bleu_signature: signatures.0,
        chrf_signature: signatures.1,
        rows,
    })
}

/// `system`'s translations of `source` (one sentence each) in `direction`; a lexicon is read
/// into `lexicons` the first time a direction needs it.
fn translate(
    root: &Path,
    lexicons: &mut HashMap<&'static str, Lexicon>,
    system: System,
    direction: Direction,
    source: &[String],
) -> Result<Vec<String>> {
    match system {
        System::Copy => Ok(source.to_vec()),
        System::WordSubstitution => {
            let other = if direction.source == super::data::INDONESIAN { direction.target } else { direction.source };
            let lexicon = match lexicons.entry(other) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(Lexicon::load(root, other)?),
            };
            let substitution = lexicon.substitution(direction)?;
            Ok(source.iter().map(|s| substitution.translate(s)).collect())
        }
        other => Err(Error::argument(
            "--systems",
            format!("{} needs a trained model: `baseline nusax-mt` runs copy and word-substitution", other.label()),
        )),
    }
}

/// The report as Markdown: per table, our row and the paper's row for each system (BLEU), then
/// our chrF, with the largest difference from the paper named.
pub fn markdown(report: &BaselineReport) -> String {
    let mut out = String::new();
    for table in Table::ALL {
        let rows: Vec<&SystemRow> = report.rows.iter().filter(|r| r.table == table).collect();
        if rows.is_empty() {
            continue;
        }
        let columns: Vec<&str> = table.directions().iter().map(|d| code(table.column(d))).collect();
        out += &format!(
            "### {}: SacreBLEU on the {} split ({} sentences)\n\n",
            table.title(),
            report.split,
            report.sentences
        );
        out += &format!("| system | {} | avg |\n", columns.join(" | "));
        out += &format!("|---|{}---:|\n", "---:|".repeat(columns.len()));
        for row in &rows {
            let ours: Vec<String> = row.directions.iter().map(|d| format!("{:.2}", d.bleu)).collect();
            out += &format!("| {} (indolm) | {} | {:.2} |\n", row.system.label(), ours.join(" | "), row.average_bleu);
            if let Some((paper, avg)) = paper::row(table, row.system) {
                let theirs: Vec<String> = paper.iter().map(|f| format!("{f:.2}")).collect();
                out += &format!("| {} (paper) | {} | {avg:.2} |\n", row.system.label(), theirs.join(" | "));
            }
        }
        out += "\n";
        for row in &rows {
            let worst = row
                .directions
                .iter()
                .filter_map(|d| d.paper_bleu.map(|p| (d, (d.bleu - p).abs())))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((d, gap)) = worst {
                out +=
                    &format!("- {}: largest |indolm − paper| {gap:.2} BLEU ({}).\n", row.system.label(), d.direction);
            }
        }
        out += "\n";
        out += &format!("chrF on the same split:\n\n| system | {} | avg |\n", columns.join(" | "));
        out += &format!("|---|{}---:|\n", "---:|".repeat(columns.len()));
        for row in &rows {
            let ours: Vec<String> = row.directions.iter().map(|d| format!("{:.2}", d.chrf)).collect();
            out += &format!("| {} | {} | {:.2} |\n", row.system.label(), ours.join(" | "), row.average_chrf);
        }
        out += "\n";
    }
    if report.split != "train" && report.rows.iter().any(|r| r.system == System::Copy) {
        out += "The paper's Copy rows are sacrebleu's figures on the train split (docs/translation.md).\n\n";
    }
    out += &format!("BLEU: {}\nchrF: {}\n", report.bleu_signature, report.chrf_signature);
    out
}
