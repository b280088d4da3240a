//! `finetune translation`: one model per direction, as the NusaX paper and IndoNLG train them,
//! each direction a unit of one run trained by the engine (checkpoints, resume, signals, data
//! parallelism): under `<output_dir>/<name>/`, one run folder per direction (`<direction>/`, its
//! selected weights in `best/`, with `result.json`, `test.hyp.txt` and `test.ref.txt` once
//! tested). The selected weights translate the test split by beam search; SacreBLEU and chrF
//! against the references as IndoNLG scores them (its labels decoded) go into `results.json` and
//! `results.md`, in Table 4's and Table 6's layout with the paper's figures beside. A killed run,
//! run again with `--resume auto`, redoes no finished direction.
use super::data::{code, english_directions, non_pivot_languages, Direction, ParallelSplit, Table};
use super::decoding::{translate, Decoding};
use super::format::{MbartFormat, Pair};
use super::model::{check_fits, language_id, TranslationModel};
use super::paper::{self, System};
use super::recipe::TranslationRecipe;
use super::salt;
use super::task::{Hyper, TranslationTask, Validation};
use indolm_core::files::{write_atomic, write_json};
use indolm_core::recipe::Fingerprint;
use indolm_core::run::units::{BaseModel, Rerun, UnitRun};
use indolm_core::run::{Run, RunLayout, RunOptions};
use indolm_metrics::bleu::{corpus_bleu, BleuOptions};
use indolm_metrics::chrf::{corpus_chrf, ChrfOptions};
use indolm_torch::device::seed_torch;
use indolm_torch::distributed::ProcessGroup;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::model_dir::content_sha256;
use indolm_torch::model::seq2seq::mbart::MbartConfig;
use indolm_torch::model::seq2seq::Seq2SeqTokenizer;
use indolm_torch::model::Precision;
use indolm_train::data_parallel::DataParallel;
use indolm_train::engine::{Engine, EngineSettings, TaskRun, TrainOptions};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file a finished direction writes.
const DIRECTION_RESULT: &str = crate::units::RESULT_FILE;
/// The test split's translations, one a line.
const TEST_HYPOTHESES: &str = "test.hyp.txt";
/// The references they were scored against, one a line.
const TEST_REFERENCES: &str = "test.ref.txt";

indolm_core::declare_run_files!(
    TRANSLATION_FILES: indolm_core::outputs::RunFile::Named(TEST_HYPOTHESES),
    indolm_core::outputs::RunFile::Named(TEST_REFERENCES),
);

/// One direction's fine-tuning and test scores (`<direction>/result.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DirectionResult {
    /// `sun-ind`.
    pub direction: String,
    /// The update whose weights were kept.
    pub best_step: u64,
    /// Its epoch, from 1.
    pub best_epoch: u64,
    /// Updates run before stopping.
    pub steps: u64,
    /// Updates per epoch.
    pub updates_per_epoch: u64,
    /// The kept weights' validation SacreBLEU (as `[eval] selection` measures it).
    pub valid_bleu: f64,
    /// Test SacreBLEU of beam search.
    pub test_bleu: f64,
    /// The BLEU line as sacrebleu prints it.
    pub test_bleu_detail: String,
    /// Test chrF.
    pub test_chrf: f64,
    /// The paper's figure for the recipe's system in this direction, where it prints one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_bleu: Option<f64>,
    /// The content SHA-256 of the model it started from.
    pub base_model_sha256: String,
}

/// What `finetune translation` measured (`results.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TranslationResults {
    /// The paper's system the recipe reproduces, if it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<System>,
    /// Whether the text was lowercased (IndoNLG's BLEU is then lowercased BLEU).
    pub lowercase: bool,
    /// SacreBLEU's signature of the BLEU figures.
    pub bleu_signature: String,
    /// One entry per direction, in the recipe's order.
    pub directions: Vec<DirectionResult>,
}

/// The splits of the corpus, read once.
struct Splits {
    train: ParallelSplit,
    valid: ParallelSplit,
    test: ParallelSplit,
}

