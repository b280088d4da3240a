//! Data parallelism for the engine, on a c10d process group: every rank draws the same global
//! micro-batch (the one sample sequence a single process would train on) and trains on its own
//! rows of it; the gradients (the optimizers' flat buffers), then the loss and the stop flag, are
//! summed across ranks once per optimizer update. Each rank's loss is its units' summed loss over
//! the whole update's units (predicted tokens, examples, ...), so the summed gradients are the
//! single process's (to float summation order), whatever the number of ranks.
use super::task::Slice;
use crate::distributed::{ProcessGroup, ReduceOp};
use crate::error::{Error, Result};
use tch::{Kind, Tensor};

/// This process's share of a data-parallel run.
pub struct DataParallel {
    group: ProcessGroup,
    /// Seconds spent in the gradient reductions so far, when they are timed (see `timed`).
    pub reduce_seconds: f64,
    /// Whether the host's clock measures the reductions: on Gloo (CPU) a collective returns
    /// when it is done; on NCCL it returns once queued, so it is timed only when `--step-times`
    /// synchronizes the device around it.
    pub timed: bool,
}

/// What the ranks agreed on after an update's reduction.
pub struct Reduced {
    /// The update's loss over the global batch (a scalar on the device).
    pub loss: Tensor,
    /// How many ranks had been asked to stop (a scalar on the device; read when the ranks
    /// decide, at the same steps on every rank).
    pub stop: Tensor,
}

impl DataParallel {
    /// Data parallelism over `group`.
    pub fn new(group: ProcessGroup) -> Result<Self> {
        let timed = group.device() == tch::Device::Cpu;
        Ok(DataParallel { group, reduce_seconds: 0.0, timed })
    }

    /// Where the group's tensors live (the CPU for Gloo, this process's GPU for NCCL).
    pub fn device(&self) -> tch::Device {
        self.group.device()
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.group.world_size()
    }

    /// The process group, lent to the evaluations that every rank shares
    /// ([`crate::hooks::Ranks`]).
    pub(crate) fn group(&mut self) -> &mut ProcessGroup {
        &mut self.group
    }

    /// Which rows of every global micro-batch this rank trains on.
    pub fn slice(&self) -> Slice {
        Slice { rank: self.rank(), world: self.world_size() }
    }

    /// Sums the gradient buffers (the optimizer's flat buffers, in its fixed order) in place
    /// across ranks, then this update's `loss` (a scalar on the device) and the stop flag in one
    /// small bucket; nothing is read back and nothing waits for the device: the flag is written
    /// on the device by a fill kernel, not copied from the host (on CUDA the sums are queued).
    pub fn reduce(&mut self, gradients: &[Tensor], loss: &Tensor, stop: bool) -> Result<Reduced> {
        let started = std::time::Instant::now();
        for g in gradients {
            let mut g = g.shallow_clone();
            if let Err(e) = self.group.all_reduce(&mut g, ReduceOp::Sum, "the gradient all-reduce") {
                return Err(self.lost(e));
            }
        }
        let device = self.group.device();
        let flag = Tensor::full([1], stop as i32 as f64, (Kind::Float, device));
        let mut tail = Tensor::cat(&[loss.to_kind(Kind::Float).reshape([1]), flag], 0);
        if let Err(e) = self.group.all_reduce(&mut tail, ReduceOp::Sum, "the all-reduce of the loss and stop flag") {
            return Err(self.lost(e));
        }
        if self.timed {
            self.reduce_seconds += started.elapsed().as_secs_f64();
        }
        Ok(Reduced { loss: tail.get(0).to_kind(Kind::Double), stop: tail.get(1) })
    }

    /// Adds `seconds` to the reductions' time (measured by `--step-times` with the device
    /// synchronized around them), which makes the share reportable on NCCL too.
    pub(crate) fn add_timed_reduction(&mut self, seconds: f64) {
        if self.group.device() != tch::Device::Cpu {
            self.timed = true;
            self.reduce_seconds += seconds;
        }
    }

    /// Stops the job unless every rank holds the same weights (compared by checksums: the sum
    /// and the sum of squares of all parameters, computed and compared on the group's device;
    /// read once, at start-up).
    pub(crate) fn check_equal_weights(&mut self, params: &[Tensor]) -> Result<()> {
        let device = self.group.device();
        let (mut sum, mut squares) =
            (Tensor::zeros([], (Kind::Double, device)), Tensor::zeros([], (Kind::Double, device)));
        for p in params {
            let p = p.detach().to_device(device).to_kind(Kind::Double);
            sum += p.sum(Kind::Double);
            squares += (&p * &p).sum(Kind::Double);
        }
        let mut high = Tensor::stack(&[sum, squares], 0);
        let mut low = high.copy();
        self.group.all_reduce(&mut high, ReduceOp::Max, "the weight checksum (max)")?;
        self.group.all_reduce(&mut low, ReduceOp::Min, "the weight checksum (min)")?;
        let equal = Vec::<f64>::try_from(high.to_device(tch::Device::Cpu)).ok()
            == Vec::<f64>::try_from(low.to_device(tch::Device::Cpu)).ok();
        if !equal {
            return Err(Error::training(
                format!("rank {}", self.rank()),
                "the ranks start from different weights (checksums differ): the same recipe and seed on every rank are needed",
            ));
        }
        Ok(())
    }

    /// Whether rank 0 decided `decision` (the others pass anything): every rank gets rank 0's
    /// answer, once every rank has called it (a decision after an evaluation only rank 0 made).
    pub fn agree(&mut self, decision: bool) -> Result<bool> {
        let value = if self.rank() == 0 && decision { 1.0 } else { 0.0 };
        let mut flag = Tensor::full([1], value, (Kind::Float, self.group.device()));
        if let Err(e) = self.group.all_reduce(&mut flag, ReduceOp::Max, "the agreement on rank 0's decision") {
            return Err(self.lost(e));
        }
        Ok(flag.double_value(&[0]) > 0.0)
    }

    /// Returns once every rank has called it: the other ranks' wait for rank 0's `what` (its
    /// checkpoint, evaluations, corpus preparation), through the rendezvous store under
    /// `--rank0-wait-timeout` rather than in a collective under `--dist-timeout`; a rank lost
    /// meanwhile is named ([`ProcessGroup::wait_for_all`]).
    pub fn wait_for_rank0(&mut self, what: &str) -> Result<()> {
        self.group.wait_for_all(what)
    }

    /// Returns once every rank has called it ([`DataParallel::wait_for_rank0`] for rank 0's work).
    pub fn barrier(&mut self) -> Result<()> {
        self.wait_for_rank0("rank 0's work")
    }

    /// A failed collective's error, naming the rank that stopped (see [`ProcessGroup::lost`]).
    fn lost(&self, e: Error) -> Error {
        self.group.lost(e)
    }
}
