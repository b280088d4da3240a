//! libtorch's exceptions as values. tch turns an exception thrown by libtorch (a CUDA
//! out-of-memory, a shape or dtype error, a failed kernel) into a Rust panic; [`catch`] runs a
//! piece of work and returns such a failure as the exception's own message instead, printing
//! nothing (no "panicked at", no C++ backtrace), so the caller can end with one indolm error
//! that says what was being done and what to change. [`guard`] does so for work that returns
//! indolm's result (the training engine's evaluation hooks), and [`run_main`] is the process's
//! last resort: a panic nothing caught is one line on stderr and a non-zero exit.
use crate::error::{Error, Result};
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`catch`] (its panics are reported by the caller).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// A failure caught by [`catch`].
#[derive(Debug, Clone)]
pub struct TorchFailure {
    /// The exception's message: its first meaningful line, without tch's wrapping or the C++
    /// backtrace libtorch appends.
    pub message: String,
}

impl TorchFailure {
    /// Whether the device (or the host, for CPU tensors) ran out of memory.
    pub fn out_of_memory(&self) -> bool {
        let m = self.message.to_lowercase();
        m.contains("out of memory")
            || m.contains("not enough memory")
            || m.contains("can't allocate memory")
            || m.contains("outofmemoryerror")
    }
}

/// Runs `work`; a panic inside it (libtorch's exception, surfaced by tch, or any other) comes
/// back as its message, printed nowhere. Panics elsewhere keep the usual report.
pub fn catch<T>(work: impl FnOnce() -> T) -> Result<T, TorchFailure> {
    install_quiet_hook();
    let was = CATCHING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(work));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| TorchFailure { message: first_line(&payload_text(&*payload)) })
}

/// Runs `work` under [`catch`]: its own error as it is, and a libtorch failure inside it as one
/// [`Error::Training`] whose context is `context()` and whose message is the exception's first
/// line, then `out_of_memory` when the device (or host) ran out of memory.
pub fn guard<T>(context: impl FnOnce() -> String, out_of_memory: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch(work) {
        Ok(result) => result,
        Err(failure) if failure.out_of_memory() => {
            Err(Error::training(context(), format!("{}; {out_of_memory}", failure.message)))
        }
        Err(failure) => Err(Error::training(context(), failure.message)),
    }
}

/// The exit code of a process whose command panicked (a failure nothing caught).
pub(crate) const PANIC_EXIT: i32 = 101;

/// Runs the command `main` (its exit code) as the process's last resort against panics: one
/// that nothing caught (a libtorch failure outside the guarded steps and hooks, or a bug) is
/// reported in one line on stderr, `error: <message> (an unexpected failure at <file>:<line>;
/// RUST_BACKTRACE=1 shows where it came from)`, without Rust's report or libtorch's C++
/// backtrace, and the exit code is [`PANIC_EXIT`]. `RUST_BACKTRACE` set (and not `0`) keeps
/// Rust's full report. A panic on another thread is reported the same way, in one line.
pub fn run_main(main: impl FnOnce() -> i32) -> i32 {
    install_one_line_hook();
    panic::catch_unwind(AssertUnwindSafe(main)).unwrap_or(PANIC_EXIT)
}

/// The text of a panic's payload (a `String` or a `&str`).
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a failure without a message".into())
}

/// The process's panic hook: one line per panic (see [`run_main`]); installed once, before
/// [`catch`]'s quiet hook, which wraps it.
fn install_one_line_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let full = std::env::var("RUST_BACKTRACE").is_ok_and(|v| !v.is_empty() && v != "0");
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if full {
                return previous(info);
            }
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            eprintln!(
                "error: {} (an unexpected failure{at}; RUST_BACKTRACE=1 shows where it came from)",
                first_line(&payload_text(info.payload()))
            );
        }));
    });
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