impl Splits {
    /// Reads the three splits and checks that every direction's columns are in each.
    fn load(root: &Path, directions: &[Direction]) -> Result<Splits> {
        let splits = Splits {
            train: ParallelSplit::load(root, "train")?,
            valid: ParallelSplit::load(root, "valid")?,
            test: ParallelSplit::load(root, "test")?,
        };
        for split in [&splits.train, &splits.valid, &splits.test] {
            for d in directions {
                split.column(d.source)?;
                split.column(d.target)?;
            }
        }
        Ok(splits)
    }
}

/// A sentence as the model reads it: on one line, lowercased when the recipe says so.
fn prepared(text: &str, lowercase: bool) -> String {
    let line = super::baselines::one_line(text);
    match lowercase {
        true => line.to_lowercase(),
        false => line,
    }
}

/// The rows of one split in one direction.
fn encode_pairs(
    model: &TranslationModel,
    format: &MbartFormat,
    split: &ParallelSplit,
    direction: &Direction,
    lowercase: bool,
) -> Result<Vec<Pair>> {
    let (sources, targets) = (split.column(direction.source)?, split.column(direction.target)?);
    sources
        .iter()
        .zip(&targets)
        .map(|(s, t)| {
            let s = model.tokenizer.encode(&prepared(s, lowercase))?;
            let t = model.tokenizer.encode(&prepared(t, lowercase))?;
            Ok(format.pair(&s, &t))
        })
        .collect()
}

/// The format of `direction` for a model of `config` and `tokenizer`: its `</s>`, the recipe's
/// language tokens as ids.
fn format_of(
    recipe: &TranslationRecipe,
    tokenizer: &Seq2SeqTokenizer,
    config: &MbartConfig,
    direction: &Direction,
) -> Result<MbartFormat> {
    let id = |language: &str| {
        let field = format!("model.language_tokens.{}", code(language));
        language_id(tokenizer, recipe.language_token(language), &field, &recipe.path)
    };
    Ok(MbartFormat {
        eos: config.eos_token_id,
        source_lang: id(direction.source)?,
        target_lang: id(direction.target)?,
        max_len: recipe.data.max_len,
    })
}

/// Runs the recipe's directions from `init` (every rank of a data-parallel launch calls this);
/// `None` when a stop signal (or `--stop-after`) ended it before every direction was tested:
/// run it again with `--resume auto`.
pub fn run(
    recipe: &TranslationRecipe,
    init: &Path,
    opts: &TrainOptions,
    group: Option<ProcessGroup>,
) -> Result<Option<TranslationResults>> {
    let precision = recipe.compute_precision(opts.device)?;
    let directions = recipe.directions()?;
    let splits = Splits::load(&recipe.data.root, &directions)?;
    // The model's configuration, its tokenizer and the language tokens are checked before the
    // run's folder is touched (the weights are read by each direction).
    let config = MbartConfig::from_file(&init.join("config.json"))?;
    let tokenizer = Seq2SeqTokenizer::from_dir(init)?;
    check_fits(&tokenizer, &config)?;
    for d in &directions {
        format_of(recipe, &tokenizer, &config, d)?;
    }
    if recipe.data.max_len as i64 > config.max_position_embeddings {
        return Err(Error::field(
            &recipe.path,
            "data.max_len",
            format!(
                "{}: more than the model's max_position_embeddings {}",
                recipe.data.max_len, config.max_position_embeddings
            ),
        ));
    }
    let base = BaseModel { path: init.display().to_string(), sha256: content_sha256(init)? };
    let mut parallel = group.map(DataParallel::new).transpose()?;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let rerun =
        Rerun { resume: opts.resume.clone(), overwrite: opts.overwrite, force: opts.force, inputs: vec![init.into()] };
    let fingerprint = recipe.fingerprint(&base.sha256);
    let layout = RunLayout::new(recipe.run_dir());
    let resume_at = checkpoint_to_resume(opts.resume.as_deref(), &layout, &directions)?;
    let units = UnitRun::open(layout, "translation", &fingerprint, &base, &rerun, &recipe.tensorboard_dir(), leader)?;
    let mut results = Vec::new();
    for direction in &directions {
        let unit = units.layout().unit(&direction.name());
        if let Some(done) = units.done::<DirectionResult>(&unit, DIRECTION_RESULT)? {
            results.push(done);
            continue;
        }
        let resume = match &resume_at {
            Some((dir, at)) if at.dir() == unit.dir() => Some(dir.display().to_string()),
            // `--resume DIR` names one direction's checkpoint; the others continue strictly.
            Some(_) => Some("latest".to_string()),
            None => opts.resume.clone(),
        };
        let job = DirectionJob { direction, unit: &unit, resume, base: &base, precision, splits: &splits };
        let (trained, back) = train_direction(recipe, init, opts, &job, parallel)?;
        parallel = back;
        let Some(trained) = trained else { return Ok(None) };
        if let Some(trained) = trained.filter(|_| leader) {
            let result = test_direction(recipe, &job, trained)?;
            units.finish(&unit, DIRECTION_RESULT, &result)?;
            // A finished direction needs only its selected weights (`best/`): its checkpoints'
            // weights and optimizer states go, but those the recipe keeps for good.
            let retention = indolm_train::engine::retention(&recipe.checkpoint);
            indolm_core::run::checkpoints::release_checkpoint_weights(&unit, &retention)?;
            results.push(result);
        }
        if let Some(p) = parallel.as_mut() {
            p.barrier()?;
        }
    }
    if !leader {
        return Ok(None);
    }
    let results = TranslationResults {
        system: recipe.model.system,
        lowercase: recipe.data.lowercase,
        bleu_signature: corpus_bleu(&["x"], &[["x"]], &BleuOptions::default())?.signature(),
        directions: results,
    };
    let dir = recipe.run_dir();
    write_json(&dir.join(crate::RESULTS_JSON), &results)?;
    write_atomic(&dir.join(crate::RESULTS_MD), results.markdown().as_bytes())?;
    Ok(Some(results))
}

