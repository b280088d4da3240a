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
//!
//! A failure on some ranks only (a libtorch error, the device out of memory on one rank's long
//! batch) must not leave the others waiting in a collective the failed rank never makes: shared
//! work runs inside [`Ranks::settled`] scopes, and every [`Share::combine`] first all-reduces a
//! small header of one slot per rank. A rank whose work failed fills its slot (with the depth of
//! the scope it failed in) when it settles that scope, which meets the others' next header
//! wherever they are; they then skip every collective until they settle the same scope, so the
//! ranks leave it together, each with an error, and go on in step (the trainer warns and trains
//! on).
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

/// Another rank's failure in shared work, agreed by every rank: the depth of the scope the ranks
/// leave together, and who failed.
#[derive(Debug, Clone)]
struct Unwinding {
    depth: usize,
    failed: Vec<usize>,
}

impl Unwinding {
    /// What a header showed (`failures`: the ranks that failed, with the depth of their scope),
    /// seen from a scope `depth` deep: the shallower of the failed scopes and this one is left
    /// together; `None` when no rank failed.
    fn from_header(failures: &[(usize, usize)], depth: usize) -> Option<Self> {
        let shallowest = failures.iter().map(|&(_, d)| d).min()?;
        Some(Unwinding { depth: shallowest.min(depth), failed: failures.iter().map(|&(r, _)| r).collect() })
    }
}

/// The processes that share an evaluation: one process alone, or the ranks of a
/// data-parallel run's process group.
pub struct Ranks<'g> {
    group: Option<RefCell<&'g mut ProcessGroup>>,
    rank: usize,
    world: usize,
    work: Cell<Work>,
    /// How many [`Ranks::settled`] scopes are open.
    depth: Cell<usize>,
    /// Set when a header showed another rank's failure: every collective is skipped until the
    /// scope it names settles.
    unwinding: RefCell<Option<Unwinding>>,
}

impl Ranks<'static> {
    /// One process, which scores every batch.
    pub fn single() -> Self {
        Ranks::of(None)
    }
}

impl<'g> Ranks<'g> {
    /// The ranks of `group`; one process when there is none.
    pub fn of(group: Option<&'g mut ProcessGroup>) -> Self {
        let (rank, world) = group.as_ref().map_or((0, 1), |g| (g.rank(), g.world_size()));
        Ranks {
            group: group.map(RefCell::new),
            rank,
            world,
            work: Cell::default(),
            depth: Cell::new(0),
            unwinding: RefCell::new(None),
        }
    }

    /// Runs `work` (`what`: "the bias evaluation") as a scope of shared work that every rank
    /// enters at the same point: when it fails on some ranks only, every rank leaves it with an
    /// error, together, and the ranks' collectives stay in step after it. Scopes nest; a failure
    /// is settled by the outermost scope that a failed rank settled with an error. One process
    /// returns `work`'s result as it is.
    pub fn settled<R>(&self, what: &str, work: impl FnOnce() -> Result<R>) -> Result<R> {
        let depth = self.depth.get() + 1;
        self.depth.set(depth);
        // Read first: the borrow must end before `work` runs (its combines may set it).
        let unwinding = self.unwinding.borrow().clone();
        let done = match unwinding {
            Some(u) => Err(self.peer_failure(&u, what)),
            None => work(),
        };
        self.depth.set(depth - 1);
        if self.group.is_none() {
            return done;
        }
        let pending = self.unwinding.borrow().clone();
        if let Some(u) = pending {
            // The failure was agreed inside this scope: no header (the failed ranks sent theirs
            // when they settled), and the scope it names ends here.
            if u.depth >= depth {
                *self.unwinding.borrow_mut() = None;
            }
            return Err(done.err().unwrap_or_else(|| self.peer_failure(&u, what)));
        }
        let failures = self.header(if done.is_err() { depth } else { 0 }, what)?;
        let Some(u) = Unwinding::from_header(&failures, depth) else { return done };
        if u.depth < depth {
            *self.unwinding.borrow_mut() = Some(u.clone());
        }
        Err(done.err().unwrap_or_else(|| self.peer_failure(&u, what)))
    }

