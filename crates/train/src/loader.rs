//! The next micro-batches, drawn from a task's source on a background thread while the device
//! trains on the current one (a few batches ahead). The batches and their order are exactly
//! those the loop would draw itself: each carries the source's cursor after it, and the engine
//! takes it as it trains on the batch, so a checkpoint records what was trained on, never what
//! was prefetched.
use super::task::{BatchSource, Drawn};
use indolm_torch::error::{Error, Result};
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// Micro-batches prepared ahead of the one in training.
const AHEAD: usize = 2;

/// One micro-batch and the source's cursor once it is drawn.
pub(crate) struct Loaded<S: BatchSource> {
    /// The micro-batch (this rank's rows) and its units of loss.
    pub drawn: Drawn<S::Batch>,
    /// The cursor after it.
    pub cursor_after: S::Cursor,
}

/// The background thread drawing micro-batches, and the receiving end of its queue.
pub(crate) struct Loader<S: BatchSource> {
    receiver: Option<Receiver<Loaded<S>>>,
    worker: Option<JoinHandle<S>>,
}

impl<S: BatchSource> Loader<S> {
    /// Starts drawing from `source` at `cursor`.
    pub(crate) fn start(mut source: S, mut cursor: S::Cursor) -> Self {
        let (sender, receiver) = sync_channel(AHEAD);
        let worker = std::thread::Builder::new()
            .name("indolm-batches".into())
            .spawn(move || {
                // Host work beside the update: not among the update's operations.
                indolm_torch::device::op_counts::exclude_this_thread();
                loop {
                    let drawn = source.next(&mut cursor);
                    if sender.send(Loaded { drawn, cursor_after: cursor.clone() }).is_err() {
                        return source; // the engine is done with batches
                    }
                }
            })
            .expect("starting the batch thread");
        Loader { receiver: Some(receiver), worker: Some(worker) }
    }

    /// The next micro-batch (waiting for it if the thread is behind).
    pub(crate) fn next_batch(&mut self) -> Result<Loaded<S>> {
        self.receiver.as_ref().and_then(|r| r.recv().ok()).ok_or_else(|| {
            Error::training("the batch thread", "stopped without a batch (it panicked; see the message above)")
        })
    }

    /// Stops the thread and hands the source back.
    pub fn finish(mut self) -> Option<S> {
        self.stop()
    }

    fn stop(&mut self) -> Option<S> {
        drop(self.receiver.take()); // a thread waiting to send gets an error and returns
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl<S: BatchSource> Drop for Loader<S> {
    fn drop(&mut self) {
        self.stop();
    }
}
