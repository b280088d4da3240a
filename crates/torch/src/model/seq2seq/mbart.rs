//! mBART as transformers 5's `modeling_mbart.py` computes `MBartForConditionalGeneration`
//! (mBART-50, and IndoBART, which is mBART's layout): word embeddings shared by the encoder, the
//! decoder and the head (scaled by √d_model when `scale_embedding`), learned positions offset by
//! 2, a layer norm over the embeddings, pre-norm blocks (self-attention, in the decoder
//! cross-attention, then fc1 → activation → fc2), a final layer norm in each stack, and
//! `final_logits_bias` added to the head's logits. The network is trainable: its variables are a
//! `VarStore`'s under HF's names, initialised as `MBartPreTrainedModel` does or copied from a
//! checkpoint ([`load_mbart`]). Labels become decoder inputs as mBART's `shift_tokens_right`
//! makes them ([`shift_tokens_right`]), and the loss is transformers' mean cross-entropy over the
//! labels that are not -100 ([`Mbart::loss`]).
use super::config::FeedForwardAct;
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::model::decoder::load::Weights;
use crate::model::layers::{dropout, LayerNorm, Linear};
use indolm_core::json_fields::{self, AtLeastInt, NonNegativeNumber, Text, TokenId};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use tch::nn::{Init, VarStore};
use tch::{Device, Kind, Tensor};

/// mBART's layer-norm epsilon (`nn.LayerNorm`'s default; the config has no field for it).
const LAYER_NORM_EPS: f64 = 1e-5;
/// The rows the learned position table has before position 0 (`MBartLearnedPositionalEmbedding`).
const POSITION_OFFSET: i64 = 2;
/// The most parameters a configuration may describe before anything is allocated (mBART-50 large
/// has 611 million).
const MAX_PARAMETERS: f64 = 2e10;

/// What the network needs from an mBART `config.json` (`MBartConfig`'s defaults for absent fields).
#[derive(Debug, Clone, PartialEq)]
pub struct MbartConfig {
    /// The file it was read from.
    pub path: PathBuf,
    /// Rows of the shared embedding table and of the head.
    pub vocab_size: i64,
    /// The width of the residual stream.
    pub d_model: i64,
    /// Encoder blocks.
    pub encoder_layers: i64,
    /// Decoder blocks.
    pub decoder_layers: i64,
    /// The encoder's attention heads.
    pub encoder_attention_heads: i64,
    /// The decoder's attention heads (self- and cross-attention).
    pub decoder_attention_heads: i64,
    /// The encoder's feed-forward width.
    pub encoder_ffn_dim: i64,
    /// The decoder's feed-forward width.
    pub decoder_ffn_dim: i64,
    /// The feed-forward activation (`activation_function`).
    pub activation: FeedForwardAct,
    /// Positions the learned table holds (it has two more rows).
    pub max_position_embeddings: i64,
    /// Whether word embeddings are multiplied by √d_model.
    pub scale_embedding: bool,
    /// Dropout after attention and feed-forward outputs and over the embeddings.
    pub dropout: f64,
    /// Dropout over attention probabilities.
    pub attention_dropout: f64,
    /// Dropout after the feed-forward activation.
    pub activation_dropout: f64,
    /// The standard deviation of the initial weights.
    pub init_std: f64,
    /// The padding token (its embedding row starts at zero; `shift_tokens_right` needs it).
    pub pad_token_id: i64,
    /// The end-of-sequence token.
    pub eos_token_id: i64,
}

