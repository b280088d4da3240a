//! libtorch's exceptions as values. tch turns an exception thrown by libtorch (a CUDA
//! out-of-memory, a shape or dtype error, a failed kernel) into a Rust panic; [`catch`] runs a
//! piece of work and returns such a failure as the exception's own message instead, printing
//! nothing (no "panicked at", no C++ backtrace), so the caller can end with one indolm error
//! that says what was being done and what to change.
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`catch`] (its panics are reported by the caller).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// A failure caught by [`catch`].
#[derive(Debug, Clone)]
pub(crate) struct TorchFailure {
    /// The exception's message: its first meaningful line, without tch's wrapping or the C++
    /// backtrace libtorch appends.
    pub message: String,
}

impl TorchFailure {
    /// Whether the device (or the host, for CPU tensors) ran out of memory.
    pub(crate) fn out_of_memory(&self) -> bool {
        let m = self.message.to_lowercase();
        m.contains("out of memory")
            || m.contains("not enough memory")
            || m.contains("can't allocate memory")
            || m.contains("outofmemoryerror")
    }
}

/// Runs `work`; a panic inside it (libtorch's exception, surfaced by tch, or any other) comes
/// back as its message, printed nowhere. Panics elsewhere keep the usual report.
pub(crate) fn catch<T>(work: impl FnOnce() -> T) -> Result<T, TorchFailure> {
    install_quiet_hook();
    let was = CATCHING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(work));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| {
        let text = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a failure without a message".into());
        TorchFailure { message: first_line(&text) }
    })
}

/// The panic hook: silent on a thread inside [`catch`], the previous hook elsewhere.
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// The message of a tch panic: tch wraps libtorch's text as `Torch("...")` (Debug-escaped) after
/// the call that failed, and libtorch appends "Exception raised from ..." and a backtrace.
fn first_line(text: &str) -> String {
    let inner = match (text.find("Torch(\""), text.rfind("\")")) {
        (Some(start), Some(end)) if end > start + 7 => text[start + 7..end].replace("\\n", "\n").replace("\\\"", "\""),
        _ => text.to_string(),
    };
    inner.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("libtorch failed without a message").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn a_libtorch_exception_comes_back_as_its_message() {
        // A real libtorch failure on the CPU: matrices that do not multiply.
        let a = Tensor::ones([2, 3], (Kind::Float, Device::Cpu));
        let failure = catch(|| a.matmul(&a)).unwrap_err();
        assert!(failure.message.contains("cannot be multiplied"), "{failure:?}");
        assert!(!failure.message.contains("Exception raised from") && !failure.message.contains('\n'));
        assert!(!failure.out_of_memory());
        // The host's allocator refusing an enormous tensor is an out-of-memory failure.
        let oom = catch(|| Tensor::empty([1i64 << 50], (Kind::Float, Device::Cpu))).unwrap_err();
        assert!(oom.out_of_memory(), "{oom:?}");
        // Work that does not fail gives its value.
        assert_eq!(catch(|| 2 + 2).unwrap(), 4);
    }
}
