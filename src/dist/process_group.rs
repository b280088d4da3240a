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
use tch::Tensor;

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

/// How often each rank marks itself alive in the group's store.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// The thread marking this rank alive: `heartbeat/<rank>` counts up every [`HEARTBEAT`].
struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
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
    heartbeat: Option<Heartbeat>,
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
        Self::joined(raw, error, launch, "Gloo")
    }

    /// Whether this build can make NCCL groups (it was compiled where CUDA's headers were found).
    pub fn has_nccl() -> bool {
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
        Self::joined(raw, error, launch, "NCCL")
    }

    fn joined(raw: *mut c_void, error: *mut c_char, launch: &Launch, backend: &str) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::system(
                format!(
                    "joining the {backend} process group (rank {} of {}, store {}:{})",
                    launch.rank, launch.world_size, launch.master_addr, launch.master_port
                ),
                take_message(error),
            ));
        }
        let mut group = ProcessGroup { raw, rank: launch.rank, world_size: launch.world_size, heartbeat: None };
        group.heartbeat = Some(group.start_heartbeat());
        Ok(group)
    }

    fn start_heartbeat(&self) -> Heartbeat {
        let stop = Arc::new(AtomicBool::new(false));
        let (raw, key, stopping) = (self.raw as usize, format!("heartbeat/{}", self.rank), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut beat = 0u64;
            while !stopping.load(Ordering::SeqCst) {
                // SAFETY: the group outlives this thread (Drop joins it before freeing the group).
                if unsafe { store_set(raw as *mut c_void, &key, &beat.to_string()) }.is_err() {
                    return; // the store is gone: the collectives will say so
                }
                beat += 1;
                for _ in 0..10 {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(HEARTBEAT / 10);
                }
            }
        });
        Heartbeat { stop, thread }
    }

    /// The ranks whose heartbeat stopped: every rank's count is read, then again three beats
    /// later; a count that did not move (or never appeared) names its rank. An error when the
    /// store itself cannot be reached (it lives in rank 0's process, or torchrun's agent).
    pub fn silent_ranks(&self) -> std::result::Result<Vec<usize>, String> {
        let read = || -> std::result::Result<Vec<Option<String>>, String> {
            // SAFETY: the group is live.
            (0..self.world_size).map(|r| unsafe { store_get(self.raw, &format!("heartbeat/{r}")) }).collect()
        };
        let before = read()?;
        std::thread::sleep(HEARTBEAT * 3);
        let after = read()?;
        Ok((0..self.world_size).filter(|&r| r != self.rank && (after[r].is_none() || after[r] == before[r])).collect())
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Combines `tensor` across ranks in place (a contiguous CPU tensor for Gloo, a tensor on
    /// the group's device for NCCL, where the call returns once the reduction is queued on the
    /// device's current stream).
    pub fn all_reduce(&mut self, tensor: &mut Tensor, op: ReduceOp) -> Result<()> {
        let op = match op {
            ReduceOp::Sum => 0,
            ReduceOp::Max => 1,
            ReduceOp::Min => 2,
        };
        let mut error = std::ptr::null_mut();
        // SAFETY: `tensor.as_mut_ptr()` is the `at::Tensor*` the shim expects; it lives through the call.
        let ok = unsafe { indolm_c10d_all_reduce(self.raw, tensor.as_mut_ptr() as *mut c_void, op, &mut error) };
        self.check(ok, error, "all-reduce")
    }

    /// Overwrites `tensor` with rank `root`'s in place.
    pub fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: as in `all_reduce`.
        let ok =
            unsafe { indolm_c10d_broadcast(self.raw, tensor.as_mut_ptr() as *mut c_void, root as c_int, &mut error) };
        self.check(ok, error, "broadcast")
    }

    /// Returns once every rank has called it.
    pub fn barrier(&mut self) -> Result<()> {
        let mut error = std::ptr::null_mut();
        // SAFETY: the group is live.
        let ok = unsafe { indolm_c10d_barrier(self.raw, &mut error) };
        self.check(ok, error, "barrier")
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
        if let Some(h) = self.heartbeat.take() {
            h.stop.store(true, Ordering::SeqCst);
            let _ = h.thread.join();
        }
        // SAFETY: `raw` came from `indolm_c10d_gloo_new` or `_nccl_new` and is freed once.
        unsafe { indolm_c10d_free(self.raw) }
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
