//! The training engine: one loop for every task (masked-LM pretraining, sequence
//! classification, BertExt, BertAbs). [`Engine::new`] assembles a task with its optimizers, the
//! run (resuming when asked), the batches drawn ahead and the data-parallel group;
//! [`Engine::run`] is the loop, top to bottom: an update, its metrics, an evaluation when due
//! (keeping the best weights apart and stopping early after `patience` evaluations without
//! improvement), a checkpoint when due, and a clean stop on SIGINT, SIGTERM, SIGUSR1 or SIGHUP.
//!
//! An update draws `grad_accumulation` micro-batches (on the loader's thread), weights each
//! rank's mean loss by its share of the update's units, sums the gradients across ranks,
//! clips each optimizer's, and runs the fused AdamW of each optimizer with its schedule; a
//! non-finite loss skips the update on the device. Nothing inside an update reads from the
//! device or waits for it: losses, the gradient norm and the ranks' stop flag are read at the
//! steps that log, evaluate or checkpoint (the same on every rank). Given a process group, rank 0
//! writes checkpoints and logs; every rank calls the task's evaluations, which a task may share
//! among the ranks (pretraining's held-out loss and hooks: each rank scores a share, rank 0
//! writes), else rank 0 evaluates while the others wait for it.
use super::data_parallel::{DataParallel, Reduction};
use super::loader::Loader;
use super::metrics::{Metrics, Update};
use super::step_times::{Phase, StepTimes};
use super::task::{CursorOf, EvaluationPlan, Evaluations, Moment, Slice, Task};
use indolm_core::outln;
use indolm_core::recipe::{Fingerprint, SharedSections};
use indolm_core::run::{BestState, CheckpointContents, Part, ResumePoint, Run, TrainerState};
use indolm_core::schedule::Schedule;
use indolm_core::seeds::per_step;
use indolm_torch::device::describe;
use indolm_torch::device::op_counts::{OpCounter, OpCounts};
use indolm_torch::device::seed_torch;
use indolm_torch::device::torch_errors;
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::Ranks;
use indolm_torch::optim::AdamW;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// The checkpoint part of the model's directory.
const MODEL_PART: &str = "model";
/// The checkpoint part of the data's cursor (a key of `trainer_state.json`).
const CURSOR_PART: &str = "cursor";

/// How a run was asked to go, from the command line.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// Where to train.
    pub device: Device,
    /// `latest`, `auto` (`latest` when the run has a checkpoint, else a new run) or a
    /// checkpoint directory.
    pub resume: Option<String>,
    /// Resume even if the recipe differs in settings that matter.
    pub force: bool,
    /// Start over, deleting the run's earlier checkpoints and logs.
    pub overwrite: bool,
    /// Stop (with a checkpoint) after this step even if `max_steps` is later (for tests and
    /// for splitting a run into jobs).
    pub stop_after: Option<u64>,
    /// Time each phase of every update, synchronizing the device between them, and print the
    /// medians at the end (for profiling: the synchronizations cost some speed).
    pub step_times: bool,
    /// Count the ATen operations of one steady-state update that reads nothing back, and the
    /// host waits among them, and print them at the end.
    pub op_counts: bool,
    /// How data-parallel ranks sum their gradients (`--bucket-mb`, `--grad-reduce`).
    pub reduction: Reduction,
}

impl TrainOptions {
    /// Plain training on `device`: a new run, nothing measured.
    pub fn on(device: Device) -> Self {
        TrainOptions {
            device,
            resume: None,
            force: false,
            overwrite: false,
            stop_after: None,
            step_times: false,
            op_counts: false,
            reduction: Reduction::default(),
        }
    }

    /// How a task opens its run under these options (`--resume`, `--overwrite` as given), with
    /// the recipe's `[checkpoint]` section.
    pub fn run_options(
        &self,
        leader: bool,
        checkpoint: &indolm_core::recipe::CheckpointSection,
        tensorboard: PathBuf,
        total_steps: u64,
    ) -> indolm_core::run::RunOptions {
        indolm_core::run::RunOptions {
            resume: self.resume.clone(),
            overwrite: self.overwrite,
            leader,
            retention: retention(checkpoint),
            tensorboard,
            total_steps,
            inputs: Vec::new(),
        }
    }
}

/// What the checkpoints of a run with the recipe's `[checkpoint]` section keep.
pub fn retention(checkpoint: &indolm_core::recipe::CheckpointSection) -> indolm_core::run::Retention {
    indolm_core::run::Retention {
        every: checkpoint.every,
        keep_last: checkpoint.keep_last,
        keep_weights_every: checkpoint.keep_weights_every,
    }
}

/// The keys (with old and new values) in which a recipe differs from a checkpoint's record.
pub(crate) type RecipeDifferences = Box<dyn Fn(&Fingerprint) -> Vec<String>>;

/// What the engine takes from a recipe, whatever its kind.
pub struct EngineSettings {
    /// The run's name (for the log and errors).
    pub name: String,
    /// The seed every random choice derives from.
    pub seed: u64,
    /// The salt of the per-step reseeding of libtorch's generators (dropout).
    pub torch_salt: u64,
    /// Updates in the whole run.
    pub max_steps: u64,
    /// Micro-batches an update.
    pub grad_accumulation: usize,
    /// Non-finite losses in a row that stop the run.
    pub max_nonfinite_steps: u64,
    /// A log line every this many updates.
    pub log_every: u64,
    /// One device's peak TFLOP/s, for MFU.
    pub peak_tflops: Option<f64>,
    /// Evaluations without a better score after which training stops (none: never).
    pub patience: Option<u64>,
    /// What a checkpoint records of the recipe.
    pub fingerprint: Fingerprint,
    /// The keys in which the recipe differs from a recorded fingerprint.
    pub differences: RecipeDifferences,
}

