//! The gradient all-reduce overlapped with backward, as PyTorch's DistributedDataParallel does
//! it: a hook after each parameter's gradient accumulation marks it done in its bucket, and a
//! bucket whose parameters are all done is all-reduced at once while backward computes the
//! earlier layers' gradients. The hooks and the collectives are C++ (`reducer_shim.cpp`); this is
//! their Rust handle. Which parameters make a bucket is the caller's choice
//! (`indolm_train::data_parallel` lays them out in the order their gradients become ready,
//! recorded here at the first update, so that each bucket is a contiguous slice of a flat
//! gradient buffer).
use super::process_group::take_message;
use super::ProcessGroup;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void};
use tch::Tensor;

extern "C" {
    fn indolm_reducer_new(
        group: *mut c_void,
        parameters: *const *mut c_void,
        n: usize,
        error: *mut *mut c_char,
    ) -> *mut c_void;
    fn indolm_reducer_free(reducer: *mut c_void);
    fn indolm_reducer_record(reducer: *mut c_void);
    fn indolm_reducer_order(reducer: *mut c_void, out: *mut i64) -> usize;
    fn indolm_reducer_set_buckets(
        reducer: *mut c_void,
        buckets: *const *mut c_void,
        count: usize,
        bucket_of: *const i64,
        bf16: c_int,
        error: *mut *mut c_char,
    ) -> c_int;
    fn indolm_reducer_arm(reducer: *mut c_void);
    fn indolm_reducer_finish(reducer: *mut c_void, launched_in_backward: *mut i64, error: *mut *mut c_char) -> c_int;
}

/// Hooks on a fixed list of parameters that all-reduce their gradients, bucket by bucket, on a
/// process group during backward. It must be dropped before its group (which it does not own);
/// dropping it removes the hooks.
pub struct GradientReducer {
    raw: *mut c_void,
    parameters: usize,
    /// Names the rank in errors: `rank r of n`.
    place: String,
}

// SAFETY: the reducer's state is guarded by a mutex in the shim (its hooks run on autograd's
// threads); indolm calls it from one thread at a time (`&mut self`).
unsafe impl Send for GradientReducer {}

impl GradientReducer {
    /// Hooks on `parameters` (the same list, in the same order, on every rank), launching on
    /// `group`. Nothing is recorded or reduced until [`GradientReducer::record`] or
    /// [`GradientReducer::arm`].
    pub fn new(group: &ProcessGroup, parameters: &[Tensor]) -> Result<Self> {
        let place = format!("rank {} of {}", group.rank(), group.world_size());
        let pointers: Vec<*mut c_void> = parameters.iter().map(|p| p.as_ptr() as *mut c_void).collect();
        let mut error = std::ptr::null_mut();
        // SAFETY: the group is live (borrowed), every pointer a live `at::Tensor` for the call (the
        // shim keeps its own handles); the shim catches every exception.
        let raw = unsafe { indolm_reducer_new(group.raw(), pointers.as_ptr(), pointers.len(), &mut error) };
        if raw.is_null() {
            return Err(Error::system(format!("the gradient hooks on {place}"), take_message(error)));
        }
        Ok(GradientReducer { raw, parameters: parameters.len(), place })
    }

    /// Records, during the next backward, the order in which the parameters' gradients are
    /// accumulated (read by [`GradientReducer::order`]).
    pub fn record(&mut self) {
        // SAFETY: `raw` is live until drop.
        unsafe { indolm_reducer_record(self.raw) }
    }

    /// The parameters' indices in the order their gradients were accumulated in the recorded
    /// backward (those without a gradient left out); stops recording.
    pub fn order(&mut self) -> Vec<usize> {
        let mut out = vec![0i64; self.parameters];
        // SAFETY: `out` has room for one index per parameter, the most the shim writes.
        let n = unsafe { indolm_reducer_order(self.raw, out.as_mut_ptr()) };
        out.truncate(n);
        out.into_iter().map(|i| i as usize).collect()
    }

    /// The buckets, in the order they are launched: contiguous gradient slices on the group's
    /// device, and each parameter's bucket (`None`: reduced by the caller after backward).
    /// `bf16` sums them through bf16 copies.
    pub fn set_buckets(&mut self, buckets: &[Tensor], bucket_of: &[Option<usize>], bf16: bool) -> Result<()> {
        assert_eq!(bucket_of.len(), self.parameters, "one bucket entry per parameter");
        let pointers: Vec<*mut c_void> = buckets.iter().map(|b| b.as_ptr() as *mut c_void).collect();
        let of: Vec<i64> = bucket_of.iter().map(|b| b.map_or(-1, |b| b as i64)).collect();
        let mut error = std::ptr::null_mut();
        // SAFETY: live tensors for the call (the shim keeps its own handles), `of` one per parameter.
        let ok = unsafe {
            indolm_reducer_set_buckets(
                self.raw,
                pointers.as_ptr(),
                pointers.len(),
                of.as_ptr(),
                bf16 as c_int,
                &mut error,
            )
        };
        self.check(ok, error, "setting the gradient buckets")
    }

    /// The next backward's hooks launch the buckets as they fill: call it before the backward of
    /// an update's last micro-batch.
    pub fn arm(&mut self) {
        // SAFETY: `raw` is live until drop.
        unsafe { indolm_reducer_arm(self.raw) }
    }

    /// After that backward: launches the buckets the hooks did not, waits for all of them (on
    /// CUDA the device's current stream waits, not the host) and returns how many the hooks
    /// launched during backward. A failed collective (a lost rank) is the error.
    pub fn finish(&mut self) -> Result<usize> {
        let mut launched = 0i64;
        let mut error = std::ptr::null_mut();
        // SAFETY: `raw` is live until drop.
        let ok = unsafe { indolm_reducer_finish(self.raw, &mut launched, &mut error) };
        self.check(ok, error, "the gradient all-reduce")?;
        Ok(launched as usize)
    }

    fn check(&self, ok: c_int, error: *mut c_char, what: &str) -> Result<()> {
        if ok != 0 {
            return Ok(());
        }
        Err(Error::system(format!("{what} on {}", self.place), take_message(error)))
    }
}

impl Drop for GradientReducer {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `indolm_reducer_new` and is freed once.
        unsafe { indolm_reducer_free(self.raw) }
    }
}
