//! Masked-LM pretraining as a task of the engine: the recipe's BERT (fresh, or `model.init_from`),
//! the data mixture and its masker (drawn on the loader's thread, the predicted positions found
//! there on the host), the held-out loss as its evaluation, and the checkpoint hooks (the bias
//! evaluation, IndoMMLU) at every checkpoint and between them. [`pretrain`] assembles the run
//! and trains it.
use super::corpus::{open_mixture, open_prepared_mixture, PinnedCorpus};
use super::heldout::Heldout;
use super::masking::{MaskedBatch, Masker};
use super::recipe::PretrainRecipe;
use super::salt;
use indolm_core::logger::Logger;
use indolm_core::outln;
use indolm_core::run::{ResumePoint, Run, RunLayout, TrainerState};
use indolm_torch::data::mixture::{Cursor, Mixture};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::{staged, upload};
use indolm_torch::distributed::ProcessGroup;
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::{CheckpointHook, Ranks};
use indolm_torch::model::model_dir::{copy_into, load_masked_lm, save_model_files};
use indolm_torch::model::{weights, BertConfig, BertForMaskedLM, Precision, IGNORE_INDEX};
use indolm_train::data_parallel::DataParallel;
use indolm_train::engine::{Engine, EngineSettings, EngineSummary, TaskRun, TrainOptions};
use indolm_train::task::{
    BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task, Throughput,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tch::nn::VarStore;
use tch::{Device, Tensor};

/// Pretrains `recipe` (read from `recipe_path`) on `opts.device`, data parallel when `group` is
/// given (every rank calls this); the recipe's evaluations ([`super::hooks::checkpoint_hooks`])
/// run at checkpoints. Returns how the run ended and the task (with its held-out losses).
pub fn pretrain(
    recipe_path: &Path,
    recipe: PretrainRecipe,
    opts: &TrainOptions,
    group: Option<ProcessGroup>,
) -> Result<(EngineSummary, MaskedLm)> {
    let hooks = super::hooks::checkpoint_hooks(&recipe, opts.device)?;
    let mut parallel = group.map(DataParallel::new).transpose()?;
    let leader = parallel.as_ref().is_none_or(|p| p.rank() == 0);
    let options = indolm_core::run::RunOptions {
        inputs: recipe.model.init_from.iter().map(|p| recipe.resolve(p)).collect(),
        ..opts.run_options(leader, &recipe.checkpoint, recipe.tensorboard_dir(), recipe.max_steps())
    };
    let (run, resume) = Run::open(RunLayout::new(recipe.run_dir()), &options)?;
    let settings = recipe.engine_settings();
    let task = match MaskedLm::new(recipe_path, recipe, opts, hooks, resume.as_ref(), parallel.as_mut(), leader) {
        Ok(task) => task,
        Err(e) => {
            run.abandon(); // refused before training: nothing of this run is left behind
            return Err(e);
        }
    };
    let finished = Engine::new(task, settings, opts, run, resume, parallel)?.run()?;
    Ok((finished.summary, finished.task))
}

/// One micro-batch of masked sequences: this rank's rows, on the host (pinned on CUDA).
pub struct MlmBatch {
    /// The masked inputs [rows, seq].
    input_ids: Tensor,
    /// The flat positions (`row * seq + column`) of the tokens to predict, found on the host so
    /// the device is never asked where they are (a `nonzero` there makes the host wait);
    /// position 0 when there is none (its loss then counts 0).
    positions: Tensor,
    /// The original token at each of those positions.
    targets: Tensor,
}

/// The mixture drawn and masked on the loader's thread.
pub struct MlmSource {
    mixture: Mixture,
    masker: Arc<Masker>,
    batch_size: usize,
    slice: Slice,
    device: Device,
}

impl BatchSource for MlmSource {
    type Batch = MlmBatch;
    type Cursor = Cursor;

    /// Draws the next global micro-batch, masks each sequence with the stream of its number in
    /// the run (so the masks do not depend on how sequences are cut into micro-batches), and
    /// keeps this rank's rows.
    fn next(&mut self, cursor: &mut Cursor) -> Drawn<MlmBatch> {
        let first = cursor.sequences;
        let sequences = self.mixture.next_sequences(cursor, self.batch_size);
        let batch = self.masker.mask(&sequences, first);
        let global_units = predicted_count(&batch.labels);
        let rows = self.slice.rows(batch.rows);
        let span = rows.start * batch.cols..rows.end * batch.cols;
        let mine = MaskedBatch {
            input_ids: batch.input_ids[span.clone()].to_vec(),
            labels: batch.labels[span].to_vec(),
            rows: rows.len(),
            cols: batch.cols,
        };
        let (positions, targets) = predicted(&mine);
        let device = self.device;
        Drawn {
            batch: MlmBatch {
                input_ids: staged(&mine.input_ids, &[mine.rows as i64, mine.cols as i64], device),
                positions: staged(&positions, &[positions.len() as i64], device),
                targets: staged(&targets, &[targets.len() as i64], device),
            },
            units: predicted_count(&mine.labels),
            global_units,
            rows: batch.rows,
        }
    }
}

/// Tokens to predict in `labels`.
fn predicted_count(labels: &[i64]) -> usize {
    labels.iter().filter(|&&l| l != IGNORE_INDEX).count()
}

/// The flat positions of the predicted tokens in `batch` and their targets; position 0 with its
/// own token when nothing is predicted (a row that still reaches every weight, its loss weighted
/// by 0).
fn predicted(batch: &MaskedBatch) -> (Vec<i64>, Vec<i64>) {
    let (positions, targets): (Vec<i64>, Vec<i64>) =
        batch.labels.iter().enumerate().filter(|(_, &l)| l != IGNORE_INDEX).map(|(i, &l)| (i as i64, l)).unzip();
    if positions.is_empty() {
        return (vec![0], vec![batch.input_ids.first().copied().unwrap_or(0)]);
    }
    (positions, targets)
}

/// Masked-LM pretraining of the recipe's BERT on its mixture.
pub struct MaskedLm {
    recipe: PretrainRecipe,
    device: Device,
    precision: Precision,
    tokenizer: TextTokenizer,
    config: BertConfig,
    vs: VarStore,
    model: BertForMaskedLM,
    masker: Arc<Masker>,
    /// The mixture, until the loader takes it.
    mixture: Option<Mixture>,
    /// Each source's content key (recorded in checkpoints: a resume on changed text is refused).
    corpus: BTreeMap<String, String>,
    /// The held-out set (every rank scores its share of it).
    heldout: Option<Heldout>,
    /// The checkpoint hooks (every rank scores its share; rank 0 writes).
    hooks: Vec<Box<dyn CheckpointHook>>,
    /// The intervals at which some hook also evaluates between checkpoints.
    evaluate_every: Vec<u64>,
    /// The first and the latest held-out loss this process measured.
    pub heldout_losses: (Option<f64>, Option<f64>),
    /// The data-parallel processes (1 for a single process).
    world: usize,
}

impl MaskedLm {
    /// Loads the recipe's tokenizer, prepares its corpus (rank 0 while the others wait; a resumed
    /// run refuses changed source text unless `--force`), and builds the model. `leader`: this
    /// process prepares the corpus and speaks (every rank evaluates its share).
    pub fn new(
        recipe_path: &Path,
        recipe: PretrainRecipe,
        opts: &TrainOptions,
        hooks: Vec<Box<dyn CheckpointHook>>,
        resume: Option<&ResumePoint>,
        parallel: Option<&mut DataParallel>,
        leader: bool,
    ) -> Result<Self> {
        let world = parallel.as_ref().map_or(1, |p| p.world_size());
        if world > 1 {
            let b = recipe.optimizer.batch_size;
            if !b.is_multiple_of(world) {
                return Err(Error::field(
                    recipe_path,
                    "optimizer.batch_size",
                    format!("{b} sequences do not divide among {world} processes; use a multiple of {world}"),
                ));
            }
        }
        let tokenizer = TextTokenizer::from_path(&recipe.resolve(&recipe.tokenizer.path))?;
        let precision = indolm_torch::device::resolve_precision(recipe.precision, opts.device, recipe_path)?;
        // A resumed run reads the text it started on: changed source files are refused (before
        // anything is re-tokenized) unless --force.
        let recorded: Option<BTreeMap<String, String>> = match resume {
            Some(p) => p.state.value("corpus", &p.dir)?,
            None => None,
        };
        let pinned = match (resume, &recorded) {
            (Some(p), Some(contents)) if !opts.force => Some(PinnedCorpus { checkpoint: &p.dir, contents }),
            _ => None,
        };
        let say = |line: &str| {
            if leader {
                outln!("{line}")
            }
        };
        // Rank 0 prepares the corpus; the others wait for it in the store (under
        // --rank0-wait-timeout, not the collectives' timeout), then open it.
        let mixture = match parallel {
            Some(p) if leader => {
                let mixture = open_mixture(&recipe, &tokenizer, pinned, say);
                p.wait_for_rank0("rank 0's corpus preparation")?;
                mixture?
            }
            Some(p) => {
                p.wait_for_rank0("rank 0's corpus preparation")?;
                open_prepared_mixture(&recipe, &tokenizer, say)?
            }
            None => open_mixture(&recipe, &tokenizer, pinned, say)?,
        };
        let masker = Arc::new(Masker::new(recipe.masking.clone(), &tokenizer, recipe.seed));
        tch::manual_seed(recipe.seed as i64);
        let (vs, mut model, config) = build_model(&recipe, recipe_path, &tokenizer, opts.device)?;
        model.set_precision(precision);
        if opts.device.is_cuda() {
            // Aligned vocabulary products on the tensor cores (the CPU gains nothing from it).
            model.set_vocab_padding(indolm_torch::model::bert::CUDA_VOCAB_MULTIPLE);
        }
        let heldout = recipe.eval.mlm.as_ref().map(|m| Heldout::new(&mixture, m));
        let evaluate_every: Vec<u64> = hooks.iter().filter_map(|h| h.every()).collect();
        Ok(MaskedLm {
            device: opts.device,
            precision,
            tokenizer,
            config,
            vs,
            model,
            masker,
            corpus: mixture.source_contents(),
            mixture: Some(mixture),
            heldout,
            hooks,
            evaluate_every,
            heldout_losses: (None, None),
            world,
            recipe,
        })
    }
}

impl Evaluations for MaskedLm {
    fn plan(&self) -> EvaluationPlan {
        let mlm = self.recipe.eval.mlm.as_ref();
        EvaluationPlan {
            every: mlm.map_or(0, |m| m.every),
            at_checkpoints: mlm.is_some(),
            at_last: false,
            at_start: mlm.is_some(),
            checkpoint_evaluations: !self.hooks.is_empty(),
            between_checkpoints: self.evaluate_every.clone(),
        }
    }

    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        self.evaluate_on(step, logger, &Ranks::single())
    }

    /// The held-out loss, its batches (the global batch's size, as one process cuts them)
    /// shared among the ranks.
    fn evaluate_on(&mut self, step: u64, logger: &mut Logger, ranks: &Ranks<'_>) -> Result<Evaluation> {
        if let Some(heldout) = &self.heldout {
            let started = Instant::now();
            let batch_size = self.recipe.optimizer.batch_size;
            let loss = heldout.loss(&self.model, &self.masker, batch_size, self.device, ranks)?;
            let shared = ranks.shared_work(started.elapsed().as_secs_f64())?;
            logger.scalar("eval/mlm_loss", loss, step);
            logger.scalar("eval/perplexity", loss.exp(), step);
            logger.println(&format!("step {step}: held-out MLM loss {loss:.4} (perplexity {:.1})", loss.exp()));
            if let Some(shared) = shared {
                logger.println(&format!("step {step}: held-out MLM loss {shared}"));
            }
            self.heldout_losses.0.get_or_insert(loss);
            self.heldout_losses.1 = Some(loss);
        }
        Ok(Evaluation::default())
    }

    fn at_checkpoint(&mut self, step: u64, dir: &Path, logger: &mut Logger, ranks: &Ranks<'_>) -> Result<()> {
        self.run_hooks(false, step, dir, logger, ranks)
    }

    fn evaluate_saved_checkpoint(&mut self, step: u64, dir: &Path, logger: &mut Logger) -> Result<()> {
        let mut saved = indolm_torch::model::model_dir::load_masked_lm(dir, self.device)?;
        saved.model.set_precision(self.precision);
        for hook in self.hooks.iter_mut() {
            let started = Instant::now();
            hook.run(step, &saved.model, &saved.tokenizer, dir, logger, &Ranks::single())?;
            logger.println(&format!(
                "step {step}: {} (redone from the checkpoint's weights) took {:.1}s",
                hook.name(),
                started.elapsed().as_secs_f64()
            ));
        }
        Ok(())
    }

    fn evaluate_between_checkpoints(
        &mut self,
        step: u64,
        dir: &Path,
        logger: &mut Logger,
        ranks: &Ranks<'_>,
    ) -> Result<()> {
        self.run_hooks(true, step, dir, logger, ranks)
    }
}

