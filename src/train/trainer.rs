//! The pretraining loop, top to bottom: recipe → tokenizer → data → model → optimizer →
//! (resume) → steps of masked-LM training with clipping, AdamW and the linear schedule,
//! logging, held-out evaluation and checkpoints with their hooks.
use crate::data::mixture::{derive_seed, Mixture};
use crate::data::tokenizer::TextTokenizer;
use crate::device::{default_precision, describe};
use crate::error::{Error, Result};
use crate::model::model_dir::load_masked_lm;
use crate::model::{BertConfig, BertForMaskedLM, Precision};
use crate::train::checkpoint::{self, TrainerState, RNG_NOTE};
use crate::train::corpus::open_mixture;
use crate::train::logger::{Logger, TrainLog};
use crate::train::masking::{MaskedBatch, Masker};
use crate::train::optim::{linear_schedule, AdamW};
use crate::train::recipe::{PrecisionSetting, Recipe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const SALT_TORCH: u64 = 4;
const SALT_EVAL_MASKS: u64 = 5;

pub struct TrainOptions {
    pub device: Device,
    /// `latest` or a checkpoint directory.
    pub resume: Option<String>,
    /// Resume even if the recipe differs in fields that matter.
    pub force: bool,
    /// Start over, deleting the run's earlier checkpoints and logs.
    pub overwrite: bool,
    /// Stop (with a checkpoint) after this step even if `max_steps` is later (for tests and
    /// for splitting a run into jobs).
    pub stop_after: Option<u64>,
}

/// Evaluations run at every checkpoint (the bias evaluation plugs in here).
pub trait CheckpointHook {
    fn name(&self) -> &str;
    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        checkpoint_dir: &Path,
        logger: &mut Logger,
    ) -> Result<()>;
}

pub struct TrainSummary {
    pub run_dir: PathBuf,
    pub final_step: u64,
    pub first_heldout_loss: Option<f64>,
    pub last_heldout_loss: Option<f64>,
    pub nonfinite_skipped: u64,
}

/// The recipe's checkpoint evaluations.
fn recipe_hooks(recipe: &Recipe, device: Device) -> Result<Vec<Box<dyn CheckpointHook>>> {
    let mut hooks: Vec<Box<dyn CheckpointHook>> = Vec::new();
    if let Some(bias) = &recipe.eval.bias {
        let pairs = crate::eval::pairs::load_indobias(&recipe.resolve(&bias.pairs))?;
        hooks.push(Box::new(crate::eval::bias::BiasHook {
            pairs,
            metric: bias.metric,
            languages: bias.languages.clone(),
            device,
        }));
    }
    if let Some(mmlu) = &recipe.eval.indommlu {
        hooks.push(Box::new(crate::eval::indommlu::IndommluHook::new(
            &recipe.resolve(&mmlu.data),
            mmlu.mode,
            mmlu.subsample,
            recipe.seed,
            device,
        )?));
    }
    Ok(hooks)
}