/// What `--resume DIR` names in a translation run: one unfinished direction's checkpoint
/// (`<run>/<direction>/step-<N>`), with that unit's layout (see
/// [`crate::units::checkpoint_to_resume`]).
fn checkpoint_to_resume(
    resume: Option<&str>,
    layout: &RunLayout,
    directions: &[Direction],
) -> Result<Option<(std::path::PathBuf, RunLayout)>> {
    let units: Vec<RunLayout> = directions.iter().map(|d| layout.unit(&d.name())).collect();
    let pattern = "<run>/<direction>/step-<N>";
    crate::units::checkpoint_to_resume(resume, layout, &units, DIRECTION_RESULT, "direction", pattern)
}

/// One direction to train.
struct DirectionJob<'a> {
    direction: &'a Direction,
    unit: &'a RunLayout,
    /// How its run folder is resumed when the run is continued.
    resume: Option<String>,
    base: &'a BaseModel,
    precision: Precision,
    splits: &'a Splits,
}

/// A direction's training as it ended on this rank: the task (its model), the best step and
/// score (rank 0's), the steps run.
struct Trained {
    task: TranslationTask,
    best: (u64, f64),
    steps: u64,
    updates_per_epoch: u64,
}

/// Fine-tunes one direction in its own run folder; `None` when it stopped before its end, else
/// what rank 0 tests (`None` on the other ranks). Hands the process group back.
fn train_direction(
    recipe: &TranslationRecipe,
    init: &Path,
    opts: &TrainOptions,
    job: &DirectionJob,
    parallel: Option<DataParallel>,
) -> Result<(Option<Option<Trained>>, Option<DataParallel>)> {
    let o = &recipe.optimizer;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let model = TranslationModel::load(init, opts.device)?;
    let format = format_of(recipe, &model.tokenizer, &model.net.config, job.direction)?;
    let lowercase = recipe.data.lowercase;
    let train = encode_pairs(&model, &format, &job.splits.train, job.direction, lowercase)?;
    let valid = encode_pairs(&model, &format, &job.splits.valid, job.direction, lowercase)?;
    let micro_per_epoch = train.len().div_ceil(o.batch_size) as u64;
    let updates_per_epoch = micro_per_epoch.div_ceil(o.grad_accumulation as u64).max(1);
    let max_steps = o.max_epochs.unwrap_or(1) * updates_per_epoch;
    let name = job.direction.name();
    let tensorboard = recipe.tensorboard_dir().join(&name);
    // A continued run resumes each unfinished direction as asked; one that has not started yet
    // (no checkpoint) starts.
    let resume = match job.resume.as_deref() {
        Some("latest" | "auto") if !job.unit.has_checkpoints()? => None,
        other => other.map(String::from),
    };
    let options =
        RunOptions { resume, overwrite: false, ..opts.run_options(leader, &recipe.checkpoint, tensorboard, max_steps) };
    let (run, resume) = Run::open(job.unit.clone(), &options)?;
    seed_torch(recipe.seed, salt::TRANSLATION_TORCH);
    let hyper = Hyper { batch_size: o.batch_size, max_steps, updates_per_epoch };
    let validation = Validation { pairs: valid, selection: recipe.eval.selection, batch: recipe.eval.batch_size };
    let task = TranslationTask::new(
        model,
        job.precision,
        format,
        train,
        validation,
        recipe.seed,
        hyper,
        o.clone(),
        name.clone(),
    )?;
    let run_of_unit = TaskRun {
        torch_salt: salt::TRANSLATION_TORCH,
        max_steps,
        patience: Some(recipe.eval.patience),
        fingerprint: unit_fingerprint(recipe, job),
    };
    let settings = EngineSettings {
        name: format!("{}/{name}", recipe.name),
        ..EngineSettings::for_recipe(&recipe.shared(), run_of_unit)
    };
    let finished = Engine::new(task, settings, opts, run, resume, parallel)?.run()?;
    let (summary, parallel) = (finished.summary, finished.parallel);
    if !summary.complete {
        return Ok((None, parallel));
    }
    let trained = match (summary.best, leader) {
        (Some(best), true) => Some(Trained {
            task: finished.task,
            best: (best.step, best.score),
            steps: summary.final_step,
            updates_per_epoch,
        }),
        (None, true) => unreachable!("a finished fine-tuning evaluated at least once"),
        (_, false) => None,
    };
    Ok((Some(trained), parallel))
}

