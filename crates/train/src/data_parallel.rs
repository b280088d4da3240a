//! Data parallelism for the engine, on a c10d process group: every rank draws the same global
//! micro-batch (the one sample sequence a single process would train on) and trains on its own
//! rows of it; the gradients (the optimizers' flat buffers), then the loss and the stop flag, are
//! summed across ranks once per optimizer update. Each rank's loss is its units' summed loss over
//! the whole update's units (predicted tokens, examples, ...), so the summed gradients are the
//! single process's (to float summation order), whatever the number of ranks.
//!
//! The gradient sum overlaps backward, as PyTorch's DistributedDataParallel does: at the first
//! update the order in which the parameters' gradients become ready is recorded (and that
//! update's gradients are summed after backward); the optimizers then lay their flat buffers out
//! in that order, and the buffers are cut into buckets of about `--bucket-mb` (the first of each
//! buffer 1 MiB, so that the first sum starts early). From the second update on, a hook after each
//! parameter's gradient accumulation launches a bucket's all-reduce as soon as its last gradient
//! is in, during the backward of the update's last micro-batch, while the earlier layers' gradients
//! are still being computed ([`GradientReducer`]). With `--grad-reduce bf16` the buckets are
//! summed in bf16 (half the bytes; each rank's gradients rounded to bf16, and the sum too).
use super::buckets::{plan_buckets, BucketPlan};
use super::task::Slice;
use indolm_torch::distributed::{GradientReducer, ProcessGroup, ReduceOp};
use indolm_torch::error::{Error, Result};
use indolm_torch::optim::AdamW;
use std::hash::{Hash, Hasher};
use tch::{Kind, Tensor};

/// How the ranks sum their gradients (`--bucket-mb`, `--grad-reduce`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reduction {
    /// The size of a bucket, in bytes of gradient; 0 sums every gradient after backward (no
    /// overlap).
    pub bucket_bytes: usize,
    /// Sum in bf16.
    pub bf16: bool,
}

impl Default for Reduction {
    /// DistributedDataParallel's: buckets of 25 MiB, summed in the gradients' dtype.
    fn default() -> Self {
        Reduction { bucket_bytes: 25 << 20, bf16: false }
    }
}

/// Where the overlapped reduction stands.
enum Overlap {
    /// Hooks installed; the first update records the order of its gradients.
    Recording(GradientReducer),
    /// Buckets set: the hooks launch them during the last micro-batch's backward.
    Armed { reducer: GradientReducer, buckets: usize },
}

/// How the overlapped reductions went: buckets all-reduced, and how many of them the hooks
/// launched during backward (the rest once backward was over).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OverlapCounts {
    /// Buckets all-reduced (one per bucket and update).
    pub buckets: u64,
    /// Of those, the ones the hooks launched during backward.
    pub during_backward: u64,
}

/// This process's share of a data-parallel run.
pub struct DataParallel {
    /// Declared before `group`, so dropped before it: its hooks launch on the group.
    overlap: Option<Overlap>,
    group: ProcessGroup,
    reduction: Reduction,
    /// The overlapped reductions so far.
    pub overlap_counts: OverlapCounts,
    /// Seconds spent in the gradient reductions so far, when they are timed (see `timed`): with
    /// the overlap, the time the update waited for them after backward.
    pub reduce_seconds: f64,
    /// Whether the host's clock measures the reductions: on Gloo (CPU) a collective returns
    /// when it is done; on NCCL it returns once queued, so it is timed only when `--step-times`
    /// synchronizes the device around it.
    pub timed: bool,
}

