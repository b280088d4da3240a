//! What the training engine needs from a task (masked-LM pretraining, sequence classification,
//! BertExt, BertAbs): its optimizers with their schedules, a source of micro-batches drawn on
//! the loader's thread, the loss of a micro-batch, and how its model and state are saved and
//! restored ([`Task`]); beside it, what it evaluates ([`Evaluations`]) and when
//! ([`EvaluationPlan`]). Everything else — the loop, accumulation, data parallelism, clipping,
//! the fused optimizer, non-finite losses, checkpoints and resume, signals, logging, best
//! weights and early stopping — is the engine's, the same for every task.
use indolm_core::logger::Logger;
use indolm_core::run::TrainerState;
use indolm_core::schedule::Schedule;
use indolm_torch::error::Result;
use indolm_torch::hooks::Ranks;
use indolm_torch::model::Precision;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use tch::{Device, Tensor};

/// One optimizer of a task: AdamW over some of the model's named variables, with its schedule.
pub struct OptimizerSpec {
    /// `""` for a task's only optimizer; else its name (`bert`, `dec`), which names its state
    /// file in checkpoints and its learning rate's tag (`train/lr_<name>`).
    pub name: String,
    /// The variables it updates, by name.
    pub vars: BTreeMap<String, Tensor>,
    /// Adam's β1 and β2.
    pub betas: [f64; 2],
    /// Adam's ε.
    pub eps: f64,
    /// Decoupled weight decay (none for biases and LayerNorm weights).
    pub weight_decay: f64,
    /// The learning rate of each update.
    pub schedule: Schedule,
    /// The largest norm of this optimizer's gradients; 0 does not clip.
    pub grad_clip: f64,
}

/// Which rows of every global micro-batch this process trains on: rank `rank` of `world`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// This process's rank.
    pub rank: usize,
    /// The number of processes.
    pub world: usize,
}

impl Slice {
    /// The single process's slice: every row.
    pub(crate) const WHOLE: Slice = Slice { rank: 0, world: 1 };

    /// This rank's rows of a global micro-batch of `rows`: a contiguous range, the ranks' ranges
    /// in order and as equal as they can be (some ranks get none when `rows < world`).
    pub fn rows(&self, rows: usize) -> std::ops::Range<usize> {
        rows * self.rank / self.world..rows * (self.rank + 1) / self.world
    }
}

/// A micro-batch as drawn: this rank's rows of the global micro-batch, and how many units of
/// loss (predicted tokens, examples, sentences, target tokens) they and the whole global
/// micro-batch hold. The engine weights each rank's mean loss by `units / update's global
/// units`, so that the summed gradients are those of one process training on the whole global
/// batch, whatever the number of ranks and micro-batches.
pub struct Drawn<B> {
    /// This rank's rows.
    pub batch: B,
    /// Units of loss in this rank's rows (0: its loss is a placeholder that still reaches every
    /// weight, weighted by 0).
    pub units: usize,
    /// Units of loss in the whole global micro-batch.
    pub global_units: usize,
    /// Rows (sequences, examples, articles) of the whole global micro-batch, for the throughput.
    pub rows: usize,
}

/// A source of micro-batches, run on the loader's thread: the draws are a function of the seed
/// and the cursor only, so a checkpoint's cursor resumes the exact stream.
pub trait BatchSource: Send + 'static {
    /// A micro-batch ready to be moved to the device.
    type Batch: Send + 'static;
    /// Where the source stands (saved in checkpoints).
    type Cursor: Clone + Send + Serialize + DeserializeOwned + 'static;

    /// Draws the next global micro-batch (this rank's rows of it), advancing `cursor`.
    fn next(&mut self, cursor: &mut Self::Cursor) -> Drawn<Self::Batch>;
}

/// The micro-batch type of a task.
pub(crate) type BatchOf<T> = <<T as Task>::Source as BatchSource>::Batch;
/// The cursor type of a task.
pub(crate) type CursorOf<T> = <<T as Task>::Source as BatchSource>::Cursor;

/// What one evaluation found.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// The score the best weights are kept by (higher is better) and its name; `None` when the
    /// task keeps no best weights (pretraining's held-out loss is only logged).
    pub score: Option<(String, f64)>,
}

/// The moment an evaluation may follow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moment {
    /// The update just taken.
    pub step: u64,
    /// A checkpoint follows.
    pub checkpoint: bool,
    /// The run stops after it (a signal).
    pub stopping: bool,
    /// It is the run's last update (`max_steps`).
    pub last: bool,
}

/// What an update trains on, for the throughput in the log.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Units of a full update (tokens, examples, articles): the nominal figure of the run's
    /// first line (the rates count what each update really trained on).
    pub per_update: f64,
    /// Units of one row of a micro-batch (a sequence's tokens; 1 for an example or article).
    pub per_row: f64,
    /// Their name (`tokens`: "tokens per step", the tag `train/tokens_per_s`).
    pub unit: &'static str,
    /// Their short name in the progress line (`tok`: "tok/s").
    pub short: &'static str,
    /// Training FLOPs per unit, for TFLOP/s and MFU (none: not reported).
    pub flops_per_unit: Option<f64>,
}

