//! A c10d process group as a Rust value: join it from a [`Launch`] (Gloo for CPU tensors, or
//! NCCL for one CUDA device per process where this build has it), then all-reduce, broadcast
//! and barrier on `tch` tensors in place. Every failure (a refused port, a rank that
//! never came, a timeout) is an [`Error`] with c10d's message, never an abort.
use super::Launch;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
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
        Ok(ProcessGroup { raw, rank: launch.rank, world_size: launch.world_size })
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
        // SAFETY: `raw` came from `indolm_c10d_gloo_new` or `_nccl_new` and is freed once.
        unsafe { indolm_c10d_free(self.raw) }
    }
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
