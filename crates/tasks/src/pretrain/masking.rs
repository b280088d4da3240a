//! Dynamic masking for the masked-LM objective, as BERT and HF's data collator do: each
//! ordinary token is chosen with probability `probability`; a chosen token becomes `[MASK]`
//! (80%), a random token (10%) or stays (10%), and only chosen tokens are predicted.
//! Optionally whole words (a piece and its `##` continuations) are chosen together. The
//! random stream is derived from the seed and the micro-batch number, so masks never depend
//! on anything but the recipe and the position in the run.
use super::recipe::MaskingSection;
use super::salt;
use indolm_core::seeds::stream_rng;
use indolm_torch::data::tokenizer::{SpecialIds, TextTokenizer};
use indolm_torch::model::IGNORE_INDEX;
use rand::Rng;
use tch::{Device, Tensor};

/// Masks batches of token sequences for the masked-LM objective, reproducibly from the seed.
pub struct Masker {
    settings: MaskingSection,
    special: SpecialIds,
    vocab_size: i64,
    /// `is_continuation[id]`: the piece continues a word (`##...`).
    is_continuation: Vec<bool>,
    seed: u64,
}

/// Masked inputs and labels (`IGNORE_INDEX` where nothing is predicted), row-major.
pub struct MaskedBatch {
    /// The inputs, masked: `[MASK]`, a random id or the original at chosen positions.
    pub input_ids: Vec<i64>,
    /// The original id at chosen positions, `IGNORE_INDEX` elsewhere.
    pub labels: Vec<i64>,
    /// Sequences in the batch.
    pub rows: usize,
    /// Tokens per sequence.
    pub cols: usize,
}

impl MaskedBatch {
    /// The batch as (input ids, labels) tensors of shape [rows, cols] on `device`.
    pub(crate) fn tensors(&self, device: Device) -> (Tensor, Tensor) {
        let shape = [self.rows as i64, self.cols as i64];
        (
            Tensor::from_slice(&self.input_ids).view(shape).to_device(device),
            Tensor::from_slice(&self.labels).view(shape).to_device(device),
        )
    }
}

impl Masker {
    /// A masker with the recipe's `[masking]` settings for `tokenizer`'s vocabulary and specials.
    pub fn new(settings: MaskingSection, tokenizer: &TextTokenizer, seed: u64) -> Self {
        let vocab_size = tokenizer.vocab_size();
        let is_continuation =
            (0..vocab_size as u32).map(|i| tokenizer.id_to_token(i).is_some_and(|t| t.starts_with("##"))).collect();
        Masker { settings, special: tokenizer.special, vocab_size: vocab_size as i64, is_continuation, seed }
    }

    fn is_special(&self, id: i64) -> bool {
        let s = &self.special;
        id == s.cls || id == s.sep || id == s.pad || id == s.mask
    }

