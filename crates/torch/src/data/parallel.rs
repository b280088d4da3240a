//! Work spread over every core: a slice cut into one contiguous chunk per thread, each item
//! mapped in its chunk, the results kept in the slice's order, and the first error (in that
//! order) returned. The threads can be limited for a while ([`with_thread_limit`]: the ranks of
//! a data-parallel job that share a node's cores).
use crate::error::Result;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most threads [`map_on_every_core`] starts (0: one per core).
static THREAD_LIMIT: AtomicUsize = AtomicUsize::new(0);

/// Runs `work` with [`map_on_every_core`] starting at most `threads` threads, then lifts the
/// limit.
pub fn with_thread_limit<R>(threads: usize, work: impl FnOnce() -> R) -> R {
    THREAD_LIMIT.store(threads, Ordering::SeqCst);
    let out = work();
    THREAD_LIMIT.store(0, Ordering::SeqCst);
    out
}

/// `f` of every item of `items`, in order, computed on every core (or as many threads as
/// [`with_thread_limit`] allows).
pub fn map_on_every_core<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> Result<R> + Sync) -> Result<Vec<R>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = THREAD_LIMIT.load(Ordering::SeqCst);
    let allowed = if limit > 0 { cores.min(limit) } else { cores };
    let threads = allowed.min(items.len()).max(1);
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    let parts: Vec<Result<Vec<R>>> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(f).collect())).collect();
        handles.into_iter().map(|h| h.join().expect("a worker thread panicked")).collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn results_keep_the_order_and_the_first_error_is_returned() {
        let items: Vec<u32> = (0..1000).collect();
        assert_eq!(map_on_every_core(&items, |&i| Ok(i * 2)).unwrap(), items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let failing = map_on_every_core(&items, |&i| {
            if i == 700 || i == 300 {
                Err(Error::invalid(std::path::Path::new("x"), format!("item {i}")))
            } else {
                Ok(i)
            }
        });
        assert!(failing.err().unwrap().to_string().contains("item 300"));
        assert!(map_on_every_core(&[] as &[u32], |&i| Ok(i)).unwrap().is_empty());
    }

    #[test]
    fn a_thread_limit_bounds_the_threads_until_it_is_lifted() {
        use std::collections::HashSet;
        use std::sync::Mutex;
        let items: Vec<u32> = (0..64).collect();
        let threads_of = |items: &[u32]| {
            let seen = Mutex::new(HashSet::new());
            map_on_every_core(items, |&i| {
                seen.lock().unwrap().insert(std::thread::current().id());
                Ok(i)
            })
            .unwrap();
            seen.into_inner().unwrap().len()
        };
        assert_eq!(with_thread_limit(1, || threads_of(&items)), 1);
        assert_eq!(THREAD_LIMIT.load(Ordering::SeqCst), 0);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(threads_of(&items) <= cores);
    }
}