/// What a task decides about its run, beside the sections every recipe shares.
pub struct TaskRun {
    /// The salt of the per-step reseeding of libtorch's generators (`seeds::salt`).
    pub torch_salt: u64,
    /// Updates in the whole run.
    pub max_steps: u64,
    /// Evaluations without a better score after which training stops (none: never).
    pub patience: Option<u64>,
    /// What a checkpoint records of the recipe.
    pub fingerprint: Fingerprint,
}

impl EngineSettings {
    /// The settings of a run of the recipe `shared` describes (its name, seed, accumulation,
    /// non-finite limit and logging) with what the task decides (`run`); a checkpoint's recorded
    /// fingerprint is compared with the new one key by key. The one place a task's engine is
    /// configured: a task changes a field with struct update syntax (a unit's longer name).
    pub fn for_recipe(shared: &SharedSections, run: TaskRun) -> Self {
        let recorded_against = run.fingerprint.clone();
        EngineSettings {
            name: shared.name.to_string(),
            seed: shared.seed,
            torch_salt: run.torch_salt,
            max_steps: run.max_steps,
            grad_accumulation: shared.optimizer.grad_accumulation,
            max_nonfinite_steps: shared.optimizer.max_nonfinite_steps,
            log_every: shared.logging.every,
            peak_tflops: shared.logging.peak_tflops,
            patience: run.patience,
            fingerprint: run.fingerprint,
            differences: Box::new(move |recorded| recorded.differences_to(&recorded_against).unwrap_or_default()),
        }
    }
}

/// How a run ended.
pub struct EngineSummary {
    /// The run folder.
    pub run_dir: PathBuf,
    /// The step the run ended at.
    pub final_step: u64,
    /// Updates skipped for a non-finite loss over the whole run.
    pub nonfinite_skipped: u64,
    /// This process's rank (0 for a single process): only rank 0 reports.
    pub rank: usize,
    /// The best evaluation, whose weights are in `<run>/best/` (tasks that keep them).
    pub best: Option<BestState>,
    /// The run is over (its last step, or stopped early); false after a stop signal or
    /// `--stop-after`, when it can be resumed.
    pub complete: bool,
}

/// A finished (or stopped) run: how it ended, the task (its model as trained: the best weights
/// are in `<run>/best/`), and the process group, for the next unit of a fine-tuning.
pub struct Finished<T> {
    /// How the run ended.
    pub summary: EngineSummary,
    /// The task, with its model.
    pub task: T,
    /// The data-parallel group, handed back.
    pub parallel: Option<DataParallel>,
}

/// One of the task's optimizers with its schedule.
struct TaskOptimizer {
    name: String,
    adam: AdamW,
    schedule: Schedule,
    grad_clip: f64,
}

/// What follows the update of a step (the same on every rank).
struct Due {
    checkpoint: bool,
    evaluation: bool,
    between_checkpoints: bool,
    /// Anything that reads values back from the device (a log line, an evaluation, a checkpoint).
    reads: bool,
}

/// `--op-counts`: which update to count, and its counts once taken.
struct OpCountPlan {
    wanted: bool,
    taken: Option<(u64, OpCounts)>,
}

impl OpCountPlan {
    /// Whether to count the update of `step`: the first from step 3 on (the first update builds
    /// the optimizer's flat buffers; the second is the first ordinary one) that reads nothing.
    fn wanted(&self, step: u64, reads: bool) -> bool {
        self.wanted && self.taken.is_none() && step >= 3 && !reads
    }
}

/// Test-only (not a user option): `INDOLM_TEST_FAIL_EVALUATION=<where>@<step>,...` makes the
/// evaluations of `<step>` fail as a full disk would, where `<where>` is `checkpoint` (the
/// hooks after a checkpoint), `between` (between checkpoints) or `redo` (a pending one redone):
/// the fault suite's way to fail an evaluation and nothing else.
fn test_failure(step: u64, place: &str) -> Option<Error> {
    let spec = std::env::var("INDOLM_TEST_FAIL_EVALUATION").ok()?;
    spec.split(',').any(|s| s == format!("{place}@{step}")).then(|| {
        Error::io(
            Path::new("(injected by INDOLM_TEST_FAIL_EVALUATION)"),
            std::io::Error::from_raw_os_error(28), // ENOSPC
        )
    })
}

