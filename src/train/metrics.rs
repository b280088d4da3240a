//! What the trainer reports as it goes: the loss, learning rate, gradient norm, throughput and
//! MFU of every `logging.every`-th update (TensorBoard, the progress line, `train_log.jsonl`), and
//! the held-out MLM loss whenever it is measured.
use super::train_log::TrainLog;
use crate::error::Result;
use crate::logger::Logger;
use crate::model::BertConfig;
use crate::recipe::Recipe;
use std::path::Path;
use std::time::Instant;

/// One optimizer update's figures.
pub struct Update {
    /// Mean loss over the micro-batches (a scalar on the device, read only when logged).
    pub loss: tch::Tensor,
    /// The learning rate used.
    pub lr: f64,
    /// The global gradient norm before clipping (a scalar on the device, read only when logged).
    pub grad_norm: tch::Tensor,
}

/// The trainer's logger, loss log and throughput window.
pub struct Metrics {
    /// TensorBoard and progress; the hooks write through it too.
    pub logger: Logger,
    /// `None` on the quiet ranks of a data-parallel run.
    train_log: Option<TrainLog>,
    every: u64,
    tokens_per_step: f64,
    flops_per_token: f64,
    peak_tflops: Option<f64>,
    /// When the window of updates since the last log line started, and its updates.
    window: (Instant, u64),
    /// The first and the latest held-out loss measured by this process.
    pub heldout: (Option<f64>, Option<f64>),
}

impl Metrics {
    /// Opens the run's TensorBoard folder and `train_log.jsonl` (cut back to `start_step`);
    /// `devices` (the data-parallel processes) scale the peak that MFU is measured against.
    pub fn open(recipe: &Recipe, config: &BertConfig, run_dir: &Path, start_step: u64, devices: usize) -> Result<Self> {
        let logger = Logger::new(&recipe.tensorboard_dir(), recipe.optimizer.max_steps, start_step)?;
        Ok(Self::with_outputs(recipe, config, logger, Some(TrainLog::open(run_dir, start_step)?), devices))
    }

    /// Metrics that show and write nothing, for the data-parallel ranks other than 0.
    pub fn quiet(recipe: &Recipe, config: &BertConfig) -> Self {
        Self::with_outputs(recipe, config, Logger::quiet(), None, 1)
    }

    fn with_outputs(
        recipe: &Recipe,
        config: &BertConfig,
        logger: Logger,
        train_log: Option<TrainLog>,
        devices: usize,
    ) -> Self {
        let o = &recipe.optimizer;
        Metrics {
            logger,
            train_log,
            every: recipe.logging.every,
            tokens_per_step: (o.batch_size * o.grad_accumulation * recipe.data.seq_len) as f64,
            flops_per_token: config.training_flops_per_token(recipe.data.seq_len, recipe.masking.probability),
            // Tokens/s count the global batch, so MFU is over every device's peak.
            peak_tflops: recipe.logging.peak_tflops.map(|peak| peak * devices as f64),
            window: (Instant::now(), 0),
            heldout: (None, None),
        }
    }

    /// Tokens one optimizer update trains on.
    pub fn tokens_per_step(&self) -> f64 {
        self.tokens_per_step
    }

    /// Whether the update of `step` is logged: every `logging.every` steps and the last.
    pub fn logs_at(&self, step: u64, last_step: u64) -> bool {
        step.is_multiple_of(self.every) || step == last_step
    }

    /// Counts an update; every `logging.every` steps (and at `last_step`) logs it with the
    /// throughput since the previous log line (a skipped update logs its non-finite loss).
    pub fn record_update(&mut self, step: u64, last_step: u64, u: &Update) -> Result<()> {
        self.window.1 += 1;
        if !self.logs_at(step, last_step) {
            return Ok(());
        }
        let secs = self.window.0.elapsed().as_secs_f64();
        let tokens_per_s = self.window.1 as f64 * self.tokens_per_step / secs.max(1e-9);
        self.window = (Instant::now(), 0);
        let tflops = tokens_per_s * self.flops_per_token / 1e12;
        // One read for both values.
        let pair = tch::Tensor::stack(&[u.loss.to_kind(tch::Kind::Double), u.grad_norm.to_kind(tch::Kind::Double)], 0);
        let pair = Vec::<f64>::try_from(pair.to_device(tch::Device::Cpu)).expect("two scalars");
        let (loss, lr, grad_norm) = (pair[0], u.lr, pair[1]);
        let log = &mut self.logger;
        log.scalar("train/loss", loss, step);
        log.scalar("train/lr", lr, step);
        log.scalar("train/grad_norm", grad_norm, step);
        log.scalar("train/tokens_per_s", tokens_per_s, step);
        log.scalar("train/tflops", tflops, step);
        let mut line =
            format!("loss {loss:.4} lr {lr:.2e} grad-norm {grad_norm:.3} {tokens_per_s:.0} tok/s {tflops:.3} TFLOP/s");
        if let Some(peak) = self.peak_tflops {
            log.scalar("train/mfu", tflops / peak, step);
            line.push_str(&format!(" MFU {:.1}%", 100.0 * tflops / peak));
        }
        log.progress(step, &line);
        match &mut self.train_log {
            Some(train_log) => train_log.append(step, loss, lr, grad_norm),
            None => Ok(()),
        }
    }

    /// Logs a held-out MLM loss (and its perplexity) at `step`.
    pub fn record_heldout(&mut self, step: u64, loss: f64) {
        self.logger.scalar("eval/mlm_loss", loss, step);
        self.logger.scalar("eval/perplexity", loss.exp(), step);
        self.logger.println(&format!("step {step}: held-out MLM loss {loss:.4} (perplexity {:.1})", loss.exp()));
        self.heldout.0.get_or_insert(loss);
        self.heldout.1 = Some(loss);
    }
}
