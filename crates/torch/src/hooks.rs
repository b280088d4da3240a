//! Checkpoint hooks: evaluations the trainer runs on the model at every checkpoint (the bias
//! evaluation, IndoMMLU). The trait lives here, below both `train` and `eval`, so that the
//! evaluations implement it and the trainer calls it without either knowing the other; the
//! command line builds a recipe's hooks and hands them to the trainer.
//!
//! In a data-parallel run every rank calls the hooks with the run's [`Ranks`]: each rank
//! scores a share of the evaluation's batches ([`Share`]), the values are combined exactly, and
//! rank 0 alone writes. The batches are planned on every rank as one process plans them (the
//! same order, padding and shapes), whole batches go to the ranks in turn, and each value comes
//! from one rank only: the combined values, and so every file and curve, are bit for bit those
//! of one process.
use crate::data::tokenizer::TextTokenizer;
use crate::distributed::{ProcessGroup, ReduceOp};
use crate::error::{Error, Result};
use crate::model::BertForMaskedLM;
use indolm_core::logger::Logger;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::Instant;
use tch::{Device, Tensor};

/// An evaluation run at every checkpoint.
pub trait CheckpointHook {
    /// What the hook does, for the log line that times it ("bias evaluation").
    fn name(&self) -> &str;

    /// Also run every this many steps between checkpoints (the records then go to
    /// `<run>/evals/step-<N>/`); `None`: at checkpoints only.
    fn every(&self) -> Option<u64> {
        None
    }

    /// Evaluates `model` at `step`, called on every rank of `ranks`: each scores its share,
    /// and rank 0 writes the results into `checkpoint_dir` (atomically) and to `logger`
    /// (TensorBoard scalars and a summary line). Every rank must make the same collective calls
    /// in the same order: an error that only some ranks could meet (a write) comes after the
    /// scoring.
    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        checkpoint_dir: &Path,
        logger: &mut Logger,
        ranks: &Ranks<'_>,
    ) -> Result<()>;
}

/// What a scorer needs to score its share of an evaluation: which batches are this rank's, and
/// how the ranks' values are combined. Every rank makes the same plan of batches and offers
/// them in the same order.
pub trait Share {
    /// Whether this rank scores the next batch of the plan (one of `rows` rows); every batch
    /// is offered, in order, on every rank. The batches go to the ranks in turn, counted over
    /// everything offered since [`Ranks::shared_work`] last reported.
    fn take(&self, rows: usize) -> bool;

    /// Gives every rank every value: each value was set by the one rank that scored it, and
    /// left 0.0 by the others. The values travel as their bit patterns, summed as integers
    /// (`x + 0` is exact), so they arrive unchanged, whatever the backend. `what` names the
    /// values in errors.
    fn combine(&self, values: &mut [f64], what: &str) -> Result<()>;
}

/// Whether this process scores the next batch: always when there is no share.
pub fn takes(share: Option<&dyn Share>, rows: usize) -> bool {
    share.is_none_or(|s| s.take(rows))
}

/// What this rank did since [`Ranks::shared_work`] last reported.
#[derive(Debug, Clone, Copy, Default)]
struct Work {
    /// Batches offered (every rank's plan alike), and their rows.
    offered: usize,
    offered_rows: usize,
    /// Batches this rank scored, and their rows.
    batches: usize,
    rows: usize,
    /// Seconds spent waiting in [`Share::combine`].
    waited: f64,
}

/// The processes that share an evaluation: one process alone, or the ranks of a
/// data-parallel run's process group.
pub struct Ranks<'g> {
    group: Option<RefCell<&'g mut ProcessGroup>>,
    rank: usize,
    world: usize,
    work: Cell<Work>,
}

impl Ranks<'static> {
    /// One process, which scores every batch.
    pub fn single() -> Self {
        Ranks { group: None, rank: 0, world: 1, work: Cell::default() }
    }
}

impl<'g> Ranks<'g> {
    /// The ranks of `group`; one process when there is none.
    pub fn of(group: Option<&'g mut ProcessGroup>) -> Self {
        match group {
            None => Ranks { group: None, rank: 0, world: 1, work: Cell::default() },
            Some(group) => Ranks {
                rank: group.rank(),
                world: group.world_size(),
                group: Some(RefCell::new(group)),
                work: Cell::default(),
            },
        }
    }

    /// This process's rank (0 alone).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Whether this process writes the results (rank 0).
    pub fn leader(&self) -> bool {
        self.rank == 0
    }

    /// Each rank's share of the work since the last call (batches and rows scored, and its
    /// `seconds` in the evaluation less the time it waited for the others), gathered with one
    /// collective that every rank calls at the same point; then the count starts again. `None`
    /// for one process; else one line for the log:
    /// `shared by 2 ranks: rank 0 scored 4 of 7 batches (1200 of 2300 rows) in 0.41s; rank 1 …`.
    pub fn shared_work(&self, seconds: f64) -> Result<Option<String>> {
        let work = self.work.replace(Work::default());
        if self.group.is_none() {
            return Ok(None);
        }
        let mut table = vec![0.0; 3 * self.world];
        let mine = [work.batches as f64, work.rows as f64, (seconds - work.waited).max(0.0)];
        table[3 * self.rank..3 * self.rank + 3].copy_from_slice(&mine);
        self.combine(&mut table, "the evaluation's work per rank")?;
        self.work.set(Work::default());
        let parts: Vec<String> = table
            .chunks(3)
            .enumerate()
            .map(|(rank, w)| {
                format!(
                    "rank {rank} scored {} of {} batches ({} of {} rows) in {:.2}s",
                    w[0] as usize, work.offered, w[1] as usize, work.offered_rows, w[2]
                )
            })
            .collect();
        Ok(Some(format!("shared by {} ranks: {}", self.world, parts.join("; "))))
    }
}

impl Share for Ranks<'_> {
    fn take(&self, rows: usize) -> bool {
        let mut work = self.work.get();
        let mine = work.offered % self.world == self.rank;
        work.offered += 1;
        work.offered_rows += rows;
        if mine {
            work.batches += 1;
            work.rows += rows;
        }
        self.work.set(work);
        mine
    }

    fn combine(&self, values: &mut [f64], what: &str) -> Result<()> {
        // Every rank holds as many values (the same plan): none to combine is every rank's case.
        let Some(group) = self.group.as_ref().filter(|_| !values.is_empty()) else { return Ok(()) };
        let started = Instant::now();
        let mut group = group.borrow_mut();
        let bits: Vec<i64> = values.iter().map(|v| v.to_bits() as i64).collect();
        let mut tensor = Tensor::from_slice(&bits).to_device(group.device());
        if let Err(e) = group.all_reduce(&mut tensor, ReduceOp::Sum, what) {
            return Err(group.lost(e));
        }
        let summed = Vec::<i64>::try_from(tensor.to_device(Device::Cpu))
            .map_err(|e| Error::torch(format!("reading back {what} on rank {} of {}", self.rank, self.world), e))?;
        for (value, bits) in values.iter_mut().zip(summed) {
            *value = f64::from_bits(bits as u64);
        }
        let mut work = self.work.get();
        work.waited += started.elapsed().as_secs_f64();
        self.work.set(work);
        Ok(())
    }
}
