//! Where bias evaluations live on disk and how they are read back: `bias.json` (the report)
//! and `bias_pairs.csv` (one [`PairRecord`] a pair) in a checkpoint's folder
//! (`<run>/step-<N>/`) or, for evaluations between checkpoints, in `<run>/evals/step-<N>/`.
//! The reports (`report bias-diff`, `bias-compare`, `bias-flips`, `bias-curve`) find a run's
//! evaluations and their records here.
//!
//! The two files are one unit: `bias.json` records the SHA-256 of the `bias_pairs.csv` it was
//! aggregated from ([`BiasReport::records_sha256`]), written after it, and [`read_evaluation`]
//! reads them only together: the checksum, the CSV's exact columns, every number finite, every
//! `preferred` as the scores decide it, and each language's counts equal to the report's.
use super::report::{BiasReport, PairRecord, Tally};
use super::rules::{outcome, score_gap};
use crate::pll::SentenceScore;
use crate::BiasMetric;
use indolm_core::files::{read_to_string, sha256_file, Staging};
use indolm_core::run::RunLayout;
use indolm_torch::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

/// The report of one evaluation.
pub const REPORT_FILE: &str = "bias.json";
/// Its per-pair records.
pub const RECORDS_FILE: &str = "bias_pairs.csv";

indolm_core::declare_run_files!(
    BIAS_FILES: indolm_core::outputs::RunFile::Named(REPORT_FILE),
    indolm_core::outputs::RunFile::Named(RECORDS_FILE),
);

/// Writes `records` as CSV to `path` (atomically): a `# warning: …` comment line when the
/// evaluation carries one, a header, then one row a pair.
pub(crate) fn write_records(path: &Path, records: &[PairRecord], warning: Option<&str>) -> Result<()> {
    let staging = Staging::new(path);
    let mut file = std::fs::File::create(staging.path()).with_path(path)?;
    if let Some(w) = warning {
        use std::io::Write;
        writeln!(file, "# warning: {}", w.replace('\n', " ")).with_path(path)?;
    }
    let mut writer = csv::Writer::from_writer(file);
    for r in records {
        writer.serialize(r).map_err(|e| Error::invalid(path, e.to_string()))?;
    }
    writer.flush().with_path(path)?;
    drop(writer);
    staging.commit()
}

/// The columns of `bias_pairs.csv`, in order (files written before the rank-1 counts existed
/// end at `antitrope`, and are read as such).
pub const RECORD_COLUMNS: [&str; 14] = [
    "language",
    "pair",
    "domain",
    "subdomain",
    "preferred",
    "gap",
    "pro_pll",
    "pro_tokens",
    "anti_pll",
    "anti_tokens",
    "protrope",
    "antitrope",
    "pro_correct",
    "anti_correct",
];

/// Reads the records of a `bias_pairs.csv` strictly: exactly [`RECORD_COLUMNS`] (or the older
/// first 12) in the header and in every row, every field of its type, every number finite, the
/// rank-1 counts present and at most the tokens scored. Errors name the row.
pub fn read_records(path: &Path) -> Result<Vec<PairRecord>> {
    let hint = "no per-pair records here: evaluations before bias_pairs.csv existed can be redone with `indolm eval bias --run`";
    let (mut reader, header) = indolm_core::files::open_csv(csv::ReaderBuilder::new().comment(Some(b'#')), path, hint)?;
    if header != RECORD_COLUMNS && header != RECORD_COLUMNS[..12] {
        return Err(Error::invalid(
            path,
            format!("the header is {}; expected {}", header.join(","), RECORD_COLUMNS.join(",")),
        ));
    }
    let mut records = Vec::new();
    for (i, row) in reader.deserialize::<PairRecord>().enumerate() {
        let row_number = i + 2;
        let r = row.map_err(|e| Error::invalid(path, format!("row {row_number}: {e}")))?;
        for (field, value) in [("gap", r.gap), ("pro_pll", r.pro_pll), ("anti_pll", r.anti_pll)] {
            if !value.is_finite() {
                return Err(Error::invalid(
                    path,
                    format!(
                        "row {row_number} (pair {} of {}): {field} is {value}, not a finite number",
                        r.pair, r.language
                    ),
                ));
            }
        }
        let counted = header.len() == RECORD_COLUMNS.len();
        for (field, correct, tokens) in
            [("pro_correct", r.pro_correct, r.pro_tokens), ("anti_correct", r.anti_correct, r.anti_tokens)]
        {
            match correct {
                None if counted => {
                    return Err(Error::invalid(
                        path,
                        format!("row {row_number} (pair {} of {}): {field} is empty", r.pair, r.language),
                    ))
                }
                Some(c) if c > tokens => {
                    return Err(Error::invalid(
                        path,
                        format!(
                            "row {row_number} (pair {} of {}): {field} is {c}, more than the {tokens} tokens scored",
                            r.pair, r.language
                        ),
                    ))
                }
                _ => {}
            }
        }
        records.push(r);
    }
    Ok(records)
}