/// What a direction's checkpoints record of the recipe: the run's fingerprint with the direction.
fn unit_fingerprint(recipe: &TranslationRecipe, job: &DirectionJob) -> Fingerprint {
    let mut fingerprint = recipe.fingerprint(&job.base.sha256);
    if let Fingerprint::Values(sections) = &mut fingerprint {
        sections.insert("unit".into(), serde_json::json!({ "direction": job.direction.name() }));
    }
    fingerprint
}

/// Translates the test split with the direction's selected weights (beam search), scores it and
/// writes the translations and references beside the result.
fn test_direction(recipe: &TranslationRecipe, job: &DirectionJob, trained: Trained) -> Result<DirectionResult> {
    let Trained { mut task, best, steps, updates_per_epoch } = trained;
    task.model.load_weights(&job.unit.best_dir())?;
    let model = &task.model;
    let format = format_of(recipe, &model.tokenizer, &model.net.config, job.direction)?;
    let pairs = encode_pairs(model, &format, &job.splits.test, job.direction, recipe.data.lowercase)?;
    let sources: Vec<&[i64]> = pairs.iter().map(|p| p.source.as_slice()).collect();
    let e = &recipe.eval;
    let decoding = Decoding { beams: e.beam_size, length_penalty: e.length_penalty, batch: e.batch_size };
    let hypotheses = translate(model, &format, &sources, decoding, job.precision)?;
    let references = pairs.iter().map(|p| model.tokenizer.decode(&p.labels, true)).collect::<Result<Vec<_>>>()?;
    let streams = [references.as_slice()];
    let bleu = corpus_bleu(&hypotheses, &streams, &BleuOptions::default())?;
    let chrf = corpus_chrf(&hypotheses, &streams, &ChrfOptions::default())?;
    let lines = |texts: &[String]| texts.iter().map(|t| super::baselines::one_line(t) + "\n").collect::<String>();
    write_atomic(&job.unit.dir().join(TEST_HYPOTHESES), lines(&hypotheses).as_bytes())?;
    write_atomic(&job.unit.dir().join(TEST_REFERENCES), lines(&references).as_bytes())?;
    let paper_bleu = recipe.model.system.and_then(|system| {
        Table::of(job.direction).and_then(|table| paper::figure(table, system, table.column(job.direction)))
    });
    let result = DirectionResult {
        direction: job.direction.name(),
        best_step: best.0,
        best_epoch: best.0.div_ceil(updates_per_epoch.max(1)),
        steps,
        updates_per_epoch,
        valid_bleu: best.1,
        test_bleu: bleu.score,
        test_bleu_detail: bleu.to_string(),
        test_chrf: chrf.score,
        paper_bleu,
        base_model_sha256: job.base.sha256.clone(),
    };
    indolm_core::outln!(
        "{}: best epoch {} of {}, valid SacreBLEU {:.2}; test {} (beam {}), chrF {:.2}{}",
        result.direction,
        result.best_epoch,
        steps.div_ceil(updates_per_epoch.max(1)),
        result.valid_bleu,
        result.test_bleu_detail,
        e.beam_size,
        result.test_chrf,
        paper_bleu.map(|p| format!(" (paper: {p:.2})")).unwrap_or_default()
    );
    Ok(result)
}

