//! Examples drawn in epochs, as the fine-tuning tasks draw them (sentiment's texts, translation's
//! sentence pairs): each epoch a seeded shuffle of every example (the stream of its number), cut
//! into batches in that order, the last one shorter; where the order stands is a checkpoint's
//! cursor, so a resumed run draws the rest of the epoch it stopped in.
use indolm_core::seeds::stream_rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

/// Where the example order stands: the epoch, and the examples of it already drawn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EpochCursor {
    /// The epoch, from 0 (its order is shuffled with the stream of its number).
    pub epoch: u64,
    /// Examples of the epoch's order drawn so far.
    pub position: usize,
}

/// The seeded order of `examples` examples, epoch after epoch.
pub(crate) struct EpochOrder {
    examples: usize,
    seed: u64,
    salt: u64,
    /// The order of the epoch in use.
    order: Option<(u64, Vec<usize>)>,
}

impl EpochOrder {
    /// The order of `examples` examples shuffled with the run's `seed` and the task's `salt`.
    pub fn new(examples: usize, seed: u64, salt: u64) -> Self {
        EpochOrder { examples, seed, salt, order: None }
    }

    /// The next `batch_size` examples of the epoch's order (fewer at its end; the next epoch
    /// starts when one is used up), advancing `cursor`.
    pub fn next_batch(&mut self, cursor: &mut EpochCursor, batch_size: usize) -> Vec<usize> {
        let n = self.examples;
        if cursor.position >= n {
            cursor.epoch += 1;
            cursor.position = 0;
        }
        if self.order.as_ref().is_none_or(|(e, _)| *e != cursor.epoch) {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut stream_rng(self.seed, self.salt, cursor.epoch));
            self.order = Some((cursor.epoch, order));
        }
        let order = &self.order.as_ref().expect("set above").1;
        let start = cursor.position;
        let chunk = order[start..(start + batch_size).min(n)].to_vec();
        cursor.position += chunk.len();
        chunk
    }
}
