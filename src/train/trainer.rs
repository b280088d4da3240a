//! The pretraining trainer, built from its parts as torchtitan's is: the model and AdamW, the
//! data mixture and its masker (drawn ahead on the loader's thread), the checkpoint manager, the
//! metrics, the held-out set and the checkpoint hooks it is given. [`Trainer::new`] assembles
//! them (resuming when asked); [`Trainer::run`] is the loop, top to bottom: a step, its metrics,
//! the held-out loss when due, a checkpoint with its hooks when due, and a clean stop on SIGINT,
//! SIGTERM, SIGUSR1 or SIGHUP. Given a process group, it trains data parallel
//! ([`DataParallel`]): rank 0 prepares the corpus, writes checkpoints, logs and runs the hooks
//! while the others wait at a barrier.
use super::checkpoint::{CheckpointManager, TrainerState};
use super::corpus::{open_mixture, open_prepared_mixture, PinnedCorpus};
use super::data_parallel::DataParallel;
use super::heldout::Heldout;
use super::loader::{DeviceBatch, LoadedBatch, Loader};
use super::masking::Masker;
use super::metrics::{Metrics, Update};
use super::step_times::{Phase, StepTimes};
use crate::data::tokenizer::TextTokenizer;
use crate::device::describe;
use crate::device::op_counts::{OpCounter, OpCounts};
use crate::device::{kernels, torch_errors};
use crate::dist::ProcessGroup;
use crate::error::{Error, IoContext, Result};
use crate::files::DirLock;
use crate::hooks::CheckpointHook;
use crate::model::model_dir::load_masked_lm;
use crate::model::{BertConfig, BertForMaskedLM, Precision};
use crate::optim::{linear_schedule, AdamW};
use crate::recipe::Recipe;
use crate::seeds::{per_step, salt, seed_torch};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// How `indolm train` was asked to run a recipe.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// Where to train.
    pub device: Device,
    /// `latest`, `auto` (`latest` when the run has a checkpoint, else a new run) or a
    /// checkpoint directory.
    pub resume: Option<String>,
    /// Resume even if the recipe differs in fields that matter.
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
}

/// What follows the update of a step (the same on every rank).
struct Due {
    checkpoint: bool,
    heldout: bool,
    evaluation: bool,
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

