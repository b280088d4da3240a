//! Data parallelism for the trainer, on a c10d process group: every rank draws and masks the
//! same global micro-batch (the one sample sequence a single process would train on) and
//! trains on its own rows of it; the gradients (the optimizer's flat buffers), then the loss and
//! the stop flag, are summed across ranks once per optimizer update. Each rank's loss is its masked
//! tokens' summed loss over the whole micro-batch's masked tokens, so the summed gradients are
//! the single process's (to float summation order), whatever the number of ranks.
use super::loader::Slice;
use crate::dist::{ProcessGroup, ReduceOp};
use crate::error::{Error, Result};
use tch::{Kind, Tensor};

/// This process's share of a data-parallel run.
pub struct DataParallel {
    group: ProcessGroup,
    /// Seconds spent in the gradient reductions so far.
    pub reduce_seconds: f64,
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
    /// Data parallelism over `group`; `batch_size` (the global micro-batch) must divide.
    pub fn new(group: ProcessGroup, batch_size: usize, recipe: &std::path::Path) -> Result<Self> {
        let world = group.world_size();
        if !batch_size.is_multiple_of(world) {
            return Err(Error::field(
                recipe,
                "optimizer.batch_size",
                format!("{batch_size} sequences do not divide among {world} processes; use a multiple of {world}"),
            ));
        }
        Ok(DataParallel { group, reduce_seconds: 0.0 })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.group.world_size()
    }

    /// Which rows of every global micro-batch this rank trains on.
    pub fn slice(&self) -> Slice {
        Slice { rank: self.rank(), world: self.world_size() }
    }

    /// Sums the gradient buffers (the optimizer's flat buffers, in its fixed order) in place
    /// across ranks, then this update's `loss` (a scalar on the device) and the stop flag in one
    /// small bucket; nothing is read back (on CUDA the sums are queued on the device).
    pub fn reduce(&mut self, gradients: &[Tensor], loss: &Tensor, stop: bool) -> Result<Reduced> {
        let started = std::time::Instant::now();
        for g in gradients {
            let mut g = g.shallow_clone();
            if let Err(e) = self.group.all_reduce(&mut g, ReduceOp::Sum) {
                return Err(self.lost(e));
            }
        }
        let flag = Tensor::from_slice(&[stop as i32 as f32]).to_device(loss.device());
        let mut tail = Tensor::cat(&[loss.to_kind(Kind::Float).reshape([1]), flag], 0);
        if let Err(e) = self.group.all_reduce(&mut tail, ReduceOp::Sum) {
            return Err(self.lost(e));
        }
        self.reduce_seconds += started.elapsed().as_secs_f64();
        Ok(Reduced { loss: tail.get(0).to_kind(Kind::Double), stop: tail.get(1) })
    }

    /// Stops the job unless every rank holds the same weights (compared by checksums).
    pub fn check_equal_weights(&mut self, params: &[Tensor]) -> Result<()> {
        let (mut sum, mut squares) = (0.0, 0.0);
        for p in params {
            let p = p.detach().to_kind(Kind::Double);
            sum += p.sum(Kind::Double).double_value(&[]);
            squares += (&p * &p).sum(Kind::Double).double_value(&[]);
        }
        let mut high = Tensor::from_slice(&[sum, squares]);
        let mut low = high.copy();
        self.group.all_reduce(&mut high, ReduceOp::Max)?;
        self.group.all_reduce(&mut low, ReduceOp::Min)?;
        if Vec::<f64>::try_from(&high).ok() != Vec::<f64>::try_from(&low).ok() {
            return Err(Error::training(
                format!("rank {}", self.rank()),
                "the ranks start from different weights (checksums differ): the same recipe and seed on every rank are needed",
            ));
        }
        Ok(())
    }

    /// Returns once every rank has called it.
    pub fn barrier(&mut self) -> Result<()> {
        self.group.barrier().map_err(|e| self.lost(e))
    }

    /// A failed collective's error, naming the rank that stopped when its heartbeat did (this
    /// waits a second and a half to tell).
    fn lost(&self, e: Error) -> Error {
        let who = match self.group.silent_ranks() {
            Ok(ranks) if !ranks.is_empty() => {
                let names: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
                format!("rank {} stopped (no heartbeat in the store)", names.join(", "))
            }
            Ok(_) => "every rank's heartbeat goes on: the network between them failed, or a rank hangs".into(),
            Err(_) => "the rendezvous store is gone too: rank 0 (whose launch serves it) or its host stopped".into(),
        };
        Error::training(e.to_string(), format!("{who}; the last checkpoint is intact: resume with --resume latest"))
    }
}