/// Reads a `bias.json` alone: only to find which metric a folder holds. Everything that uses an
/// evaluation's numbers reads it whole ([`read_evaluation`], [`read_checked`]).
fn read_report(path: &Path) -> Result<BiasReport> {
    serde_json::from_str(&read_to_string(path)?).map_err(|e| Error::json(path, &e))
}

/// The evaluation in `dir` as reports read it: whole and checked ([`read_evaluation`]) whenever
/// it has records or its report names them, so an edited, swapped or deleted `bias_pairs.csv` is
/// refused; an evaluation made before `bias_pairs.csv` existed (no checksum in its report, no
/// CSV beside it) is its report alone, with `None` for the records.
pub fn read_checked(dir: &Path) -> Result<(BiasReport, Option<Vec<PairRecord>>)> {
    let report = read_report(&dir.join(REPORT_FILE))?;
    if report.records_sha256.is_none() && !dir.join(RECORDS_FILE).exists() {
        return Ok((report, None));
    }
    let records = checked_records(dir, &report)?;
    Ok((report, Some(records)))
}

/// Refuses to write a bias evaluation into `dir` when it holds one, unless `overwrite`; and
/// always when `dir` is a checkpoint whose evaluation its trainer has yet to make.
pub fn refuse_to_replace(dir: &Path, overwrite: bool) -> Result<()> {
    if dir.join(indolm_core::run::layout::PENDING_EVALUATION).exists() {
        return Err(Error::invalid(
            dir,
            "its evaluation is pending in the run's trainer (evaluation.pending): two writers would mix files; let the trainer finish, or resume it",
        ));
    }
    match evaluation_in(dir)? {
        Some(found) if !overwrite => Err(Error::invalid(
            dir,
            format!(
                "already holds a bias evaluation ({}): pass --overwrite to replace it (all of it, bias-<metric>/ folders included), or choose another --out",
                found.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether `dir` holds a bias evaluation's files: `bias.json` or `bias_pairs.csv`, directly or in
/// a `bias-<metric>/` folder; the first found, for messages.
fn evaluation_in(dir: &Path) -> Result<Option<PathBuf>> {
    for file in [REPORT_FILE, RECORDS_FILE] {
        if dir.join(file).exists() {
            return Ok(Some(dir.join(file)));
        }
    }
    for sub in metric_dirs(dir)? {
        for file in [REPORT_FILE, RECORDS_FILE] {
            if sub.join(file).exists() {
                return Ok(Some(sub.join(file)));
            }
        }
    }
    Ok(None)
}

/// The `bias-<metric>/` folders under `dir` (of any metric this indolm knows), in name order.
fn metric_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_path(dir)?
        .filter_map(|e| e.ok())
        // A symlink named like one is not indolm's folder: nothing is removed through it.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_prefix("bias-").is_some_and(|m| BiasMetric::ALL.iter().any(|k| k.to_string() == m))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    Ok(found)
}

/// Removes every `bias-<metric>/` folder under `dir` but those of `keep`: its `bias.json` and
/// `bias_pairs.csv`, and the folder once empty. Nothing else is touched.
pub(crate) fn remove_metric_dirs_except(dir: &Path, keep: &[BiasMetric]) -> Result<()> {
    let ours = |name: &str| name == REPORT_FILE || name == RECORDS_FILE;
    for sub in metric_dirs(dir)? {
        if !keep.iter().any(|&m| metric_dir(dir, m) == sub) {
            indolm_core::outputs::remove_owned(&sub, &ours)?;
        }
    }
    Ok(())
}

/// Reads the report and records of the evaluation in `dir` as one unit, refusing files of two
/// evaluations, changed or cut ones (see the module's doc). A report written before the
/// checksum existed is checked by its counts alone.
pub fn read_evaluation(dir: &Path) -> Result<(BiasReport, Vec<PairRecord>)> {
    let report = read_report(&dir.join(REPORT_FILE))?;
    let records = checked_records(dir, &report)?;
    Ok((report, records))
}

/// The records in `dir`, checked against `report` (its `bias.json`, read by the caller): the
/// checksum, the columns, every number, each decision and each language's counts.
fn checked_records(dir: &Path, report: &BiasReport) -> Result<Vec<PairRecord>> {
    let (report_path, records_path) = (dir.join(REPORT_FILE), dir.join(RECORDS_FILE));
    let redo = "redo the evaluation (`indolm eval bias`)";
    if let Some(expected) = &report.records_sha256 {
        let found = sha256_file(&records_path)?;
        if &found != expected {
            return Err(Error::invalid(
                &records_path,
                format!(
                    "not the file {} was aggregated from (SHA-256 {found}, the report names {expected}): the two come from different evaluations, or this one was changed or cut; {redo}",
                    report_path.display()
                ),
            ));
        }
    }
    let records = read_records(&records_path)?;
    let mut tallies: Vec<(&str, Tally)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let (pro, anti) = (
            SentenceScore { pll: r.pro_pll, tokens: r.pro_tokens, correct: r.pro_correct.unwrap_or(0) },
            SentenceScore { pll: r.anti_pll, tokens: r.anti_tokens, correct: r.anti_correct.unwrap_or(0) },
        );
        let (decided, gap) = (outcome(report.metric, &pro, &anti), score_gap(report.metric, &pro, &anti));
        if decided != r.preferred || gap != r.gap {
            return Err(Error::invalid(
                &records_path,
                format!(
                    "row {} (pair {} of {}, {:?}): preferred {} and gap {} do not follow from its scores, which give {} and {} under metric {}; {redo}",
                    i + 2, r.pair, r.language, r.protrope, r.preferred.name(), r.gap, decided.name(), gap, report.metric
                ),
            ));
        }
        match tallies.iter_mut().find(|(l, _)| *l == r.language) {
            Some((_, t)) => t.add(r.preferred),
            None => {
                let mut t = Tally::default();
                t.add(r.preferred);
                tallies.push((&r.language, t));
            }
        }
    }
    let counted = |t: &Tally| format!("{} pairs, {} wins, {} ties", t.pairs, t.wins, t.ties);
    let in_report: Vec<&str> = report.languages.iter().map(|l| l.language.as_str()).collect();
    let in_records: Vec<&str> = tallies.iter().map(|(l, _)| *l).collect();
    if in_report != in_records {
        return Err(Error::invalid(
            &records_path,
            format!(
                "its languages {in_records:?} are not those of {} ({in_report:?}): the two come from different evaluations; {redo}",
                report_path.display()
            ),
        ));
    }
    for (l, (_, t)) in report.languages.iter().zip(&tallies) {
        if l.overall.tally != *t {
            return Err(Error::invalid(
                &records_path,
                format!(
                    "language {}: {} here, {} in {}: the two come from different evaluations; {redo}",
                    l.language,
                    counted(t),
                    counted(&l.overall.tally),
                    report_path.display()
                ),
            ));
        }
    }
    Ok(records)
}

/// Writes an evaluation's two files into `dir` as one unit: the records, then the report naming
/// their checksum, each written to a temporary name and renamed. A failure between the two
/// leaves the new records beside an earlier report that names other ones, which readers refuse;
/// an earlier report without a checksum (older versions) is removed first, as it could not tell.
pub fn write_evaluation(dir: &Path, report: &BiasReport, records: &[PairRecord]) -> Result<()> {
    let report_path = dir.join(REPORT_FILE);
    if report_path.exists() && read_report(&report_path).map_or(true, |r| r.records_sha256.is_none()) {
        std::fs::remove_file(&report_path).with_path(&report_path)?;
    }
    let records_path = dir.join(RECORDS_FILE);
    write_records(&records_path, records, report.warning.as_deref())?;
    let mut report = report.clone();
    report.records_sha256 = Some(sha256_file(&records_path)?);
    indolm_core::files::write_json(&report_path, &report)
}

/// One evaluation of a run: its step and the folder holding its files.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluationDir {
    /// The training step evaluated.
    pub step: u64,
    /// `<run>/step-<N>` or `<run>/evals/step-<N>`.
    pub dir: PathBuf,
}

impl EvaluationDir {
    /// Its `bias.json`, checked against its records ([`read_checked`]).
    pub fn report(&self) -> Result<BiasReport> {
        Ok(read_checked(&self.dir)?.0)
    }

    /// Its report and records, read as one ([`read_evaluation`]).
    pub fn read(&self) -> Result<(BiasReport, Vec<PairRecord>)> {
        read_evaluation(&self.dir)
    }

    /// Whether it has per-pair records (evaluations before `bias_pairs.csv` existed do not).
    pub fn has_records(&self) -> bool {
        self.dir.join(RECORDS_FILE).exists()
    }
}

/// Where an evaluation under `metric` lives beside a folder's main one, when one evaluation
/// scored several metrics (`[eval.bias] extra_metrics`, `eval bias --metric A B`): `bias-<metric>/`.
pub fn metric_dir(dir: &Path, metric: BiasMetric) -> PathBuf {
    dir.join(format!("bias-{metric}"))
}

/// The folder of `dir`'s evaluation under `metric`: `dir` itself when its `bias.json` is of that
/// metric (or `metric` is `None`: the main one), else [`metric_dir`].
pub fn evaluation_under_metric(dir: PathBuf, metric: Option<BiasMetric>) -> PathBuf {
    match metric {
        None => dir,
        Some(m) if !dir.join(REPORT_FILE).exists() => metric_dir(&dir, m),
        // A report of another metric sends to `bias-<metric>/`; an unreadable one stays, so that
        // reading it says what is wrong with it.
        Some(m) => match read_report(&dir.join(REPORT_FILE)) {
            Ok(r) if r.metric != m => metric_dir(&dir, m),
            _ => dir,
        },
    }
}

/// The folders of `(step, folder)` that hold a `bias.json`.
fn with_reports(dirs: Vec<(u64, PathBuf)>) -> Vec<EvaluationDir> {
    dirs.into_iter()
        .filter(|(_, dir)| dir.join(REPORT_FILE).exists())
        .map(|(step, dir)| EvaluationDir { step, dir })
        .collect()
}

/// Every bias evaluation of `run` (checkpoints and evaluations between them), by step; an
/// error when there is none.
pub fn run_evaluations(run: &Path) -> Result<Vec<EvaluationDir>> {
    run_evaluations_under(run, None)
}

/// [`run_evaluations`] under `metric` (`None`: each folder's main evaluation).
pub fn run_evaluations_under(run: &Path, metric: Option<BiasMetric>) -> Result<Vec<EvaluationDir>> {
    if !run.is_dir() {
        return Err(Error::MissingFile { path: run.into(), hint: "expected a run folder (checkpoints/<run>)".into() });
    }
    let layout = RunLayout::new(run);
    let of_metric = |dirs: Vec<(u64, PathBuf)>| {
        dirs.into_iter().map(|(step, dir)| (step, evaluation_under_metric(dir, metric))).collect()
    };
    let mut out = with_reports(of_metric(layout.checkpoints()?));
    for dense in with_reports(of_metric(layout.evaluations_between_checkpoints()?)) {
        // A checkpoint's own evaluation wins over a dense one at the same step.
        if !out.iter().any(|e| e.step == dense.step) {
            out.push(dense);
        }
    }
    out.sort_by_key(|e| e.step);
    if out.is_empty() {
        return Err(Error::invalid(
            run,
            match metric {
                None => "no evaluation of this run has a bias.json (train with [eval.bias], or run `indolm eval bias --run`)".to_string(),
                Some(m) => format!("no evaluation of this run is under metric {m} (train with [eval.bias] extra_metrics = [\"{m}\"], or run `indolm eval bias --run --metric {m}`)"),
            },
        ));
    }
    Ok(out)
}

/// Which evaluation of a run to use: a given step, or the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepChoice {
    /// The evaluation at this step.
    At(u64),
    /// The run's last evaluation.
    Final,
}

impl std::str::FromStr for StepChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "final" | "last" => Ok(StepChoice::Final),
            n => n.parse().map(StepChoice::At).map_err(|_| format!("expected a step number or `final`, found {n:?}")),
        }
    }
}

