//! What the engine reports as it goes: the loss, learning rates, gradient norm, throughput and
//! MFU of every `logging.every`-th update (TensorBoard, the progress line, `train_log.jsonl`).
use super::task::Throughput;
use super::train_log::TrainLog;
use indolm_core::logger::Logger;
use indolm_torch::error::Result;
use std::path::Path;
use std::time::Instant;

/// One optimizer update's figures.
pub(crate) struct Update {
    /// The update's loss (a scalar on the device, read only when logged).
    pub loss: tch::Tensor,
    /// Each optimizer's name and learning rate.
    pub lrs: Vec<(String, f64)>,
    /// The gradient norm before clipping, over every optimizer (a scalar on the device).
    pub grad_norm: tch::Tensor,
    /// Units it trained on (tokens, examples, articles), for the throughput.
    pub units: f64,
}

/// The loss log and the throughput window of a run.
pub(crate) struct Metrics {
    /// `None` on the quiet ranks of a data-parallel run.
    train_log: Option<TrainLog>,
    every: u64,
    throughput: Throughput,
    peak_tflops: Option<f64>,
    /// When the window of updates since the last log line started, and the units trained since.
    window: (Instant, f64),
}

impl Metrics {
    /// The metrics of the run at `run_dir`: `train_log.jsonl` (cut back to `start_step`) when
    /// `leader`; a line every `every` updates; `peak_tflops` of one device, scaled by `devices`
    /// (the data-parallel processes), for MFU.
    pub fn open(
        run_dir: &Path,
        start_step: u64,
        leader: bool,
        every: u64,
        throughput: Throughput,
        peak_tflops: Option<f64>,
        devices: usize,
    ) -> Result<Self> {
        let train_log = if leader { Some(TrainLog::open(run_dir, start_step)?) } else { None };
        Ok(Metrics {
            train_log,
            every: every.max(1),
            throughput,
            // The throughput counts the global batch, so MFU is over every device's peak.
            peak_tflops: peak_tflops.map(|peak| peak * devices as f64),
            window: (Instant::now(), 0.0),
        })
    }

    /// What an update trains on.
    pub(crate) fn throughput(&self) -> Throughput {
        self.throughput
    }

    /// Whether the update of `step` is logged: every `logging.every` steps and the last.
    pub(crate) fn logs_at(&self, step: u64, last_step: u64) -> bool {
        step.is_multiple_of(self.every) || step == last_step
    }

    /// Counts an update; every `logging.every` steps (and at `last_step`) logs it with the
    /// throughput since the previous log line (a skipped update logs its non-finite loss).
    pub(crate) fn record_update(&mut self, logger: &mut Logger, step: u64, last_step: u64, u: &Update) -> Result<()> {
        self.window.1 += u.units;
        if !self.logs_at(step, last_step) {
            return Ok(());
        }
        let secs = self.window.0.elapsed().as_secs_f64();
        let t = self.throughput;
        let per_s = self.window.1 / secs.max(1e-9);
        self.window = (Instant::now(), 0.0);
        // One read for both values.
        let pair = tch::Tensor::stack(&[u.loss.to_kind(tch::Kind::Double), u.grad_norm.to_kind(tch::Kind::Double)], 0);
        let pair = Vec::<f64>::try_from(pair.to_device(tch::Device::Cpu)).expect("two scalars");
        let (loss, grad_norm) = (pair[0], pair[1]);
        logger.scalar("train/loss", loss, step);
        for (name, lr) in &u.lrs {
            logger.scalar(
                &if name.is_empty() { "train/lr".to_string() } else { format!("train/lr_{name}") },
                *lr,
                step,
            );
        }
        logger.scalar("train/grad_norm", grad_norm, step);
        logger.scalar(&format!("train/{}_per_s", t.unit), per_s, step);
        let lrs: Vec<String> = u
            .lrs
            .iter()
            .map(|(name, lr)| if name.is_empty() { format!("lr {lr:.2e}") } else { format!("lr {name} {lr:.2e}") })
            .collect();
        let mut line = format!("loss {loss:.4} {} grad-norm {grad_norm:.3} {per_s:.0} {}/s", lrs.join(" "), t.short);
        if let Some(flops) = t.flops_per_unit {
            let tflops = per_s * flops / 1e12;
            logger.scalar("train/tflops", tflops, step);
            line.push_str(&format!(" {tflops:.3} TFLOP/s"));
            if let Some(peak) = self.peak_tflops {
                logger.scalar("train/mfu", tflops / peak, step);
                line.push_str(&format!(" MFU {:.1}%", 100.0 * tflops / peak));
            }
        }
        logger.progress(step, &line);
        let lr = u.lrs.first().map_or(0.0, |(_, lr)| *lr);
        match &mut self.train_log {
            Some(train_log) => train_log.append(step, loss, lr, grad_norm),
            None => Ok(()),
        }
    }
}
