//! Work spread over every core: a slice cut into one contiguous chunk per thread, each item
//! mapped in its chunk, the results kept in the slice's order, and the first error (in that
//! order) returned.
use crate::error::Result;

/// `f` of every item of `items`, in order, computed on every core.
pub(crate) fn map_on_every_core<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> Result<R> + Sync) -> Result<Vec<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len()).max(1);
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
}