/// The fields of `config.json` the network reads, each `None` when absent (the class's default).
#[derive(Debug, Deserialize)]
struct Fields {
    vocab_size: Option<AtLeastInt<1>>,
    d_model: Option<AtLeastInt<1>>,
    encoder_layers: Option<AtLeastInt<1>>,
    decoder_layers: Option<AtLeastInt<1>>,
    encoder_attention_heads: Option<AtLeastInt<1>>,
    decoder_attention_heads: Option<AtLeastInt<1>>,
    encoder_ffn_dim: Option<AtLeastInt<1>>,
    decoder_ffn_dim: Option<AtLeastInt<1>>,
    activation_function: Option<Text>,
    max_position_embeddings: Option<AtLeastInt<1>>,
    scale_embedding: Option<bool>,
    dropout: Option<NonNegativeNumber>,
    attention_dropout: Option<NonNegativeNumber>,
    activation_dropout: Option<NonNegativeNumber>,
    init_std: Option<NonNegativeNumber>,
    pad_token_id: Option<TokenId>,
    eos_token_id: Option<TokenId>,
    tie_word_embeddings: Option<bool>,
}

impl MbartConfig {
    /// Reads and checks `path` (`model_type` must be `mbart`).
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_json(path, &json_fields::read_object(path)?)
    }

    /// Checks a parsed `config.json` with `MBartConfig`'s defaults, the sizes bounded before any
    /// allocation.
    pub(crate) fn from_json(path: &Path, v: &serde_json::Value) -> Result<Self> {
        let model_type = v.get("model_type").and_then(serde_json::Value::as_str);
        if model_type != Some("mbart") {
            return Err(Error::field(path, "model_type", format!("expected \"mbart\", found {model_type:?}")));
        }
        let f: Fields = json_fields::from_value(path, v)?;
        if f.tie_word_embeddings == Some(false) {
            return Err(Error::field(
                path,
                "tie_word_embeddings",
                "false: an untied head is not supported (mBART ties it)",
            ));
        }
        let int = |field: Option<AtLeastInt<1>>, default: i64| field.map_or(default, |n| n.0);
        let act_name = f.activation_function.as_ref().map_or("gelu", |t| t.0.as_str());
        let activation = FeedForwardAct::parse(act_name).ok_or_else(|| {
            Error::field(
                path,
                "activation_function",
                format!("`{act_name}` is not supported (relu, gelu, gelu_new, gelu_pytorch_tanh, silu)"),
            )
        })?;
        let rate = |field: Option<NonNegativeNumber>, name: &str, default: f64| -> Result<f64> {
            let p = field.map_or(default, |x| x.0);
            if p >= 1.0 {
                return Err(Error::field(path, name, format!("{p}: a dropout probability is below 1")));
            }
            Ok(p)
        };
        let c = MbartConfig {
            path: path.to_path_buf(),
            vocab_size: int(f.vocab_size, 50_265),
            d_model: int(f.d_model, 1024),
            encoder_layers: int(f.encoder_layers, 12),
            decoder_layers: int(f.decoder_layers, 12),
            encoder_attention_heads: int(f.encoder_attention_heads, 16),
            decoder_attention_heads: int(f.decoder_attention_heads, 16),
            encoder_ffn_dim: int(f.encoder_ffn_dim, 4096),
            decoder_ffn_dim: int(f.decoder_ffn_dim, 4096),
            activation,
            max_position_embeddings: int(f.max_position_embeddings, 1024),
            scale_embedding: f.scale_embedding.unwrap_or(false),
            dropout: rate(f.dropout, "dropout", 0.1)?,
            attention_dropout: rate(f.attention_dropout, "attention_dropout", 0.0)?,
            activation_dropout: rate(f.activation_dropout, "activation_dropout", 0.0)?,
            init_std: f.init_std.map_or(0.02, |x| x.0),
            pad_token_id: f.pad_token_id.map_or(1, |t| t.0),
            eos_token_id: f.eos_token_id.map_or(2, |t| t.0),
        };
        for (heads, name) in [
            (c.encoder_attention_heads, "encoder_attention_heads"),
            (c.decoder_attention_heads, "decoder_attention_heads"),
        ] {
            if c.d_model % heads != 0 {
                return Err(Error::field(path, name, format!("{heads} heads do not divide d_model {}", c.d_model)));
            }
        }
        if c.pad_token_id >= c.vocab_size || c.eos_token_id >= c.vocab_size {
            return Err(Error::field(
                path,
                "pad_token_id",
                format!("pad or eos id outside the vocabulary of {}", c.vocab_size),
            ));
        }
        let parameters = c.parameters();
        if parameters > MAX_PARAMETERS {
            return Err(Error::invalid(
                path,
                format!(
                    "the sizes describe {parameters:.3e} parameters, more than indolm allocates ({MAX_PARAMETERS:.0e})"
                ),
            ));
        }
        Ok(c)
    }

    /// The number of parameters the sizes describe (as f64: no overflow for hostile sizes).
    pub fn parameters(&self) -> f64 {
        let d = self.d_model as f64;
        let block =
            |ffn: i64, attentions: f64| attentions * 4.0 * d * (d + 1.0) + 2.0 * d * ffn as f64 + ffn as f64 + d;
        let embeddings = (self.vocab_size as f64 + 2.0 * (self.max_position_embeddings + POSITION_OFFSET) as f64) * d;
        embeddings
            + self.encoder_layers as f64 * block(self.encoder_ffn_dim, 1.0)
            + self.decoder_layers as f64 * block(self.decoder_ffn_dim, 2.0)
    }
}