impl TranslationResults {
    /// Table 5's layout when the run has English-side directions: the mean test BLEU of each set
    /// (ind → x, x → ind, eng → x, x → eng; a set not complete says how many of its 11 it
    /// averages), the paper's averages for the recipe's system beside.
    fn table5(&self) -> String {
        let sets = [
            ("ind → x", Table::FromIndonesian.directions()),
            ("x → ind", Table::IntoIndonesian.directions()),
            ("eng → x", english_directions(false)),
            ("x → eng", english_directions(true)),
        ];
        let scores: Vec<Vec<f64>> = sets
            .iter()
            .map(|(_, ds)| {
                ds.iter()
                    .filter_map(|d| self.directions.iter().find(|r| r.direction == d.name()).map(|r| r.test_bleu))
                    .collect()
            })
            .collect();
        if scores[2].is_empty() && scores[3].is_empty() {
            return String::new();
        }
        let mut out = String::from("\nTable 5 (average SacreBLEU from / to Indonesian and English)\n\n| system |");
        for (name, _) in &sets {
            out.push_str(&format!(" {name} |"));
        }
        out.push_str("\n|---|---:|---:|---:|---:|\n| indolm |");
        for (s, (_, ds)) in scores.iter().zip(&sets) {
            let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
            out.push_str(&match s.len() {
                0 => " – |".to_string(),
                n if n == ds.len() => format!(" {mean:.2} |"),
                n => format!(" {mean:.2} ({n} of {}) |", ds.len()),
            });
        }
        out.push('\n');
        if let Some((system, row)) = self.system.and_then(|s| paper::TABLE5.iter().find(|(t, _)| *t == s)) {
            out.push_str(&format!("| {} (paper) |", system.label()));
            for v in row {
                out.push_str(&format!(" {v:.2} |"));
            }
            out.push('\n');
        }
        out
    }

