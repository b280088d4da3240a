//! The held-out MLM loss: a fixed set of sequences each source kept out of training, scored with
//! masks fixed by the seed, so every checkpoint is measured on the same predictions.
use super::masking::Masker;
use super::recipe::MlmEvalSection;
use crate::data::mixture::Mixture;
use crate::model::BertForMaskedLM;
use crate::seeds::salt;
use tch::{Device, Kind};

/// The held-out sequences of a run (when they are scored is the task's evaluation plan).
pub(crate) struct Heldout {
    sequences: Vec<(usize, Vec<i64>)>,
}

impl Heldout {
    /// `sequences_per_source` held-out sequences of each source of `mixture`.
    pub fn new(mixture: &Mixture, settings: &MlmEvalSection) -> Self {
        Heldout { sequences: mixture.heldout_sequences(settings.sequences_per_source) }
    }

    /// Mean masked-LM loss over the held-out sequences.
    pub fn loss(&self, model: &BertForMaskedLM, masker: &Masker, batch_size: usize, device: Device) -> f64 {
        let (mut total, mut count) = (0.0, 0i64);
        tch::no_grad(|| {
            for (i, chunk) in self.sequences.chunks(batch_size).enumerate() {
                let seqs: Vec<Vec<i64>> = chunk.iter().map(|(_, s)| s.clone()).collect();
                let batch = masker.mask(&seqs, (salt::HELDOUT_MASKS << 48) | (i * batch_size) as u64);
                let (ids, labels) = batch.tensors(device);
                let out = model.mlm_loss(&ids, None, None, &labels, false);
                total += out.loss.to_kind(Kind::Double).double_value(&[]) * out.predicted as f64;
                count += out.predicted;
            }
        });
        total / count.max(1) as f64
    }
}