/// Labels [batch, t] (padding as -100 or the pad id) as mBART's decoder inputs: the last
/// non-padding token of each row (its language id) first, then the labels shifted right by one.
pub fn shift_tokens_right(labels: &Tensor, pad_token_id: i64) -> Tensor {
    let tokens = labels.masked_fill(&labels.eq(-100), pad_token_id);
    let last = tokens.ne(pad_token_id).sum_dim_intlist(1, true, Kind::Int64) - 1;
    let start = tokens.gather(1, &last.clamp_min(0), false);
    let width = tokens.size()[1];
    Tensor::cat(&[start, tokens.narrow(1, 0, width - 1)], 1)
}

/// Multi-head attention with biased q/k/v/out projections (`MBartAttention`).
#[derive(Debug)]
struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    out_proj: Linear,
    heads: i64,
}

impl Attention {
    fn new(p: tch::nn::Path, d: i64, heads: i64, std: f64) -> Self {
        Attention {
            q_proj: Linear::new(&p / "q_proj", d, d, std),
            k_proj: Linear::new(&p / "k_proj", d, d, std),
            v_proj: Linear::new(&p / "v_proj", d, d, std),
            out_proj: Linear::new(&p / "out_proj", d, d, std),
            heads,
        }
    }

    /// `t` [b, len, d] as heads [b, heads, len, d / heads].
    fn split(&self, t: Tensor) -> Tensor {
        let size = t.size();
        t.view([size[0], size[1], self.heads, size[2] / self.heads]).transpose(1, 2)
    }

    /// The keys and values [b, heads, tk, d / heads] of `kv` [b, tk, d].
    fn keys_values(&self, kv: &Tensor, precision: Precision) -> (Tensor, Tensor) {
        (self.split(self.k_proj.forward(kv, precision)), self.split(self.v_proj.forward(kv, precision)))
    }

    /// Queries from `x` [b, tq, d] over keys and values from `kv` [b, tk, d]; `allowed` [b, 1,
    /// tq or 1, tk] marks the pairs that may attend.
    fn forward(
        &self,
        x: &Tensor,
        kv: &Tensor,
        allowed: &Tensor,
        p_drop: f64,
        train: bool,
        precision: Precision,
    ) -> Tensor {
        let (k, v) = self.keys_values(kv, precision);
        self.attend(x, &k, &v, allowed, if train { p_drop } else { 0.0 }, precision)
    }

    /// Queries from `x` [b, tq, d] over keys and values already projected.
    fn attend(&self, x: &Tensor, k: &Tensor, v: &Tensor, allowed: &Tensor, p: f64, precision: Precision) -> Tensor {
        let size = x.size();
        let (b, tq, d) = (size[0], size[1], size[2]);
        let q = self.split(self.q_proj.forward(x, precision));
        let mask = allowed.to_kind(Kind::Bool);
        let out = Tensor::scaled_dot_product_attention(&q, k, v, Some(&mask), p, false, None, false);
        self.out_proj.forward(&out.transpose(1, 2).reshape([b, tq, d]), precision)
    }
}

