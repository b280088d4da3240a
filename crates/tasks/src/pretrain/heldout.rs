//! The held-out MLM loss: a fixed set of sequences each source kept out of training, scored with
//! masks fixed by the seed, so every checkpoint is measured on the same predictions. In a
//! data-parallel run the ranks share its batches (see [`Heldout::loss`]).
use super::masking::Masker;
use super::recipe::MlmEvalSection;
use super::salt;
use indolm_torch::data::mixture::Mixture;
use indolm_torch::error::Result;
use indolm_torch::hooks::Share;
use indolm_torch::model::BertForMaskedLM;
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

    /// Mean masked-LM loss over the held-out sequences, in batches of `batch_size` sequences.
    /// The ranks of `share` score whole batches in turn, each batch's summed loss and count are
    /// combined exactly, and the sums run over the batches in order, as one process sums them:
    /// the loss is bit for bit the single process's.
    pub fn loss(
        &self,
        model: &BertForMaskedLM,
        masker: &Masker,
        batch_size: usize,
        device: Device,
        share: &dyn Share,
    ) -> Result<f64> {
        let batches: Vec<&[(usize, Vec<i64>)]> = self.sequences.chunks(batch_size).collect();
        // Per batch: its tokens' summed loss (its mean loss times its count), and its count.
        let mut sums = vec![0.0f64; 2 * batches.len()];
        tch::no_grad(|| {
            for (i, chunk) in batches.iter().enumerate() {
                if !share.take(chunk.len()) {
                    continue;
                }
                let seqs: Vec<Vec<i64>> = chunk.iter().map(|(_, s)| s.clone()).collect();
                let batch = masker.mask(&seqs, (salt::HELDOUT_MASKS << 48) | (i * batch_size) as u64);
                let (ids, labels) = batch.tensors(device);
                let out = model.mlm_loss(&ids, None, None, &labels, false);
                sums[2 * i] = out.loss.to_kind(Kind::Double).double_value(&[]) * out.predicted as f64;
                sums[2 * i + 1] = out.predicted as f64;
            }
        });
        share.combine(&mut sums, "the held-out loss")?;
        let (mut total, mut count) = (0.0, 0i64);
        for batch in sums.chunks(2) {
            total += batch[0];
            count += batch[1] as i64;
        }
        Ok(total / count.max(1) as f64)
    }
}