    /// Masks equal-length `sequences`, row `r` with the random stream of sequence number
    /// `first + r` of the run, so that the masks of a sequence do not depend on how the
    /// sequences are cut into micro-batches (another batch size, accumulation or world size).
    pub fn mask(&self, sequences: &[Vec<i64>], first: u64) -> MaskedBatch {
        let cols = sequences.first().map_or(0, Vec::len);
        let mut input_ids = Vec::with_capacity(sequences.len() * cols);
        let mut labels = Vec::with_capacity(sequences.len() * cols);
        let p = self.settings.probability;
        for (row, seq) in sequences.iter().enumerate() {
            let mut rng = stream_rng(self.seed, salt::MASKING, first + row as u64);
            let mut chosen = vec![false; seq.len()];
            let mut i = 0;
            while i < seq.len() {
                // A unit is one token, or with whole-word masking a word's pieces together.
                let mut end = i + 1;
                if self.settings.whole_word {
                    while end < seq.len() && self.is_continuation.get(seq[end] as usize).copied().unwrap_or(false) {
                        end += 1;
                    }
                }
                if !self.is_special(seq[i]) && rng.random::<f64>() < p {
                    chosen[i..end].iter_mut().for_each(|c| *c = true);
                }
                i = end;
            }
            for (j, &id) in seq.iter().enumerate() {
                if !chosen[j] || self.is_special(id) {
                    input_ids.push(id);
                    labels.push(IGNORE_INDEX);
                    continue;
                }
                labels.push(id);
                let r: f64 = rng.random();
                if r < self.settings.mask_fraction {
                    input_ids.push(self.special.mask);
                } else if r < self.settings.mask_fraction + self.settings.random_fraction {
                    input_ids.push(rng.random_range(0..self.vocab_size));
                } else {
                    input_ids.push(id);
                }
            }
        }
        // A batch with nothing to predict would give a NaN loss: predict one token then.
        if !labels.iter().any(|&l| l != IGNORE_INDEX) {
            if let Some(j) = input_ids.iter().position(|&id| !self.is_special(id)) {
                labels[j] = input_ids[j];
                input_ids[j] = self.special.mask;
            }
        }
        MaskedBatch { input_ids, labels, rows: sequences.len(), cols }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vocabulary of the five specials, 20 word starts `w0..w19` and 20 continuations `##c0..##c19`.
    fn tokenizer() -> TextTokenizer {
        let dir = std::env::temp_dir().join(format!("indolm-masking-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(String::from).to_vec();
        vocab.extend((0..20).map(|i| format!("w{i}")));
        vocab.extend((0..20).map(|i| format!("##c{i}")));
        let path = dir.join("vocab.txt");
        std::fs::write(&path, vocab.join("\n") + "\n").unwrap();
        TextTokenizer::from_vocab_txt(&path, true).unwrap()
    }

    fn masker(tok: &TextTokenizer, probability: f64, whole_word: bool) -> Masker {
        let settings = MaskingSection { probability, whole_word, ..MaskingSection::default() };
        Masker::new(settings, tok, 3407)
    }

    /// `[CLS] w.. ##c.. … [SEP]`: words of one to three pieces.
    fn sequences(tok: &TextTokenizer, rows: usize, cols: usize) -> Vec<Vec<i64>> {
        let s = tok.special;
        (0..rows)
            .map(|r| {
                let mut seq = vec![s.cls];
                for i in 1..cols - 1 {
                    let continuation = (r + i) % 3 != 0 && i > 1;
                    seq.push(5 + (i % 20) as i64 + if continuation { 20 } else { 0 });
                }
                seq.push(s.sep);
                seq
            })
            .collect()
    }

    #[test]
    fn chosen_tokens_follow_bert_s_shares_and_specials_are_never_chosen() {
        let tok = tokenizer();
        let m = masker(&tok, 0.15, false);
        let seqs = sequences(&tok, 64, 128);
        let batch = m.mask(&seqs, 0);
        let (mut chosen, mut as_mask, mut kept) = (0usize, 0usize, 0usize);
        let originals: Vec<i64> = seqs.concat();
        for ((&input, &label), &original) in batch.input_ids.iter().zip(&batch.labels).zip(&originals) {
            if label == IGNORE_INDEX {
                assert_eq!(input, original, "an unchosen token is left as it is");
                continue;
            }
            assert_eq!(label, original, "a chosen token's label is the original id");
            assert!(original != tok.special.cls && original != tok.special.sep, "specials are never chosen");
            chosen += 1;
            as_mask += (input == tok.special.mask) as usize;
            kept += (input == original) as usize;
        }
        let ordinary = 64 * 126;
        let share = chosen as f64 / ordinary as f64;
        // 8,064 Bernoulli(0.15) draws: the standard deviation of the share is 0.004.
        assert!((share - 0.15).abs() < 0.02, "chose {share:.3} of the tokens");
        let mask_share = as_mask as f64 / chosen as f64;
        assert!((mask_share - 0.8).abs() < 0.05, "{mask_share:.3} of the chosen became [MASK]");
        // "kept" counts the 10% left unchanged plus random draws that hit the original (1/45).
        let kept_share = kept as f64 / chosen as f64;
        assert!((kept_share - 0.1).abs() < 0.04, "{kept_share:.3} of the chosen were kept");
        assert_eq!((batch.rows, batch.cols), (64, 128));
    }

    #[test]
    fn masks_depend_only_on_the_seed_and_the_stream() {
        let tok = tokenizer();
        let seqs = sequences(&tok, 8, 32);
        let a = masker(&tok, 0.15, false).mask(&seqs, 7);
        let b = masker(&tok, 0.15, false).mask(&seqs, 7);
        let c = masker(&tok, 0.15, false).mask(&seqs, 8);
        assert_eq!((&a.input_ids, &a.labels), (&b.input_ids, &b.labels));
        assert_ne!(a.labels, c.labels, "another micro-batch gets other masks");
    }

    #[test]
    fn whole_word_masking_takes_a_word_s_pieces_together() {
        let tok = tokenizer();
        let seqs = sequences(&tok, 16, 64);
        let batch = masker(&tok, 0.3, true).mask(&seqs, 0);
        let is_continuation = |id: i64| id >= 25;
        let flat: Vec<i64> = seqs.concat();
        let chosen: Vec<bool> = batch.labels.iter().map(|&l| l != IGNORE_INDEX).collect();
        for (i, window) in flat.windows(2).enumerate() {
            if is_continuation(window[1]) {
                assert_eq!(
                    chosen[i + 1],
                    chosen[i],
                    "piece {} ({}) was chosen apart from the piece before it",
                    i + 1,
                    window[1]
                );
            }
        }
        assert!(batch.labels.iter().any(|&l| l != IGNORE_INDEX));
    }

    #[test]
    fn a_batch_with_nothing_chosen_still_predicts_one_token() {
        let tok = tokenizer();
        let seqs = sequences(&tok, 2, 8);
        let batch = masker(&tok, 1e-12, false).mask(&seqs, 0);
        let predicted: Vec<usize> = (0..batch.labels.len()).filter(|&i| batch.labels[i] != IGNORE_INDEX).collect();
        assert_eq!(predicted, vec![1], "the first ordinary token is predicted, so the loss is not NaN");
        assert_eq!(batch.input_ids[1], tok.special.mask);
        assert_eq!(batch.labels[1], seqs[0][1]);
    }
}
