//! `indolm train --step-times`: where an update's time goes. The device is synchronized at every
//! phase boundary, so each phase's time is its own (at the cost of the overlap a normal step
//! has): the batch (drawing and masking), forward (with the copy to the device), backward, the
//! gradient all-reduce (data-parallel runs) and the optimizer (clipping and AdamW). Medians over
//! the run's updates, printed at its end.
use std::time::Instant;
use tch::Device;

/// A phase of an update.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// Drawing and masking the micro-batches.
    Batch,
    /// The forward passes (with the batches' copies to the device).
    Forward,
    /// The backward passes.
    Backward,
    /// Summing the gradients across ranks.
    AllReduce,
    /// Clipping and the AdamW update.
    Optimizer,
}

const PHASES: [(Phase, &str); 5] = [
    (Phase::Batch, "batch"),
    (Phase::Forward, "forward"),
    (Phase::Backward, "backward"),
    (Phase::AllReduce, "all-reduce"),
    (Phase::Optimizer, "optimizer"),
];

/// Per-phase times of every update so far.
pub(crate) struct StepTimes {
    device: Device,
    last: Instant,
    current: [f64; 5],
    updates: Vec<[f64; 5]>,
}

impl StepTimes {
    /// Timing on `device`.
    pub fn new(device: Device) -> Self {
        StepTimes { device, last: Instant::now(), current: [0.0; 5], updates: Vec::new() }
    }

    /// An update starts now (once the device has finished what came before).
    pub(crate) fn start(&mut self) {
        indolm_torch::device::synchronize(self.device);
        self.current = [0.0; 5];
        self.last = Instant::now();
    }

    /// The time since the last mark (once the device is done) belongs to `phase`; returns it.
    pub(crate) fn lap(&mut self, phase: Phase) -> f64 {
        indolm_torch::device::synchronize(self.device);
        let now = Instant::now();
        let seconds = (now - self.last).as_secs_f64();
        self.current[phase as usize] += seconds;
        self.last = now;
        seconds
    }

    /// The update is done.
    pub(crate) fn end(&mut self) {
        self.updates.push(self.current);
    }

    /// One line: each phase's median in milliseconds and its share of the median update.
    pub(crate) fn summary(&self) -> Option<String> {
        if self.updates.is_empty() {
            return None;
        }
        let median = |mut values: Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let total = median(self.updates.iter().map(|u| u.iter().sum()).collect());
        let parts: Vec<String> = PHASES
            .iter()
            .map(|&(phase, name)| {
                let ms = median(self.updates.iter().map(|u| u[phase as usize]).collect()) * 1e3;
                format!("{name} {ms:.2} ms ({:.0}%)", 100.0 * ms / (total * 1e3).max(1e-12))
            })
            .collect();
        Some(format!(
            "step times (device synchronized between phases; medians of {} updates): {:.2} ms an update: {}",
            self.updates.len(),
            total * 1e3,
            parts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_and_medians_are_reported() {
        let mut times = StepTimes::new(Device::Cpu);
        assert!(times.summary().is_none());
        for _ in 0..3 {
            times.start();
            std::thread::sleep(std::time::Duration::from_millis(2));
            times.lap(Phase::Forward);
            times.lap(Phase::Optimizer);
            times.end();
        }
        let line = times.summary().unwrap();
        assert!(line.contains("medians of 3 updates"), "{line}");
        assert!(times.updates.iter().all(|u| u[Phase::Forward as usize] >= 0.002 && u[Phase::Batch as usize] == 0.0));
    }
}