/// When a task's evaluations happen, fixed by its recipe: the engine follows it, and every rank
/// reads the same answer from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvaluationPlan {
    /// [`Evaluations::evaluate`] every this many updates (0: not by count).
    pub every: u64,
    /// Also at every checkpoint, and when the run stops on a signal.
    pub at_checkpoints: bool,
    /// Also after the run's last update (`max_steps`).
    pub at_last: bool,
    /// Also the untrained model, as step 0 (its score can be the best).
    pub at_start: bool,
    /// Whether [`Evaluations::at_checkpoint`] evaluates (rank 0 writes): checkpoints are then marked
    /// pending until it has, and redone from their weights when it failed.
    pub checkpoint_evaluations: bool,
    /// The intervals of the evaluations between checkpoints (each hook's `every`): they follow
    /// every update that one of them divides.
    pub between_checkpoints: Vec<u64>,
}

impl EvaluationPlan {
    /// Whether [`Evaluations::evaluate`] follows the update at `moment`.
    pub(crate) fn due(&self, moment: Moment) -> bool {
        (self.every > 0 && moment.step.is_multiple_of(self.every))
            || (self.at_checkpoints && (moment.checkpoint || moment.stopping))
            || (self.at_last && moment.last)
    }

    /// Whether evaluations between checkpoints follow the update of `step`.
    pub(crate) fn between_checkpoints_due(&self, step: u64) -> bool {
        self.between_checkpoints.iter().any(|&every| every > 0 && step.is_multiple_of(every))
    }
}

/// What a task evaluates, beside its training ([`Task`]): the engine calls these when its
/// [`EvaluationPlan`] says, on every rank with the run's [`Ranks`] (a task that shares an
/// evaluation scores a share on each rank, rank 0 writing; by default rank 0 evaluates alone
/// while the others wait), except [`Evaluations::evaluate_saved_checkpoint`], rank 0's alone.
pub trait Evaluations {
    /// When the evaluations happen.
    fn plan(&self) -> EvaluationPlan;

    /// Evaluates the model, logging through `logger` (one process).
    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation>;

    /// [`Evaluations::evaluate`] on every rank of `ranks`; the score that counts is rank 0's.
    /// By default rank 0 evaluates alone and the other ranks find nothing.
    fn evaluate_on(&mut self, step: u64, logger: &mut Logger, ranks: &Ranks<'_>) -> Result<Evaluation> {
        match ranks.leader() {
            true => self.evaluate(step, logger),
            false => Ok(Evaluation::default()),
        }
    }

    /// After a checkpoint is written into `dir` (by rank 0; called on every rank): the
    /// pretraining hooks, on the model in memory (the checkpoint's weights).
    fn at_checkpoint(&mut self, _step: u64, _dir: &Path, _logger: &mut Logger, _ranks: &Ranks<'_>) -> Result<()> {
        Ok(())
    }

    /// The checkpoint evaluations of an earlier checkpoint whose evaluations did not complete,
    /// on its weights read from `dir`.
    fn evaluate_saved_checkpoint(&mut self, _step: u64, _dir: &Path, _logger: &mut Logger) -> Result<()> {
        Ok(())
    }

    /// The evaluations between checkpoints due after `step` (called on every rank), their
    /// files into `dir` (by rank 0).
    fn evaluate_between_checkpoints(
        &mut self,
        _step: u64,
        _dir: &Path,
        _logger: &mut Logger,
        _ranks: &Ranks<'_>,
    ) -> Result<()> {
        Ok(())
    }
}

/// A task the engine trains: its model, batches, loss, optimizers and state. What it evaluates,
/// and when, is [`Evaluations`] beside it.
pub trait Task {
    /// Where its micro-batches come from.
    type Source: BatchSource;

    /// The model, for the run's first line (architecture and sizes).
    fn describe(&self) -> String;

    /// The dtype of the model's matrix products.
    fn precision(&self) -> Precision;

    /// More lines for the run's start (the attention kernel libtorch picks on CUDA).
    fn announce(&self, _device: Device) -> Vec<String> {
        Vec::new()
    }

    /// The optimizers, each over some of the model's named variables (together, every
    /// trainable one).
    fn optimizers(&self) -> Vec<OptimizerSpec>;

    /// The batch source, moved to the loader's thread (called once); `slice` is this rank's.
    fn source(&mut self, slice: Slice) -> Result<Self::Source>;

    /// Where a new run's source starts.
    fn start_cursor(&self) -> CursorOf<Self>;

    /// This rank's mean loss over the units of one micro-batch (with dropout); a placeholder
    /// that reaches every weight when the rows hold no unit.
    fn loss(&self, batch: &BatchOf<Self>) -> Tensor;

    /// Writes the model's directory (config, weights, tokenizer) into `dir`.
    fn save_model(&self, dir: &Path) -> Result<()>;

    /// Loads weights saved by [`Task::save_model`] (a checkpoint, or the best weights).
    fn load_weights(&mut self, dir: &Path) -> Result<()>;

    /// The task's own state for a checkpoint (beside the cursor, which the engine saves).
    fn state(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }

    /// Checks and restores the state a checkpoint recorded (`force`: `--force` was given).
    fn restore_state(&mut self, _state: &TrainerState, _dir: &Path, _force: bool) -> Result<()> {
        Ok(())
    }

    /// What an update trains on.
    fn throughput(&self) -> Throughput;

    /// Lines for the end of the run about the data seen (pretraining: each source's epochs),
    /// from the source the loader hands back and the cursor after the last trained batch.
    fn data_seen(&self, _source: Self::Source, _cursor: &CursorOf<Self>) -> Vec<String> {
        Vec::new()
    }
}