/// The evaluation of `run` at `choice` under `metric` (`None`: the main one), with the steps it
/// has when the one asked for is missing.
pub fn run_evaluation(run: &Path, choice: StepChoice, metric: Option<BiasMetric>) -> Result<EvaluationDir> {
    let all = run_evaluations_under(run, metric)?;
    match choice {
        StepChoice::Final => Ok(all.last().expect("run_evaluations is never empty").clone()),
        StepChoice::At(step) => all.iter().find(|e| e.step == step).cloned().ok_or_else(|| {
            let steps: Vec<String> = all.iter().map(|e| e.step.to_string()).collect();
            Error::invalid(run, format!("no bias evaluation at step {step}; it has steps {}", steps.join(", ")))
        }),
    }
}

/// The folder of an evaluation named on the command line: a `bias_pairs.csv` or `bias.json`
/// file, or a folder holding them (a checkpoint, an `eval bias --out` folder).
pub fn evaluation_folder(path: &Path) -> Result<PathBuf> {
    let dir = if path.is_file() { path.parent().unwrap_or(Path::new(".")).to_path_buf() } else { path.to_path_buf() };
    if !dir.join(RECORDS_FILE).is_file() {
        return Err(Error::MissingFile {
            path: dir.join(RECORDS_FILE),
            hint: "expected one bias evaluation: a checkpoint folder (checkpoints/<run>/step-N or evals/step-N) or an `indolm eval bias --out` folder, with its bias_pairs.csv"
                .into(),
        });
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bias::Preference;

    fn record(pair: usize, text: &str) -> PairRecord {
        PairRecord {
            language: "id".into(),
            pair,
            domain: "Gender".into(),
            subdomain: "work, home".into(),
            preferred: Preference::Anti,
            gap: -0.1 / 3.0,
            pro_pll: -12.345678901234567,
            pro_tokens: 7,
            anti_pll: -1e-300,
            anti_tokens: 0,
            protrope: text.into(),
            antitrope: "Ayah \"memasak\"\nlagi.".into(),
            pro_correct: Some(3),
            anti_correct: Some(0),
        }
    }

    #[test]
    fn records_round_trip_exactly_through_csv() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORDS_FILE);
        let records = vec![record(0, "Ibu memasak, lalu pergi."), record(1, "")];
        write_records(&path, &records, None).unwrap();
        assert_eq!(read_records(&path).unwrap(), records);
        let header = std::fs::read_to_string(&path).unwrap().lines().next().unwrap().to_string();
        assert_eq!(
            header,
            "language,pair,domain,subdomain,preferred,gap,pro_pll,pro_tokens,anti_pll,anti_tokens,protrope,antitrope,pro_correct,anti_correct"
        );
        std::fs::write(&path, header.clone() + "\nid,x,G,s,pro,0,0,1,0,1,a,b,0,0\n").unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(err.contains("row 2") && err.contains("pair"), "{err}");
        std::fs::write(&path, header.clone() + "\nid,0,G,s,pro,0,0,1,0,1,a,b,,0\n").unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(err.contains("row 2") && err.contains("pro_correct is empty"), "{err}");
        // Files written before the rank-1 counts: read, without them.
        let older = RECORD_COLUMNS[..12].join(",");
        std::fs::write(&path, older + "\nid,0,G,s,pro,0,0,1,0,1,a,b\n").unwrap();
        let read = read_records(&path).unwrap();
        assert_eq!((read[0].pro_correct, read[0].anti_correct), (None, None));
        let err = read_records(&dir.path().join("nope.csv")).unwrap_err().to_string();
        assert!(err.contains("eval bias --run"), "{err}");
    }

    #[test]
    fn step_choice_parses_numbers_and_final() {
        assert_eq!("final".parse::<StepChoice>(), Ok(StepChoice::Final));
        assert_eq!("1250".parse::<StepChoice>(), Ok(StepChoice::At(1250)));
        assert!("latest-ish".parse::<StepChoice>().is_err());
    }

    #[test]
    fn run_evaluations_merge_checkpoints_and_dense_evaluations_by_step() {
        let run = tempfile::tempdir().unwrap();
        for dir in ["step-20", "step-10", "evals/step-5", "evals/step-10", "evals/step-15", "step-30"] {
            std::fs::create_dir_all(run.path().join(dir)).unwrap();
            if dir != "step-30" {
                std::fs::write(run.path().join(dir).join(REPORT_FILE), "{}").unwrap();
            }
        }
        let found: Vec<(u64, String)> = run_evaluations(run.path())
            .unwrap()
            .into_iter()
            .map(|e| (e.step, e.dir.strip_prefix(run.path()).unwrap().display().to_string()))
            .collect();
        assert_eq!(
            found,
            vec![
                (5, "evals/step-5".into()),
                (10, "step-10".into()),
                (15, "evals/step-15".into()),
                (20, "step-20".into())
            ]
        );
        assert_eq!(run_evaluation(run.path(), StepChoice::Final, None).unwrap().step, 20);
        let err = run_evaluation(run.path(), StepChoice::At(7), None).unwrap_err().to_string();
        assert!(err.contains("no bias evaluation at step 7; it has steps 5, 10, 15, 20"), "{err}");
    }
}
