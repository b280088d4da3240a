//! Encoder-decoder LMs from Hugging Face directories: T5 and mT5 (`T5ForConditionalGeneration`,
//! `MT5ForConditionalGeneration`; mT0 is an mT5) as transformers 5 computes them, for scoring;
//! and mBART (`mbart`: mBART-50 and IndoBART's layout), a trainable network of its own, with
//! transformers' beam search (`beam`). The family and
//! sizes come from `config.json` (`config`), the network is `t5`, the tokenizer the directory's
//! own `tokenizer.json` (`tokenizer`), opened, like `config.json`, through what causal LMs share
//! ([`crate::model::hf_folder`]). The weights are memory-mapped by the decoders' loader
//! ([`crate::model::decoder::load::Weights`]: single or sharded safetensors, or
//! `pytorch_model.bin`) and keep HF's names as `VarStore` paths.
pub mod beam;
pub mod config;
pub mod mbart;
pub(crate) mod t5;
pub mod tokenizer;

pub use config::{FeedForwardAct, Seq2SeqConfig, Seq2SeqFamily};
pub use tokenizer::Seq2SeqTokenizer;

use crate::error::Result;
use crate::model::decoder::load::Weights;
use crate::model::hf_folder;
use std::path::Path;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// An encoder-decoder LM ready to score: network, variables, configuration, tokenizer.
pub struct Seq2SeqLm {
    net: t5::T5,
    /// Its weights under their HF names (views of the mapped files where dtype and device allow).
    pub vs: VarStore,
    /// The configuration.
    pub config: Seq2SeqConfig,
    /// The directory's tokenizer.
    pub tokenizer: Seq2SeqTokenizer,
    /// The dtype the forward pass runs in (fp32 on CPU, bf16 on CUDA).
    pub kind: Kind,
    /// Where it runs.
    pub device: Device,
    /// Checkpoint tensors the network does not use (sorted).
    pub unused: Vec<String>,
    _maps: Vec<std::sync::Arc<memmap2::MmapMut>>,
}

/// Whether `dir`'s `config.json` describes a T5 or mT5 encoder-decoder (`model_type` t5 or mt5,
/// or without one, `architectures` naming `T5ForConditionalGeneration` or
/// `MT5ForConditionalGeneration`). False for a missing or unreadable config.
pub fn is_seq2seq_dir(dir: &Path) -> bool {
    crate::model::hf_folder::peek_config(dir).is_some_and(|v| Seq2SeqFamily::of(&v).is_some())
}

/// Loads the encoder-decoder in `dir` onto `device`, in fp32 on the CPU and bf16 on CUDA.
pub fn load_seq2seq_lm(dir: &Path, device: Device) -> Result<Seq2SeqLm> {
    load_seq2seq_lm_as(dir, device, crate::model::decoder::run_kind(device))
}

/// Loads the encoder-decoder in `dir` onto `device`, its weights cast to `kind`.
pub(crate) fn load_seq2seq_lm_as(dir: &Path, device: Device, kind: Kind) -> Result<Seq2SeqLm> {
    let config_path = hf_folder::config_path(
        dir,
        "an encoder-decoder directory holds config.json, model.safetensors (or shards, or pytorch_model.bin) and tokenizer.json",
    )?;
    let config = Seq2SeqConfig::from_file(&config_path)?;
    let tokenizer = Seq2SeqTokenizer::from_dir(dir)?;
    hf_folder::check_tokenizer_fits(&config_path, &tokenizer.source, tokenizer.vocab_size(), config.vocab_size)?;
    let mut weights = Weights::open(dir, kind, device)?;
    let vs = VarStore::new(device);
    let net = tch::no_grad(|| t5::T5::take(&mut weights, &vs, &config))?;
    let unused = weights.leftover();
    Ok(Seq2SeqLm { net, vs, config, tokenizer, kind, device, unused, _maps: weights.maps })
}

impl Seq2SeqLm {
    /// The encoder's output [batch, seq, d_model] of right-padded `ids` [batch, seq] whose real
    /// tokens are marked 1 in `mask`.
    pub fn encode(&self, ids: &Tensor, mask: &Tensor) -> Tensor {
        self.net.encode(ids, mask, self.kind)
    }

    /// The decoder's final hidden states [rows, t, d_model] of decoder inputs `ids` [rows, t]
    /// (causal: right padding changes no earlier position), row i reading encoder row
    /// `rows[i]` of `encoded` (from [`Self::encode`], real tokens marked 1 in `encoder_mask`).
    pub fn decode(&self, ids: &Tensor, encoded: &Tensor, encoder_mask: &Tensor, rows: &Tensor) -> Tensor {
        self.net.decode(ids, encoded, encoder_mask, rows)
    }

    /// The head's logits (fp32) of decoder states [.., d_model].
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        self.net.logits(hidden)
    }
}