/// One decoder layer's cached keys and values: the self-attention's [rows, heads, len, d / heads]
/// (none before the first token) and the cross-attention's [rows, heads, source, d / heads].
type LayerCache = (Option<(Tensor, Tensor)>, (Tensor, Tensor));

/// What the decoder computed for the tokens it has read, so that the next token costs one
/// position (`generate`'s key/value cache): per layer, the self-attention's keys and values of
/// every position so far, and the cross-attention's of the encoder output (computed once).
pub struct DecoderCache {
    /// Per layer, its keys and values.
    layers: Vec<LayerCache>,
    /// Positions read so far.
    len: i64,
}

impl DecoderCache {
    /// Keeps, in order, the rows `rows` [new rows] of every cached tensor (the beams a search
    /// goes on with, each from the row it continues).
    pub fn reorder(&mut self, rows: &Tensor) {
        for (own, cross) in &mut self.layers {
            if let Some((k, v)) = own {
                *own = Some((k.index_select(0, rows), v.index_select(0, rows)));
            }
            *cross = (cross.0.index_select(0, rows), cross.1.index_select(0, rows));
        }
    }
}

/// fc1 → activation → dropout → fc2.
#[derive(Debug)]
struct FeedForward {
    fc1: Linear,
    fc2: Linear,
    act: FeedForwardAct,
}

impl FeedForward {
    fn forward(&self, x: &Tensor, activation_dropout: f64, train: bool, precision: Precision) -> Tensor {
        let h = self.act.apply(&self.fc1.forward(x, precision));
        self.fc2.forward(&dropout(&h, activation_dropout, train), precision)
    }
}

/// One block: self-attention, cross-attention in the decoder, feed-forward, each pre-norm with a
/// residual.
#[derive(Debug)]
struct Block {
    self_attn: Attention,
    self_attn_layer_norm: LayerNorm,
    encoder_attn: Option<(Attention, LayerNorm)>,
    ffn: FeedForward,
    final_layer_norm: LayerNorm,
}

/// An encoder or decoder: positions, the embedding norm, the blocks, the final norm.
#[derive(Debug)]
struct Stack {
    embed_positions: Tensor,
    layernorm_embedding: LayerNorm,
    layers: Vec<Block>,
    layer_norm: LayerNorm,
}

impl Stack {
    fn new(p: tch::nn::Path, c: &MbartConfig, decoder: bool) -> Self {
        let (d, std) = (c.d_model, c.init_std);
        let (layers, heads, ffn) = if decoder {
            (c.decoder_layers, c.decoder_attention_heads, c.decoder_ffn_dim)
        } else {
            (c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim)
        };
        let embed_positions = (&p / "embed_positions").var(
            "weight",
            &[c.max_position_embeddings + POSITION_OFFSET, d],
            Init::Randn { mean: 0.0, stdev: std },
        );
        let layers = (0..layers)
            .map(|i| {
                let l = &p / "layers" / i;
                Block {
                    self_attn: Attention::new(&l / "self_attn", d, heads, std),
                    self_attn_layer_norm: LayerNorm::new(&l / "self_attn_layer_norm", d, LAYER_NORM_EPS),
                    encoder_attn: decoder.then(|| {
                        (
                            Attention::new(&l / "encoder_attn", d, heads, std),
                            LayerNorm::new(&l / "encoder_attn_layer_norm", d, LAYER_NORM_EPS),
                        )
                    }),
                    ffn: FeedForward {
                        fc1: Linear::new(&l / "fc1", d, ffn, std),
                        fc2: Linear::new(&l / "fc2", ffn, d, std),
                        act: c.activation,
                    },
                    final_layer_norm: LayerNorm::new(&l / "final_layer_norm", d, LAYER_NORM_EPS),
                }
            })
            .collect();
        Stack {
            embed_positions,
            layernorm_embedding: LayerNorm::new(&p / "layernorm_embedding", d, LAYER_NORM_EPS),
            layers,
            layer_norm: LayerNorm::new(&p / "layer_norm", d, LAYER_NORM_EPS),
        }
    }
}