pub fn train(recipe_path: &Path, opts: &TrainOptions) -> Result<TrainSummary> {
    // --- Recipe, tokenizer, model configuration -------------------------------------------
    let recipe = Recipe::load(recipe_path)?;
    let tokenizer = TextTokenizer::from_path(&recipe.resolve(&recipe.tokenizer.path))?;
    let precision = match (recipe.precision, opts.device) {
        (PrecisionSetting::Fp32, _) => Precision::Fp32,
        (PrecisionSetting::Bf16, d) if d.is_cuda() => Precision::Bf16,
        (PrecisionSetting::Bf16, _) => {
            return Err(Error::field(
                recipe_path,
                "precision",
                "bf16 needs a CUDA device; use \"auto\" (bf16 on CUDA, fp32 on CPU) or \"fp32\"",
            ))
        }
        (PrecisionSetting::Auto, d) => default_precision(d),
    };
    let mut hooks = recipe_hooks(&recipe, opts.device)?;
    let run_dir = recipe.run_dir();
    prepare_run_dir(&run_dir, &recipe, opts)?;

    // --- Data ------------------------------------------------------------------------------
    let mut mixture = open_mixture(&recipe, &tokenizer, |line| println!("{line}"))?;
    let masker = Masker::new(recipe.masking.clone(), &tokenizer, recipe.seed);

    // --- Model and optimizer -----------------------------------------------------------------
    tch::manual_seed(recipe.seed as i64);
    let (vs, mut model, config) = build_model(&recipe, recipe_path, &tokenizer, opts.device)?;
    model.set_precision(precision);
    let o = recipe.optimizer.clone();
    let mut optimizer = AdamW::new(vs.variables().into_iter().collect(), o.betas, o.eps, o.weight_decay);
    let mut state = TrainerState {
        step: 0,
        seed: recipe.seed,
        cursor: mixture.new_cursor(),
        micro_batches: 0,
        nonfinite_skipped: 0,
        rng: RNG_NOTE.into(),
        recipe_fingerprint: recipe.fingerprint(),
        checksums: Default::default(),
        last_loss: None,
    };
    if let Some(which) = &opts.resume {
        state = resume(&run_dir, which, &recipe, opts.force, &vs, &mut optimizer)?;
    }

    // --- Logging and signals -----------------------------------------------------------------
    let stop_at = opts.stop_after.unwrap_or(o.max_steps).min(o.max_steps);
    let mut logger = Logger::new(&recipe.tensorboard_dir(), o.max_steps, state.step)?;
    let mut train_log = TrainLog::open(&run_dir, state.step)?;
    let stop_requested = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop_requested))
            .map_err(|e| Error::usage("signals", e.to_string()))?;
    }
    let tokens_per_step = (o.batch_size * o.grad_accumulation * recipe.data.seq_len) as f64;
    let flops_per_token = config.training_flops_per_token(recipe.data.seq_len, recipe.masking.probability);
    let heldout = recipe.eval.mlm.as_ref().map(|m| mixture.heldout_sequences(m.sequences_per_source));
    logger.println(&format!(
        "run {}: {} on {}, {} parameters, {:?}, {} tokens per step, steps {}..{}",
        recipe.name,
        describe_config(&config),
        describe(opts.device),
        vs.variables().values().map(|t| t.numel()).sum::<usize>(),
        precision,
        tokens_per_step,
        state.step,
        stop_at
    ));
    let mut summary = TrainSummary {
        run_dir: run_dir.clone(),
        final_step: state.step,
        first_heldout_loss: None,
        last_heldout_loss: None,
        nonfinite_skipped: 0,
    };
    let mut consecutive_nonfinite = 0;
    let mut window = (Instant::now(), 0u64);
    if let (Some(sequences), 0) = (&heldout, state.step) {
        // The untrained model's held-out loss: where every curve starts.
        let loss = heldout_loss(&model, &masker, sequences, o.batch_size, opts.device);
        log_heldout(&mut logger, &mut summary, 0, loss);
    }

    // --- The loop ------------------------------------------------------------------------------
    while state.step < stop_at {
        // Every random choice of this step derives from the seed and the step number.
        tch::manual_seed(derive_seed(recipe.seed, SALT_TORCH ^ (state.step << 8)) as i64);
        optimizer.zero_grad();
        let mut loss = 0.0;
        for _ in 0..o.grad_accumulation {
            let sequences = mixture.next_sequences(&mut state.cursor, o.batch_size);
            let batch = masker.mask(&sequences, state.micro_batches);
            state.micro_batches += 1;
            let (input_ids, labels) = batch_tensors(&batch, opts.device);
            let out = model.mlm_loss(&input_ids, None, None, &labels, true);
            (&out.loss / o.grad_accumulation as f64).backward();
            loss += out.loss.double_value(&[]) / o.grad_accumulation as f64;
        }
        let lr = linear_schedule(o.lr, o.warmup_steps, o.max_steps, state.step);
        state.step += 1;
        if !loss.is_finite() {
            state.nonfinite_skipped += 1;
            consecutive_nonfinite += 1;
            logger.println(&format!(
                "step {}: non-finite loss {loss}, update skipped ({} in a row)",
                state.step, consecutive_nonfinite
            ));
            if consecutive_nonfinite >= o.max_nonfinite_steps {
                return Err(Error::usage(
                    format!("run {}", recipe.name),
                    format!("{consecutive_nonfinite} consecutive non-finite losses at step {}; stopped. The last good checkpoint is intact: lower optimizer.lr or check the data, then resume with --resume latest", state.step),
                ));
            }
            continue;
        }
        consecutive_nonfinite = 0;
        let grad_norm = optimizer.clip_grad_norm(o.grad_clip);
        optimizer.step(lr);
        state.last_loss = Some(loss);
        window.1 += 1;

        if state.step % recipe.logging.every == 0 || state.step == stop_at {
            let secs = window.0.elapsed().as_secs_f64();
            let tokens_per_s = window.1 as f64 * tokens_per_step / secs.max(1e-9);
            window = (Instant::now(), 0);
            logger.scalar("train/loss", loss, state.step);
            logger.scalar("train/lr", lr, state.step);
            logger.scalar("train/grad_norm", grad_norm, state.step);
            let tflops = tokens_per_s * flops_per_token / 1e12;
            logger.scalar("train/tokens_per_s", tokens_per_s, state.step);
            logger.scalar("train/tflops", tflops, state.step);
            let mut line = format!(
                "loss {loss:.4} lr {lr:.2e} grad-norm {grad_norm:.3} {tokens_per_s:.0} tok/s {tflops:.3} TFLOP/s"
            );
            if let Some(peak) = recipe.logging.peak_tflops {
                logger.scalar("train/mfu", tflops / peak, state.step);
                line.push_str(&format!(" MFU {:.1}%", 100.0 * tflops / peak));
            }
            logger.progress(state.step, &line);
            train_log.append(state.step, loss, lr, grad_norm)?;
        }
        let eval_every = recipe.eval.mlm.as_ref().map_or(0, |m| m.every);
        let at_checkpoint = state.step % recipe.checkpoint.every == 0 || state.step == stop_at;
        let stopping = stop_requested.load(Ordering::SeqCst);
        if let Some(sequences) = &heldout {
            if at_checkpoint || stopping || (eval_every > 0 && state.step % eval_every == 0) {
                let loss = heldout_loss(&model, &masker, sequences, o.batch_size, opts.device);
                log_heldout(&mut logger, &mut summary, state.step, loss);
            }
        }
        if at_checkpoint || stopping {
            let dir = checkpoint::save(&run_dir, &state, &config, &vs, &optimizer, &tokenizer)?;
            logger.println(&format!("step {}: checkpoint {}", state.step, dir.display()));
            for hook in hooks.iter_mut() {
                let started = Instant::now();
                hook.run(state.step, &model, &tokenizer, &dir, &mut logger)?;
                logger.println(&format!(
                    "step {}: {} took {:.1}s",
                    state.step,
                    hook.name(),
                    started.elapsed().as_secs_f64()
                ));
            }
            checkpoint::prune(&run_dir, recipe.checkpoint.keep_last)?;
            logger.flush();
        }
        if stopping {
            logger.println(&format!("stop requested: checkpoint written at step {}, exiting", state.step));
            break;
        }
    }
    logger.finish();
    summary.final_step = state.step;
    summary.nonfinite_skipped = state.nonfinite_skipped;
    report_epochs(&mixture, &state);
    Ok(summary)
}

