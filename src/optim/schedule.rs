//! Learning-rate schedules, as functions of the update number: the linear warmup and decay of
//! pretraining (transformers' `get_linear_schedule_with_warmup`), the constant-or-linear rate of
//! sentiment fine-tuning, and PreSumm's Noam schedule of the summarizers.

/// Linear warmup from 0 to `peak` over `warmup` updates, then linear decay to 0 at `total`.
/// Update number `k` (0-based) uses `lr(k)`, as HF's scheduler does (so the first update of a
/// warmed-up run has learning rate 0).
pub fn linear_schedule(peak: f64, warmup: u64, total: u64, k: u64) -> f64 {
    if k < warmup {
        return peak * k as f64 / warmup.max(1) as f64;
    }
    peak * (total.saturating_sub(k) as f64 / total.saturating_sub(warmup).max(1) as f64).max(0.0)
}

/// With no warmup, a constant learning rate (the NusaX setting); else warmup and linear decay.
pub fn constant_or_linear(peak: f64, warmup: u64, total: u64, k: u64) -> f64 {
    if warmup == 0 {
        peak
    } else {
        linear_schedule(peak, warmup, total, k)
    }
}

/// PreSumm's Noam schedule, `peak · min(step^-0.5, step · warmup^-1.5)`, for steps counted from 1.
pub fn noam(peak: f64, warmup: u64, step: u64) -> f64 {
    let s = step.max(1) as f64;
    peak * (s.powf(-0.5)).min(s * (warmup as f64).powf(-1.5))
}