/// `MBartForConditionalGeneration`'s network.
#[derive(Debug)]
pub struct Mbart {
    shared: Tensor,
    encoder: Stack,
    decoder: Stack,
    final_logits_bias: Tensor,
    embed_scale: f64,
    /// The configuration it was built from.
    pub config: MbartConfig,
}

impl Mbart {
    /// A new network under `root` (the `VarStore`'s root: `model.*` and `final_logits_bias`),
    /// initialised as `MBartPreTrainedModel` does: linear and embedding weights ~ N(0, init_std²),
    /// the padding row of the word embeddings zeroed, biases zero, layer norms one and zero.
    pub fn new(root: &tch::nn::Path, config: &MbartConfig) -> Self {
        let model = root / "model";
        let (d, std) = (config.d_model, config.init_std);
        let shared = (&model / "shared").var("weight", &[config.vocab_size, d], Init::Randn { mean: 0.0, stdev: std });
        tch::no_grad(|| {
            let _ = shared.get(config.pad_token_id).fill_(0.0);
        });
        let final_logits_bias = root.zeros_no_train("final_logits_bias", &[1, config.vocab_size]);
        Mbart {
            shared,
            encoder: Stack::new(&model / "encoder", config, false),
            decoder: Stack::new(&model / "decoder", config, true),
            final_logits_bias,
            embed_scale: if config.scale_embedding { (d as f64).sqrt() } else { 1.0 },
            config: config.clone(),
        }
    }

    /// Word embeddings (scaled) plus learned positions 0.., through the embedding norm and dropout.
    fn embed(&self, stack: &Stack, ids: &Tensor, train: bool) -> Result<Tensor> {
        let t = ids.size()[1];
        if t > self.config.max_position_embeddings {
            return Err(Error::invalid(
                &self.config.path,
                format!(
                    "a sequence of {t} tokens is longer than max_position_embeddings {}",
                    self.config.max_position_embeddings
                ),
            ));
        }
        let words = Tensor::embedding(&self.shared, ids, -1, false, false) * self.embed_scale;
        let positions = stack.embed_positions.narrow(0, POSITION_OFFSET, t);
        let h = stack.layernorm_embedding.forward(&(words + positions));
        Ok(dropout(&h, self.config.dropout, train))
    }

    /// The encoder's output [b, s, d] of right-padded `ids` [b, s] whose real tokens are 1 in `mask`.
    pub fn encode(&self, ids: &Tensor, mask: &Tensor, train: bool, precision: Precision) -> Result<Tensor> {
        let allowed = mask.to_kind(Kind::Bool).unsqueeze(1).unsqueeze(1);
        let mut h = self.embed(&self.encoder, ids, train)?;
        for block in &self.encoder.layers {
            h = self.block(block, h, &allowed, None, train, precision);
        }
        Ok(self.encoder.layer_norm.forward(&h))
    }

    /// The decoder's final hidden states [b, t, d] of decoder inputs `ids` [b, t] (causal; real
    /// tokens 1 in `mask`, all when `None`) over `encoded` (real tokens 1 in `encoder_mask`).
    pub fn decode(
        &self,
        ids: &Tensor,
        mask: Option<&Tensor>,
        encoded: &Tensor,
        encoder_mask: &Tensor,
        train: bool,
        precision: Precision,
    ) -> Result<Tensor> {
        let t = ids.size()[1];
        let causal = Tensor::ones([t, t], (Kind::Bool, ids.device())).tril(0);
        let allowed = match mask {
            Some(m) => causal.unsqueeze(0).logical_and(&m.to_kind(Kind::Bool).unsqueeze(1)).unsqueeze(1),
            None => causal.unsqueeze(0).unsqueeze(0),
        };
        let cross = encoder_mask.to_kind(Kind::Bool).unsqueeze(1).unsqueeze(1);
        let mut h = self.embed(&self.decoder, ids, train)?;
        for block in &self.decoder.layers {
            h = self.block(block, h, &allowed, Some((encoded, &cross)), train, precision);
        }
        Ok(self.decoder.layer_norm.forward(&h))
    }

