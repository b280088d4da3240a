//! Learning-rate schedules, as functions of the update number: the linear warmup and decay of
//! pretraining (transformers' `get_linear_schedule_with_warmup`), the constant rate (with optional
//! warmup) of sentiment fine-tuning, and PreSumm's Noam schedule of the summarizers.

/// A learning-rate schedule, as a recipe and a task choose it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// [`linear_schedule`]: warmup over `warmup` updates to `peak`, then down to 0 at `total`.
    Linear {
        /// The peak learning rate.
        peak: f64,
        /// Updates of warmup.
        warmup: u64,
        /// The update at which it reaches 0.
        total: u64,
    },
    /// Linear warmup over `warmup` updates (none when 0), then `peak` throughout.
    Constant {
        /// The learning rate after warmup.
        peak: f64,
        /// Updates of warmup.
        warmup: u64,
    },
    /// [`noam`]: PreSumm's schedule.
    Noam {
        /// Its peak factor.
        peak: f64,
        /// Updates of warmup.
        warmup: u64,
    },
    /// Linear warmup over `warmup` updates, then `peak · gamma^epoch`: the learning rate
    /// multiplied by `gamma` after every epoch (PyTorch's `StepLR` with `step_size = 1`, stepped
    /// once an epoch), the epoch being `k / updates_per_epoch`.
    EpochDecay {
        /// The learning rate of the first epoch.
        peak: f64,
        /// The factor applied after each epoch.
        gamma: f64,
        /// Updates in one epoch.
        updates_per_epoch: u64,
        /// Updates of warmup.
        warmup: u64,
    },
}

impl Schedule {
    /// The learning rate of update `k`, counted from 0 (Noam's steps count from 1: `k + 1`).
    pub fn lr(&self, k: u64) -> f64 {
        match *self {
            Schedule::Linear { peak, warmup, total } => linear_schedule(peak, warmup, total, k),
            Schedule::Constant { peak, warmup } if k < warmup => peak * k as f64 / warmup as f64,
            Schedule::Constant { peak, .. } => peak,
            Schedule::Noam { peak, warmup } => noam(peak, warmup, k + 1),
            Schedule::EpochDecay { peak, warmup, .. } if k < warmup => peak * k as f64 / warmup as f64,
            Schedule::EpochDecay { peak, gamma, updates_per_epoch, .. } => {
                let epoch = k / updates_per_epoch.max(1);
                peak * gamma.powi(epoch.min(i32::MAX as u64) as i32)
            }
        }
    }
}

/// Linear warmup from 0 to `peak` over `warmup` updates, then linear decay to 0 at `total`.
/// Update number `k` (0-based) uses `lr(k)`, as HF's scheduler does (so the first update of a
/// warmed-up run has learning rate 0).
pub fn linear_schedule(peak: f64, warmup: u64, total: u64, k: u64) -> f64 {
    if k < warmup {
        return peak * k as f64 / warmup.max(1) as f64;
    }
    peak * (total.saturating_sub(k) as f64 / total.saturating_sub(warmup).max(1) as f64).max(0.0)
}

/// PreSumm's Noam schedule, `peak · min(step^-0.5, step · warmup^-1.5)`, for steps counted from 1.
pub fn noam(peak: f64, warmup: u64, step: u64) -> f64 {
    let s = step.max(1) as f64;
    peak * (s.powf(-0.5)).min(s * (warmup as f64).powf(-1.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_schedule_warms_up_then_decays_to_zero() {
        // 10 warmup updates to 1e-3, then down to 0 at update 110 (HF: lr(k) for update k).
        let lr = |k| linear_schedule(1e-3, 10, 110, k);
        assert_eq!(lr(0), 0.0, "the first update of a warmed-up run has learning rate 0");
        assert!((lr(5) - 5e-4).abs() < 1e-18);
        assert!((lr(10) - 1e-3).abs() < 1e-18, "the peak is reached at the end of warmup");
        assert!((lr(60) - 5e-4).abs() < 1e-18, "half way through the decay");
        assert_eq!(lr(110), 0.0);
        assert_eq!(lr(500), 0.0, "past the end it stays at 0");
        assert!((linear_schedule(2.0, 0, 4, 0) - 2.0).abs() < 1e-15, "no warmup: start at the peak");
        assert!((linear_schedule(2.0, 0, 4, 3) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn constant_warms_up_linearly_then_holds() {
        let none = Schedule::Constant { peak: 3e-5, warmup: 0 };
        assert_eq!(none.lr(0), 3e-5, "no warmup: the NusaX setting, constant from the start");
        assert_eq!(none.lr(10_000), 3e-5);
        let warm = Schedule::Constant { peak: 2e-3, warmup: 4 };
        assert_eq!(warm.lr(0), 0.0);
        assert!((warm.lr(2) - 1e-3).abs() < 1e-18);
        assert_eq!(warm.lr(4), 2e-3);
        assert_eq!(warm.lr(900), 2e-3);
    }

    #[test]
    fn epoch_decay_multiplies_by_gamma_after_every_epoch() {
        // 10 updates an epoch, γ 0.9 (NusaX's Table 10): epoch e (updates 10e..10e+9) at 1e-4 · 0.9^e.
        let s = Schedule::EpochDecay { peak: 1e-4, gamma: 0.9, updates_per_epoch: 10, warmup: 0 };
        assert_eq!(s.lr(0), 1e-4);
        assert_eq!(s.lr(9), 1e-4, "the whole first epoch at the peak");
        assert!((s.lr(10) - 0.9e-4).abs() < 1e-18);
        assert!((s.lr(29) - 0.81e-4).abs() < 1e-18);
        assert!((s.lr(100) - 1e-4 * 0.9f64.powi(10)).abs() < 1e-18);
        let warm = Schedule::EpochDecay { peak: 1e-4, gamma: 0.5, updates_per_epoch: 10, warmup: 4 };
        assert_eq!(warm.lr(0), 0.0);
        assert!((warm.lr(2) - 0.5e-4).abs() < 1e-18);
        assert_eq!(warm.lr(4), 1e-4);
        assert_eq!(warm.lr(10), 0.5e-4);
    }

    #[test]
    fn noam_rises_as_step_and_falls_as_its_inverse_square_root() {
        let warmup = 100;
        // Before warmup: peak · step · warmup^-1.5; after: peak · step^-0.5; equal at warmup.
        assert!((noam(2e-3, warmup, 25) - 2e-3 * 25.0 / 1000.0).abs() < 1e-15);
        assert!((noam(2e-3, warmup, 100) - 2e-3 / 10.0).abs() < 1e-15);
        assert!((noam(2e-3, warmup, 400) - 2e-3 / 20.0).abs() < 1e-15);
        assert_eq!(noam(1.0, warmup, 0), noam(1.0, warmup, 1), "steps count from 1");
        let max = (1..1000).map(|s| noam(1.0, warmup, s)).fold(0.0, f64::max);
        assert_eq!(max, noam(1.0, warmup, warmup), "the peak is at the end of warmup");
    }
}