    fn counted(&mut self, step: u64, counts: OpCounts) {
        self.taken = Some((step, counts));
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

/// What a finished (or stopped) run reports.
pub struct TrainSummary {
    /// `<output_dir>/<name>`.
    pub run_dir: PathBuf,
    /// The step the run ended at.
    pub final_step: u64,
    /// The first held-out loss this process measured (the untrained model's on a new run).
    pub first_heldout_loss: Option<f64>,
    /// The last held-out loss this process measured.
    pub last_heldout_loss: Option<f64>,
    /// Updates skipped for a non-finite loss over the whole run.
    pub nonfinite_skipped: u64,
    /// This process's rank (0 for a single process): only rank 0 reports.
    pub rank: usize,
}

/// A pretraining run, ready to take steps.
pub struct Trainer {
    recipe: Recipe,
    device: Device,
    precision: Precision,
    tokenizer: TextTokenizer,
    config: BertConfig,
    vs: VarStore,
    model: BertForMaskedLM,
    optimizer: AdamW,
    /// The background thread drawing and masking the next micro-batches from the mixture.
    loader: Option<Loader>,
    masker: Arc<Masker>,
    state: TrainerState,
    checkpoints: CheckpointManager,
    metrics: Metrics,
    heldout: Option<Heldout>,
    hooks: Vec<Box<dyn CheckpointHook>>,
    /// The last step this process takes: `max_steps`, or `--stop-after`.
    stop_at: u64,
    stop_requested: Arc<AtomicBool>,
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
    /// The intervals at which some hook also evaluates between checkpoints (known to every
    /// rank, though only rank 0 runs the hooks).
    evaluate_every: Vec<u64>,
    /// Evaluations between checkpoints so far, and the seconds they took.
    dense_evaluations: (u64, f64),
    /// Held by rank 0 while the trainer lives: a second trainer (or `--overwrite`) on this run
    /// is refused.
    _run_lock: Option<DirLock>,
}

impl Trainer {
    /// Loads the recipe's tokenizer, prepares its corpus and run directory, builds the model and
    /// optimizer (restoring a checkpoint with `--resume`), and opens the logs. `hooks` run at
    /// every checkpoint. With a process group, this process is one rank of a data-parallel run.
    pub fn new(
        recipe_path: &Path,
        recipe: Recipe,
        opts: &TrainOptions,
        hooks: Vec<Box<dyn CheckpointHook>>,
        group: Option<ProcessGroup>,
    ) -> Result<Self> {
        let mut parallel = group.map(|g| DataParallel::new(g, recipe.optimizer.batch_size, recipe_path)).transpose()?;
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
        let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
        let tokenizer = TextTokenizer::from_path(&recipe.resolve(&recipe.tokenizer.path))?;
        let precision = crate::recipe::resolve_precision(recipe.precision, opts.device, recipe_path)?;
        let checkpoints = CheckpointManager::new(recipe.run_dir(), &recipe.checkpoint);
        let checkpoints = if leader { checkpoints } else { checkpoints.quiet() };
        let run_lock = if leader { Some(DirLock::acquire(checkpoints.run_dir())?) } else { None };
        let resume_point = checkpoints.find_resume_point(opts.resume.as_deref())?;
        if leader {
            checkpoints.prepare(resume_point.is_some(), opts.overwrite, &recipe.tensorboard_dir())?;
        }
        if let Some(point) = &resume_point {
            checkpoints.check_recipe(point, &recipe, opts.force)?;
        }

        // A resumed run reads the text it started on: changed source files are refused (before
        // anything is re-tokenized) unless --force.
        let pinned = resume_point
            .as_ref()
            .filter(|_| !opts.force)
            .map(|p| PinnedCorpus { checkpoint: &p.dir, contents: &p.state.corpus });
        let say = |line: &str| {
            if leader {
                outln!("{line}")
            }
        };
        // Rank 0 prepares the corpus; the others open it once it is ready.
        let mixture = match parallel.as_mut() {
            Some(p) if leader => {
                let mixture = open_mixture(&recipe, &tokenizer, pinned, say);
                p.barrier()?;
                mixture?
            }
            Some(p) => {
                p.barrier()?;
                open_prepared_mixture(&recipe, &tokenizer, say)?
            }
            None => open_mixture(&recipe, &tokenizer, pinned, say)?,
        };
        let masker = Arc::new(Masker::new(recipe.masking.clone(), &tokenizer, recipe.seed));

        tch::manual_seed(recipe.seed as i64);
        let (vs, mut model, config) = build_model(&recipe, recipe_path, &tokenizer, opts.device)?;
        model.set_precision(precision);
        let o = &recipe.optimizer;
        let mut optimizer = AdamW::new(vs.variables().into_iter().collect(), o.betas, o.eps, o.weight_decay);
        let corpus = mixture.source_contents();
        let state = match resume_point {
            Some(point) => checkpoints.restore(point, &recipe, corpus, &vs, &mut optimizer)?,
            None => TrainerState::start(&recipe, mixture.new_cursor(), corpus),
        };

        let params: Vec<Tensor> =
            vs.variables().into_iter().collect::<std::collections::BTreeMap<_, _>>().into_values().collect();
        if let Some(p) = parallel.as_mut() {
            p.check_equal_weights(&params)?;
        }

        let stop_at = opts.stop_after.unwrap_or(o.max_steps).min(o.max_steps);
        let metrics = if leader {
            let devices = parallel.as_ref().map_or(1, |p| p.world_size());
            Metrics::open(&recipe, &config, checkpoints.run_dir(), state.step, devices)?
        } else {
            Metrics::quiet(&recipe, &config)
        };
        let heldout = recipe.eval.mlm.as_ref().filter(|_| leader).map(|m| Heldout::new(&mixture, m));
        let slice = parallel.as_ref().map(|p| p.slice());
        let loader =
            Loader::start(mixture, Arc::clone(&masker), state.cursor.clone(), o.batch_size, slice, opts.device);
        let evaluate_every: Vec<u64> = hooks.iter().filter_map(|h| h.every()).collect();
        let hooks = if leader { hooks } else { Vec::new() };
        Ok(Trainer {
            device: opts.device,
            precision,
            tokenizer,
            config,
            vs,
            model,
            optimizer,
            loader: Some(loader),
            masker,
            state,
            checkpoints,
            metrics,
            heldout,
            hooks,
            stop_at,
            stop_requested: stop_on_signals()?,
            consecutive_nonfinite: 0,
            unsettled: Vec::new(),
            parallel,
            agreed_stop: None,
            step_seconds: 0.0,
            step_times: opts.step_times.then(|| StepTimes::new(opts.device)),
            op_counts: OpCountPlan { wanted: opts.op_counts, taken: None },
            evaluate_every,
            dense_evaluations: (0, 0.0),
            _run_lock: run_lock,
            recipe,
        })
    }

    /// Trains until `stop_at` or a stop signal, evaluating and checkpointing as the recipe says.
    pub fn run(mut self) -> Result<TrainSummary> {
        self.announce();
        if self.state.step == 0 {
            self.evaluate_heldout(); // the untrained model's loss: where every curve starts
        }
        while self.state.step < self.stop_at {
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
                None => self.stop_requested.load(Ordering::SeqCst),
            };
            if due.reads || stopping {
                self.settle_losses()?;
            }
            self.step_seconds += started.elapsed().as_secs_f64();
            self.metrics.record_update(step, self.stop_at, &update)?;
            if let Some(counter) = counter {
                self.op_counts.counted(step, counter.stop()?);
            }
            if due.checkpoint || stopping || due.heldout {
                self.evaluate_heldout();
            }
            if due.checkpoint || stopping {
                self.checkpoint()?;
            } else if due.evaluation {
                self.evaluate_between_checkpoints()?;
            }
            if stopping {
                self.metrics.logger.println(&format!("stop requested: checkpoint written at step {step}, exiting"));
                break;
            }
        }
        Ok(self.finish())
    }

    /// What the update of `step` is followed by; the same on every rank.
    fn due_at(&self, step: u64) -> Due {
        let checkpoint = self.checkpoints.due(step) || step == self.stop_at;
        // From the recipe, not from `heldout` (which only rank 0 holds): every rank must agree.
        let heldout = self.recipe.eval.mlm.as_ref().is_some_and(|m| m.every > 0 && step.is_multiple_of(m.every));
        let evaluation = self.evaluate_every.iter().any(|every| step.is_multiple_of(*every));
        let reads = self.metrics.logs_at(step, self.stop_at) || checkpoint || heldout || evaluation;
        Due { checkpoint, heldout, evaluation, reads }
    }

    /// [`Trainer::step`], with a libtorch failure inside it (a CUDA out-of-memory, above all)
    /// turned into one error that names the step, the batch's shape and what to change; the
    /// last checkpoint is untouched.
    fn guarded_step(&mut self) -> Result<Update> {
        let step = self.state.step + 1;
        match torch_errors::catch(|| self.step()) {
            Ok(update) => update,
            Err(failure) => {
                let o = &self.recipe.optimizer;
                let world = self.parallel.as_ref().map_or(1, |p| p.world_size());
                let shape = format!(
                    "{} x {} tokens a micro-batch on this process, {} micro-batches an update",
                    o.batch_size / world,
                    self.recipe.data.seq_len,
                    o.grad_accumulation
                );
                let advice = if failure.out_of_memory() {
                    "the device ran out of memory: lower optimizer.batch_size and raise optimizer.grad_accumulation by the same factor (the global batch, and so the run, stay the same)"
                } else {
                    "libtorch failed in the update"
                };
                let resume = match self.checkpoints.latest_step() {
                    Some(good) => format!("the last checkpoint (step {good}) is intact: resume with --resume latest"),
                    None => "no checkpoint was written yet".into(),
                };
                Err(Error::training(
                    format!("run {}, update of step {step} ({shape})", self.recipe.name),
                    format!("{}; {advice}; {resume}", failure.message),
                ))
            }
        }
    }

    /// One optimizer update over `grad_accumulation` micro-batches, with clipping and the
    /// linear schedule. Where the loss is not finite the update is skipped on the device (an
    /// exact no-op); [`Trainer::settle_losses`] reports it later (and after
    /// `max_nonfinite_steps` in a row stops the run with an error). Nothing is read back here.
    fn step(&mut self) -> Result<Update> {
        inject_failure(self.state.step + 1, self.device);
        let o = &self.recipe.optimizer;
        // Every random choice of this step derives from the seed and the step number (and the
        // rank: each rank draws its own dropout masks).
        let rank = self.rank() as u64;
        seed_torch(self.recipe.seed, per_step(salt::PRETRAIN_TORCH, self.state.step) ^ (rank << 48));
        self.optimizer.zero_grad();
        let lap = |times: &mut Option<StepTimes>, phase| times.as_mut().map(|t| t.lap(phase));
        if let Some(t) = &mut self.step_times {
            t.start();
        }
        // The update's micro-batches, drawn and masked ahead on the loader's thread; the state
        // takes the cursor after the last.
        let loader = self.loader.as_mut().expect("the loader runs until finish");
        let micro: Vec<LoadedBatch> = (0..o.grad_accumulation).map(|_| loader.next_batch()).collect::<Result<_>>()?;
        if let Some(last) = micro.last() {
            self.state.cursor = last.cursor_after.clone();
        }
        self.state.micro_batches += micro.len() as u64;
        lap(&mut self.step_times, Phase::Batch);
        // The update's loss is the mean over every token it predicts (on every rank, in every
        // micro-batch): each micro-batch's mean is weighted by its share of them, so the summed
        // gradients are the same however the global batch is cut into ranks and micro-batches.
        let predicted: usize = micro.iter().map(|b| b.batch_masked).sum();
        let mut loss_sum: Option<Tensor> = None;
        for batch in &micro {
            let share = batch.masked as f64 / predicted.max(1) as f64;
            let part = self.share_of_loss(&batch.to_device(self.device), share);
            lap(&mut self.step_times, Phase::Forward);
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
                let grads = self.optimizer.gradient_buffers();
                let reduced = p.reduce(&grads, &loss_sum, self.stop_requested.load(Ordering::SeqCst))?;
                self.agreed_stop = Some(reduced.stop);
                if let Some(seconds) = lap(&mut self.step_times, Phase::AllReduce) {
                    p.add_timed_reduction(seconds);
                }
                reduced.loss
            }
        };
        let lr = linear_schedule(o.lr, o.warmup_steps, o.max_steps, self.state.step);
        let grad_clip = o.grad_clip;
        self.state.step += 1;
        let grad_norm = self.optimizer.clip_grad_norm(grad_clip);
        self.optimizer.step_if(lr, Some(&loss.isfinite()));
        if let Some(t) = &mut self.step_times {
            t.lap(Phase::Optimizer);
            t.end();
        }
        self.unsettled.push((self.state.step, loss.shallow_clone()));
        Ok(Update { loss, lr, grad_norm })
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

    /// This rank's part of an update's loss from one micro-batch: its rows' mean loss times
    /// their `share` of the update's predicted tokens. Rows with no masked token bring one
    /// position whose loss is weighted by 0: it still reaches every weight of the masked LM, so
    /// that every rank's gradients exist.
    fn share_of_loss(&self, batch: &DeviceBatch, share: f64) -> Tensor {
        self.model.mlm_loss_at(&batch.input_ids, None, None, &batch.positions, &batch.targets, true) * share
    }

    /// Counts the skipped update of `step` (its loss not finite), and stops the run after too
    /// many in a row.
    fn skip_nonfinite(&mut self, step: u64, loss: f64) -> Result<()> {
        self.state.nonfinite_skipped += 1;
        self.consecutive_nonfinite += 1;
        let in_a_row = self.consecutive_nonfinite;
        self.metrics
            .logger
            .println(&format!("step {step}: non-finite loss {loss}, update skipped ({in_a_row} in a row)"));
        if in_a_row >= self.recipe.optimizer.max_nonfinite_steps {
            return Err(Error::training(
                format!("run {}", self.recipe.name),
                match self.checkpoints.latest_step() {
                    Some(good) => format!("{in_a_row} consecutive non-finite losses at step {step}; stopped. The last checkpoint (step {good}) is intact: lower optimizer.lr or check the data, then resume with --resume latest"),
                    None => format!("{in_a_row} consecutive non-finite losses at step {step}; stopped before any checkpoint was written: lower optimizer.lr or check the data, then start again with --overwrite"),
                },
            ));
        }
        Ok(())
    }

    /// Scores the held-out set (when the recipe has `[eval.mlm]`) and logs the loss.
    fn evaluate_heldout(&mut self) {
        if let Some(heldout) = &self.heldout {
            let batch_size = self.recipe.optimizer.batch_size;
            let loss = heldout.loss(&self.model, &self.masker, batch_size, self.device);
            self.metrics.record_heldout(self.state.step, loss);
        }
    }

    /// Writes a checkpoint, runs every hook on it (timed), prunes old weights, flushes the logs:
    /// rank 0 does, while the other ranks wait for it.
    fn checkpoint(&mut self) -> Result<()> {
        if self.rank() != 0 {
            return self.parallel.as_mut().expect("a rank other than 0 is data parallel").barrier();
        }
        let step = self.state.step;
        let dir = self.checkpoints.save(&self.state, &self.config, &self.vs, &self.optimizer, &self.tokenizer)?;
        let logger = &mut self.metrics.logger;
        logger.println(&format!("step {step}: checkpoint {}", dir.display()));
        for hook in self.hooks.iter_mut() {
            let started = Instant::now();
            hook.run(step, &self.model, &self.tokenizer, &dir, logger)?;
            logger.println(&format!("step {step}: {} took {:.1}s", hook.name(), started.elapsed().as_secs_f64()));
        }
        self.checkpoints.prune()?;
        logger.flush();
        match self.parallel.as_mut() {
            Some(p) => p.barrier(),
            None => Ok(()),
        }
    }

    /// Runs the hooks due at this step between checkpoints (`[eval.bias] every`), their
    /// records under `<run>/evals/step-<N>/`: rank 0 does, while the other ranks wait for it.
    fn evaluate_between_checkpoints(&mut self) -> Result<()> {
        if self.rank() != 0 {
            return self.parallel.as_mut().expect("a rank other than 0 is data parallel").barrier();
        }
        let step = self.state.step;
        let started = Instant::now();
        let dir = self.checkpoints.run_dir().join(crate::hooks::EVALS_DIR).join(format!("step-{step}"));
        std::fs::create_dir_all(&dir).with_path(&dir)?;
        let logger = &mut self.metrics.logger;
        for hook in self.hooks.iter_mut().filter(|h| h.every().is_some_and(|every| step.is_multiple_of(every))) {
            hook.run(step, &self.model, &self.tokenizer, &dir, logger)?;
        }
        self.dense_evaluations.0 += 1;
        self.dense_evaluations.1 += started.elapsed().as_secs_f64();
        match self.parallel.as_mut() {
            Some(p) => p.barrier(),
            None => Ok(()),
        }
    }

    /// The run's first log line: model, device, size, precision, tokens per step, steps.
    fn announce(&self) {
        let c = &self.config;
        let parameters: usize = self.vs.variables().values().map(|t| t.numel()).sum();
        self.metrics.logger.println(&format!(
            "run {}: BERT L{} H{} A{} FF{} V{} on {}, {parameters} parameters, {:?}, {} tokens per step, steps {}..{}",
            self.recipe.name,
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.intermediate_size,
            c.vocab_size,
            match &self.parallel {
                Some(p) => format!("{} in each of {} data-parallel processes", describe(self.device), p.world_size()),
                None => describe(self.device),
            },
            self.precision,
            self.metrics.tokens_per_step(),
            self.state.step,
            self.stop_at
        ));
        if let Device::Cuda(_) = self.device {
            let world = self.parallel.as_ref().map_or(1, |p| p.world_size());
            let (c, o) = (&self.config, &self.recipe.optimizer);
            let head_dim = c.hidden_size / c.num_attention_heads;
            let shape =
                [(o.batch_size / world) as i64, c.num_attention_heads, self.recipe.data.seq_len as i64, head_dim];
            let dropout = c.attention_probs_dropout_prob;
            let kind = self.precision.compute_kind();
            let line = match kernels::attention_backend(shape, kind, self.device, dropout) {
                Ok(name) => format!("attention: libtorch picks {name} for {shape:?} {kind:?} with dropout {dropout}"),
                Err(e) => format!("attention: libtorch could not say which kernel it picks ({e})"),
            };
            self.metrics.logger.println(&line);
            self.metrics.logger.println(if self.recipe.deterministic {
                "determinism: deterministic algorithms requested (`deterministic = true`): resuming gives bit-identical weights on this GPU type, at some speed"
            } else {
                "determinism: not requested: attention's backward (and a few other kernels) on CUDA add with atomics in a varying order, so a resumed run matches an uninterrupted one up to rounding, not bit for bit; set `deterministic = true` in the recipe for exact resume"
            });
        }
    }

    /// `--op-counts`: rank 0 prints the counted update's table, every other rank its waits.
    fn report_op_counts(&self, rank: usize) {
        match (&self.op_counts.taken, rank) {
            (Some((step, counts)), 0) => outln!(
                "{}",
                counts.table(&format!(
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

    /// Closes the logs, reports how much of each source was seen, and sums the run up.
    fn finish(mut self) -> TrainSummary {
        self.metrics.logger.finish();
        let rank = self.rank();
        if let Some(p) = self.parallel.as_ref().filter(|p| p.rank() == 0) {
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
        if self.op_counts.wanted {
            self.report_op_counts(rank);
        }
        if let Some(line) = self.step_times.as_ref().filter(|_| rank == 0).and_then(StepTimes::summary) {
            outln!("{line}");
        }
        let (evaluations, seconds) = self.dense_evaluations;
        if evaluations > 0 {
            outln!(
                "{evaluations} evaluations between checkpoints took {seconds:.1}s, {:.1}% of the {:.1}s spent in updates and those evaluations",
                100.0 * seconds / (seconds + self.step_seconds).max(1e-9),
                seconds + self.step_seconds
            );
        }
        let mixture = self.loader.take().and_then(Loader::finish).expect("the batch thread returns the mixture");
        let epochs = mixture.epochs(&self.state.cursor);
        for ((name, epochs), weight) in mixture.names().iter().zip(epochs).zip(mixture.weights()) {
            if rank == 0 {
                outln!("source {name}: weight {weight:.3}, {epochs:.2} epochs seen");
            }
        }
        TrainSummary {
            run_dir: self.checkpoints.run_dir().to_path_buf(),
            final_step: self.state.step,
            first_heldout_loss: self.metrics.heldout.0,
            last_heldout_loss: self.metrics.heldout.1,
            nonfinite_skipped: self.state.nonfinite_skipped,
            rank,
        }
    }
}

/// A flag the stop signals raise: the loop finishes its step, checkpoints and exits 0. SIGUSR1
/// is what Slurm's `--signal` sends ahead of a time limit; SIGHUP comes when a login session
/// that started the run ends.
fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    let stop_requested = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM, SIGUSR1, SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&stop_requested))
            .map_err(|e| Error::system("signals", e.to_string()))?;
    }
    Ok(stop_requested)
}

/// A fresh model, or the weights of `model.init_from`.
fn build_model(
    recipe: &Recipe,
    recipe_path: &Path,
    tokenizer: &TextTokenizer,
    device: Device,
) -> Result<(VarStore, BertForMaskedLM, BertConfig)> {
    if let Some(init) = &recipe.model.init_from {
        let loaded = load_masked_lm(&recipe.resolve(init), device)?;
        for note in &loaded.notes {
            eprintln!("note: {note}");
        }
        return Ok((loaded.vs, loaded.model, loaded.config));
    }
    let config = recipe.model_config(tokenizer.vocab_size(), recipe_path)?;
    let vs = VarStore::new(device);
    let model = BertForMaskedLM::new(&vs.root(), &config, false);
    Ok((vs, model, config))
}
