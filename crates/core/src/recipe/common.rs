//! The sections every recipe kind shares, with one set of defaults: `[optimizer]` (AdamW, its
//! schedule and the batch), `[checkpoint]` and `[logging]`. Pretraining and the fine-tuning
//! recipes embed them; a task adds only its own sections (`[data]`, `[model]`, `[masking]`,
//! `[eval]`, `[grid]`, `[ext]`, `[abs]`). A key a recipe kind does not use is refused by its
//! validation, naming the key.
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The learning-rate schedule of `[optimizer] schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Linear warmup over `warmup_steps`, then linear decay to 0 at the last update
    /// (transformers' `get_linear_schedule_with_warmup`).
    #[default]
    Linear,
    /// Linear warmup over `warmup_steps` (none when 0), then constant.
    Constant,
    /// PreSumm's Noam schedule: `lr · min(step^-0.5, step · warmup_steps^-1.5)`.
    Noam,
    /// Linear warmup, then the learning rate multiplied by `gamma` after every epoch (recipes
    /// that count epochs: sentiment).
    #[serde(rename = "epoch-decay")]
    EpochDecay,
}

fn is_linear(kind: &ScheduleKind) -> bool {
    *kind == ScheduleKind::Linear
}

/// `[optimizer]`: AdamW, its schedule, the batch and how long to train.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OptimizerSection {
    /// Peak learning rate (Noam: its factor).
    pub lr: f64,
    /// Adam's β1 and β2.
    #[serde(default = "d_betas")]
    pub betas: [f64; 2],
    /// Adam's ε.
    #[serde(default = "d_eps")]
    pub eps: f64,
    /// Decoupled weight decay (not on biases and LayerNorm weights).
    #[serde(default = "d_wd")]
    pub weight_decay: f64,
    /// Max gradient norm (each optimizer's); 0 disables clipping.
    #[serde(default = "d_clip")]
    pub grad_clip: f64,
    /// Sequences (or examples, articles) per micro-batch, over all data-parallel processes.
    pub batch_size: usize,
    /// Micro-batches per optimizer update.
    #[serde(default = "d_accum")]
    pub grad_accumulation: usize,
    /// The learning-rate schedule.
    #[serde(default, skip_serializing_if = "is_linear")]
    pub schedule: ScheduleKind,
    /// Updates of warmup.
    #[serde(default)]
    pub warmup_steps: u64,
    /// The factor the `epoch-decay` schedule multiplies the learning rate by after each epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// Updates in the whole run (or `max_epochs`, where a task counts epochs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Passes over the training data (fine-tuning on a fixed set), instead of `max_steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_epochs: Option<u64>,
    /// Abort after this many consecutive steps with a non-finite loss (each one skipped; noticed
    /// when the losses are read: at the next log line, evaluation or checkpoint).
    #[serde(default = "d_nonfinite")]
    pub max_nonfinite_steps: u64,
    /// BertAbs and BertExtAbs: the decoder's (and generator's) own Noam factor; the encoder
    /// uses `lr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_dec: Option<f64>,
    /// BertAbs and BertExtAbs: the warmup of `lr_dec`'s schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_dec: Option<u64>,
}

fn d_betas() -> [f64; 2] {
    [0.9, 0.999]
}
fn d_eps() -> f64 {
    1e-6
}
fn d_wd() -> f64 {
    0.01
}
fn d_clip() -> f64 {
    1.0
}
fn d_accum() -> usize {
    1
}
fn d_nonfinite() -> u64 {
    10
}

impl OptimizerSection {
    /// The schedule of an optimizer with peak `lr` and `warmup`, over `total` updates of
    /// `updates_per_epoch` each (`None` for a task that counts updates, whose recipe
    /// [`Self::required_max_steps`] refuses `epoch-decay`).
    pub fn schedule_of(
        &self,
        lr: f64,
        warmup: u64,
        total: u64,
        updates_per_epoch: Option<u64>,
    ) -> crate::schedule::Schedule {
        use crate::schedule::Schedule;
        match self.schedule {
            ScheduleKind::Linear => Schedule::Linear { peak: lr, warmup, total },
            ScheduleKind::Constant => Schedule::Constant { peak: lr, warmup },
            ScheduleKind::Noam => Schedule::Noam { peak: lr, warmup },
            ScheduleKind::EpochDecay => Schedule::EpochDecay {
                peak: lr,
                gamma: self.gamma.unwrap_or(1.0),
                updates_per_epoch: updates_per_epoch.unwrap_or(u64::MAX),
                warmup,
            },
        }
    }