fn log_heldout(logger: &mut Logger, summary: &mut TrainSummary, step: u64, loss: f64) {
    logger.scalar("eval/mlm_loss", loss, step);
    logger.scalar("eval/perplexity", loss.exp(), step);
    logger.println(&format!("step {step}: held-out MLM loss {loss:.4} (perplexity {:.1})", loss.exp()));
    summary.first_heldout_loss.get_or_insert(loss);
    summary.last_heldout_loss = Some(loss);
}

fn describe_config(c: &BertConfig) -> String {
    format!(
        "BERT L{} H{} A{} FF{} V{}",
        c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size, c.vocab_size
    )
}

fn report_epochs(mixture: &Mixture, state: &TrainerState) {
    for ((name, epochs), weight) in mixture.names().iter().zip(mixture.epochs(&state.cursor)).zip(mixture.weights()) {
        println!("source {name}: weight {weight:.3}, {epochs:.2} epochs seen");
    }
}

/// A new run refuses to overwrite an earlier one unless asked to; a resumed run needs it.
fn prepare_run_dir(run_dir: &Path, recipe: &Recipe, opts: &TrainOptions) -> Result<()> {
    let has_checkpoints = run_dir.join("latest").exists();
    if opts.resume.is_none() && has_checkpoints {
        if !opts.overwrite {
            return Err(Error::invalid(
                run_dir,
                "this run already has checkpoints: pass --resume latest to continue it, or --overwrite to start over",
            ));
        }
        std::fs::remove_dir_all(run_dir).map_err(|e| Error::io(run_dir, e))?;
        let tb = recipe.tensorboard_dir();
        if tb.exists() {
            std::fs::remove_dir_all(&tb).map_err(|e| Error::io(&tb, e))?;
        }
    }
    std::fs::create_dir_all(run_dir).map_err(|e| Error::io(run_dir, e))
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

/// Restores weights, optimizer moments and the trainer state; refuses a changed recipe.
fn resume(
    run_dir: &Path,
    which: &str,
    recipe: &Recipe,
    force: bool,
    vs: &VarStore,
    optimizer: &mut AdamW,
) -> Result<TrainerState> {
    let dir = checkpoint::resolve(run_dir, which)?;
    let state = checkpoint::load_state(&dir)?;
    let differing: Vec<String> = state
        .recipe_fingerprint
        .iter()
        .zip(recipe.fingerprint())
        .filter(|(old, new)| old.1 != new.1)
        .map(|(old, _)| old.0.clone())
        .collect();
    if !differing.is_empty() && !force {
        return Err(Error::invalid(&dir, format!("the recipe differs from the one this checkpoint was trained with in: {} (pass --force to resume anyway)", differing.join(", "))));
    }
    // The same strict, shape-checked copy as any model load; nothing may be missing.
    let weights_path = dir.join("model.safetensors");
    crate::model::model_dir::copy_into(vs, crate::model::weights::read_file(&weights_path)?, &weights_path, &[])?;
    let opt_path = dir.join("optimizer.safetensors");
    optimizer.load_state(
        crate::model::weights::read_file(&opt_path)?,
        state.step - state.nonfinite_skipped,
        &opt_path,
    )?;
    println!("resumed from {} at step {}", dir.display(), state.step);
    Ok(state)
}

fn batch_tensors(batch: &MaskedBatch, device: Device) -> (Tensor, Tensor) {
    let shape = [batch.rows as i64, batch.cols as i64];
    (
        Tensor::from_slice(&batch.input_ids).view(shape).to_device(device),
        Tensor::from_slice(&batch.labels).view(shape).to_device(device),
    )
}

/// Mean masked-LM loss over the held-out sequences, with masks fixed by the seed so every
/// checkpoint is scored on the same predictions.
pub fn heldout_loss(
    model: &BertForMaskedLM,
    masker: &Masker,
    sequences: &[(usize, Vec<i64>)],
    batch_size: usize,
    device: Device,
) -> f64 {
    let (mut total, mut count) = (0.0, 0i64);
    tch::no_grad(|| {
        for (i, chunk) in sequences.chunks(batch_size).enumerate() {
            let seqs: Vec<Vec<i64>> = chunk.iter().map(|(_, s)| s.clone()).collect();
            let batch = masker.mask(&seqs, (SALT_EVAL_MASKS << 48) | i as u64);
            let (ids, labels) = batch_tensors(&batch, device);
            let out = model.mlm_loss(&ids, None, None, &labels, false);
            total += out.loss.to_kind(Kind::Double).double_value(&[]) * out.predicted as f64;
            count += out.predicted;
        }
    });
    total / count.max(1) as f64
}