    /// The error a rank meets when other ranks failed in shared work.
    fn peer_failure(&self, u: &Unwinding, what: &str) -> Error {
        let who = match u.failed.as_slice() {
            [one] => format!("rank {one}"),
            many => format!("ranks {}", many.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")),
        };
        Error::training(
            format!("{what} on rank {} of {}", self.rank, self.world),
            format!("{who} failed in its share (its own output says why); every rank stopped this work together"),
        )
    }

    /// Every rank's header: all-reduces one slot per rank, this rank's `mine` (the depth of the
    /// scope it failed in, or 0), and returns the ranks whose slot is set, with their depth.
    fn header(&self, mine: usize, what: &str) -> Result<Vec<(usize, usize)>> {
        let Some(group) = self.group.as_ref() else { return Ok(Vec::new()) };
        let mut group = group.borrow_mut();
        let mut slots = vec![0i64; self.world];
        slots[self.rank] = mine as i64;
        let mut tensor = Tensor::from_slice(&slots).to_device(group.device());
        let what = format!("{what} (whether every rank's share succeeded)");
        if let Err(e) = group.all_reduce(&mut tensor, ReduceOp::Sum, &what) {
            return Err(group.lost(e));
        }
        let summed = Vec::<i64>::try_from(tensor.to_device(Device::Cpu))
            .map_err(|e| Error::torch(format!("reading back {what} on rank {} of {}", self.rank, self.world), e))?;
        Ok(summed.into_iter().enumerate().filter(|&(_, d)| d > 0).map(|(r, d)| (r, d as usize)).collect())
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
        if self.group.is_none() || self.unwinding.borrow().is_some() {
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
        let unwinding = self.unwinding.borrow().clone();
        if let Some(u) = unwinding {
            return Err(self.peer_failure(&u, what));
        }
        // Every rank holds as many values (the same plan): none to combine is every rank's case.
        let Some(group) = self.group.as_ref().filter(|_| !values.is_empty()) else { return Ok(()) };
        let started = Instant::now();
        // The values go to the device before the header: a failure there is this rank's own,
        // settled by its scope like any other.
        let bits: Vec<i64> = values.iter().map(|v| v.to_bits() as i64).collect();
        let mut tensor = Tensor::f_from_slice(&bits)
            .and_then(|t| t.f_to_device(group.borrow().device()))
            .map_err(|e| Error::torch(format!("{what} on rank {} of {}", self.rank, self.world), e))?;
        let failures = self.header(0, what)?;
        if let Some(u) = Unwinding::from_header(&failures, self.depth.get()) {
            let error = self.peer_failure(&u, what);
            if self.depth.get() > 0 {
                *self.unwinding.borrow_mut() = Some(u);
            }
            return Err(error);
        }
        let mut group = group.borrow_mut();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::Launch;
    use std::time::Duration;

    /// Rank `rank` of two Gloo ranks in this process (one thread each) on `port`.
    fn join(rank: usize, port: u16) -> ProcessGroup {
        let launch = Launch {
            launcher: "torchrun",
            rank,
            world_size: 2,
            local_rank: rank,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            agent_store: false,
            gloo_interface: None,
            local_world_size: 2,
            restart_count: 0,
        };
        ProcessGroup::gloo(&launch, Duration::from_secs(30)).expect("joining the test's Gloo group")
    }

    fn injected(rank: usize) -> Error {
        Error::training(format!("rank {rank}'s share"), "injected")
    }

    /// Each rank's value, combined: rank r sets slot r to r + 1.
    fn combined(ranks: &Ranks<'_>) -> Result<Vec<f64>> {
        let mut values = vec![0.0; 2];
        values[ranks.rank()] = ranks.rank() as f64 + 1.0;
        ranks.combine(&mut values, "the test's values")?;
        Ok(values)
    }

    /// What one rank saw of four rounds of shared work, each an outer scope holding two inner
    /// ones (as the trainer's evaluations hold their hooks): whether each scope failed, and the
    /// values a final combine outside them gives (the ranks still in step).
    fn rounds(rank: usize, port: u16) -> Vec<String> {
        // The operation counter's test, beside this one, counts every thread's operations.
        crate::device::op_counts::exclude_this_thread();
        let mut group = join(rank, port);
        let ranks = Ranks::of(Some(&mut group));
        let mut seen = Vec::new();
        // (where rank 1 fails, where rank 0 fails): nowhere; rank 1 in the outer scope before
        // its inner ones, while rank 0 combines in the first; rank 1 in the first inner scope;
        // rank 1 in the outer scope and rank 0 in the first inner one at once (their two headers
        // meet).
        for (round, (fail1, fail0)) in
            [(None, None), (Some(0), None), (Some(1), None), (Some(0), Some(1))].iter().enumerate()
        {
            let fails = |at: usize| (rank == 1 && *fail1 == Some(at)) || (rank == 0 && *fail0 == Some(at));
            let mut inner = Vec::new();
            let outer = ranks.settled("outer", || {
                if fails(0) {
                    return Err(injected(rank));
                }
                for scope in 1..=2 {
                    let done = ranks.settled("inner", || {
                        if fails(scope) {
                            return Err(injected(rank));
                        }
                        combined(&ranks)
                    });
                    inner.push(done.is_ok());
                }
                match inner.iter().all(|&ok| ok) {
                    true => Ok(()),
                    false => Err(injected(rank)),
                }
            });
            let after = combined(&ranks).map(|v| format!("{v:?}")).unwrap_or_else(|e| e.to_string());
            seen.push(format!("round {round}: inner {inner:?}, outer ok {}, after {after}", outer.is_ok()));
        }
        drop(ranks);
        seen
    }

    /// A failure on one rank (or on both, in different scopes) ends the scope it names on every
    /// rank, the inner scopes after an inner failure still run on both, and the ranks' next
    /// combine outside meets: the same view on both ranks, within the collectives' timeout.
    #[test]
    fn a_failure_on_some_ranks_ends_the_shared_work_on_every_rank_and_keeps_them_in_step() {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
        let started = Instant::now();
        let threads: Vec<_> = (0..2).map(|rank| std::thread::spawn(move || rounds(rank, port))).collect();
        let seen: Vec<Vec<String>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let after = "after [1.0, 2.0]";
        assert_eq!(
            seen[0],
            vec![
                format!("round 0: inner [true, true], outer ok true, {after}"),
                // Rank 0 learns of rank 1's failure in its first inner combine, skips the rest.
                format!("round 1: inner [false, false], outer ok false, {after}"),
                format!("round 2: inner [false, true], outer ok false, {after}"),
                format!("round 3: inner [false, false], outer ok false, {after}"),
            ]
        );
        assert_eq!(
            seen[1],
            vec![
                format!("round 0: inner [true, true], outer ok true, {after}"),
                format!("round 1: inner [], outer ok false, {after}"),
                format!("round 2: inner [false, true], outer ok false, {after}"),
                format!("round 3: inner [], outer ok false, {after}"),
            ]
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    }
}