    /// An empty cache over `encoded` [rows, s, d] (the encoder output of each row).
    pub fn start_cache(&self, encoded: &Tensor, precision: Precision) -> DecoderCache {
        let layers = self
            .decoder
            .layers
            .iter()
            .map(|block| {
                let (attn, _) = block.encoder_attn.as_ref().expect("decoder blocks cross-attend");
                (None, attn.keys_values(encoded, precision))
            })
            .collect();
        DecoderCache { layers, len: 0 }
    }

    /// The decoder's final hidden states [rows, t, d] of the next decoder inputs `ids` [rows, t]
    /// (positions `cache.len..`), reading the earlier positions from `cache` and adding these
    /// to it; no dropout. The same as [`Self::decode`] over the whole prefix, a position at a
    /// time.
    pub fn decode_cached(
        &self,
        ids: &Tensor,
        cache: &mut DecoderCache,
        encoder_mask: &Tensor,
        precision: Precision,
    ) -> Result<Tensor> {
        let (t, start) = (ids.size()[1], cache.len);
        if start + t > self.config.max_position_embeddings {
            return Err(Error::invalid(
                &self.config.path,
                format!(
                    "a sequence of {} tokens is longer than max_position_embeddings {}",
                    start + t,
                    self.config.max_position_embeddings
                ),
            ));
        }
        let words = Tensor::embedding(&self.shared, ids, -1, false, false) * self.embed_scale;
        let positions = self.decoder.embed_positions.narrow(0, POSITION_OFFSET + start, t);
        let mut h = self.decoder.layernorm_embedding.forward(&(words + positions));
        // Each new position sees every earlier one and itself.
        let allowed = Tensor::ones([t, start + t], (Kind::Bool, ids.device())).tril(start).unsqueeze(0).unsqueeze(0);
        let cross_allowed = encoder_mask.to_kind(Kind::Bool).unsqueeze(1).unsqueeze(1);
        let c = &self.config;
        for (block, (own, cross)) in self.decoder.layers.iter().zip(cache.layers.iter_mut()) {
            let x = block.self_attn_layer_norm.forward(&h);
            let (k, v) = block.self_attn.keys_values(&x, precision);
            let (k, v) = match own.take() {
                Some((pk, pv)) => (Tensor::cat(&[pk, k], 2), Tensor::cat(&[pv, v], 2)),
                None => (k, v),
            };
            let a = block.self_attn.attend(&x, &k, &v, &allowed, 0.0, precision);
            *own = Some((k, v));
            h = &h + a.to_kind(Kind::Float);
            let (attn, norm) = block.encoder_attn.as_ref().expect("decoder blocks cross-attend");
            let x = norm.forward(&h);
            h = &h + attn.attend(&x, &cross.0, &cross.1, &cross_allowed, 0.0, precision).to_kind(Kind::Float);
            let x = block.final_layer_norm.forward(&h);
            h = &h + block.ffn.forward(&x, c.activation_dropout, false, precision).to_kind(Kind::Float);
        }
        cache.len = start + t;
        Ok(self.decoder.layer_norm.forward(&h))
    }

    /// One pre-norm block.
    fn block(
        &self,
        block: &Block,
        h: Tensor,
        allowed: &Tensor,
        cross: Option<(&Tensor, &Tensor)>,
        train: bool,
        precision: Precision,
    ) -> Tensor {
        let c = &self.config;
        let x = block.self_attn_layer_norm.forward(&h);
        let a = block.self_attn.forward(&x, &x, allowed, c.attention_dropout, train, precision);
        let mut h = h + dropout(&a.to_kind(Kind::Float), c.dropout, train);
        if let (Some((attn, norm)), Some((encoded, cross_allowed))) = (&block.encoder_attn, cross) {
            let x = norm.forward(&h);
            let a = attn.forward(&x, encoded, cross_allowed, c.attention_dropout, train, precision);
            // Not `+=`: the norm above saved h for its backward pass.
            h = &h + dropout(&a.to_kind(Kind::Float), c.dropout, train);
        }
        let x = block.final_layer_norm.forward(&h);
        let f = block.ffn.forward(&x, c.activation_dropout, train, precision);
        h + dropout(&f.to_kind(Kind::Float), c.dropout, train)
    }