/// Test-only (not a user option): `INDOLM_TEST_HOLD_RANK0=<step>:<file>` makes rank 0, at its
/// first wait of step `<step>` (the end of its part of a checkpoint or an evaluation, the other
/// ranks waiting for it), write its process id to `<file>` and stay there while that file exists
/// (ten minutes at most): a test can kill a rank while, for the others, rank 0 still evaluates.
fn hold_for_test(step: u64) {
    static HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Ok(spec) = std::env::var("INDOLM_TEST_HOLD_RANK0") else { return };
    let Some((at, file)) = spec.split_once(':') else { return };
    if at.parse::<u64>().ok() != Some(step) || HELD.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let file = Path::new(file);
    if indolm_core::files::write_atomic(file, std::process::id().to_string().as_bytes()).is_err() {
        return;
    }
    let started = Instant::now();
    while file.exists() && started.elapsed() < std::time::Duration::from_secs(600) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Test-only (not a user option): `INDOLM_TEST_OOM_AT_STEP=N` makes the update of step N ask
/// libtorch for an impossibly large tensor on the run's device, a real out-of-memory exception,
/// so the tests can see how a failure inside an update ends the run.
fn inject_failure(step: u64, device: Device) {
    if std::env::var("INDOLM_TEST_OOM_AT_STEP").ok().and_then(|v| v.parse::<u64>().ok()) == Some(step) {
        let _ = Tensor::empty([1i64 << 50], (Kind::Float, device));
    }
}

/// A task's evaluation hook after `step` under libtorch's error guard: a libtorch failure inside
/// it (a CUDA out-of-memory, above all) is one error naming the run, the hook and the step, not
/// a panic. `place` names the hook: `evaluation`, `checkpoint` (the hooks after a checkpoint),
/// `between` (between checkpoints) or `redo` (a pending one redone). Test-only (not a user
/// option): `INDOLM_TEST_TORCH_FAILURE=<place>@<step>,...` makes the hook ask libtorch for an
/// impossibly large tensor on `device` first, a real out-of-memory exception inside it.
fn guarded_hook<R>(run: &str, place: &str, step: u64, device: Device, hook: impl FnOnce() -> Result<R>) -> Result<R> {
    let what = match place {
        "evaluation" => "the evaluation",
        "checkpoint" => "the checkpoint's evaluations",
        "between" => "the evaluations between checkpoints",
        _ => "the redone evaluations of the checkpoint",
    };
    torch_errors::guard(
        || format!("run {run}, {what} at step {step}"),
        "the device ran out of memory in an evaluation, not in an update: give the evaluations smaller batches, or \
         evaluate the saved checkpoints in a separate process",
        || {
            let spec = std::env::var("INDOLM_TEST_TORCH_FAILURE").unwrap_or_default();
            if spec.split(',').any(|s| s == format!("{place}@{step}")) {
                let _ = Tensor::empty([1i64 << 50], (Kind::Float, device));
            }
            hook()
        },
    )
}

/// A task in training.
pub struct Engine<T: Task> {
    task: T,
    /// When the task's evaluations happen.
    plan: EvaluationPlan,
    settings: EngineSettings,
    device: Device,
    run: Run,
    optimizers: Vec<TaskOptimizer>,
    /// The background thread drawing the next micro-batches.
    loader: Option<Loader<T::Source>>,
    state: TrainerState,
    /// The source's cursor after the last micro-batch trained on.
    cursor: CursorOf<T>,
    metrics: Metrics,
    /// The last step this process takes: `max_steps`, or `--stop-after`.
    stop_at: u64,
    consecutive_nonfinite: u64,
    /// The updates whose losses are still on the device: (step, loss).
    unsettled: Vec<(u64, Tensor)>,
    /// The data-parallel group, when launched by torchrun or srun.
    parallel: Option<DataParallel>,
    /// What the ranks agreed at the last reduction: some rank was asked to stop.
    agreed_stop: Option<Tensor>,
    /// Seconds spent in optimizer updates (for the share the reductions took).
    step_seconds: f64,
    /// `--step-times`: per-phase times of every update.
    step_times: Option<StepTimes>,
    /// `--op-counts`: the counted update.
    op_counts: OpCountPlan,
    /// Evaluations between checkpoints so far, and the seconds they took.
    dense_evaluations: (u64, f64),
    /// Updates this process took.
    updates_taken: u64,
    /// Units (tokens, examples, articles) those updates trained on, over all ranks.
    units_trained: f64,
}

impl<T: Task + Evaluations> Engine<T> {
    /// Builds the optimizers of `task`, restores `resume` (weights, optimizer states, the
    /// source's cursor, the task's and the engine's state; the recipe compared with the one it
    /// was trained with unless `--force`), checks that every rank holds the same weights, and
    /// starts drawing batches.
    pub fn new(
        mut task: T,
        settings: EngineSettings,
        opts: &TrainOptions,
        run: Run,
        resume: Option<ResumePoint>,
        mut parallel: Option<DataParallel>,
    ) -> Result<Self> {
        if let Some(p) = parallel.as_ref().filter(|p| p.device() != opts.device) {
            // Every tensor the reductions take is the model's: the group must live where it does.
            return Err(Error::argument(
                "--device",
                format!(
                    "training on {:?}, but this process's group runs its collectives on {:?}",
                    opts.device,
                    p.device()
                ),
            ));
        }
        let mut optimizers: Vec<TaskOptimizer> = task
            .optimizers()
            .into_iter()
            .map(|o| TaskOptimizer {
                adam: AdamW::new(o.vars, o.betas, o.eps, o.weight_decay),
                name: o.name,
                schedule: o.schedule,
                grad_clip: o.grad_clip,
            })
            .collect();
        let (state, cursor) = match resume {
            Some(point) => {
                let differing = (settings.differences)(&point.state.recipe_fingerprint);
                run.checkpoints.check_recipe(&point, &differing, opts.force)?;
                task.load_weights(&point.dir)?;
                let applied = point.state.step - point.state.nonfinite_skipped;
                for o in &mut optimizers {
                    o.adam.restore_from(&point.dir, &o.name, applied)?;
                }
                task.restore_state(&point.state, &point.dir, opts.force)?;
                let cursor: CursorOf<T> = point.value(CURSOR_PART)?;
                if run.leader {
                    outln!("resumed from {} at step {}", point.dir.display(), point.state.step);
                }
                let mut state = point.state;
                state.recipe_fingerprint = settings.fingerprint.clone();
                (state, cursor)
            }
            None => (TrainerState::start(settings.seed, settings.fingerprint.clone()), task.start_cursor()),
        };
        if let Some(p) = parallel.as_mut() {
            let vars: Vec<Tensor> = optimizers.iter().flat_map(|o| o.adam.parameters()).collect();
            p.check_equal_weights(&vars)?;
            p.attach(&optimizers.iter().map(|o| &o.adam).collect::<Vec<_>>(), opts.reduction)?;
        }
        if let Some(stop) = opts.stop_after.filter(|&s| s < state.step) {
            return Err(Error::argument(
                "--stop-after",
                format!(
                    "step {stop} is before step {}, where {} resumes: give a later step (up to max_steps {}), or leave it out",
                    state.step,
                    settings.name,
                    settings.max_steps
                ),
            ));
        }
        let stop_at = opts.stop_after.unwrap_or(settings.max_steps).min(settings.max_steps);
        let devices = parallel.as_ref().map_or(1, |p| p.world_size());
        let metrics = Metrics::open(
            run.dir(),
            state.step,
            run.leader,
            settings.log_every,
            task.throughput(),
            settings.peak_tflops,
            devices,
        )?;
        let slice = parallel.as_ref().map_or(Slice::WHOLE, |p| p.slice());
        let loader = Loader::start(task.source(slice)?, cursor.clone());
        Ok(Engine {
            plan: task.plan(),
            device: opts.device,
            run,
            optimizers,
            loader: Some(loader),
            state,
            cursor,
            metrics,
            stop_at,
            consecutive_nonfinite: 0,
            unsettled: Vec::new(),
            parallel,
            agreed_stop: None,
            step_seconds: 0.0,
            step_times: opts.step_times.then(|| StepTimes::new(opts.device)),
            op_counts: OpCountPlan { wanted: opts.op_counts, taken: None },
            dense_evaluations: (0, 0.0),
            updates_taken: 0,
            units_trained: 0.0,
            settings,
            task,
        })
    }

    /// Trains until the last step, an early stop or a stop signal, evaluating and checkpointing
    /// as the recipe says.
    pub fn run(mut self) -> Result<Finished<T>> {
        match self.train_to_end() {
            Ok(()) => Ok(self.finish()),
            Err(e) => {
                // The other ranks learn through the store that this one failed alone, and name it
                // at once instead of waiting in a collective it will never join.
                if let Some(p) = self.parallel.as_mut() {
                    p.group().announce_failure();
                }
                Err(e)
            }
        }
    }

    /// [`Engine::run`]'s work: every update, evaluation and checkpoint up to the last step.
    fn train_to_end(&mut self) -> Result<()> {
        self.announce();
        // Evaluations of earlier checkpoints that did not complete (a full disk, a kill) are
        // redone before training goes on.
        self.redo_pending_evaluations(None)?;
        self.wait_for_rank0("redoing of pending evaluations")?;
        if self.state.step == 0 && self.plan.at_start {
            self.evaluate(0)?; // the untrained model: where every curve starts
        }
        while self.state.step < self.stop_at && !self.state.early_stopped {
            let started = Instant::now();
            let step = self.state.step + 1;
            let due = self.due_at(step);
            // `--op-counts`: the first steady-state update that reads nothing back is counted.
            let counter = match self.op_counts.wanted(step, due.reads) {
                true => Some(OpCounter::start()?),
                false => None,
            };
            let update = self.guarded_step()?;
            // Values stay on the device until a step that logs, evaluates or checkpoints (the
            // same steps on every rank): there the losses are read together, non-finite ones
            // reported, and data-parallel ranks read whether any of them was asked to stop.
            let stopping = match &self.agreed_stop {
                Some(agreed) => due.reads && agreed.double_value(&[]) > 0.0,
                None => self.run.stop.raised(),
            };
            if due.reads || stopping {
                self.settle_losses()?;
            }
            self.step_seconds += started.elapsed().as_secs_f64();
            self.updates_taken += 1;
            self.metrics.record_update(&mut self.run.logger, step, self.stop_at, &update)?;
            if let Some(counter) = counter {
                self.op_counts.taken = Some((step, counter.stop()?));
            }
            let last = step == self.settings.max_steps;
            let moment = Moment { step, checkpoint: due.checkpoint || stopping, stopping, last };
            if due.evaluation || (stopping && self.plan.due(moment)) {
                self.evaluate(step)?;
            }
            if due.checkpoint || stopping || self.state.early_stopped {
                self.checkpoint()?;
            } else if due.between_checkpoints {
                self.evaluate_between_checkpoints()?;
            }
            if stopping {
                self.run.logger.println(&format!("stop requested: checkpoint written at step {step}, exiting"));
                break;
            }
        }
        self.refuse_pending_evaluations()
    }

    /// The checkpoint evaluations still pending (other than `except`, the checkpoint just
    /// written), each redone from its checkpoint's weights; one that fails again stays pending
    /// with a warning. Rank 0's work (the caller's wait for rank 0 makes the other ranks wait).
    fn redo_pending_evaluations(&mut self, except: Option<u64>) -> Result<()> {
        if self.rank() != 0 || !self.plan.checkpoint_evaluations {
            return Ok(());
        }
        for (step, dir) in self.run.checkpoints.pending_evaluations()? {
            if Some(step) == except {
                continue;
            }
            self.run.logger.println(&format!(
                "step {step}: the evaluations of this checkpoint did not complete; redoing them from its weights"
            ));
            let done = match test_failure(step, "redo") {
                Some(e) => Err(e),
                None => guarded_hook(&self.settings.name, "redo", step, self.device, || {
                    self.task.evaluate_saved_checkpoint(step, &dir, &mut self.run.logger)
                }),
            };
            if let Err(e) = done.and_then(|_| self.run.checkpoints.evaluated(&dir)) {
                self.warn_pending(step, &e);
            }
        }
        self.run.logger.flush();
        Ok(())
    }

    /// A warning that the evaluations of checkpoint `step` failed and stay pending.
    fn warn_pending(&mut self, step: u64, error: &Error) {
        self.run.logger.println(&format!(
            "warning: step {step}: the checkpoint's evaluations failed ({error}); they stay pending, its weights are kept, and they are redone at the next checkpoint and on resume"
        ));
    }

    /// Rank 0 at the end of a run: an error when some checkpoint's evaluations are still
    /// pending, so that a run whose curves have holes does not end as a success.
    fn refuse_pending_evaluations(&mut self) -> Result<()> {
        // A run stopped before its end (a signal, `--stop-after`) redoes them when it resumes.
        let ended = self.state.step >= self.settings.max_steps || self.state.early_stopped;
        if self.rank() != 0 || !self.plan.checkpoint_evaluations || !ended {
            return Ok(());
        }
        let pending: Vec<String> =
            self.run.checkpoints.pending_evaluations()?.iter().map(|(step, _)| step.to_string()).collect();
        if pending.is_empty() {
            return Ok(());
        }
        Err(Error::training(
            format!("run {}", self.settings.name),
            format!(
                "the evaluations of the checkpoint(s) at step {} could not be completed (see the warnings above); their weights are kept: run again with --resume latest to redo them",
                pending.join(", ")
            ),
        ))
    }

    /// What follows the update of `step`; the same on every rank. An evaluation's schedule is
    /// the run's (`max_steps`), never `--stop-after`'s, so a run cut into jobs evaluates, and
    /// keeps best weights, exactly as one uninterrupted run.
    fn due_at(&self, step: u64) -> Due {
        let last = step == self.settings.max_steps;
        let checkpoint = self.run.checkpoints.due(step) || step == self.stop_at;
        let evaluation = self.plan.due(Moment { step, checkpoint, stopping: false, last });
        let between_checkpoints = self.plan.between_checkpoints_due(step);
        let reads = self.metrics.logs_at(step, self.stop_at) || checkpoint || evaluation || between_checkpoints;
        Due { checkpoint, evaluation, between_checkpoints, reads }
    }

    /// [`Engine::step`], with a libtorch failure inside it (a CUDA out-of-memory, above all)
    /// turned into one error that names the step, the batch's shape and what to change; the
    /// last checkpoint is untouched.
    fn guarded_step(&mut self) -> Result<Update> {
        let step = self.state.step + 1;
        match torch_errors::catch(|| self.step()) {
            Ok(update) => update,
            Err(failure) => {
                let world = self.parallel.as_ref().map_or(1, |p| p.world_size());
                let t = self.metrics.throughput();
                let shape = format!(
                    "{} {} an update, in {} micro-batch(es) on {world} process(es)",
                    t.per_update, t.unit, self.settings.grad_accumulation
                );
                let advice = if failure.out_of_memory() {
                    "the device ran out of memory: lower optimizer.batch_size and raise optimizer.grad_accumulation by the same factor (the global batch, and so the run, stay the same)"
                } else {
                    "libtorch failed in the update"
                };
                let resume = match self.run.checkpoints.latest_step() {
                    Some(good) => format!("the last checkpoint (step {good}) is intact: resume with --resume latest"),
                    None => "no checkpoint was written yet".into(),
                };
                Err(Error::training(
                    format!("run {}, update of step {step} ({shape})", self.settings.name),
                    format!("{}; {advice}; {resume}", failure.message),
                ))
            }
        }
    }

    /// One optimizer update over `grad_accumulation` micro-batches, with clipping and the
    /// schedules. Where the loss is not finite the update is skipped on the device (an exact
    /// no-op); [`Engine::settle_losses`] reports it later (and after `max_nonfinite_steps` in a
    /// row stops the run with an error). Nothing is read back here.
    fn step(&mut self) -> Result<Update> {
        let index = self.state.step;
        inject_failure(index + 1, self.device);
        // Every random choice of this step derives from the seed and the step number (and the
        // rank: each rank draws its own dropout masks).
        let rank = self.rank() as u64;
        seed_torch(self.settings.seed, per_step(self.settings.torch_salt, index) ^ (rank << 48));
        for o in &mut self.optimizers {
            o.adam.zero_grad();
        }
        let lap = |times: &mut Option<StepTimes>, phase| times.as_mut().map(|t| t.lap(phase));
        if let Some(t) = &mut self.step_times {
            t.start();
        }
        // The update's micro-batches, drawn ahead on the loader's thread; the cursor after the
        // last is what a checkpoint records.
        let loader = self.loader.as_mut().expect("the loader runs until finish");
        let micro = (0..self.settings.grad_accumulation).map(|_| loader.next_batch()).collect::<Result<Vec<_>>>()?;
        if let Some(last) = micro.last() {
            self.cursor = last.cursor_after.clone();
        }
        lap(&mut self.step_times, Phase::Batch);
        // The update's loss is the mean over every unit it trains on (on every rank, in every
        // micro-batch): each micro-batch's mean is weighted by its share of them, so the summed
        // gradients are the same however the global batch is cut into ranks and micro-batches.
        let units: usize = micro.iter().map(|b| b.drawn.global_units).sum();
        let rows: usize = micro.iter().map(|b| b.drawn.rows).sum();
        let trained = rows as f64 * self.metrics.throughput().per_row;
        let mut loss_sum: Option<Tensor> = None;
        for (k, loaded) in micro.iter().enumerate() {
            let share = loaded.drawn.units as f64 / units.max(1) as f64;
            let part = self.task.loss(&loaded.drawn.batch) * share;
            lap(&mut self.step_times, Phase::Forward);
            if let Some(p) = self.parallel.as_mut().filter(|_| k + 1 == micro.len()) {
                // The gradients' all-reduce starts, bucket by bucket, during this backward.
                p.before_last_backward();
            }
            part.backward();
            lap(&mut self.step_times, Phase::Backward);
            let part = part.detach().to_kind(Kind::Double);
            loss_sum = Some(match loss_sum {
                None => part,
                Some(sum) => sum + part,
            });
        }
        let loss_sum = loss_sum.expect("at least one micro-batch");
        let loss = match self.parallel.as_mut() {
            None => loss_sum,
            Some(p) => {
                let mut adams: Vec<&mut AdamW> = self.optimizers.iter_mut().map(|o| &mut o.adam).collect();
                let reduced = p.reduce(&mut adams, &loss_sum, self.run.stop.raised())?;
                self.agreed_stop = Some(reduced.stop);
                if let Some(seconds) = lap(&mut self.step_times, Phase::AllReduce) {
                    p.add_timed_reduction(seconds);
                }
                reduced.loss
            }
        };
        self.state.step += 1;
        let applies = loss.isfinite();
        let (mut lrs, mut norms) = (Vec::new(), Vec::new());
        for o in &mut self.optimizers {
            let lr = o.schedule.lr(index);
            norms.push(o.adam.clip_grad_norm(o.grad_clip));
            o.adam.step_if(lr, Some(&applies));
            lrs.push((o.name.clone(), lr));
        }
        let grad_norm = match norms.len() {
            1 => norms.pop().expect("one norm"),
            _ => Tensor::stack(&norms, 0).norm(),
        };
        if let Some(t) = &mut self.step_times {
            t.lap(Phase::Optimizer);
            t.end();
        }
        self.unsettled.push((self.state.step, loss.shallow_clone()));
        self.units_trained += trained;
        Ok(Update { loss, lrs, grad_norm, units: trained })
    }

    /// Reads the losses of the updates since the last call (one read for all of them), reports
    /// those that were not finite (their updates were skipped), and stops the run after
    /// `max_nonfinite_steps` of them in a row.
    fn settle_losses(&mut self) -> Result<()> {
        if self.unsettled.is_empty() {
            return Ok(());
        }
        let (steps, losses): (Vec<u64>, Vec<Tensor>) = std::mem::take(&mut self.unsettled).into_iter().unzip();
        let values = Vec::<f64>::try_from(Tensor::stack(&losses, 0).to_kind(Kind::Double).to_device(Device::Cpu))
            .expect("a vector of losses");
        for (step, loss) in steps.into_iter().zip(values) {
            if loss.is_finite() {
                self.consecutive_nonfinite = 0;
                self.state.last_loss = Some(loss);
            } else {
                self.skip_nonfinite(step, loss)?;
            }
        }
        Ok(())
    }

    /// This process's rank in a data-parallel run (0 for a single process).
    fn rank(&self) -> usize {
        self.parallel.as_ref().map_or(0, |p| p.rank())
    }

    /// Counts the skipped update of `step` (its loss not finite), and stops the run after too
    /// many in a row.
    fn skip_nonfinite(&mut self, step: u64, loss: f64) -> Result<()> {
        self.state.nonfinite_skipped += 1;
        self.consecutive_nonfinite += 1;
        let in_a_row = self.consecutive_nonfinite;
        self.run.logger.println(&format!("step {step}: non-finite loss {loss}, update skipped ({in_a_row} in a row)"));
        if in_a_row >= self.settings.max_nonfinite_steps {
            return Err(Error::training(
                format!("run {}", self.settings.name),
                match self.run.checkpoints.latest_step() {
                    Some(good) => format!("{in_a_row} consecutive non-finite losses at step {step}; stopped. The last checkpoint (step {good}) is intact: lower optimizer.lr or check the data, then resume with --resume latest"),
                    None => format!("{in_a_row} consecutive non-finite losses at step {step}; stopped before any checkpoint was written: lower optimizer.lr or check the data, then start again with --overwrite"),
                },
            ));
        }
        Ok(())
    }

    /// Evaluates the model after `step` (every rank: shared, or rank 0 while the others wait): a
    /// better score keeps the weights in `<run>/best/`; `patience` evaluations without one stop
    /// the run (every rank learns rank 0's decision).
    fn evaluate(&mut self, step: u64) -> Result<()> {
        let mut exhausted = false;
        let evaluation = {
            let ranks = Ranks::of(self.parallel.as_mut().map(DataParallel::group));
            ranks.settled("the evaluation", || {
                guarded_hook(&self.settings.name, "evaluation", step, self.device, || {
                    self.task.evaluate_on(step, &mut self.run.logger, &ranks)
                })
            })?
        };
        if let Some((metric, score)) = evaluation.score.filter(|_| self.run.leader) {
            exhausted = self.offer_best(step, metric, score)?;
        }
        // Rank 0's writes (the evaluation's files, the best weights) are waited for in the store.
        self.wait_for_rank0("evaluation")?;
        if let Some(p) = self.parallel.as_mut() {
            exhausted = p.agree(exhausted)?;
        }
        if exhausted {
            self.state.early_stopped = true;
            let best = self.state.best.as_ref().map_or(0, |b| b.step);
            self.run.logger.println(&format!(
                "step {step}: no better score in {} evaluations (the best was at step {best}): stopping early",
                self.settings.patience.unwrap_or(0)
            ));
        }
        Ok(())
    }

    /// Keeps `score` of `step` as the best when it beats the best so far (its weights written to
    /// `<run>/best/`); true when `patience` evaluations have passed without a better one.
    fn offer_best(&mut self, step: u64, metric: String, score: f64) -> Result<bool> {
        if let Some(best) = self.state.best.as_mut().filter(|b| score <= b.score) {
            best.since += 1;
            return Ok(self.settings.patience.is_some_and(|p| best.since >= p));
        }
        let best = BestState { step, score, metric, since: 0 };
        let task = &self.task;
        self.run.checkpoints.save_best(&best, &|dir: &Path| task.save_model(dir))?;
        self.state.best = Some(best);
        Ok(false)
    }

    /// Writes a checkpoint and runs the task's checkpoint work on it (timed), then flushes the
    /// logs: rank 0 does, while the other ranks score their share of the checkpoint's
    /// evaluations, then wait for it.
    fn checkpoint(&mut self) -> Result<()> {
        if self.rank() != 0 {
            if self.plan.checkpoint_evaluations {
                // The checkpoint written first (in the store, not in the evaluations' collectives).
                self.wait_for_rank0("checkpoint")?;
                // Rank 0 keeps the checkpoint pending on a failure (every rank meets the same,
                // agreed, but for rank 0's writes); each rank says so.
                let dir = self.run.layout().step_dir(self.state.step);
                if let Err(e) = self.checkpoint_evaluations(&dir) {
                    let (step, rank, world) =
                        (self.state.step, self.rank(), self.parallel.as_ref().map_or(1, |p| p.world_size()));
                    eprintln!("warning: rank {rank} of {world}: step {step}: the checkpoint's evaluations failed ({e}); rank 0 keeps them pending and training goes on");
                }
            }
            return self.wait_for_rank0("checkpoint");
        }
        let step = self.state.step;
        let evaluations = self.plan.checkpoint_evaluations;
        let dir = {
            let contents = CheckpointContents { parts: self.checkpoint_parts(), evaluations };
            self.run.checkpoints.save(&self.state, &contents)?
        };
        self.run.logger.println(&format!("step {step}: checkpoint {}", dir.display()));
        if evaluations {
            self.wait_for_rank0("checkpoint")?;
            // A failed evaluation loses nothing: the checkpoint stays marked pending (its weights
            // kept) and is redone at the next checkpoint and on resume.
            let done = self.checkpoint_evaluations(&dir);
            match done.and_then(|_| self.run.checkpoints.evaluated(&dir)) {
                Ok(()) => {}
                Err(e) => self.warn_pending(step, &e),
            }
        }
        self.run.logger.flush();
        // Rank 0 alone redoes earlier pending evaluations; the wait below covers them.
        self.redo_pending_evaluations(Some(step))?;
        self.wait_for_rank0("checkpoint")
    }

    /// Makes the ranks wait for rank 0's `work` of this step (its writes: a checkpoint, best
    /// weights, evaluation files) through the rendezvous store ([`DataParallel::wait_for_rank0`]:
    /// under `--rank0-wait-timeout`, not the collectives' timeout, a lost rank named); nothing for
    /// a single process.
    fn wait_for_rank0(&mut self, work: &str) -> Result<()> {
        let step = self.state.step;
        let Some(p) = self.parallel.as_mut() else { return Ok(()) };
        if p.rank() == 0 {
            hold_for_test(step);
        }
        p.wait_for_rank0(&format!("rank 0's {work} at step {step}"))
    }

    /// The task's evaluations of the checkpoint of this step in `dir`, on every rank (each scores
    /// its share, rank 0 writes).
    fn checkpoint_evaluations(&mut self, dir: &Path) -> Result<()> {
        let step = self.state.step;
        if let Some(e) = test_failure(step, "checkpoint") {
            return Err(e);
        }
        let ranks = Ranks::of(self.parallel.as_mut().map(DataParallel::group));
        ranks.settled("the checkpoint's evaluations", || {
            guarded_hook(&self.settings.name, "checkpoint", step, self.device, || {
                self.task.at_checkpoint(step, dir, &mut self.run.logger, &ranks)
            })
        })
    }

    /// What a checkpoint of this run holds: the model's directory, each optimizer's state, the
    /// data's cursor and each value of the task's state.
    fn checkpoint_parts(&self) -> Vec<Part<'_>> {
        let task = &self.task;
        let mut parts = vec![Part::weights(MODEL_PART, move |dir: &Path| {
            task.save_model(dir)?;
            Ok(vec![indolm_torch::model::model_dir::WEIGHTS_FILE.to_string()])
        })];
        for o in &self.optimizers {
            parts.push(Part::files(AdamW::part_name(&o.name), move |dir: &Path| {
                Ok(vec![o.adam.save_into(dir, &o.name)?])
            }));
        }
        parts.push(Part::value(CURSOR_PART, &self.cursor));
        for (key, value) in task.state() {
            parts.push(Part::Value { name: key, value });
        }
        parts
    }

    /// Runs the evaluations due at this step between checkpoints, their files under
    /// `<run>/evals/step-<N>/`: every rank scores its share, rank 0 writes, and rank 0's outcome
    /// decides for every rank.
    fn evaluate_between_checkpoints(&mut self) -> Result<()> {
        let step = self.state.step;
        let started = Instant::now();
        let dir = self.run.layout().evals_dir(step);
        let done = match test_failure(step, "between") {
            Some(e) => Err(e),
            None => {
                // Every rank scores even when rank 0 cannot make the folder (its writes then fail).
                let made = match self.run.leader {
                    true => std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e)),
                    false => Ok(()),
                };
                let ranks = Ranks::of(self.parallel.as_mut().map(DataParallel::group));
                let scored = ranks.settled("the evaluations between checkpoints", || {
                    guarded_hook(&self.settings.name, "between", step, self.device, || {
                        self.task.evaluate_between_checkpoints(step, &dir, &mut self.run.logger, &ranks)
                    })
                });
                made.and(scored)
            }
        };
        if self.run.leader {
            self.dense_evaluations.0 += 1;
            self.dense_evaluations.1 += started.elapsed().as_secs_f64();
        }
        self.wait_for_rank0("evaluations between checkpoints")?;
        let failed = match self.parallel.as_mut() {
            Some(p) => p.agree(done.is_err())?,
            None => done.is_err(),
        };
        if failed {
            // The weights of this step exist only in memory: a checkpoint keeps them, and the
            // evaluations are done on it (or stay pending on it) as at any checkpoint.
            if let Err(e) = done {
                self.run.logger.println(&format!(
                    "warning: step {step}: the evaluations between checkpoints failed ({e}); writing a checkpoint here so that training goes on and they can be redone from its weights"
                ));
            }
            return self.checkpoint();
        }
        // The agreement above came after rank 0's writes: no rank waits any longer.
        Ok(())
    }

    /// The run's first lines: the model, device, size, precision, units per step, steps; on
    /// CUDA the task's kernel choices and whether resume is bit-exact.
    fn announce(&self) {
        let parameters: i64 = self.optimizers.iter().map(|o| o.adam.parameter_count()).sum();
        let t = self.metrics.throughput();
        self.run.logger.println(&format!(
            "run {}: {} on {}, {parameters} parameters, {:?}, {} {} per step, steps {}..{}",
            self.settings.name,
            self.task.describe(),
            match &self.parallel {
                Some(p) => format!("{} in each of {} data-parallel processes", describe(self.device), p.world_size()),
                None => describe(self.device),
            },
            self.task.precision(),
            t.per_update,
            t.unit,
            self.state.step,
            self.stop_at
        ));
        if self.device.is_cuda() {
            for line in self.task.announce(self.device) {
                self.run.logger.println(&line);
            }
            self.run.logger.println(if indolm_torch::device::kernels::deterministic() {
                "determinism: deterministic algorithms requested (`deterministic = true`): resuming gives bit-identical weights on this GPU type, at some speed"
            } else {
                "determinism: not requested: attention's backward (and a few other kernels) on CUDA add with atomics in a varying order, so a resumed run matches an uninterrupted one up to rounding, not bit for bit; set `deterministic = true` in the recipe for exact resume"
            });
        }
    }

    /// Closes the logs, reports the reductions' share, the step times, the operation counts and
    /// the data seen, and sums the run up.
    fn finish(mut self) -> Finished<T> {
        self.run.logger.finish();
        let rank = self.rank();
        if let Some(p) = self.parallel.as_mut() {
            p.detach();
        }
        if let Some(p) = self.parallel.as_ref().filter(|p| p.rank() == 0) {
            let (counts, reduction) = (p.overlap_counts, p.reduction());
            if counts.buckets > 0 {
                let dtype = if reduction.bf16 { "in bf16, " } else { "" };
                outln!(
                    "data parallel: {} of {} gradient buckets were all-reduced during backward ({dtype}buckets of {} MiB)",
                    counts.during_backward,
                    counts.buckets,
                    reduction.bucket_bytes as f64 / (1 << 20) as f64
                );
            }
            match p.timed {
                true => outln!(
                    "data parallel over {} ranks: the gradient all-reduce took {:.1}% of the time in updates ({:.2}s of {:.2}s)",
                    p.world_size(),
                    100.0 * p.reduce_seconds / self.step_seconds.max(1e-9),
                    p.reduce_seconds,
                    self.step_seconds
                ),
                false => outln!(
                    "data parallel over {} ranks on NCCL: the all-reduce's share of an update is measured only with --step-times (NCCL's calls return once queued)",
                    p.world_size()
                ),
            }
        }
        if rank == 0 && self.updates_taken > 0 {
            let t = self.metrics.throughput();
            let units = self.units_trained;
            outln!(
                "{}: {} updates, {units:.0} {} in {:.1}s of updates ({:.1} {}/s)",
                self.settings.name,
                self.updates_taken,
                t.unit,
                self.step_seconds,
                units / self.step_seconds.max(1e-9),
                t.unit
            );
        }
        if let Some(line) = self.step_times.as_ref().filter(|_| rank == 0).and_then(StepTimes::summary) {
            outln!("{line}");
        }
        if self.op_counts.wanted {
            report_op_counts(&self.op_counts.taken, rank);
        }
        let (evaluations, seconds) = self.dense_evaluations;
        if evaluations > 0 {
            outln!(
                "{evaluations} evaluations between checkpoints took {seconds:.1}s, {:.1}% of the {:.1}s spent in updates and those evaluations",
                100.0 * seconds / (seconds + self.step_seconds).max(1e-9),
                seconds + self.step_seconds
            );
        }
        if let Some(source) = self.loader.take().and_then(Loader::finish) {
            for line in self.task.data_seen(source, &self.cursor) {
                if rank == 0 {
                    outln!("{line}");
                }
            }
        }
        let complete = self.state.early_stopped || self.state.step >= self.settings.max_steps;
        let summary = EngineSummary {
            run_dir: self.run.dir().to_path_buf(),
            final_step: self.state.step,
            nonfinite_skipped: self.state.nonfinite_skipped,
            rank,
            best: self.state.best.clone(),
            complete,
        };
        Finished { summary, task: self.task, parallel: self.parallel }
    }
}

/// `--op-counts`: rank 0 prints the counted update's table, every other rank its waits.
fn report_op_counts(taken: &Option<(u64, OpCounts)>, rank: usize) {
    match (taken, rank) {
        (Some((step, counts)), 0) => outln!(
            "{}",
            counts
                .table(&format!(
                    "ATen operations of the update of step {step} (a steady-state update that reads nothing back), by name:"
                ))
                .trim_end()
        ),
        (Some((step, counts)), _) => {
            outln!("rank {rank}: update of step {step}: host syncs per update: {}", counts.host_syncs())
        }
        (None, _) => outln!(
            "--op-counts: no update from step 3 on was free of log lines, evaluations and checkpoints; run more steps or log less often"
        ),
    }
}
