//! A run's checkpoints as an evaluation after the fact sees them: those with weights, in step
//! order, each still held against the trainer's pruning (`keep_last`) while they are read; a
//! checkpoint whose evaluation is pending in the run's trainer is left to it (two writers would
//! mix files).
use indolm_core::run::layout::{step_dir_name, PENDING_EVALUATION};
use indolm_core::run::readers::ReadHold;
use indolm_core::run::RunLayout;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::model_dir::WEIGHTS_FILE;
use std::path::{Path, PathBuf};

/// The checkpoints of a run to evaluate, held for reading while this lives.
pub struct RunCheckpoints {
    /// (step, folder) of each checkpoint with weights and no pending evaluation, in step order.
    pub steps: Vec<(u64, PathBuf)>,
    _hold: ReadHold,
}

impl RunCheckpoints {
    /// The checkpoints of `run` with weights; an error for a folder that is not a run or has
    /// none. Each checkpoint left to its trainer is noted on stderr.
    pub fn open(run: &Path) -> Result<Self> {
        let layout = RunLayout::new(run);
        if !run.is_dir() {
            return Err(Error::MissingFile {
                path: run.into(),
                hint: "expected a run folder (checkpoints/<run>)".into(),
            });
        }
        let hold = ReadHold::take(&layout)?;
        let mut steps = Vec::new();
        for (step, dir) in layout.checkpoints()? {
            if !dir.join(WEIGHTS_FILE).exists() {
                continue;
            }
            if dir.join(PENDING_EVALUATION).exists() {
                eprintln!("note: step {step}: its evaluation is pending in the run's trainer; left to it");
                continue;
            }
            steps.push((step, dir));
        }
        if steps.is_empty() {
            return Err(Error::invalid(
                run,
                "no checkpoint with weights (step-N/model.safetensors) to evaluate in this run",
            ));
        }
        Ok(RunCheckpoints { steps, _hold: hold })
    }

    /// Refuses, unless `overwrite`, when a checkpoint already holds an evaluation
    /// (`evaluated(dir)`), naming them; `what` names the evaluation and where it came from.
    pub fn refuse_to_replace(
        &self,
        run: &Path,
        what: &str,
        evaluated: &dyn Fn(&Path) -> bool,
        overwrite: bool,
    ) -> Result<()> {
        let held: Vec<String> =
            self.steps.iter().filter(|(_, d)| evaluated(d)).map(|(s, _)| step_dir_name(*s)).collect();
        if held.is_empty() || overwrite {
            return Ok(());
        }
        Err(Error::invalid(
            run,
            format!("{} already hold(s) {what}: pass --overwrite to replace them", held.join(", ")),
        ))
    }
}