    /// The head's logits (fp32) of decoder states [.., d]: the shared embeddings, plus
    /// `final_logits_bias`.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        hidden.to_kind(Kind::Float).linear(&self.shared, None::<&Tensor>) + &self.final_logits_bias
    }

    /// Beam search (transformers' `generate` with `num_beams`, see [`super::beam`]) from each
    /// row's `decoder_start` ids [b, p] over the encoding of `ids` [b, s] (real tokens 1 in
    /// `mask`), without dropout or gradients, the decoder reading its earlier positions from a
    /// key/value cache ([`DecoderCache`]) as `generate` does.
    pub fn generate(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        decoder_start: &Tensor,
        settings: &super::beam::BeamSettings,
        precision: Precision,
    ) -> Result<super::beam::BeamOutput> {
        tch::no_grad(|| {
            let k = settings.num_beams.max(1);
            let encoded = self.encode(ids, mask, false, precision)?.repeat_interleave_self_int(k, 0, None);
            let mask = mask.repeat_interleave_self_int(k, 0, None);
            let mut cache = self.start_cache(&encoded, precision);
            super::beam::beam_search(decoder_start, settings, |flat, continued| {
                // The rows go on from the rows `continued` names; only the new position is run.
                if let Some(rows) = continued {
                    cache.reorder(rows);
                }
                let new = flat.narrow(1, cache.len, flat.size()[1] - cache.len);
                let hidden = self.decode_cached(&new, &mut cache, &mask, precision)?;
                let last = hidden.size()[1] - 1;
                Ok(self.logits(&hidden.select(1, last)))
            })
        })
    }

    /// Transformers' loss: mean cross-entropy of `logits` [b, t, vocab] at the `labels` [b, t]
    /// that are not -100.
    pub fn loss(logits: &Tensor, labels: &Tensor) -> Tensor {
        let vocab = logits.size()[2];
        logits.view([-1, vocab]).log_softmax(-1, Kind::Float).nll_loss(&labels.view([-1]))
    }
}

