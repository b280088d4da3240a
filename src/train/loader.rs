//! The next micro-batches, drawn from the mixture and masked on a background thread while the
//! device trains on the current one (a few batches ahead), and on CUDA put in pinned host memory
//! so that their copy to the device does not block. The batches and their order are exactly those
//! the loop would draw itself: each batch carries the mixture's cursor after it, and the
//! trainer's state takes it as it consumes the batch, so a checkpoint records what was trained
//! on, never what was prefetched. In a data-parallel run every rank draws and masks the same
//! global micro-batch and keeps its own rows.
use super::masking::{MaskedBatch, Masker};
use crate::data::mixture::{Cursor, Mixture};
use crate::error::{Error, Result};
use crate::model::IGNORE_INDEX;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use tch::{Device, Kind, Tensor};

/// Micro-batches prepared ahead of the one in training.
const AHEAD: usize = 2;

/// One micro-batch, ready for the device.
pub struct LoadedBatch {
    /// This process's rows of the masked inputs [rows, seq], on the host (pinned on CUDA).
    input_ids: Tensor,
    /// The flat positions (`row * seq + column`) of the tokens to predict in these rows, found
    /// here on the host, so that the device never has to be asked where they are (a `nonzero`
    /// there makes the host wait); position 0 when there is none (its loss then counts 0).
    positions: Tensor,
    /// The original token at each of those positions.
    targets: Tensor,
    /// Tokens to predict in these rows.
    pub masked: usize,
    /// Tokens to predict in the whole global micro-batch (all ranks' rows).
    pub batch_masked: usize,
    /// The mixture's cursor once this micro-batch is drawn.
    pub cursor_after: Cursor,
}

/// A micro-batch on the device.
pub struct DeviceBatch {
    /// The masked inputs [rows, seq].
    pub input_ids: Tensor,
    /// The flat positions of the tokens to predict.
    pub positions: Tensor,
    /// The tokens to predict there.
    pub targets: Tensor,
}

impl LoadedBatch {
    /// The batch on `device`: the copies are asked for as non-blocking, so from pinned memory
    /// (CUDA) they are queued, not waited for (on the CPU they are no copies at all).
    pub fn to_device(&self, device: Device) -> DeviceBatch {
        let copy = |t: &Tensor| t.to_device_(device, Kind::Int64, true, false);
        DeviceBatch { input_ids: copy(&self.input_ids), positions: copy(&self.positions), targets: copy(&self.targets) }
    }
}

/// Which rows of each global micro-batch this process trains on: rank `rank` of `world`.
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    /// This process's rank.
    pub rank: usize,
    /// The number of processes.
    pub world: usize,
}

impl Slice {
    /// This rank's rows of `batch`.
    pub fn rows_of(&self, batch: &MaskedBatch) -> MaskedBatch {
        let per = batch.rows / self.world;
        let span = self.rank * per * batch.cols..(self.rank + 1) * per * batch.cols;
        MaskedBatch {
            input_ids: batch.input_ids[span.clone()].to_vec(),
            labels: batch.labels[span].to_vec(),
            rows: per,
            cols: batch.cols,
        }
    }
}

/// Tokens to predict in `labels`.
fn masked(labels: &[i64]) -> usize {
    labels.iter().filter(|&&l| l != IGNORE_INDEX).count()
}

/// The flat positions of the predicted tokens in `batch` and their targets; position 0 with its
/// own token when nothing is predicted (a row that still reaches every weight, its loss weighted
/// by 0).
fn predicted(batch: &MaskedBatch) -> (Vec<i64>, Vec<i64>) {
    let (positions, targets): (Vec<i64>, Vec<i64>) =
        batch.labels.iter().enumerate().filter(|(_, &l)| l != IGNORE_INDEX).map(|(i, &l)| (i as i64, l)).unzip();
    if positions.is_empty() {
        return (vec![0], vec![batch.input_ids.first().copied().unwrap_or(0)]);
    }
    (positions, targets)
}

/// The background thread drawing micro-batches, and the receiving end of its queue.
pub struct Loader {
    receiver: Option<Receiver<LoadedBatch>>,
    worker: Option<JoinHandle<Mixture>>,
}

impl Loader {
    /// Starts drawing `batch_size` sequences a micro-batch from `mixture` at `cursor` (each
    /// sequence masked with the stream of its number in the run); `slice` keeps one rank's rows;
    /// `device` decides whether host batches are pinned (CUDA).
    pub fn start(
        mut mixture: Mixture,
        masker: Arc<Masker>,
        mut cursor: Cursor,
        batch_size: usize,
        slice: Option<Slice>,
        device: Device,
    ) -> Self {
        let (sender, receiver) = sync_channel(AHEAD);
        let worker = std::thread::Builder::new()
            .name("indolm-batches".into())
            .spawn(move || {
                // Host work beside the update: not among the update's operations.
                crate::device::op_counts::exclude_this_thread();
                loop {
                    let first = cursor.sequences;
                    let sequences = mixture.next_sequences(&mut cursor, batch_size);
                    let batch = masker.mask(&sequences, first);
                    let batch_masked = masked(&batch.labels);
                    let rows = match slice {
                        Some(slice) => slice.rows_of(&batch),
                        None => batch,
                    };
                    let host = |ids: &[i64]| {
                        let t = Tensor::from_slice(ids);
                        match device {
                            Device::Cuda(_) => t.f_pin_memory(device).unwrap_or(t),
                            _ => t,
                        }
                    };
                    let (positions, targets) = predicted(&rows);
                    let loaded = LoadedBatch {
                        input_ids: host(&rows.input_ids).view([rows.rows as i64, rows.cols as i64]),
                        positions: host(&positions),
                        targets: host(&targets),
                        masked: masked(&rows.labels),
                        batch_masked,
                        cursor_after: cursor.clone(),
                    };
                    if sender.send(loaded).is_err() {
                        return mixture; // the trainer is done with batches
                    }
                }
            })
            .expect("starting the batch thread");
        Loader { receiver: Some(receiver), worker: Some(worker) }
    }

    /// The next micro-batch (waiting for it if the thread is behind).
    pub fn next_batch(&mut self) -> Result<LoadedBatch> {
        self.receiver.as_ref().and_then(|r| r.recv().ok()).ok_or_else(|| {
            Error::training("the batch thread", "stopped without a batch (it panicked; see the message above)")
        })
    }

    /// Stops the thread and hands the mixture back.
    pub fn finish(mut self) -> Option<Mixture> {
        self.stop()
    }

    fn stop(&mut self) -> Option<Mixture> {
        drop(self.receiver.take()); // a thread waiting to send gets an error and returns
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop();
    }
}
