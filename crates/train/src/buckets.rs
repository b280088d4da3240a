//! How data-parallel training cuts its flat gradient buffers into buckets, each all-reduced as
//! soon as backward has finished its gradients ([`crate::data_parallel`]): runs of
//! consecutive parameters up to a size, launched in the order their last gradient becomes ready.

/// The first bucket of each flat buffer: small, so that the first all-reduce starts early in
/// backward (DDP's `first_bucket_bytes_cap`).
const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// A bucket of a flat gradient buffer: `len` elements from `offset` of layout `layout`, holding
/// the parameters `members` (indices in the reducer's list).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BucketPlan {
    pub layout: usize,
    pub offset: i64,
    pub len: i64,
    pub members: Vec<usize>,
}

/// Cuts each layout (its parameters in buffer order: index in the reducer's list, element count)
/// into buckets of consecutive parameters of at most `cap` bytes (the first of each layout at
/// most [`FIRST_BUCKET_BYTES`]; a parameter larger than that alone), `element_bytes` each, and
/// orders all the buckets by when their last gradient becomes ready (`ready`: per parameter, its
/// position in backward's order; the layout's order breaks ties). Every rank computes the same
/// plan from the same layouts and order, so every rank launches the same collectives in the same
/// order.
pub(crate) fn plan_buckets(layouts: &[(Vec<(usize, i64)>, usize)], ready: &[usize], cap: usize) -> Vec<BucketPlan> {
    let mut plans: Vec<(usize, BucketPlan)> = Vec::new();
    for (layout, (members, element_bytes)) in layouts.iter().enumerate() {
        let mut offset = 0i64;
        let mut current: Option<BucketPlan> = None;
        let mut first = true;
        for &(param, numel) in members {
            let limit = if first { FIRST_BUCKET_BYTES.min(cap) } else { cap };
            if let Some(b) = current.as_mut() {
                if (b.len + numel) as usize * element_bytes > limit {
                    plans.push((0, current.take().expect("a bucket")));
                    first = false;
                }
            }
            let b = current.get_or_insert(BucketPlan { layout, offset, len: 0, members: Vec::new() });
            b.len += numel;
            b.members.push(param);
            offset += numel;
        }
        plans.extend(current.map(|b| (0, b)));
    }
    for (at, b) in &mut plans {
        *at = b.members.iter().map(|&m| ready.get(m).copied().unwrap_or(usize::MAX)).max().unwrap_or(usize::MAX);
    }
    plans.sort_by_key(|(at, b)| (*at, b.layout, b.offset));
    plans.into_iter().map(|(_, b)| b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets are runs of consecutive parameters of a layout up to the cap (the first of each
    /// layout up to 1 MiB, a parameter larger than the cap alone), launched in the order their
    /// last gradient becomes ready.
    #[test]
    fn buckets_follow_the_layouts_and_launch_in_ready_order() {
        const MIB: i64 = 1 << 18; // fp32 elements in a MiB
                                  // Layout 0 (decay) in ready order: parameters 4, 2, 0 (0.5, 0.75 and 3 MiB); layout 1
                                  // (no decay): 3, 1 (tiny), ready in between and last.
        let layouts = vec![(vec![(4, MIB / 2), (2, 3 * MIB / 4), (0, 3 * MIB)], 4), (vec![(3, 10), (1, 20)], 4)];
        let ready = [4, 5, 1, 2, 0];
        let plans = plan_buckets(&layouts, &ready, 2 << 20);
        let summary: Vec<(usize, i64, i64, Vec<usize>)> =
            plans.iter().map(|b| (b.layout, b.offset, b.len, b.members.clone())).collect();
        assert_eq!(
            summary,
            vec![
                // 4 alone: with 2 (1.25 MiB) it would pass the first bucket's 1 MiB.
                (0, 0, MIB / 2, vec![4]),
                // 2, then 0 alone (3 MiB is over the 2 MiB cap); ready at positions 1 and 4.
                (0, MIB / 2, 3 * MIB / 4, vec![2]),
                (0, 5 * MIB / 4, 3 * MIB, vec![0]),
                // Ready at position 5, the last.
                (1, 0, 30, vec![3, 1]),
            ]
        );
        // Every parameter in exactly one bucket; the slices tile each layout.
        let mut members: Vec<usize> = plans.iter().flat_map(|b| b.members.clone()).collect();
        members.sort();
        assert_eq!(members, vec![0, 1, 2, 3, 4]);
        // A cap of 0 bytes still makes buckets (one parameter each); no recorded order keeps
        // the layouts' own.
        let alone = plan_buckets(&layouts, &[], 0);
        assert_eq!(alone.len(), 5);
        assert!(alone.windows(2).all(|w| (w[0].layout, w[0].offset) < (w[1].layout, w[1].offset)));
    }
}