    /// Checks the values every recipe kind needs: positive learning rate, batch and
    /// accumulation, betas in [0, 1), a non-negative ε and clip; Noam needs a warmup.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let gamma_ok = match (self.schedule, self.gamma) {
            (ScheduleKind::EpochDecay, Some(g)) => g > 0.0 && g <= 1.0,
            (ScheduleKind::EpochDecay, None) | (_, Some(_)) => false,
            (_, None) => true,
        };
        let checks: [(bool, &str, String); 8] = [
            (self.lr > 0.0, "optimizer.lr", format!("must be > 0, found {}", self.lr)),
            (self.batch_size > 0, "optimizer.batch_size", "must be > 0".into()),
            (self.grad_accumulation > 0, "optimizer.grad_accumulation", "must be > 0".into()),
            (
                self.betas.iter().all(|b| (0.0..1.0).contains(b)),
                "optimizer.betas",
                format!("each must be in [0, 1), found {:?}", self.betas),
            ),
            (self.eps >= 0.0 && self.grad_clip >= 0.0, "optimizer.eps", "eps and grad_clip must be >= 0".into()),
            (self.max_nonfinite_steps > 0, "optimizer.max_nonfinite_steps", "must be > 0".into()),
            (
                self.schedule != ScheduleKind::Noam || self.warmup_steps > 0,
                "optimizer.warmup_steps",
                "the Noam schedule needs warmup_steps > 0".into(),
            ),
            (
                gamma_ok,
                "optimizer.gamma",
                match (self.schedule, self.gamma) {
                    (ScheduleKind::EpochDecay, None) => "missing: the epoch-decay schedule's factor per epoch".into(),
                    (ScheduleKind::EpochDecay, Some(g)) => format!("must be in (0, 1], found {g}"),
                    _ => "only the epoch-decay schedule takes a gamma".into(),
                },
            ),
        ];
        for (ok, field, message) in checks {
            if !ok {
                return Err(Error::field(path, field, message));
            }
        }
        Ok(())
    }

    /// `max_steps`, required (pretraining, summarization): an error naming the key when absent
    /// or 0, and `max_epochs` refused.
    pub fn required_max_steps(&self, path: &Path) -> Result<u64> {
        if self.max_epochs.is_some() {
            return Err(Error::field(path, "optimizer.max_epochs", "this recipe counts updates: use max_steps"));
        }
        if self.schedule == ScheduleKind::EpochDecay {
            return Err(Error::field(
                path,
                "optimizer.schedule",
                "\"epoch-decay\" decays the learning rate per epoch; this recipe counts updates (use it in recipes with max_epochs)",
            ));
        }
        match self.max_steps {
            Some(n) if n > 0 => Ok(n),
            Some(_) => Err(Error::field(path, "optimizer.max_steps", "must be > 0")),
            None => Err(Error::field(path, "optimizer.max_steps", "missing: the number of updates of the run")),
        }
    }

    /// Refuses the decoder's schedule keys where there is no decoder.
    pub fn refuse_decoder_keys(&self, path: &Path) -> Result<()> {
        if self.lr_dec.is_some() || self.warmup_dec.is_some() {
            return Err(Error::field(
                path,
                "optimizer.lr_dec",
                "lr_dec and warmup_dec set the decoder's schedule of BertAbs and BertExtAbs; this recipe trains no decoder",
            ));
        }
        Ok(())
    }
}

/// Checks what every recipe kind shares: the run's name (a folder name), `[optimizer]`,
/// `[checkpoint]` and `[logging]`. Each kind then checks its own sections.
pub fn check_shared(
    path: &Path,
    name: &str,
    optimizer: &OptimizerSection,
    checkpoint: &CheckpointSection,
    logging: &LoggingSection,
) -> Result<()> {
    super::check_name(path, "name", name)?;
    optimizer.validate(path)?;
    checkpoint.validate(path)?;
    logging.validate(path)
}

/// `[checkpoint]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSection {
    /// Write a checkpoint every this many updates (and at the last).
    pub every: u64,
    /// Keep the weights and optimizer states of only the last N checkpoints (their evaluations
    /// and states are always kept).
    #[serde(default = "d_keep")]
    pub keep_last: usize,
    /// Also keep the model weights (not the optimizer states) of every this many checkpoints
    /// for good: 1 keeps every checkpoint's, 0 (the default) only the last `keep_last`'s.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keep_weights_every: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn d_keep() -> usize {
    2
}

