//! Work run with a bound on the memory it holds ([`run_bounded`]): the process's allocator
//! ([`CountingAllocator`], the system's, counting) keeps, for a thread running bounded work, the
//! bytes that thread has allocated and not freed; an allocation that would take it past its
//! budget is never made: the thread stops there for good (it sleeps, holding at most its budget)
//! and [`run_bounded`] returns [`Stopped::OverBudget`] to its caller at once.
//!
//! This is how a chat template, which minijinja lets grow strings without a hook (`~`, `+`,
//! captures and filters make values of any size), is bounded before the memory is taken. The cost
//! for every other allocation is one thread-local read. A stopped thread is not resumed: its
//! memory (at most the budget) and its stack stay until the process ends, which for indolm's
//! commands is when the error is reported.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The system allocator, counting the bytes held by a thread that runs bounded work.
pub(crate) struct CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

thread_local! {
    /// This thread's budget in bytes; 0 for a thread without one (every thread but bounded work's).
    static LIMIT: Cell<usize> = const { Cell::new(0) };
    /// The bytes this thread allocated and has not freed since its budget was set.
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// Raised when this thread was stopped at its budget (a flag its caller watches).
    static STOPPED: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
}

/// Counts `size` more bytes for a bounded thread; past its budget, raises its flag and stops the
/// thread for good (it never returns). Allocates nothing. A thread that is panicking is not
/// stopped: the panic's message and backtrace are written under std's global locks, which a
/// stopped thread would hold for good.
fn take(size: usize) {
    let limit = LIMIT.with(Cell::get);
    if limit == 0 || std::thread::panicking() {
        return;
    }
    let held = HELD.with(Cell::get).saturating_add(size);
    if held > limit {
        let flag = STOPPED.with(Cell::get);
        // SAFETY: set by `run_bounded` to an `Arc<AtomicBool>` this thread's closure owns, and
        // this thread never returns from here, so the closure (and the Arc) outlive the use.
        if let Some(flag) = unsafe { flag.as_ref() } {
            flag.store(true, Ordering::SeqCst);
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    HELD.with(|h| h.set(held));
}

/// Counts `size` bytes freed by a bounded thread.
fn give(size: usize) {
    if LIMIT.with(Cell::get) != 0 {
        HELD.with(|h| h.set(h.get().saturating_sub(size)));
    }
}

// SAFETY: every call is the system allocator's with the same arguments; the counting around it
// allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        give(layout.size());
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            take(new_size - layout.size());
        } else {
            give(layout.size() - new_size);
        }
        System.realloc(ptr, layout, new_size)
    }
}

/// Why bounded work gave no result.
#[derive(Debug)]
pub enum Stopped {
    /// It reached its budget of this many bytes and was stopped before allocating past it.
    OverBudget(usize),
    /// No thread could be started for it (the system's error).
    NoThread(std::io::Error),
}

/// Runs `work` on a thread of its own whose allocations may hold at most `bytes` at a time
/// (memory it frees counts no more): its result, or [`Stopped::OverBudget`] as soon as an allocation would
/// pass the budget (the thread then stays stopped). A panic in `work` is resumed here.
pub fn run_bounded<T, F>(bytes: usize, work: F) -> Result<T, Stopped>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let stopped = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel();
    let flag = Arc::clone(&stopped);
    let spawned = std::thread::Builder::new().name("bounded".into()).spawn(move || {
        STOPPED.with(|s| s.set(Arc::as_ptr(&flag)));
        HELD.with(|h| h.set(0));
        LIMIT.with(|l| l.set(bytes.max(1)));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        LIMIT.with(|l| l.set(0));
        STOPPED.with(|s| s.set(std::ptr::null()));
        let _ = sender.send(result);
        drop(flag);
    });
    let handle = spawned.map_err(Stopped::NoThread)?;
    loop {
        match receiver.recv_timeout(Duration::from_millis(10)) {
            Ok(Ok(value)) => {
                let _ = handle.join();
                return Ok(value);
            }
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(mpsc::RecvTimeoutError::Timeout) if stopped.load(Ordering::SeqCst) => {
                return Err(Stopped::OverBudget(bytes))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(Stopped::OverBudget(bytes)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_within_its_budget_returns_and_past_it_is_stopped() {
        // Memory freed counts no more: 64 MiB allocated and freed 1 MiB at a time fits 8 MiB.
        let total = run_bounded(8 << 20, || (0..64).map(|i| vec![i as u8; 1 << 20]).map(|v| v.len()).sum::<usize>());
        assert_eq!(total.unwrap(), 64 << 20);
        // Holding them is not: stopped at the allocation that would pass 8 MiB, not after.
        let held = run_bounded(8 << 20, || (0..64).map(|i| vec![i as u8; 1 << 20]).collect::<Vec<_>>().len());
        assert!(matches!(held, Err(Stopped::OverBudget(bytes)) if bytes == 8 << 20), "{held:?}");
        // The caller's thread stays unbounded, and a panic comes back as one.
        assert_eq!(vec![0u8; 64 << 20].len(), 64 << 20);
        let panicked = std::panic::catch_unwind(|| run_bounded(1 << 20, || panic!("inside")));
        assert!(panicked.is_err());
    }
}
