//! A c10d process group as a Rust value: join it from a [`Launch`] (Gloo for CPU tensors, or
//! NCCL for one CUDA device per process where this build has it), then all-reduce, broadcast
//! and barrier on `tch` tensors in place. Each rank marks itself alive in the group's store
//! every half second, so that when a collective fails the survivors can name the rank that
//! stopped. Every failure (a refused port, a rank that never came, a timeout) is an [`Error`]
//! with c10d's message, never an abort.
use super::Launch;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tch::{Device, Tensor};

extern "C" {
    #[allow(clippy::too_many_arguments)]
    fn indolm_c10d_gloo_new(
        store_host: *const c_char,
        store_port: c_int,
        store_server: c_int,
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
        rank: c_int,
        world_size: c_int,
        device_index: c_int,
        timeout_ms: i64,
        error: *mut *mut c_char,
    ) -> *mut c_void;
    fn indolm_c10d_configure_logging();
    fn indolm_c10d_free(group: *mut c_void);
    fn indolm_c10d_free_message(message: *mut c_char);
    fn indolm_c10d_all_reduce(group: *mut c_void, tensor: *mut c_void, op: c_int, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_broadcast(group: *mut c_void, tensor: *mut c_void, root: c_int, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_barrier(group: *mut c_void, error: *mut *mut c_char) -> c_int;
    fn indolm_c10d_error(group: *mut c_void, kind: *mut c_int, error: *mut *mut c_char) -> c_int;
    /// libc's: ends the process without running exit handlers.
    fn _exit(status: c_int) -> !;
    fn indolm_c10d_store_set(
        group: *mut c_void,
        key: *const c_char,
        value: *const c_char,
        error: *mut *mut c_char,
    ) -> c_int;
    fn indolm_c10d_store_get(
        group: *mut c_void,
        key: *const c_char,
        value: *mut *mut c_char,
        error: *mut *mut c_char,
    ) -> c_int;
}

/// Which c10d backend a group runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Gloo,
    /// On this CUDA device.
    Nccl(usize),
}

/// How often each rank marks itself alive in the group's store.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// A thread of the group's (the heartbeat, the NCCL watcher), stopped and joined before the group
/// is freed.
struct Background {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Background {
    /// Runs `tick` every [`HEARTBEAT`] until stopped or until it returns false.
    fn every_beat(mut tick: impl FnMut() -> bool + Send + 'static) -> Self {
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
                    std::thread::sleep(HEARTBEAT / 10);
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
    /// Where every tensor of this group's collectives lives: the CPU for Gloo, the process's
    /// CUDA device for NCCL.
    device: Device,
    /// `heartbeat/<rank>` in the store, counting up every [`HEARTBEAT`].
    heartbeat: Option<Background>,
    /// On NCCL: the thread that ends the process when NCCL's watchdog finds a failure.
    watcher: Option<Background>,
}

// SAFETY: c10d process groups are used from any thread (PyTorch's DDP calls them from its
// autograd threads); indolm calls one group from one thread at a time (`&mut self`).
unsafe impl Send for ProcessGroup {}

impl ProcessGroup {
    /// Joins the Gloo process group the launch describes; every rank must call this within
    /// `timeout`, which also bounds each collective.
    pub fn gloo(launch: &Launch, timeout: Duration) -> Result<Self> {
        let text = |s: &str, what: &str| {
            CString::new(s).map_err(|_| Error::argument(what, format!("{s:?} contains a NUL byte")))
        };
        let host = text(&launch.master_addr, "MASTER_ADDR")?;
        let interface = text(launch.gloo_interface.as_deref().unwrap_or(""), "GLOO_SOCKET_IFNAME")?;
        let local = text(launch.gloo_host().unwrap_or(""), "MASTER_ADDR")?;
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: sets c10's log level; the strings outlive the call; `error` is set only on failure.
        unsafe { indolm_c10d_configure_logging() };
        let raw = unsafe {
            indolm_c10d_gloo_new(
                host.as_ptr(),
                launch.master_port as c_int,
                launch.serves_store() as c_int,
                interface.as_ptr(),
                local.as_ptr(),
                launch.rank as c_int,
                launch.world_size as c_int,
                timeout.as_millis() as i64,
                &mut error,
            )
        };
        Self::joined(raw, error, launch, Backend::Gloo)
    }

    /// Whether this build can make NCCL groups (it was compiled where CUDA's headers were found).
    pub(crate) fn has_nccl() -> bool {
        // SAFETY: reads a constant.
        unsafe { indolm_c10d_has_nccl() != 0 }
    }

    /// Joins the NCCL process group the launch describes, on CUDA device `device` (which becomes
    /// this process's current device); `timeout` bounds the join and each collective.
    pub fn nccl(launch: &Launch, device: usize, timeout: Duration) -> Result<Self> {
        if !Self::has_nccl() {
            return Err(Error::argument(
                "--device",
                format!(
                    "launched as rank {} of {} on CUDA, but this indolm was built without NCCL (CUDA's headers were not found at build time): run `make setup` and rebuild, or use --device cpu (Gloo)",
                    launch.rank, launch.world_size
                ),
            ));
        }
        let host = CString::new(launch.master_addr.as_str())
            .map_err(|_| Error::argument("MASTER_ADDR", format!("{:?} contains a NUL byte", launch.master_addr)))?;
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: as in `gloo`.
        unsafe { indolm_c10d_configure_logging() };
        let raw = unsafe {
            indolm_c10d_nccl_new(
                host.as_ptr(),
                launch.master_port as c_int,
                launch.serves_store() as c_int,
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
            Backend::Gloo => ("Gloo", Device::Cpu),
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
            heartbeat: None,
            watcher: None,
        };
        group.heartbeat = Some(group.start_heartbeat());
        if let Backend::Nccl(_) = backend {
            group.watcher = Some(group.start_nccl_watcher());
        }
        Ok(group)
    }

    fn start_heartbeat(&self) -> Background {
        let (raw, key) = (self.raw as usize, format!("heartbeat/{}", self.rank));
        let mut beat = 0u64;
        Background::every_beat(move || {
            // SAFETY: the group outlives this thread (Drop joins it before freeing the group).
            let alive = unsafe { store_set(raw as *mut c_void, &key, &beat.to_string()) }.is_ok();
            beat += 1;
            alive // when the store is gone, the collectives will say so
        })
    }

    /// NCCL's collectives return once queued, and its errors and timeouts are found by its
    /// watchdog thread, not by the call: with the shim's settings the watchdog records the error
    /// and aborts the communicators without taking the process down (`TORCH_NCCL_ASYNC_ERROR_
    /// HANDLING=2`). This thread asks the group for that error every beat; when there is one, it
    /// ends the process as a failed collective ends a Gloo rank: one line naming the rank that
    /// stopped (from the heartbeats) and exit status 1, even while the main thread waits on the
    /// device for a collective that will never finish.
    fn start_nccl_watcher(&self) -> Background {
        let (raw, rank, world) = (self.raw as usize, self.rank, self.world_size);
        Background::every_beat(move || {
            // SAFETY: the group outlives this thread (Drop joins it before freeing the group).
            let Some(cause) = (unsafe { nccl_error(raw as *mut c_void) }) else { return true };
            let failure = Error::system(format!("NCCL collective on rank {rank} of {world}"), cause);
            // SAFETY: as above.
            let who = unsafe { lost_ranks(raw as *mut c_void, rank, world) };
            let line = lost_error(failure, &who);
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {line}");
            let _ = std::io::stderr().flush();
            let _ = std::io::stdout().flush();
            // SAFETY: ends the process at once: the main thread may be blocked in a device wait
            // that NCCL's aborted communicator leaves, and exit handlers could wait on it too.
            unsafe { _exit(1) }
        })
    }

    /// A failed collective's error, naming the rank that stopped when its heartbeat did (this
    /// waits a second and a half to tell), with how to go on.
    pub fn lost(&self, e: Error) -> Error {
        // SAFETY: the group is live.
        lost_error(e, &unsafe { lost_ranks(self.raw, self.rank, self.world_size) })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Where this group's tensors live: every tensor handed to a collective must be there (the
    /// CPU for Gloo, this process's GPU for NCCL).
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

    /// Returns once every rank has called it.
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
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        for thread in [self.watcher.take(), self.heartbeat.take()].into_iter().flatten() {
            thread.finish();
        }
        // SAFETY: `raw` came from `indolm_c10d_gloo_new` or `_nccl_new` and is freed once.
        unsafe { indolm_c10d_free(self.raw) }
    }
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
            "handed a tensor on {:?}, but this group's collectives run on {device:?} (Gloo: the CPU; NCCL: this process's GPU)",
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
/// count that did not move (or never appeared) names its rank. When the store itself cannot be
/// reached, that is said (it lives in rank 0's process, or torchrun's agent).
///
/// # Safety
/// `raw` must be a live group from the shim.
unsafe fn lost_ranks(raw: *mut c_void, rank: usize, world: usize) -> String {
    let read = || -> std::result::Result<Vec<Option<String>>, String> {
        // SAFETY: the caller's promise.
        (0..world).map(|r| unsafe { store_get(raw, &format!("heartbeat/{r}")) }).collect()
    };
    let silent = read().and_then(|before| {
        std::thread::sleep(HEARTBEAT * 3);
        let after = read()?;
        Ok((0..world).filter(|&r| r != rank && (after[r].is_none() || after[r] == before[r])).collect::<Vec<_>>())
    });
    match silent {
        Ok(ranks) if !ranks.is_empty() => {
            let names: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
            format!("rank {} stopped (no heartbeat in the store)", names.join(", "))
        }
        Ok(_) => "every rank's heartbeat goes on: the network between them failed, or a rank hangs".into(),
        Err(_) => "the rendezvous store is gone too: rank 0 (whose launch serves it) or its host stopped".into(),
    }
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

/// Sets `key` in the group's store.
///
/// # Safety
/// `raw` must be a live group from the shim.
unsafe fn store_set(raw: *mut c_void, key: &str, value: &str) -> std::result::Result<(), String> {
    let (key, value) = (CString::new(key).map_err(|e| e.to_string())?, CString::new(value).map_err(|e| e.to_string())?);
    let mut error = std::ptr::null_mut();
    // SAFETY: `raw` is live (the caller's promise); the strings outlive the call.
    if unsafe { indolm_c10d_store_set(raw, key.as_ptr(), value.as_ptr(), &mut error) } != 0 {
        Ok(())
    } else {
        Err(take_message(error))
    }
}

/// Reads `key` from the group's store, `None` when it is not set (without waiting for it).
///
/// # Safety
/// `raw` must be a live group from the shim.
unsafe fn store_get(raw: *mut c_void, key: &str) -> std::result::Result<Option<String>, String> {
    let key = CString::new(key).map_err(|e| e.to_string())?;
    let (mut value, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: as in `store_set`; a value comes back malloc'ed and NUL-terminated, freed here.
    if unsafe { indolm_c10d_store_get(raw, key.as_ptr(), &mut value, &mut error) } == 0 {
        return Err(take_message(error));
    }
    if value.is_null() {
        return Ok(None);
    }
    let text = unsafe { CStr::from_ptr(value) }.to_string_lossy().to_string();
    unsafe { indolm_c10d_free_message(value) };
    Ok(Some(text))
}

/// The shim's error message (its first line: c10d appends a C++ backtrace), freed.
fn take_message(error: *mut c_char) -> String {
    if error.is_null() {
        return "c10d failed without a message".into();
    }
    // SAFETY: the shim returns a NUL-terminated malloc'ed string, freed here once.
    let text = unsafe { CStr::from_ptr(error) }.to_string_lossy().to_string();
    unsafe { indolm_c10d_free_message(error) };
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("c10d failed").trim().to_string()
}
