//! The bias evaluation of model folders, masked or causal LMs alike: one model
//! ([`evaluate_model`]), or every checkpoint of a run after the fact ([`evaluate_run`]), each
//! checkpoint's files into its folder and the curves to TensorBoard.
use super::board::BiasBoard;
use super::records::{metric_dir, REPORT_FILE};
use super::report::{BiasReport, Bootstrap};
use super::scoring::{evaluate_under, Evaluation};
use crate::checkpoints::RunCheckpoints;
use crate::pairs::PairSet;
use crate::scorer::LoadedLm;
use crate::BiasMetric;
use indolm_torch::error::Result;
use std::path::Path;
use tch::Device;

/// What a bias evaluation of model folders is asked.
pub struct BiasRequest<'a> {
    /// The pairs.
    pub pairs: &'a PairSet,
    /// The metrics, the main one first.
    pub metrics: &'a [BiasMetric],
    /// Languages to evaluate (codes or names); empty: all.
    pub languages: &'a [String],
    /// The intervals' bootstrap.
    pub bootstrap: Bootstrap,
    /// Score a masked LM whose MLM head was initialised randomly (else refused); its outputs
    /// then carry the warning.
    pub allow_random_head: bool,
    /// Where the model runs.
    pub device: Device,
}

/// Loads the model in `dir` (masked or causal) and scores the pairs under every metric: one
/// evaluation per metric, in order; notes and the time taken on stderr.
pub fn evaluate_model(dir: &Path, request: &BiasRequest, step: Option<u64>) -> Result<Vec<Evaluation>> {
    let lm = LoadedLm::load(dir, request.device)?;
    let warning = lm.require_trained_head(dir, request.allow_random_head)?;
    for note in lm.notes() {
        eprintln!("note: {note}");
    }
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    let scorer = lm.scorer(request.device)?;
    let started = std::time::Instant::now();
    let mut evaluations =
        evaluate_under(scorer.as_ref(), request.pairs, request.metrics, request.languages, step, request.bootstrap)?;
    for evaluation in &mut evaluations {
        evaluation.report.warning = warning.clone();
    }
    let names: Vec<String> = request.metrics.iter().map(|m| m.to_string()).collect();
    eprintln!("scored under {} ({}) in {:.2} s", names.join(", "), lm.describe(), started.elapsed().as_secs_f64());
    Ok(evaluations)
}

/// Evaluates every checkpoint with weights of `run` ([`RunCheckpoints`]), writing each one's
/// `bias.json` and `bias_pairs.csv` (each extra metric's under `bias-<metric>/`) into its folder
/// and the curves under `logdir` (the main metric's one TensorBoard run per language, each
/// extra metric's under `<metric>/`); a checkpoint that already holds a bias evaluation is
/// refused unless `overwrite`. `on_step` sees each checkpoint's evaluations as they are made.
/// Returns every report, checkpoint by checkpoint.
pub fn evaluate_run(
    run: &Path,
    request: &BiasRequest,
    logdir: &Path,
    overwrite: bool,
    on_step: &mut dyn FnMut(u64, &Evaluation),
) -> Result<Vec<BiasReport>> {
    let checkpoints = RunCheckpoints::open(run)?;
    let evaluated = |d: &Path| {
        d.join(REPORT_FILE).exists() || request.metrics.iter().any(|&m| metric_dir(d, m).join(REPORT_FILE).exists())
    };
    checkpoints.refuse_to_replace(
        run,
        "a bias evaluation (the training hook's, or an earlier `eval bias --run`)",
        &evaluated,
        overwrite,
    )?;
    let mut boards: Vec<BiasBoard> = request
        .metrics
        .iter()
        .enumerate()
        .map(|(i, m)| BiasBoard::new(if i == 0 { logdir.to_path_buf() } else { logdir.join(m.to_string()) }))
        .collect();
    let mut reports = Vec::new();
    for (step, dir) in &checkpoints.steps {
        let evaluations = evaluate_model(dir, request, Some(*step))?;
        Evaluation::write_all(&evaluations, dir)?;
        for (evaluation, board) in evaluations.into_iter().zip(&mut boards) {
            board.log(&evaluation.report, *step);
            on_step(*step, &evaluation);
            reports.push(evaluation.report);
        }
    }
    Ok(reports)
}
