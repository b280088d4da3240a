//! indolm's torch layer, everything that holds tensors below the evaluations: the device and
//! precision (`device`), the data-parallel launch and process group (`distributed`), BERT and its
//! family, the causal LM families and encoder-decoders with HF's weight names (`model`), text,
//! tokenizers, corpora and downloads (`data`), AdamW on flat buffers and the schedules (`optim`),
//! and the checkpoint hook trait (`hooks`); the training engine is `indolm-train`, above it.
//! `error` is `indolm_core`'s errors with libtorch's errors made values ([`error::TorchContext`]).
#![warn(missing_docs)]

pub mod data;
pub mod device;
pub mod distributed;
pub mod hooks;
pub mod model;
pub mod optim;

/// indolm's errors ([`indolm_core::error`]) and the context added to libtorch's.
pub mod error {
    pub use indolm_core::error::*;

    /// Adds a context string to libtorch errors: `tensor.f_op(..).torch_ctx("attention")?`.
    pub trait TorchContext<T> {
        /// The error as [`Error::Torch`] with `context`.
        fn torch_ctx(self, context: &str) -> Result<T>;
    }

    impl<T> TorchContext<T> for std::result::Result<T, tch::TchError> {
        fn torch_ctx(self, context: &str) -> Result<T> {
            self.map_err(|e| Error::torch(context, e))
        }
    }
}
