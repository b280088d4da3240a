//! Batches for inference by length: items sorted by their token count, packed greedily so that
//! a batch's padded size (items × its longest) stays under a token budget. Similar lengths share
//! a batch, so little of it is padding; callers put each result back in the input's order.

/// Padded tokens per forward pass for inference on `device`: 8,192 on CPU, 65,536 on CUDA.
pub fn token_budget(device: tch::Device) -> usize {
    if device.is_cuda() {
        65_536
    } else {
        8_192
    }
}

/// Item indices in batches: shortest first (ties in input order), each batch as many items as
/// keep `items × longest ≤ token_budget` (at least one item, however long).
pub fn by_length(lengths: &[usize], token_budget: usize) -> Vec<Vec<usize>> {
    bucket_by_length(lengths, 0, token_budget, usize::MAX)
}

/// Item indices in batches, shortest first (ties in input order), each batch as many items as
/// keep `rows × (longest + per_row_extra) ≤ token_budget` and `rows ≤ max_rows` (at least one
/// item, however long). `per_row_extra` is what each row grows by beyond its item (generation's
/// new tokens); the one length bucketing of the scorers ([`by_length`]) and of generation.
pub fn bucket_by_length(
    lengths: &[usize],
    per_row_extra: usize,
    token_budget: usize,
    max_rows: usize,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| (lengths[i], i));
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        // Sorted by length: the last item of a batch is its longest.
        let mut end = start + 1;
        while end < order.len()
            && end - start < max_rows
            && (end + 1 - start).saturating_mul(lengths[order[end]].saturating_add(per_row_extra)) <= token_budget
        {
            end += 1;
        }
        batches.push(order[start..end].to_vec());
        start = end;
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_sorted_packed_under_the_budget_and_cover_every_item_once() {
        let lengths = [5, 1, 9, 3, 3, 20, 2];
        let batches = by_length(&lengths, 10);
        // Sorted: 1 (1), 6 (2), 3 (3), 4 (3), 0 (5), 2 (9), 5 (20).
        assert_eq!(batches, vec![vec![1, 6, 3], vec![4, 0], vec![2], vec![5]]);
        for b in &batches {
            let longest = b.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(b.len() == 1 || b.len() * longest <= 10, "{b:?}");
        }
        let mut all: Vec<usize> = batches.concat();
        all.sort();
        assert_eq!(all, (0..lengths.len()).collect::<Vec<_>>());
        assert!(by_length(&[], 10).is_empty());
    }
}
