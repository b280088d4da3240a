//! A c10d process group as a Rust value: join it from a [`Launch`] (Gloo for CPU tensors, or for
//! CUDA tensors of ranks that may share a GPU; NCCL for one CUDA device per process where this
//! build has it), then all-reduce, broadcast and barrier on `tch` tensors in place, and wait for
//! every rank through the rendezvous store ([`ProcessGroup::wait_for_all`]: how the ranks wait
//! for rank 0's checkpoints, evaluations and preparations, under their own limit rather than the
//! collectives' timeout). Each rank counts up a heartbeat in the group's store every half
//! second, and marks it when it leaves the group; a rank whose heartbeat stops for ten seconds
//! while the others wait is named by them in one error, and on NCCL (whose collectives hang
//! rather than fail) a watcher thread names it the same way wherever the survivors are. Every
//! failure (a refused port, a rank that never came, a timeout, a lost rank) is an [`Error`] with
//! c10d's message or indolm's, never an abort.
use super::Launch;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tch::{Device, Tensor};

extern "C" {
    #[allow(clippy::too_many_arguments)]
    fn indolm_c10d_gloo_new(
        store_host: *const c_char,
        store_port: c_int,
        store_server: c_int,
        prefix: *const c_char,
        interface: *const c_char,
        local_host: *const c_char,
        rank: c_int,
        world_size: c_int,
        timeout_ms: i64,
        error: *mut *mut c_char,
    ) -> *mut c_void;
    fn indolm_c10d_has_nccl() -> c_int;
    #[allow(clippy::too_many_arguments)]
    fn indolm_c10d_nccl_new(
        store_host: *const c_char,
        store_port: c_int,
        store_server: c_int,
        prefix: *const c_char,
        rank: c_int,
        world_size: c_int,
        device_index: c_int,
        timeout_ms: i64,
        error: *mut *mut c_char,
    ) -> *mut c_void;
    fn indolm_c10d_configure_logging();
    fn indolm_c10d_release_backend(group: *mut c_void);
    fn indolm_c10d_free(group: *mut c_void);
    fn indolm_c10d_free_message(message: *mut c_char);
    fn indolm_c10d_all_reduce(group: *mut c_void, tensor: *mut c_void, op: c_int, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_broadcast(group: *mut c_void, tensor: *mut c_void, root: c_int, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_barrier(group: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_error(group: *mut c_void, kind: *mut c_int, error: *mut *mut c_char) -> c_int;
    /// libc's: ends the process without running exit handlers.
    fn _exit(status: c_int) -> !;
    fn indolm_c10d_store_add(
        group: *mut c_void,
        key: *const c_char,
        delta: i64,
        value: *mut i64,
        error: *mut *mut c_char,
    ) -> c_int;
    fn indolm_c10d_store_delete(group: *mut c_void, key: *const c_char, error: *mut *mut c_char) -> c_int;
}

/// Which c10d backend a group runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    /// With its tensors on this device (the CPU, or a CUDA device ranks may share).
    Gloo(Device),
    /// On this CUDA device.
    Nccl(usize),
}

/// How often each rank counts up its heartbeat in the group's store.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// Heartbeats a rank may miss while the others wait for it before they call it lost: 20, ten
/// seconds. A heartbeat is one round trip to the store from a thread of its own, so a live rank
/// misses none however busy it is; a dead one is named ten seconds after it died, well inside
/// the 30 s torchrun's agent leaves the survivors between its SIGTERM and its SIGKILL.
const SILENT_BEATS: u32 = 20;

/// Heartbeats the rank serving the store, leaving, waits for another rank that neither leaves
/// nor beats (dead) before it goes on leaving.
const DEPARTURE_SILENT_BEATS: u32 = 4;

/// At most this long the rank serving the store waits, when it leaves, for the others to leave.
const DEPARTURE: Duration = Duration::from_secs(60);

/// What a rank adds to its heartbeat when it leaves the group (its process ends, normally or
/// with its own error): a count at or above it means the rank left, never that it was lost.
const LEFT: i64 = 1 << 40;

/// What a rank adds to its heartbeat when it fails alone, before it leaves: a count at or above it
/// means the rank failed, and the others' collectives with it will never finish.
const FAILED: i64 = 1 << 42;

/// The default limit of a wait for rank 0 (`--rank0-wait-timeout`): two hours, a slow
/// evaluation or the preparation of a corpus; a lost rank is named long before, by its heartbeat.
pub(crate) const DEFAULT_RANK0_WAIT: Duration = Duration::from_secs(7200);

/// The heartbeat's interval: [`HEARTBEAT`], or (test-only, not a user option)
/// `INDOLM_TEST_HEARTBEAT_MS` milliseconds, so that a test sees a silent rank named in seconds.
fn heartbeat_interval() -> Duration {
    std::env::var("INDOLM_TEST_HEARTBEAT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(HEARTBEAT, Duration::from_millis)
}

/// A thread of the group's (the heartbeat, the NCCL watcher), stopped and joined before the group
/// is freed.
struct Background {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Background {
    /// Runs `tick` every `period` until stopped or until it returns false.
    fn every(period: Duration, mut tick: impl FnMut() -> bool + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                if !tick() {
                    return;
                }
                for _ in 0..10 {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(period / 10);
                }
            }
        });
        Background { stop, thread }
    }

    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Raises a flag for as long as it lives.
struct Raised(Arc<AtomicBool>);

impl Raised {
    fn new(flag: &Arc<AtomicBool>) -> Self {
        flag.store(true, Ordering::SeqCst);
        Raised(Arc::clone(flag))
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// How long indolm's own calls to the store (the heartbeats' readings, the waits, the marks a
/// rank leaves) may take before the store is called unreachable: a host that died takes its
/// connections with it silently, and a call to it would otherwise block until TCP gives up.
const STORE_DEADLINE: Duration = Duration::from_secs(5);

/// A store call handed to the group's store thread: the key, the delta, where the answer goes.
type StoreCall = (String, i64, std::sync::mpsc::Sender<std::result::Result<i64, String>>);

/// The thread that makes the group's store calls for callers that must not block (the
/// watchers, the waits, the marks): each caller waits for its answer [`STORE_DEADLINE`] at most.
struct StoreThread {
    calls: std::sync::mpsc::Sender<StoreCall>,
}

/// The group's store, as the shim reaches it (the group's raw pointer), with the store thread
/// when its calls have a deadline. Made only from a live group, and used only while it lives:
/// its threads are joined before the group is freed (the store thread too, unless a call of
/// its is still blocked: the group is then left unfreed).
#[derive(Clone)]
struct Store(usize, Option<Arc<StoreThread>>);

impl Store {
    /// Adds `delta` to the counter `key` (a key never set counts 0) and returns the sum; with
    /// `delta` 0, reads the counter without waiting for it to exist. Through the store thread,
    /// when there is one, waiting [`STORE_DEADLINE`] at most.
    fn add(&self, key: &str, delta: i64) -> std::result::Result<i64, String> {
        let Some(thread) = self.1.as_ref() else { return self.add_now(key, delta) };
        let (answer, answered) = std::sync::mpsc::channel();
        thread.calls.send((key.into(), delta, answer)).map_err(|_| "the store thread has ended".to_string())?;
        answered
            .recv_timeout(STORE_DEADLINE)
            .unwrap_or_else(|_| Err(format!("no answer from the store within {} s", STORE_DEADLINE.as_secs())))
    }

    /// [`Store::add`] on this thread, blocking as long as the store does.
    fn add_now(&self, key: &str, delta: i64) -> std::result::Result<i64, String> {
        let key = CString::new(key).map_err(|e| e.to_string())?;
        let (mut value, mut error) = (0i64, std::ptr::null_mut());
        // SAFETY: the group is live (see `Store`); the key outlives the call; `error` is set only
        // on failure.
        if unsafe { indolm_c10d_store_add(self.0 as *mut c_void, key.as_ptr(), delta, &mut value, &mut error) } != 0 {
            Ok(value)
        } else {
            Err(take_message(error))
        }
    }

    /// Removes `key` (a clean-up: on this thread).
    fn delete(&self, key: &str) -> std::result::Result<(), String> {
        let key = CString::new(key).map_err(|e| e.to_string())?;
        let mut error = std::ptr::null_mut();
        // SAFETY: as in `add`.
        if unsafe { indolm_c10d_store_delete(self.0 as *mut c_void, key.as_ptr(), &mut error) } != 0 {
            Ok(())
        } else {
            Err(take_message(error))
        }
    }

    /// Every rank's heartbeat count, in rank order.
    fn heartbeats(&self, world: usize) -> std::result::Result<Vec<i64>, String> {
        (0..world).map(|r| self.add(&heartbeat_key(r), 0)).collect()
    }
}

/// The store key of a rank's heartbeat.
fn heartbeat_key(rank: usize) -> String {
    format!("heartbeat/{rank}")
}

/// The other ranks, as their heartbeats told at one reading.
#[derive(Debug, Default, PartialEq)]
struct Heard {
    /// Ranks that left the group: their process ended (normally, or with its own error).
    left: Vec<usize>,
    /// Ranks that announced a failure of their own before leaving ([`ProcessGroup::announce_failure`]).
    failed: Vec<usize>,
    /// Ranks whose heartbeat had not moved for the silence limit: their process or host died.
    silent: Vec<usize>,
    /// How long the longest silence was.
    silent_for: Duration,
}

impl Heard {
    /// What happened to the ranks that are gone, in words; `None` when none is.
    fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.silent.is_empty() {
            parts.push(format!(
                "{} stopped (no heartbeat in the store): silent for {:.1} s",
                ranks(&self.silent),
                self.silent_for.as_secs_f64()
            ));
        }
        if !self.failed.is_empty() {
            parts.push(format!("{} failed (its own output says why)", ranks(&self.failed)));
        }
        if !self.left.is_empty() {
            parts.push(format!("{} left the job before this point (its own output says why)", ranks(&self.left)));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// "rank 3" or "ranks 8, 9, 10".
fn ranks(list: &[usize]) -> String {
    let names: Vec<String> = list.iter().map(|r| r.to_string()).collect();
    match names.len() {
        1 => format!("rank {}", names[0]),
        _ => format!("ranks {}", names.join(", ")),
    }
}

/// The other ranks' heartbeats as one rank watches them: each one's last count and when it was
/// seen to move (or the watch began).
struct Watch {
    rank: usize,
    last: Vec<(i64, Instant)>,
    /// When the heartbeats were last read.
    read_at: Instant,
}

impl Watch {
    /// Reads every heartbeat once.
    fn start(store: &Store, rank: usize, world: usize) -> std::result::Result<Self, String> {
        let now = Instant::now();
        let last = store.heartbeats(world)?.into_iter().map(|count| (count, now)).collect();
        Ok(Watch { rank, last, read_at: now })
    }

    /// Reads the heartbeats again: the ranks that left, and those whose count has not moved for
    /// `silent_after` (a rank that has not beaten yet, still starting, is not silent); an error
    /// when the store cannot be reached.
    fn check(&mut self, store: &Store, silent_after: Duration) -> std::result::Result<Heard, String> {
        let counts = store.heartbeats(self.last.len())?;
        let now = Instant::now();
        self.read_at = now;
        let mut heard = Heard::default();
        for (r, (count, last)) in counts.into_iter().zip(self.last.iter_mut()).enumerate() {
            if r == self.rank {
                continue;
            }
            if count >= FAILED {
                heard.failed.push(r);
            } else if count >= LEFT {
                heard.left.push(r);
            } else if count != last.0 {
                *last = (count, now);
            } else if count > 0 && now.duration_since(last.1) >= silent_after {
                heard.silent.push(r);
                heard.silent_for = heard.silent_for.max(now.duration_since(last.1));
            }
        }
        Ok(heard)
    }
}

/// How an all-reduce combines the ranks' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum over ranks.
    Sum,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
}

/// This process's membership of a c10d process group.
pub struct ProcessGroup {
    raw: *mut c_void,
    rank: usize,
    world_size: usize,
    /// Where every tensor of this group's collectives lives: the CPU or a CUDA device for Gloo,
    /// the process's CUDA device for NCCL.
    device: Device,
    /// The heartbeat's interval ([`HEARTBEAT`]).
    beat: Duration,
    /// The limit of one [`ProcessGroup::wait_for_all`] (`--rank0-wait-timeout`).
    rank0_wait: Duration,
    /// The calls of [`ProcessGroup::wait_for_all`] so far.
    waits: u64,
    /// Whether this process serves the store (rank 0 outside torchrun): the store ends with it.
    serves_store: bool,
    /// Whether torchrun's agent serves the store.
    agent_store: bool,
    /// Raised while this rank is in [`ProcessGroup::wait_for_all`], which names a lost rank
    /// itself (the NCCL watcher then leaves that to it).
    waiting: Arc<AtomicBool>,
    /// `heartbeat/<rank>` in the store, counting up every beat.
    heartbeat: Option<Background>,
    /// On NCCL: the threads that end the process, with one line, when NCCL's watchdog finds a
    /// failure (one thread), or a rank's heartbeat stops or it announces a failure (the other).
    watchers: Vec<Background>,
    /// The thread that makes indolm's store calls under [`STORE_DEADLINE`] (shared by the
    /// watchers and the waits), and its handle.
    store_thread: Option<(Arc<StoreThread>, std::thread::JoinHandle<()>)>,
    /// Whether this rank announced a failure of its own.
    failed: bool,
}

// SAFETY: c10d process groups are used from any thread (PyTorch's DDP calls them from its
// autograd threads); indolm calls one group from one thread at a time (`&mut self`).
unsafe impl Send for ProcessGroup {}

/// A C string of an environment-given text, or an error naming the variable.
fn c_text(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::argument(what, format!("{s:?} contains a NUL byte")))
}

impl ProcessGroup {
    /// Joins the Gloo process group the launch describes, its collectives on the CPU; every rank
    /// must call this within `timeout`, which also bounds each collective.
    pub fn gloo(launch: &Launch, timeout: Duration) -> Result<Self> {
        Self::gloo_on(launch, Device::Cpu, timeout)
    }

    /// Joins the Gloo process group the launch describes, its collectives taking tensors on
    /// `device`: the CPU, or a CUDA device (Gloo stages them through the host, so several ranks
    /// may share one GPU, which NCCL refuses). `timeout` bounds the join and each collective.
    pub(crate) fn gloo_on(launch: &Launch, device: Device, timeout: Duration) -> Result<Self> {
        let host = c_text(&launch.master_addr, "MASTER_ADDR")?;
        let prefix = c_text(&launch.store_prefix("gloo"), "TORCHELASTIC_RESTART_COUNT")?;
        let interface = c_text(launch.gloo_interface.as_deref().unwrap_or(""), "GLOO_SOCKET_IFNAME")?;
        let local = c_text(launch.gloo_host().unwrap_or(""), "MASTER_ADDR")?;
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: sets c10's log level; the strings outlive the call; `error` is set only on failure.
        unsafe { indolm_c10d_configure_logging() };
        let raw = unsafe {
            indolm_c10d_gloo_new(
                host.as_ptr(),
                launch.master_port as c_int,
                launch.serves_store() as c_int,
                prefix.as_ptr(),
                interface.as_ptr(),
                local.as_ptr(),
                launch.rank as c_int,
                launch.world_size as c_int,
                timeout.as_millis() as i64,
                &mut error,
            )
        };
        Self::joined(raw, error, launch, Backend::Gloo(device))
    }

    /// Whether this build can make NCCL groups (it was compiled where CUDA's headers were found).
    pub(crate) fn has_nccl() -> bool {
        // SAFETY: reads a constant.
        unsafe { indolm_c10d_has_nccl() != 0 }
    }

    /// Joins the NCCL process group the launch describes, on CUDA device `device` (which becomes
    /// this process's current device); `timeout` bounds the join and each collective.
    pub(crate) fn nccl(launch: &Launch, device: usize, timeout: Duration) -> Result<Self> {
        if !Self::has_nccl() {
            return Err(Error::argument(
                "--device",
                format!(
                    "launched as rank {} of {} on CUDA, but this indolm was built without NCCL (CUDA's headers were not found at build time): run `make setup` and rebuild, or use --device cpu (Gloo)",
                    launch.rank, launch.world_size
                ),
            ));
        }
        let host = c_text(&launch.master_addr, "MASTER_ADDR")?;
        let prefix = c_text(&launch.store_prefix("nccl"), "TORCHELASTIC_RESTART_COUNT")?;
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: as in `gloo_on`.
        unsafe { indolm_c10d_configure_logging() };
        let raw = unsafe {
            indolm_c10d_nccl_new(
                host.as_ptr(),
                launch.master_port as c_int,
                launch.serves_store() as c_int,
                prefix.as_ptr(),
                launch.rank as c_int,
                launch.world_size as c_int,
                device as c_int,
                timeout.as_millis() as i64,
                &mut error,
            )
        };
        Self::joined(raw, error, launch, Backend::Nccl(device))
    }

    fn joined(raw: *mut c_void, error: *mut c_char, launch: &Launch, backend: Backend) -> Result<Self> {
        let (name, device) = match backend {
            Backend::Gloo(device) => ("Gloo", device),
            Backend::Nccl(index) => ("NCCL", Device::Cuda(index)),
        };
        if raw.is_null() {
            return Err(Error::system(
                format!(
                    "joining the {name} process group (rank {} of {}, store {}:{})",
                    launch.rank, launch.world_size, launch.master_addr, launch.master_port
                ),
                take_message(error),
            ));
        }
        let mut group = ProcessGroup {
            raw,
            rank: launch.rank,
            world_size: launch.world_size,
            device,
            beat: heartbeat_interval(),
            rank0_wait: DEFAULT_RANK0_WAIT,
            waits: 0,
            serves_store: launch.serves_store(),
            agent_store: launch.agent_store,
            waiting: Arc::new(AtomicBool::new(false)),
            heartbeat: None,
            watchers: Vec::new(),
            store_thread: None,
            failed: false,
        };
        group.store_thread = Some(group.start_store_thread());
        group.heartbeat = Some(group.start_heartbeat());
        if let Backend::Nccl(_) = backend {
            group.watchers = vec![group.start_nccl_error_watcher(), group.start_nccl_heartbeat_watcher()];
        }
        Ok(group)
    }

    /// The group's store, its calls under [`STORE_DEADLINE`] through the store thread.
    fn store(&self) -> Store {
        Store(self.raw as usize, self.store_thread.as_ref().map(|(t, _)| Arc::clone(t)))
    }

    /// The thread that makes the calls of [`ProcessGroup::store`] (it ends when every sender is
    /// gone).
    fn start_store_thread(&self) -> (Arc<StoreThread>, std::thread::JoinHandle<()>) {
        let (calls, received) = std::sync::mpsc::channel::<StoreCall>();
        let direct = Store(self.raw as usize, None);
        let handle = std::thread::spawn(move || {
            for (key, delta, answer) in received {
                let _ = answer.send(direct.add_now(&key, delta));
            }
        });
        (Arc::new(StoreThread { calls }), handle)
    }

    /// The heartbeat: its own thread, calling the store directly (a beat that blocks on a dead
    /// store delays only the beats).
    fn start_heartbeat(&self) -> Background {
        let (store, key) = (Store(self.raw as usize, None), heartbeat_key(self.rank));
        // When the store is gone, the beats stop (the collectives and waits will say so).
        Background::every(self.beat, move || store.add(&key, 1).is_ok())
    }

    /// Tells the other ranks, through the store, that this rank failed alone (its own error,
    /// which it is about to report): their watchers and waits then name it at once rather than
    /// wait in a collective it will never join. Called once, before the group is let go.
    pub fn announce_failure(&mut self) {
        if !self.failed {
            self.failed = true;
            let _ = self.store().add(&heartbeat_key(self.rank), FAILED);
        }
    }

    /// NCCL's collectives return once queued: its errors and timeouts are found by its watchdog
    /// thread, and a peer lost over NVLink usually hangs the collective rather than failing it.
    /// With the shim's settings the watchdog records an error and aborts the communicators
    /// without taking the process down (`TORCH_NCCL_ASYNC_ERROR_HANDLING=2`). This thread asks
    /// the group for that error every beat, and nothing else (the heartbeats are read by
    /// [`ProcessGroup::start_nccl_heartbeat_watcher`], so that no store call delays it); on an
    /// error it ends the process as a failed collective ends a Gloo rank: one line naming the rank
    /// that stopped, and exit status 1, even while the main thread waits on the device for a
    /// collective that will never finish.
    fn start_nccl_error_watcher(&self) -> Background {
        let (raw, store, rank, world, beat, agent) =
            (self.raw as usize, self.store(), self.rank, self.world_size, self.beat, self.agent_store);
        Background::every(beat, move || {
            // SAFETY: the group outlives this thread (Drop joins it before freeing the group).
            if let Some(cause) = unsafe { nccl_error(raw as *mut c_void) } {
                let failure = Error::system(format!("NCCL collective on rank {rank} of {world}"), cause);
                end_process(&lost_error(failure, &lost_ranks(&store, rank, world, beat, agent)));
            }
            true
        })
    }

    /// The other half of the NCCL watch, on a thread of its own so that a store that answers
    /// late (each reading waits [`STORE_DEADLINE`] at most) never delays NCCL's error check:
    /// the other ranks' heartbeats, read every beat. A rank silent for [`SILENT_BEATS`] beats, or
    /// one that announced a failure of its own (not a rank that left normally: its process ended,
    /// and this one may still have work of its own), ends the process as a failed collective ends
    /// a Gloo rank. During [`ProcessGroup::wait_for_all`] the wait names them itself.
    fn start_nccl_heartbeat_watcher(&self) -> Background {
        let (store, rank, world, beat) = (self.store(), self.rank, self.world_size, self.beat);
        let waiting = Arc::clone(&self.waiting);
        let mut watch: Option<Watch> = None;
        Background::every(beat, move || {
            if waiting.load(Ordering::SeqCst) {
                watch = None;
                return true;
            }
            let current = watch.take().map_or_else(|| Watch::start(&store, rank, world), Ok);
            // A store that cannot be read is left to the collectives: it ends with rank 0's
            // process, which may have finished its run normally.
            let Ok(mut current) = current else { return true };
            if let Ok(heard) = current.check(&store, beat * SILENT_BEATS) {
                if !heard.silent.is_empty() || !heard.failed.is_empty() {
                    let gone = Heard { left: Vec::new(), ..heard };
                    let failure = Error::system(
                        format!("NCCL collectives on rank {rank} of {world}"),
                        "a rank stopped or failed while the job runs (its collectives cannot finish)",
                    );
                    end_process(&lost_error(failure, &gone.describe().unwrap_or_default()));
                }
            }
            watch = Some(current);
            true
        })
    }

    /// Sets the limit of each [`ProcessGroup::wait_for_all`] (`--rank0-wait-timeout`; default
    /// [`DEFAULT_RANK0_WAIT`]).
    pub(crate) fn set_rank0_wait_timeout(&mut self, limit: Duration) {
        self.rank0_wait = limit;
    }

    /// Returns once every rank has called it, waiting through the rendezvous store rather than in
    /// a collective: how the ranks wait for rank 0's checkpoints, evaluations and preparations
    /// (`what` names that work in errors: "rank 0's checkpoint at step 20"). The wait is bounded
    /// by [`ProcessGroup::set_rank0_wait_timeout`], not by the collectives' timeout; meanwhile the
    /// other ranks' heartbeats are read every beat, and a rank that left the job, one whose
    /// heartbeat stopped for [`SILENT_BEATS`] beats (ten seconds) or a store that is gone ends the
    /// wait with one error naming it. Every rank must make the same calls in the same order (the
    /// n-th call of each meets the n-th of the others).
    pub fn wait_for_all(&mut self, what: &str) -> Result<()> {
        let (store, world, beat) = (self.store(), self.world_size as i64, self.beat);
        let key = format!("wait/{}", self.waits);
        self.waits += 1;
        let context = format!("waiting for {what} on rank {} of {}", self.rank, self.world_size);
        let resume = "the last checkpoint is intact: resume with --resume latest";
        let agent = self.agent_store;
        let lost = |who: String| Error::training(context.as_str(), format!("{who}; {resume}"));
        let _waiting = Raised::new(&self.waiting);
        store.add(&key, 1).map_err(|e| lost(store_gone(agent, &e)))?;
        let started = Instant::now();
        let mut watch = Watch::start(&store, self.rank, self.world_size).map_err(|e| lost(store_gone(agent, &e)))?;
        let mut pause = Duration::from_millis(1);
        loop {
            if store.add(&key, 0).map_err(|e| lost(store_gone(agent, &e)))? >= world {
                break;
            }
            if watch.read_at.elapsed() >= beat {
                let heard = watch.check(&store, beat * SILENT_BEATS).map_err(|e| lost(store_gone(agent, &e)))?;
                if let Some(who) = heard.describe() {
                    // The last rank may have arrived, then left, between the two reads.
                    if store.add(&key, 0).is_ok_and(|n| n >= world) {
                        break;
                    }
                    return Err(lost(who));
                }
            }
            if started.elapsed() >= self.rank0_wait {
                return Err(Error::training(
                    context.as_str(),
                    format!(
                        "not every rank got there within --rank0-wait-timeout ({} s), though every rank's heartbeat goes on: raise --rank0-wait-timeout for a slower evaluation or preparation (run `indolm corpus prepare` before a job on a new corpus), or look for a rank that hangs",
                        self.rank0_wait.as_secs()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        // Every rank has left the previous wait's loop: its key can go.
        if self.rank == 0 && self.waits > 1 {
            let _ = store.delete(&format!("wait/{}", self.waits - 2));
        }
        Ok(())
    }

    /// A failed collective's error, naming the rank that stopped when its heartbeat did (this
    /// waits three beats, a second and a half, to tell), with how to go on.
    pub fn lost(&self, e: Error) -> Error {
        lost_error(e, &lost_ranks(&self.store(), self.rank, self.world_size, self.beat, self.agent_store))
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The shim's handle of the group (for [`super::GradientReducer`], which launches its
    /// buckets' all-reduces on it).
    pub(super) fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// Where this group's tensors live: every tensor handed to a collective must be there (the
    /// CPU, or a CUDA device, for Gloo; this process's GPU for NCCL).
    pub fn device(&self) -> Device {
        self.device
    }

    /// Combines `tensor` across ranks in place (on CUDA the call returns once the reduction is
    /// queued on the device's current stream). `what` names the call in errors. A tensor that is
    /// not a dense, contiguous tensor on [`ProcessGroup::device`] is refused here, before c10d
    /// sees it (NCCL would refuse a CPU tensor with its own message, or Gloo a CUDA one).
    pub fn all_reduce(&mut self, tensor: &mut Tensor, op: ReduceOp, what: &str) -> Result<()> {
        self.accepts(tensor, what)?;
        let op = match op {
            ReduceOp::Sum => 0,
            ReduceOp::Max => 1,
            ReduceOp::Min => 2,
        };
        let mut error = std::ptr::null_mut();
        // SAFETY: `tensor.as_mut_ptr()` is the `at::Tensor*` the shim expects; it lives through the call.
        let ok = unsafe { indolm_c10d_all_reduce(self.raw, tensor.as_mut_ptr() as *mut c_void, op, &mut error) };
        self.check(ok, error, what)
    }

    /// Overwrites `tensor` with rank `root`'s in place; refused as in [`ProcessGroup::all_reduce`].
    pub fn broadcast(&mut self, tensor: &mut Tensor, root: usize, what: &str) -> Result<()> {
        self.accepts(tensor, what)?;
        let mut error = std::ptr::null_mut();
        // SAFETY: as in `all_reduce`.
        let ok =
            unsafe { indolm_c10d_broadcast(self.raw, tensor.as_mut_ptr() as *mut c_void, root as c_int, &mut error) };
        self.check(ok, error, what)
    }

    /// Returns once every rank has called it: c10d's barrier, a collective under the collectives'
    /// timeout (a wait for rank 0's work is [`ProcessGroup::wait_for_all`]).
    pub fn barrier(&mut self) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: the group is live.
        let ok = unsafe { indolm_c10d_barrier(self.raw, &mut error) };
        self.check(ok, error, "barrier")
    }

    /// An error unless `tensor` can be handed to this group's collectives.
    fn accepts(&self, tensor: &Tensor, what: &str) -> Result<()> {
        check_collective_tensor(tensor, self.device, what, self.rank, self.world_size)
    }

    fn check(&self, ok: c_int, error: *mut c_char, what: &str) -> Result<()> {
        if ok != 0 {
            return Ok(());
        }
        Err(Error::system(format!("{what} on rank {} of {}", self.rank, self.world_size), take_message(error)))
    }

    /// The rank that serves the store (rank 0 outside torchrun), leaving: waits until every
    /// other rank has left too, or has not beaten for [`DEPARTURE_SILENT_BEATS`] beats (it died),
    /// at most [`DEPARTURE`]. A rank still reading the store as it leaves its last wait would
    /// otherwise find the store gone with this process, and fail a run that succeeded.
    fn await_departures(&self) {
        let store = self.store();
        let Ok(mut watch) = Watch::start(&store, self.rank, self.world_size) else { return };
        let started = Instant::now();
        while started.elapsed() < DEPARTURE {
            match watch.check(&store, self.beat * DEPARTURE_SILENT_BEATS) {
                Ok(heard) if heard.left.len() + heard.failed.len() + heard.silent.len() + 1 >= self.world_size => {
                    return
                }
                Ok(_) => std::thread::sleep(self.beat / 5),
                Err(_) => return,
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        for thread in self.watchers.drain(..).chain(self.heartbeat.take()) {
            thread.finish();
        }
        // The others, waiting or watching, now know this rank left rather than died.
        let marked = self.store().add(&heartbeat_key(self.rank), LEFT).is_ok();
        // A peer blocked in a collective with this rank fails now, not at its timeout.
        // SAFETY: the group is live; nothing but the free below uses it after this.
        unsafe { indolm_c10d_release_backend(self.raw) };
        if marked && self.serves_store {
            self.await_departures();
        }
        // The store thread ends once its sender is gone, unless a call of its still blocks on a
        // store that does not answer: then the group is left unfreed (the process is ending).
        if let Some((thread, handle)) = self.store_thread.take() {
            drop(thread);
            let started = Instant::now();
            while !handle.is_finished() && started.elapsed() < STORE_DEADLINE {
                std::thread::sleep(Duration::from_millis(1));
            }
            if !handle.is_finished() {
                return;
            }
            let _ = handle.join();
        }
        // SAFETY: `raw` came from `indolm_c10d_gloo_new` or `_nccl_new` and is freed once.
        unsafe { indolm_c10d_free(self.raw) }
    }
}

/// Prints `error` as the one line a lost rank ends a process with, and ends it at once with
/// status 1: the main thread may be blocked in a device wait that NCCL's aborted communicator
/// leaves, and exit handlers could wait on it too.
fn end_process(error: &Error) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "error: {error}");
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    // SAFETY: ends the process; nothing runs after this.
    unsafe { _exit(1) }
}

/// An error, naming the collective `what`, unless `tensor` is a defined, dense, contiguous tensor
/// on `device` (what c10d's Gloo and NCCL backends take).
pub fn check_collective_tensor(tensor: &Tensor, device: Device, what: &str, rank: usize, world: usize) -> Result<()> {
    let refused = |why: String| {
        Err(Error::system(
            format!("{what} on rank {rank} of {world}"),
            format!("{why}: indolm refuses it before c10d does (this is a bug in indolm; please report it)"),
        ))
    };
    if !tensor.defined() {
        return refused("handed an undefined tensor".into());
    }
    if tensor.device() != device {
        return refused(format!(
            "handed a tensor on {:?}, but this group's collectives run on {device:?} (Gloo: the CPU, or the CUDA device its ranks share; NCCL: this process's GPU)",
            tensor.device()
        ));
    }
    if tensor.is_sparse() {
        return refused("handed a sparse tensor; collectives take dense tensors".into());
    }
    if !tensor.is_contiguous() {
        return refused(format!(
            "handed a non-contiguous tensor (shape {:?}, strides {:?}); collectives take contiguous tensors",
            tensor.size(),
            tensor.stride()
        ));
    }
    Ok(())
}

/// Who stopped, from the heartbeats: every rank's count is read, then again three beats later; a
/// rank that left the group, or whose count did not move, is named. When the store itself cannot
/// be reached, that is said (it lives in rank 0's process, or in torchrun's agent).
fn lost_ranks(store: &Store, rank: usize, world: usize, beat: Duration, agent: bool) -> String {
    let heard = Watch::start(store, rank, world).and_then(|mut watch| {
        std::thread::sleep(beat * 3);
        watch.check(store, beat * 3)
    });
    let quiet = "every rank's heartbeat goes on: the network between them failed, or a rank hangs";
    match heard {
        Ok(heard) => heard.describe().unwrap_or_else(|| quiet.into()),
        Err(e) => store_gone(agent, &e),
    }
}

/// What a store that cannot be reached means: the process serving it stopped.
fn store_gone(agent: bool, cause: &str) -> String {
    let server = match agent {
        true => "torchrun's agent (which serves it) or its host stopped",
        false => "rank 0 (whose launch serves it) or its host stopped",
    };
    format!("the rendezvous store is gone too: {server} ({cause})")
}

/// The one line a lost rank ends a survivor with.
fn lost_error(failure: Error, who: &str) -> Error {
    Error::training(failure.to_string(), format!("{who}; the last checkpoint is intact: resume with --resume latest"))
}

/// The error NCCL's watchdog recorded for the group, if any (c10d's `ErrorType`: a timeout, an
/// NCCL error, or another rank's error propagated through the store).
///
/// # Safety
/// `raw` must be a live NCCL group from the shim.
unsafe fn nccl_error(raw: *mut c_void) -> Option<String> {
    let (mut kind, mut error) = (0, std::ptr::null_mut());
    // SAFETY: the caller's promise; `error` is set only on failure.
    if unsafe { indolm_c10d_error(raw, &mut kind, &mut error) } == 0 {
        return Some(format!("asking NCCL for its state failed: {}", take_message(error)));
    }
    match kind {
        0 => None,
        1 => Some("a collective ran past --dist-timeout (NCCL's watchdog stopped it)".into()),
        2 => Some("NCCL reported a communication error (a peer's connection broke)".into()),
        3 => Some("another rank's NCCL failed (propagated through the store)".into()),
        other => Some(format!("NCCL reported error type {other}")),
    }
}

/// The shim's error message (its first line: c10d appends a C++ backtrace), freed.
pub(super) fn take_message(error: *mut c_char) -> String {
    if error.is_null() {
        return "c10d failed without a message".into();
    }
    // SAFETY: the shim returns a NUL-terminated malloc'ed string, freed here once.
    let text = unsafe { CStr::from_ptr(error) }.to_string_lossy().to_string();
    unsafe { indolm_c10d_free_message(error) };
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("c10d failed").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranks_that_are_gone_are_named_in_one_phrase() {
        assert_eq!(Heard::default().describe(), None);
        let one = Heard { left: vec![], failed: vec![], silent: vec![3], silent_for: Duration::from_millis(10_200) };
        assert_eq!(one.describe().unwrap(), "rank 3 stopped (no heartbeat in the store): silent for 10.2 s");
        let many = Heard { left: vec![1], failed: vec![4], silent: vec![8, 9], silent_for: Duration::from_secs(10) };
        assert_eq!(
            many.describe().unwrap(),
            "ranks 8, 9 stopped (no heartbeat in the store): silent for 10.0 s; rank 4 failed (its own output says why); rank 1 left the job before this point (its own output says why)"
        );
        assert!(store_gone(true, "reset").contains("torchrun's agent (which serves it)"));
        assert!(store_gone(false, "reset").contains("rank 0 (whose launch serves it) or its host stopped (reset)"));
    }
}
