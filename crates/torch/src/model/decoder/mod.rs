//! Causal (decoder-only) LMs from Hugging Face directories: the family chosen by
//! `config.json` (`config`), the weights memory-mapped from single or sharded safetensors
//! (`load`), the shared pieces (`layers`), the RoPE families in one network with per-family
//! switches (`rope`: Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3), BLOOM (`bloom`), XGLM
//! (`xglm`), Falcon (`falcon`), GPT-2 (`gpt2`: IndoGPT's layout), and the directory's own
//! `tokenizer.json` with its BOS/EOS (`tokenizer`). Weights keep HF's names as `VarStore` paths.
//! BERT directories are loaded by `model_dir`, untouched by this. A PEFT LoRA adapter folder loads as its base model with the
//! adapter merged into the weights (`adapter`). Each family's forward pass runs over a whole
//! right-padded batch (scoring) or over the new tokens after a key/value cache (generation,
//! `cache`), the same code for both, with libtorch's fused attention or eager attention
//! ([`Attention`], fused unless `INDOLM_ATTENTION=eager`).
pub mod adapter;
pub(crate) mod bloom;
pub(crate) mod cache;
pub mod config;
pub(crate) mod falcon;
pub(crate) mod gpt2;
pub mod layers;
pub mod load;
pub(crate) mod rope;
pub mod tokenizer;
pub(crate) mod xglm;

pub(crate) use cache::KvCache;
pub use config::{DecoderConfig, Family};
pub use layers::Attention;
pub use tokenizer::{CausalTokenizer, SpecialToken};

use crate::error::{Error, Result};
use cache::Step;
use std::path::Path;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// The network of one family.
#[derive(Debug)]
enum Net {
    Rope(rope::RopeDecoder),
    Bloom(bloom::Bloom),
    Xglm(xglm::Xglm),
    Falcon(falcon::Falcon),
    Gpt2(gpt2::Gpt2),
}

/// A causal LM ready to score: network, variables, configuration, tokenizer.
pub struct CausalLm {
    net: Net,
    /// Its weights under their HF names (views of the mapped files where dtype and device allow).
    pub vs: VarStore,
    /// The configuration.
    pub config: DecoderConfig,
    /// The directory's tokenizer.
    pub tokenizer: CausalTokenizer,
    /// The dtype the forward pass runs in (fp32 on CPU, bf16 on CUDA).
    pub kind: Kind,
    /// Where it runs.
    pub device: Device,
    /// How its attention is computed: [`Attention::from_env`] at load (fused unless
    /// `INDOLM_ATTENTION=eager`); a test may set it to compare the two.
    pub attention: Attention,
    /// Checkpoint tensors the network does not use (sorted).
    pub unused: Vec<String>,
    /// Tensors of a multimodal checkpoint outside its text model (the vision tower, the
    /// projector), not read.
    pub not_text: usize,
    /// The PEFT LoRA adapter merged into the weights, when the folder was an adapter's.
    pub adapter: Option<Box<adapter::MergedAdapter>>,
    _maps: Vec<std::sync::Arc<memmap2::MmapMut>>,
}

/// Whether `dir`'s `config.json` describes a causal LM: a family indolm loads, or any other
/// `…ForCausalLM`/`…LMHeadModel` architecture (which [`load_causal_lm`] then refuses, naming
/// the supported families). False for BERT and for a missing or unreadable config. A PEFT adapter
/// folder (`adapter_config.json`) counts as one: [`load_causal_lm`] loads its base model and
/// merges it, or says why not.
pub fn is_causal_dir(dir: &Path) -> bool {
    if adapter::is_adapter_dir(dir) {
        return true;
    }
    let Some(v) = crate::model::hf_folder::peek_config(dir) else { return false };
    let causal_arch = v["architectures"].as_array().is_some_and(|a| {
        a.iter().filter_map(|x| x.as_str()).any(|x| x.ends_with("ForCausalLM") || x.ends_with("LMHeadModel"))
    });
    causal_arch || config::family_of(&dir.join("config.json"), &v).is_ok()
}

/// The dtype a forward pass runs in on `device`: fp32 on the CPU, bf16 on CUDA.
pub(crate) fn run_kind(device: Device) -> Kind {
    if device.is_cuda() {
        Kind::BFloat16
    } else {
        Kind::Float
    }
}

/// Loads the causal LM in `dir` onto `device`, in [`run_kind`]'s dtype.
pub fn load_causal_lm(dir: &Path, device: Device) -> Result<CausalLm> {
    load_causal_lm_as(dir, device, run_kind(device))
}