/// Loads the mBART checkpoint in `dir` (`config.json` and safetensors or `pytorch_model.bin`)
/// into a new trainable `VarStore` on `device` (fp32). The tied copies (`lm_head.weight`, the
/// stacks' `embed_tokens.weight`) must equal `model.shared.weight` where the file holds them; a
/// missing `final_logits_bias` is zero, as transformers makes it; any other missing, misshapen
/// or unknown tensor is refused.
pub fn load_mbart(dir: &Path, device: Device) -> Result<(VarStore, Mbart)> {
    let config_path = crate::model::hf_folder::config_path(
        dir,
        "an mBART directory holds config.json and model.safetensors (or shards, or pytorch_model.bin)",
    )?;
    let config = MbartConfig::from_file(&config_path)?;
    let vs = VarStore::new(device);
    let net = Mbart::new(&vs.root(), &config);
    let mut weights = Weights::open(dir, Kind::Float, device)?;
    let scratch = VarStore::new(device);
    let shared_shape = [config.vocab_size, config.d_model];
    let shared = weights.take(&scratch, "model.shared.weight", &shared_shape)?;
    for alias in ["lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"] {
        if weights.has(alias) {
            let copy = weights.take(&scratch, alias, &shared_shape)?;
            if !copy.equal(&shared) {
                return Err(Error::invalid(
                    &config_path,
                    format!("`{alias}` differs from `model.shared.weight`: an untied copy is not supported (mBART ties them)"),
                ));
            }
        }
    }
    tch::no_grad(|| -> Result<()> {
        for (name, mut var) in vs.variables() {
            let source = match name.as_str() {
                "model.shared.weight" => shared.shallow_clone(),
                "final_logits_bias" if !weights.has(&name) => continue,
                _ => weights.take(&scratch, &name, &var.size())?,
            };
            var.f_copy_(&source).map_err(|e| Error::torch(format!("copying `{name}`"), e))?;
        }
        Ok(())
    })?;
    let unused = weights.leftover();
    if !unused.is_empty() {
        let shown: Vec<&str> = unused.iter().take(6).map(String::as_str).collect();
        return Err(Error::invalid(
            &config_path,
            format!(
                "{} tensor(s) that mBART has no place for, e.g. {} (is this an mBART checkpoint?)",
                unused.len(),
                shown.join(", ")
            ),
        ));
    }
    Ok((vs, net))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: serde_json::Value) -> Result<MbartConfig> {
        MbartConfig::from_json(Path::new("config.json"), &v)
    }

    #[test]
    fn the_config_takes_mbart_defaults_and_refuses_what_it_cannot_build() {
        let c = read(
            json!({"model_type": "mbart", "d_model": 64, "encoder_attention_heads": 4, "decoder_attention_heads": 4}),
        )
        .unwrap();
        assert_eq!(
            (c.vocab_size, c.encoder_layers, c.pad_token_id, c.activation),
            (50_265, 12, 1, FeedForwardAct::Gelu)
        );
        assert!(!c.scale_embedding);
        let refused = |v: serde_json::Value, what: &str| {
            let err = read(v).unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
        };
        refused(json!({"model_type": "bart"}), "field `model_type`");
        refused(json!({"model_type": "mbart", "d_model": 30}), "16 heads do not divide d_model 30");
        refused(json!({"model_type": "mbart", "activation_function": "mish"}), "`mish` is not supported");
        refused(json!({"model_type": "mbart", "dropout": 1.5}), "field `dropout`");
        refused(json!({"model_type": "mbart", "tie_word_embeddings": false}), "untied head");
        refused(json!({"model_type": "mbart", "vocab_size": 10, "pad_token_id": 12}), "outside the vocabulary");
        // Hostile sizes are refused before anything is allocated.
        refused(json!({"model_type": "mbart", "d_model": 1_048_576, "encoder_ffn_dim": 1_000_000_000}), "parameters");
    }

    #[test]
    fn labels_shift_right_behind_their_last_real_token() {
        let labels = Tensor::from_slice2(&[[9i64, 14, 2, 92, -100], [30, 31, 32, 2, 92], [50, 2, 93, 1, 1]]);
        let shifted = shift_tokens_right(&labels, 1);
        let expected = [[92i64, 9, 14, 2, 92], [92, 30, 31, 32, 2], [93, 50, 2, 93, 1]];
        assert_eq!(Vec::<Vec<i64>>::try_from(&shifted).unwrap(), expected.map(|r| r.to_vec()).to_vec());
    }

    #[test]
    fn a_new_network_is_initialised_as_transformers_does() {
        let c = read(
            json!({"model_type": "mbart", "vocab_size": 50, "d_model": 16, "encoder_layers": 1, "decoder_layers": 1,
            "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 8, "decoder_ffn_dim": 8,
            "max_position_embeddings": 12}),
        )
        .unwrap();
        let vs = VarStore::new(Device::Cpu);
        let _net = Mbart::new(&vs.root(), &c);
        let vars = vs.variables();
        assert_eq!(
            vars["model.shared.weight"].get(1).abs().sum(Kind::Float).double_value(&[]),
            0.0,
            "padding row zero"
        );
        assert_eq!(vars["model.encoder.embed_positions.weight"].size(), [14, 16]);
        assert_eq!(
            vars["model.decoder.layers.0.encoder_attn_layer_norm.weight"].mean(Kind::Float).double_value(&[]),
            1.0
        );
        assert!(!vs.trainable_variables().iter().any(|t| t.size() == [1, 50]), "final_logits_bias is not trained");
        // shared and final_logits_bias; per stack positions and two norms; 16 tensors an encoder
        // block, 26 a decoder block.
        assert_eq!(vars.len(), 2 + 2 * 5 + 16 + 26);
    }
}
