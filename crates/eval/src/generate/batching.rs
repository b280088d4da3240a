//! Batches of prompts for generation: sorted by length and packed while the rows times the longest
//! prompt and the new tokens (what the key/value cache grows to) stay within a token budget and the
//! rows within a cap; each batch left-padded, so that every row's last prompt token is in the last
//! column and the new tokens of all rows follow in step, as transformers pads for `generate`.
use tch::{Device, Tensor};

/// Prompt indices in batches, shortest first (ties in input order), each batch as many prompts as
/// keep `rows × (longest + max_new_tokens) ≤ token_budget` and `rows ≤ max_rows` (at least one
/// prompt, however long).
pub(crate) fn plan(lengths: &[usize], max_new_tokens: usize, token_budget: usize, max_rows: usize) -> Vec<Vec<usize>> {
    indolm_torch::data::batching::bucket_by_length(lengths, max_new_tokens, token_budget, max_rows)
}

/// A left-padded batch on a device: ids and mask [rows, width] and the width.
pub(crate) type LeftPadded = (Tensor, Tensor, i64);

/// `prompts` left-padded with `pad` to the longest: ids and mask (1 at real tokens) [rows, width]
/// on `device`, and the width.
pub(crate) fn left_padded(prompts: &[&[i64]], pad: i64, device: Device) -> LeftPadded {
    let width = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    let mut ids = vec![pad; prompts.len() * width];
    let mut mask = vec![0i64; prompts.len() * width];
    for (r, prompt) in prompts.iter().enumerate() {
        let start = r * width + width - prompt.len();
        ids[start..start + prompt.len()].copy_from_slice(prompt);
        mask[start..start + prompt.len()].fill(1);
    }
    let shape = [prompts.len() as i64, width as i64];
    let on_device = |values: &[i64]| Tensor::from_slice(values).view(shape).to_device(device);
    (on_device(&ids), on_device(&mask), width as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_keep_the_cache_within_the_budget_and_the_row_cap() {
        // Cache rows of 2 + 3, 4 + 3, 9 + 3 tokens: a budget of 14 takes the two shortest together.
        assert_eq!(plan(&[9, 2, 4], 3, 14, 10), vec![vec![1, 2], vec![0]]);
        assert_eq!(plan(&[9, 2, 4], 3, 1000, 10), vec![vec![1, 2, 0]]);
        assert_eq!(plan(&[9, 2, 4], 3, 1000, 2), vec![vec![1, 2], vec![0]]);
        // A prompt over the budget still gets a batch of its own.
        assert_eq!(plan(&[50, 2], 3, 10, 10), vec![vec![1], vec![0]]);
        assert!(plan(&[], 3, 10, 10).is_empty());
    }

    #[test]
    fn prompts_are_padded_on_the_left() {
        let (ids, mask, width) = left_padded(&[&[5, 6, 7], &[8]], 0, Device::Cpu);
        assert_eq!(width, 3);
        assert_eq!(Vec::<i64>::try_from(&ids.view([-1])).unwrap(), vec![5, 6, 7, 0, 0, 8]);
        assert_eq!(Vec::<i64>::try_from(&mask.view([-1])).unwrap(), vec![1, 1, 1, 0, 0, 1]);
    }
}