/// Loads the causal LM in `dir` onto `device`, its weights cast to `kind`. A PEFT LoRA adapter
/// folder loads as its base model (config, tokenizer unless the adapter has its own
/// `tokenizer.json`, weights) with the adapter merged into the weights ([`adapter`]). Its
/// attention is the one `INDOLM_ATTENTION` asks for ([`Attention::from_env`]).
pub fn load_causal_lm_as(dir: &Path, device: Device, kind: Kind) -> Result<CausalLm> {
    let attention = Attention::from_env()?;
    let lora = adapter::Adapter::open(dir)?;
    let tokenizer_dir = lora.as_ref().map_or(dir, |a| a.tokenizer_dir());
    let dir = lora.as_ref().map_or(dir, |a| a.base.as_path());
    let config_path = crate::model::hf_folder::config_path(
        dir,
        "a causal LM directory holds config.json, model.safetensors (or shards) and tokenizer.json",
    )?;
    let config = DecoderConfig::from_file(&config_path)?;
    let tokenizer = CausalTokenizer::from_dir(tokenizer_dir, config.bos_token_id, config.eos_token_id)?;
    crate::model::hf_folder::check_tokenizer_fits(
        &config_path,
        &tokenizer.source,
        tokenizer.vocab_size(),
        config.vocab_size,
    )?;
    let mut weights = load::Weights::open(dir, kind, device)?;
    let dropped = if config.multimodal { weights.keep_text_model() } else { 0 };
    let adapter = lora.as_ref().map(|a| a.merge_into(&mut weights, config.multimodal)).transpose()?.map(Box::new);
    let vs = VarStore::new(device);
    let net = tch::no_grad(|| -> Result<Net> {
        Ok(match config.family {
            Family::Bloom => Net::Bloom(bloom::Bloom::take(&mut weights, &vs, &config)?),
            Family::Xglm => Net::Xglm(xglm::Xglm::take(&mut weights, &vs, &config)?),
            Family::Falcon => Net::Falcon(falcon::Falcon::take(&mut weights, &vs, &config)?),
            Family::Gpt2 => Net::Gpt2(gpt2::Gpt2::take(&mut weights, &vs, &config)?),
            _ => Net::Rope(rope::RopeDecoder::take(&mut weights, &vs, &config)?),
        })
    })?;
    let unused = weights.leftover();
    Ok(CausalLm {
        net,
        vs,
        config,
        tokenizer,
        kind,
        device,
        attention,
        unused,
        not_text: dropped,
        adapter,
        _maps: weights.maps,
    })
}

impl CausalLm {
    /// Final hidden states [batch, seq, hidden] of right-padded `ids` [batch, seq] whose real
    /// tokens are marked 1 in `mask`. Rows no longer than the model's positions
    /// ([`DecoderConfig::max_positions`]): the scorers refuse longer sentences first
    /// ([`Self::check_positions`]).
    pub fn hidden(&self, ids: &Tensor, mask: &Tensor) -> Tensor {
        self.forward(ids, &Step::full(mask), None)
    }

    /// The family's forward pass over the new tokens `ids` of `step`, after `cache` when given.
    fn forward(&self, ids: &Tensor, step: &Step, cache: Option<&mut KvCache>) -> Tensor {
        let attention = self.attention;
        match &self.net {
            Net::Rope(n) => n.forward(ids, step, cache, attention),
            Net::Bloom(n) => n.forward(ids, step, cache, attention),
            Net::Xglm(n) => n.forward(ids, step, cache, attention),
            Net::Falcon(n) => n.forward(ids, step, cache, attention),
            Net::Gpt2(n) => n.forward(ids, step, cache, attention),
        }
    }

    /// An empty key/value cache for `batch` rows of at most `capacity` tokens each (a prompt and
    /// its new tokens), for [`Self::hidden_cached`].
    pub fn new_cache(&self, batch: i64, capacity: i64) -> KvCache {
        KvCache::new(self.config.layers.len(), batch, capacity, self.device)
    }

    /// Final hidden states [batch, s, hidden] of `ids` [batch, s] after the tokens `cache` holds,
    /// whose keys and values are added to it: the whole prompt of a left-padded batch at first,
    /// then each new token. `mask` [batch, s] marks the real tokens (0 at a prompt's left
    /// padding); positions count from each row's first real token, as transformers' `generate`
    /// counts them. An error if the shapes do not match the cache, the tokens overflow it, or a
    /// family with learned positions has none for them ([`Self::check_positions`]).
    pub fn hidden_cached(&self, ids: &Tensor, mask: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        if ids.size() != mask.size() || ids.dim() != 2 {
            return Err(Error::unsupported(
                "a cached forward pass",
                format!("ids {:?} and mask {:?}: expected two [batch, seq] tensors", ids.size(), mask.size()),
            ));
        }
        let s = ids.size()[1];
        self.check_positions(cache.len() + s)?;
        let step = cache.begin(mask)?;
        let hidden = self.forward(ids, &step, Some(&mut *cache));
        cache.advance(s);
        Ok(hidden)
    }

    /// Refuses `tokens` tokens a row where the family reads positions from a table (GPT-2's
    /// `wpe`, `n_positions` rows) and they pass it; the other families compute any position.
    pub fn check_positions(&self, tokens: i64) -> Result<()> {
        match self.config.max_positions {
            Some(max) if self.config.family == Family::Gpt2 && tokens > max => Err(Error::unsupported(
                "a forward pass",
                format!("{tokens} tokens a row pass the model's {max} learned positions (config.json's n_positions)"),
            )),
            _ => Ok(()),
        }
    }

    /// Next-token logits (fp32) [batch, s, vocab] of `ids` after the tokens `cache` holds, as
    /// [`Self::hidden_cached`] runs them.
    pub fn forward_cached(&self, ids: &Tensor, mask: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        Ok(self.logits(&self.hidden_cached(ids, mask, cache)?))
    }

    /// Next-token logits (fp32) of hidden states [.., hidden].
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        match &self.net {
            Net::Rope(n) => n.logits(hidden),
            Net::Bloom(n) => n.logits(hidden),
            Net::Xglm(n) => n.logits(hidden),
            Net::Falcon(n) => n.logits(hidden),
            Net::Gpt2(n) => n.logits(hidden),
        }
    }
}