    /// The tables' layout: for Table 4's and Table 6's directions, a column per language with
    /// our test BLEU, the paper's row for the recipe's system beside it and our chrF; other
    /// directions in a list.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "Test SacreBLEU{} ({})\n",
            if self.lowercase { ", lowercased text as IndoNLG" } else { "" },
            self.bleu_signature
        );
        let find = |d: &Direction| self.directions.iter().find(|r| r.direction == d.name());
        for table in Table::ALL {
            let columns: Vec<(&str, Option<&DirectionResult>)> =
                table.directions().iter().map(|d| (table.column(d), find(d))).collect();
            if columns.iter().all(|(_, r)| r.is_none()) {
                continue;
            }
            out.push_str(&format!("\n{}\n\n| system |", table.title()));
            for language in non_pivot_languages() {
                out.push_str(&format!(" {} |", code(language)));
            }
            out.push_str(" avg |\n|---|");
            out.push_str(&"---:|".repeat(12));
            out.push('\n');
            let mut row = |label: String, value: &dyn Fn(&str, Option<&DirectionResult>) -> Option<f64>| {
                out.push_str(&format!("| {label} |"));
                let values: Vec<f64> = columns
                    .iter()
                    .map(|(l, r)| {
                        let v = value(l, *r);
                        out.push_str(&v.map_or(" – |".into(), |v| format!(" {v:.2} |")));
                        v
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .flatten()
                    .collect();
                let average = values.iter().sum::<f64>() / values.len().max(1) as f64;
                out.push_str(&format!(" {} |\n", if values.is_empty() { "–".into() } else { format!("{average:.2}") }));
            };
            row("indolm BLEU".into(), &|_, r| r.map(|r| r.test_bleu));
            if let Some(system) = self.system {
                let label = format!("{} BLEU (paper)", system.label());
                row(label, &|l, r| r.and_then(|_| paper::figure(table, system, l)));
            }
            row("indolm chrF".into(), &|_, r| r.map(|r| r.test_chrf));
        }
        out.push_str(&self.table5());
        let english: Vec<Direction> = [english_directions(false), english_directions(true)].concat();
        let others: Vec<&DirectionResult> = self
            .directions
            .iter()
            .filter(|r| {
                Direction::parse(&r.direction).is_some_and(|d| Table::of(&d).is_none() && !english.contains(&d))
            })
            .collect();
        if !others.is_empty() {
            out.push_str("\nOther directions\n\n| direction | BLEU | chrF |\n|---|---:|---:|\n");
            for r in others {
                out.push_str(&format!("| {} | {:.2} | {:.2} |\n", r.direction, r.test_bleu, r.test_chrf));
            }
        }
        out.push_str("\n| direction | best epoch | valid BLEU | test |\n|---|---:|---:|---|\n");
        for r in &self.directions {
            out.push_str(&format!(
                "| {} | {} | {:.2} | {} |\n",
                r.direction, r.best_epoch, r.valid_bleu, r.test_bleu_detail
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(direction: &str, bleu: f64) -> DirectionResult {
        DirectionResult {
            direction: direction.into(),
            best_step: 1,
            best_epoch: 1,
            steps: 1,
            updates_per_epoch: 1,
            valid_bleu: 0.0,
            test_bleu: bleu,
            test_bleu_detail: String::new(),
            test_chrf: 0.0,
            paper_bleu: None,
            base_model_sha256: String::new(),
        }
    }

    #[test]
    fn the_tables_lay_out_each_direction_once_with_the_papers_rows() {
        let mut directions = vec![result("sun-ind", 40.0), result("ind-sun", 30.0), result("eng-ind", 20.0)];
        // English into the other 11, eng-ind (20.0) among them.
        directions.extend(
            english_directions(false).iter().filter(|d| d.target != "indonesian").map(|d| result(&d.name(), 5.0)),
        );
        directions.push(result("sun-jav", 12.5));
        let results = TranslationResults {
            system: Some(System::Mbart50),
            lowercase: true,
            bleu_signature: "sig".into(),
            directions,
        };
        let md = results.markdown();
        // Table 4: sun and eng columns, the paper's mBART-50 figures beside (35.19 and 17.92).
        assert!(md.contains("| indolm BLEU | – | – | – | – | – | 20.00 | – | – | – | – | 40.00 | 30.00 |"), "{md}");
        assert!(
            md.contains("| mBART-50 BLEU (paper) | – | – | – | – | – | 17.92 | – | – | – | – | 35.19 | 26.55 |"),
            "{md}"
        );
        // Table 5: eng → x complete (11 directions: (20 + 10 × 5) / 11), x → ind two of 11, the
        // paper's averages.
        assert!(md.contains("| indolm | 30.00 (1 of 11) | 30.00 (2 of 11) | 6.36 | – |"), "{md}");
        assert!(md.contains("| mBART-50 (paper) | 24.69 | 30.64 | 7.20 | 6.45 |"), "{md}");
        // A direction of no table is listed on its own.
        assert!(md.contains("| sun-jav | 12.50 | 0.00 |"), "{md}");
    }
}
