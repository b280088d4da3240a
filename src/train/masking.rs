//! Dynamic masking for the masked-LM objective, as BERT and HF's data collator do: each
//! ordinary token is chosen with probability `probability`; a chosen token becomes `[MASK]`
//! (80%), a random token (10%) or stays (10%), and only chosen tokens are predicted.
//! Optionally whole words (a piece and its `##` continuations) are chosen together. The
//! random stream is derived from the seed and the micro-batch number, so masks never depend
//! on anything but the recipe and the position in the run.
use crate::data::tokenizer::{SpecialIds, TextTokenizer};
use crate::model::IGNORE_INDEX;
use crate::recipe::pretrain::MaskingSection;
use crate::seeds::{salt, stream_rng};
use rand::Rng;
use tch::{Device, Tensor};

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
    pub input_ids: Vec<i64>,
    pub labels: Vec<i64>,
    pub rows: usize,
    pub cols: usize,
}

impl MaskedBatch {
    /// The batch as (input ids, labels) tensors of shape [rows, cols] on `device`.
    pub fn tensors(&self, device: Device) -> (Tensor, Tensor) {
        let shape = [self.rows as i64, self.cols as i64];
        (
            Tensor::from_slice(&self.input_ids).view(shape).to_device(device),
            Tensor::from_slice(&self.labels).view(shape).to_device(device),
        )
    }
}

impl Masker {
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

    /// Masks equal-length `sequences`; `stream` numbers the micro-batch in the run.
    pub fn mask(&self, sequences: &[Vec<i64>], stream: u64) -> MaskedBatch {
        let mut rng = stream_rng(self.seed, salt::MASKING, stream);
        let cols = sequences.first().map_or(0, Vec::len);
        let mut input_ids = Vec::with_capacity(sequences.len() * cols);
        let mut labels = Vec::with_capacity(sequences.len() * cols);
        let p = self.settings.probability;
        for seq in sequences {
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