impl MaskedLm {
    /// Runs the hooks on the model in memory at `step`: every hook at a checkpoint (each timed),
    /// or those due `between` checkpoints; in a data-parallel run each rank's share is logged
    /// too. Each hook is a scope of shared work ([`Ranks::settled`]): a hook that fails on some
    /// ranks only fails on every rank, and the next hooks still run on all of them; the first
    /// failure is returned.
    fn run_hooks(
        &mut self,
        between: bool,
        step: u64,
        dir: &Path,
        logger: &mut Logger,
        ranks: &Ranks<'_>,
    ) -> Result<()> {
        let due = |every: Option<u64>| !between || every.is_some_and(|every| step.is_multiple_of(every));
        let mut failure = None;
        for hook in self.hooks.iter_mut().filter(|h| due(h.every())) {
            let started = Instant::now();
            let name = hook.name().to_string();
            let done = ranks.settled(&name, || {
                fail_hook_for_test(&name, step, ranks.rank())?;
                hook.run(step, &self.model, &self.tokenizer, dir, logger, ranks)
            });
            let seconds = started.elapsed().as_secs_f64();
            if done.is_ok() && !between {
                logger.println(&format!("step {step}: {} took {seconds:.1}s", hook.name()));
            }
            if let Some(shared) = ranks.shared_work(seconds)? {
                logger.println(&format!("step {step}: {} {shared}", hook.name()));
            }
            if let Err(e) = done {
                failure.get_or_insert(e);
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

impl Task for MaskedLm {
    type Source = MlmSource;

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "BERT L{} H{} A{} FF{} V{}",
            c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size, c.vocab_size
        )
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn announce(&self, device: Device) -> Vec<String> {
        let (c, o) = (&self.config, &self.recipe.optimizer);
        let head_dim = c.hidden_size / c.num_attention_heads;
        let rows = (o.batch_size / self.world) as i64;
        let shape = [rows, c.num_attention_heads, self.recipe.data.seq_len as i64, head_dim];
        let (dropout, kind) = (c.attention_probs_dropout_prob, self.precision.compute_kind());
        vec![match indolm_torch::device::kernels::attention_backend(shape, kind, device, dropout) {
            Ok(name) => format!("attention: libtorch picks {name} for {shape:?} {kind:?} with dropout {dropout}"),
            Err(e) => format!("attention: libtorch could not say which kernel it picks ({e})"),
        }]
    }

    fn optimizers(&self) -> Vec<OptimizerSpec> {
        let o = &self.recipe.optimizer;
        vec![OptimizerSpec {
            name: String::new(),
            vars: self.vs.variables().into_iter().collect(),
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            schedule: o.schedule_of(o.lr, o.warmup_steps, self.recipe.max_steps(), None),
            grad_clip: o.grad_clip,
        }]
    }

    fn source(&mut self, slice: Slice) -> Result<MlmSource> {
        let mixture =
            self.mixture.take().ok_or_else(|| Error::training("pretraining", "the mixture was taken twice"))?;
        Ok(MlmSource {
            mixture,
            masker: Arc::clone(&self.masker),
            batch_size: self.recipe.optimizer.batch_size,
            slice,
            device: self.device,
        })
    }

    fn start_cursor(&self) -> Cursor {
        self.mixture.as_ref().map(Mixture::new_cursor).unwrap_or_default()
    }

    fn loss(&self, batch: &MlmBatch) -> Tensor {
        let d = self.device;
        let (ids, positions, targets) =
            (upload(&batch.input_ids, d), upload(&batch.positions, d), upload(&batch.targets, d));
        self.model.mlm_loss_at(&ids, None, None, &positions, &targets, true)
    }

    fn save_model(&self, dir: &Path) -> Result<()> {
        save_model_files(dir, &self.config, &self.vs, &self.tokenizer)
    }

    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(indolm_torch::model::model_dir::WEIGHTS_FILE);
        copy_into(&self.vs, weights::read_file(&path)?, &path, &[]).map(|_| ())
    }

    fn state(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut state = serde_json::Map::new();
        state.insert("corpus".into(), serde_json::to_value(&self.corpus).expect("a map of strings"));
        state
    }

    fn restore_state(&mut self, _state: &TrainerState, _dir: &Path, _force: bool) -> Result<()> {
        // The corpus was checked against the checkpoint's before it was prepared (`new`); later
        // checkpoints record the text the run continues on.
        Ok(())
    }

    fn throughput(&self) -> Throughput {
        let (o, d) = (&self.recipe.optimizer, &self.recipe.data);
        Throughput {
            per_update: (o.batch_size * o.grad_accumulation * d.seq_len) as f64,
            per_row: d.seq_len as f64,
            unit: "tokens",
            short: "tok",
            flops_per_unit: Some(self.config.training_flops_per_token(d.seq_len, self.recipe.masking.probability)),
        }
    }

    fn data_seen(&self, source: MlmSource, cursor: &Cursor) -> Vec<String> {
        let mixture = source.mixture;
        let epochs = mixture.epochs(cursor);
        mixture
            .names()
            .iter()
            .zip(epochs)
            .zip(mixture.weights())
            .map(|((name, epochs), weight)| format!("source {name}: weight {weight:.3}, {epochs:.2} epochs seen"))
            .collect()
    }
}

/// A fresh model, or the weights of `model.init_from`.
fn build_model(
    recipe: &PretrainRecipe,
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

impl PretrainRecipe {
    /// What the engine takes from this recipe: the shared sections, and a comparison of a
    /// checkpoint's record that also reads checkpoints of earlier versions (`Legacy`).
    pub(crate) fn engine_settings(&self) -> EngineSettings {
        let recipe = self.clone();
        let run = TaskRun {
            torch_salt: salt::PRETRAIN_TORCH,
            max_steps: self.max_steps(),
            patience: None,
            fingerprint: self.fingerprint(),
        };
        EngineSettings {
            differences: Box::new(move |recorded| recipe.differences_from(recorded)),
            ..EngineSettings::for_recipe(&self.shared(), run)
        }
    }
}

/// Test-only (not a user option): `INDOLM_TEST_FAIL_HOOK=<hook name>@<step>@<rank>` makes that
/// hook fail on that rank alone, before it scores anything (as a libtorch failure on one rank's
/// batch would), so that a test sees the other ranks leave the hook with it.
fn fail_hook_for_test(name: &str, step: u64, rank: usize) -> Result<()> {
    let Ok(spec) = std::env::var("INDOLM_TEST_FAIL_HOOK") else { return Ok(()) };
    if spec.split(',').any(|s| s == format!("{name}@{step}@{rank}")) {
        return Err(Error::training(format!("{name} at step {step}"), "failure injected by INDOLM_TEST_FAIL_HOOK"));
    }
    Ok(())
}