impl CheckpointSection {
    /// `every` and `keep_last` positive.
    pub fn validate(&self, path: &Path) -> Result<()> {
        if self.every == 0 {
            return Err(Error::field(path, "checkpoint.every", "must be > 0"));
        }
        if self.keep_last == 0 {
            return Err(Error::field(path, "checkpoint.keep_last", "must be at least 1"));
        }
        Ok(())
    }
}

/// `[logging]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LoggingSection {
    /// TensorBoard folder; the run logs to `<tensorboard>/<name>/`.
    #[serde(default = "d_tb")]
    pub tensorboard: PathBuf,
    /// Log the training scalars every this many updates (and at the last).
    #[serde(default = "d_log_every")]
    pub every: u64,
    /// One device's peak dense TFLOP/s in the training precision (e.g. 989 for an H100/H200
    /// in bf16); when given, MFU is logged as `train/mfu` (over all the devices of a
    /// data-parallel run).
    #[serde(default)]
    pub peak_tflops: Option<f64>,
}

fn d_tb() -> PathBuf {
    "runs".into()
}
fn d_log_every() -> u64 {
    10
}

impl Default for LoggingSection {
    fn default() -> Self {
        LoggingSection { tensorboard: d_tb(), every: d_log_every(), peak_tflops: None }
    }
}

impl LoggingSection {
    /// `every` positive.
    pub fn validate(&self, path: &Path) -> Result<()> {
        if self.every == 0 {
            return Err(Error::field(path, "logging.every", "must be > 0"));
        }
        Ok(())
    }
}

/// What every recipe kind has, borrowed: how the engine reads any recipe.
#[derive(Debug, Clone, Copy)]
pub struct SharedSections<'a> {
    /// The run's name.
    pub name: &'a str,
    /// The seed every random choice derives from.
    pub seed: u64,
    /// `[optimizer]`.
    pub optimizer: &'a OptimizerSection,
    /// `[logging]`.
    pub logging: &'a LoggingSection,
}

/// The compute precision a recipe asks for.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionSetting {
    /// bf16 on CUDA, fp32 on CPU.
    #[default]
    Auto,
    /// bf16 matrix products and attention with fp32 master weights (CUDA only).
    Bf16,
    /// fp32 everywhere.
    Fp32,
}

/// Test-only, not a user option: `INDOLM_TEST_BF16_ON_CPU=1` lets `precision = "bf16"` run on the
/// CPU (libtorch has CPU bf16 kernels, slower than fp32 there), so that the tests execute the
/// bf16 branches that otherwise first run on a GPU.
pub fn bf16_on_cpu_for_tests() -> bool {
    std::env::var("INDOLM_TEST_BF16_ON_CPU").is_ok_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> OptimizerSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn epoch_decay_needs_its_gamma_and_a_recipe_that_counts_epochs() {
        let path = Path::new("r.toml");
        let ok = section("lr = 1e-4\nbatch_size = 8\nschedule = \"epoch-decay\"\ngamma = 0.9\nmax_epochs = 3");
        ok.validate(path).unwrap();
        let s = ok.schedule_of(1e-4, 0, 30, Some(10));
        assert!((s.lr(25) - 0.81e-4).abs() < 1e-18, "epoch 2 of 10 updates each");
        let err = |text: &str| section(text).validate(path).unwrap_err().to_string();
        assert!(err("lr = 1e-4\nbatch_size = 8\nschedule = \"epoch-decay\"").contains("`optimizer.gamma`: missing"));
        assert!(err("lr = 1e-4\nbatch_size = 8\nschedule = \"epoch-decay\"\ngamma = 1.5").contains("(0, 1]"));
        assert!(err("lr = 1e-4\nbatch_size = 8\ngamma = 0.9").contains("only the epoch-decay schedule"));
        let steps = section("lr = 1e-4\nbatch_size = 8\nschedule = \"epoch-decay\"\ngamma = 0.9\nmax_steps = 5");
        let refused = steps.required_max_steps(path).unwrap_err().to_string();
        assert!(refused.contains("`optimizer.schedule`") && refused.contains("counts updates"), "{refused}");
    }
}