/// What the ranks agreed on after an update's reduction.
pub(crate) struct Reduced {
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
        Ok(DataParallel {
            overlap: None,
            group,
            reduction: Reduction::default(),
            overlap_counts: OverlapCounts::default(),
            reduce_seconds: 0.0,
            timed,
        })
    }

    /// How the gradients are summed.
    pub(crate) fn reduction(&self) -> Reduction {
        self.reduction
    }

    /// Sums the gradients of `optimizers` as `reduction` says: with buckets, installs the hooks on
    /// their parameters (the first update then records their order). Called once by the engine,
    /// before the first update.
    pub(crate) fn attach(&mut self, optimizers: &[&AdamW], reduction: Reduction) -> Result<()> {
        self.reduction = reduction;
        self.overlap = None;
        if reduction.bucket_bytes > 0 {
            let parameters: Vec<Tensor> = optimizers.iter().flat_map(|o| o.parameters()).collect();
            self.overlap = Some(Overlap::Recording(GradientReducer::new(&self.group, &parameters)?));
        }
        Ok(())
    }

    /// Removes the hooks (the engine's run is over; the model may train again elsewhere).
    pub(crate) fn detach(&mut self) {
        self.overlap = None;
    }

    /// Called before the backward of an update's last micro-batch: the hooks record the
    /// gradients' order (the first update) or launch the buckets as they fill.
    pub(crate) fn before_last_backward(&mut self) {
        match self.overlap.as_mut() {
            Some(Overlap::Recording(reducer)) => reducer.record(),
            Some(Overlap::Armed { reducer, .. }) => reducer.arm(),
            None => {}
        }
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
    /// ([`indolm_torch::hooks::Ranks`]).
    pub(crate) fn group(&mut self) -> &mut ProcessGroup {
        &mut self.group
    }

    /// Which rows of every global micro-batch this rank trains on.
    pub(crate) fn slice(&self) -> Slice {
        Slice { rank: self.rank(), world: self.world_size() }
    }

    /// Sums the gradients of `optimizers` (the same list as [`DataParallel::attach`]'s) across
    /// ranks in place: the buckets the hooks launched during backward are waited for (on CUDA the
    /// device waits, not the host) and the rest all-reduced now; at the first update, where the
    /// hooks only recorded the gradients' order, the optimizers lay their flat buffers out in that
    /// order, every buffer is summed now, and the buckets are set for the next updates. Then this
    /// update's `loss` (a scalar on the device) and the stop flag, in one small bucket. Nothing is
    /// read back and nothing waits for the device: the flag is written on the device by a fill
    /// kernel, not copied from the host.
    pub(crate) fn reduce(&mut self, optimizers: &mut [&mut AdamW], loss: &Tensor, stop: bool) -> Result<Reduced> {
        let started = std::time::Instant::now();
        let now: Vec<Tensor> = match self.overlap.take() {
            None => optimizers.iter_mut().flat_map(|o| o.gradient_buffers()).collect(),
            Some(Overlap::Recording(mut reducer)) => {
                // Each optimizer's parameters, in the reducer's list, from `starts[k]` on.
                let starts: Vec<usize> = optimizers
                    .iter()
                    .scan(0, |next, o| {
                        let start = *next;
                        *next += o.parameter_tensors();
                        Some(start)
                    })
                    .collect();
                let mut ready = vec![usize::MAX; optimizers.iter().map(|o| o.parameter_tensors()).sum()];
                for (position, &index) in recorded_order(&mut reducer).iter().enumerate() {
                    ready[index] = position;
                }
                for (o, &start) in optimizers.iter_mut().zip(&starts) {
                    o.flatten_in_order(&ready[start..start + o.parameter_tensors()]);
                }
                let now = optimizers.iter_mut().flat_map(|o| o.gradient_buffers()).collect();
                let state = self.arm_buckets(reducer, optimizers, &starts, &ready)?;
                self.overlap = Some(state);
                now
            }
            Some(Overlap::Armed { mut reducer, buckets }) => {
                let finished = reducer.finish();
                self.overlap = Some(Overlap::Armed { reducer, buckets });
                let during = finished.map_err(|e| self.lost(e))?;
                self.overlap_counts.buckets += buckets as u64;
                self.overlap_counts.during_backward += during as u64;
                optimizers.iter().flat_map(|o| o.loose_gradients()).collect()
            }
        };
        for g in now {
            let mut sum = if self.reduction.bf16 { g.to_kind(Kind::BFloat16) } else { g.shallow_clone() };
            if let Err(e) = self.group.all_reduce(&mut sum, ReduceOp::Sum, "the gradient all-reduce") {
                return Err(self.lost(e));
            }
            if self.reduction.bf16 {
                tch::no_grad(|| g.shallow_clone().copy_(&sum));
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

    /// Cuts the optimizers' flat gradient buffers into buckets ([`plan_buckets`], `ready` the
    /// recorded order, `starts` where each optimizer's parameters begin in the reducer's list)
    /// and hands them to `reducer`. Without any flat buffer (nothing had a gradient) every update
    /// sums after backward.
    fn arm_buckets(
        &mut self,
        mut reducer: GradientReducer,
        optimizers: &[&mut AdamW],
        starts: &[usize],
        ready: &[usize],
    ) -> Result<Overlap> {
        let (mut layouts, mut buffers) = (Vec::new(), Vec::new());
        for (o, &start) in optimizers.iter().zip(starts) {
            for (grads, members) in o.flat_layouts() {
                let bytes = grads.kind().elt_size_in_bytes();
                layouts.push((members.into_iter().map(|(i, n)| (start + i, n)).collect::<Vec<_>>(), bytes));
                buffers.push(grads);
            }
        }
        let plans = plan_buckets(&layouts, ready, self.reduction.bucket_bytes);
        self.check_same_plan(optimizers, ready, &plans)?;
        let mut bucket_of = vec![None; ready.len()];
        for (b, plan) in plans.iter().enumerate() {
            for &m in &plan.members {
                bucket_of[m] = Some(b);
            }
        }
        let slices: Vec<Tensor> = plans.iter().map(|p| buffers[p.layout].narrow(0, p.offset, p.len)).collect();
        reducer.set_buckets(&slices, &bucket_of, self.reduction.bf16)?;
        Ok(Overlap::Armed { reducer, buckets: plans.len() })
    }

    /// Stops the job unless every rank recorded the same order of gradients (`ready`: per
    /// parameter, its position in backward, `usize::MAX` for none) and made the same bucket plan,
    /// before any bucket is summed: a parameter that gets a gradient on some ranks only, or a
    /// branch that depends on the data, would otherwise sum mismatched slices of the buffers, or
    /// hang. The positions and a hash of the plan are all-reduced with MIN and with MAX (once,
    /// at the first update); where they differ, the first parameter whose position differs is
    /// named.
    fn check_same_plan(&mut self, optimizers: &[&mut AdamW], ready: &[usize], plans: &[BucketPlan]) -> Result<()> {
        let device = self.group.device();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for p in plans {
            (p.layout, p.offset, p.len, &p.members).hash(&mut hasher);
        }
        let mut values: Vec<i64> = ready.iter().map(|&r| if r == usize::MAX { -1 } else { r as i64 }).collect();
        values.push(hasher.finish() as i64);
        let values_here = Tensor::from_slice(&values).to_device(device);
        let (low, high) =
            self.min_and_max(&values_here, "the check of the gradient order").map_err(|e| self.lost(e))?;
        let read = |t: &Tensor| Vec::<i64>::try_from(t.to_device(tch::Device::Cpu));
        let (low, high) = match (read(&low), read(&high)) {
            (Ok(low), Ok(high)) => (low, high),
            (Err(e), _) | (_, Err(e)) => {
                return Err(Error::torch(format!("reading the gradient order's check on rank {}", self.rank()), e))
            }
        };
        let Some(at) = (0..values.len()).find(|&i| low[i] != high[i]) else { return Ok(()) };
        let names: Vec<String> = optimizers.iter().flat_map(|o| o.parameter_names()).collect();
        let position = |p: i64| if p < 0 { "none (no gradient)".to_string() } else { p.to_string() };
        let why = match names.get(at) {
            Some(name) if at < ready.len() => format!(
                "the ranks' backward passes differ: parameter {name} got its gradient at position {} on some ranks and {} on others (this rank: {}); every rank must compute the same graph (no parameter used on some ranks only, no branch on the data)",
                position(low[at]),
                position(high[at]),
                position(values[at]),
            ),
            _ => "the ranks made different gradient bucket plans from the same gradient order (this is a bug in indolm; please report it)".to_string(),
        };
        Err(Error::training(format!("rank {} of {}", self.rank(), self.world_size()), why))
    }

    /// Lets go of the data parallelism, handing back its group (the hooks removed first).
    pub fn into_group(self) -> ProcessGroup {
        let DataParallel { overlap, group, .. } = self;
        drop(overlap);
        group
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
        let (low, high) = self.min_and_max(&Tensor::stack(&[sum, squares], 0), "the weight checksum")?;
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

    /// `values` all-reduced with MIN and with MAX (`what (min)`, `what (max)`): the two are equal
    /// exactly where every rank holds the same value.
    fn min_and_max(&mut self, values: &Tensor, what: &str) -> Result<(Tensor, Tensor)> {
        let (mut low, mut high) = (values.copy(), values.copy());
        self.group.all_reduce(&mut low, ReduceOp::Min, &format!("{what} (min)"))?;
        self.group.all_reduce(&mut high, ReduceOp::Max, &format!("{what} (max)"))?;
        Ok((low, high))
    }

    /// Whether rank 0 decided `decision` (the others pass anything): every rank gets rank 0's
    /// answer, once every rank has called it (a decision after an evaluation only rank 0 made).
    pub(crate) fn agree(&mut self, decision: bool) -> Result<bool> {
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

/// The order the reducer recorded; test-only (not a user option): with
/// `INDOLM_TEST_SWAP_GRADIENT_ORDER` set, its first two entries swapped, as a rank whose backward
/// differs would record it.
fn recorded_order(reducer: &mut GradientReducer) -> Vec<usize> {
    let mut order = reducer.order();
    if std::env::var_os("INDOLM_TEST_SWAP_GRADIENT_ORDER").is_some() && order.len() > 1 {
        order.swap(0, 1);
    }
    order
}
