//! The next token of each row from its logits: greedy, the argmax (the first of equal maxima, as
//! `torch.argmax`); or drawn from the distribution transformers' sampling leaves — the logits
//! divided by the temperature, then cut to the k most likely tokens, then to the most likely ones
//! that hold `top_p` of the probability, in that order, with `min_tokens_to_keep` 1 and the cut
//! scores at −∞ (its `TemperatureLogitsWarper`, `TopKLogitsWarper` and `TopPLogitsWarper`) — at
//! a uniform from the prompt's own seeded stream, by the inverse of the cumulative distribution,
//! so that a seed gives the same text on every run and in any batch. transformers draws with
//! `torch.multinomial` from torch's generator: a seeded sample is not comparable token for token
//! across the two, only the distribution it is drawn from.
use indolm_torch::error::{Error, Result};
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor};

/// How to sample the next token.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sampling {
    /// The logits are divided by this (> 0).
    pub temperature: f64,
    /// Only the k most likely tokens are kept (0: no cut).
    pub top_k: usize,
    /// Only the most likely tokens whose probabilities reach this sum are kept (1: no cut; 0 keeps
    /// the most likely one).
    pub top_p: f64,
    /// The seed of every prompt's stream.
    pub seed: u64,
}

impl Sampling {
    /// Refuses what transformers refuses: a temperature that is not a positive number, a `top_p`
    /// outside [0, 1].
    pub(crate) fn check(&self) -> Result<()> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(Error::argument(
                "temperature",
                format!("must be a positive number to sample, not {} (greedy decoding takes none)", self.temperature),
            ));
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return Err(Error::argument("top_p", format!("must be between 0 and 1, not {}", self.top_p)));
        }
        Ok(())
    }

    /// `logits` [rows, vocab] (fp32) as transformers' sampling warps them: divided by the
    /// temperature, then the scores under the k-th largest set to −∞, then those of the least
    /// likely tokens whose probabilities sum to at most 1 − `top_p` (the most likely one always
    /// kept).
    pub fn warp(&self, logits: &Tensor) -> Tensor {
        let mut scores = if self.temperature != 1.0 { logits / self.temperature } else { logits.shallow_clone() };
        let vocab = scores.size().last().copied().unwrap_or(0);
        if self.top_k != 0 && vocab > 0 {
            let k = (self.top_k as i64).min(vocab);
            let (top, _) = scores.topk(k, -1, true, true);
            let kth = top.narrow(-1, k - 1, 1);
            scores = scores.masked_fill(&scores.lt_tensor(&kth), f64::NEG_INFINITY);
        }
        if self.top_p < 1.0 && vocab > 0 {
            let (sorted, order) = scores.sort(-1, false);
            let cumulative = sorted.softmax(-1, Kind::Float).cumsum(-1, Kind::Float);
            let removed = cumulative.le(1.0 - self.top_p);
            let _ = removed.narrow(-1, vocab - 1, 1).fill_(0i64);
            let removed = removed.scatter(-1, &order, &removed);
            scores = scores.masked_fill(&removed, f64::NEG_INFINITY);
        }
        scores
    }
}

/// The stream of uniforms of the prompt numbered `prompt` (its place among all prompts) under
/// `seed`.
pub(crate) fn stream(seed: u64, prompt: usize) -> ChaCha8Rng {
    indolm_core::seeds::stream_rng(seed, indolm_core::seeds::salt::GENERATION, prompt as u64)
}

/// The next token of each row of `logits` [rows, vocab] (fp32): the argmax without `sampling`;
/// with it, the token of the warped distribution whose cumulative probability first passes
/// `uniforms[row]` ∈ [0, 1) of the total.
pub(crate) fn choose(logits: &Tensor, sampling: Option<&Sampling>, uniforms: &[f64]) -> Result<Vec<i64>> {
    let chosen = match sampling {
        None => logits.argmax(-1, false),
        Some(sampling) => {
            if uniforms.len() as i64 != logits.size()[0] {
                return Err(Error::unsupported(
                    "sampling",
                    format!("{} uniforms for {} rows of logits", uniforms.len(), logits.size()[0]),
                ));
            }
            let probs = sampling.warp(logits).softmax(-1, Kind::Float);
            let cdf = probs.cumsum(-1, Kind::Double);
            let vocab = cdf.size()[1];
            let u = Tensor::from_slice(uniforms).to_device(cdf.device());
            let target = (cdf.select(1, vocab - 1) * u).unsqueeze(1);
            cdf.le_tensor(&target).sum_dim_intlist(-1i64, false, Kind::Int64).clamp_max(vocab - 1)
        }
    };
    Vec::<i64>::try_from(&chosen.to_device(Device::Cpu)).map_err(|e| Error::torch("reading the chosen tokens", e))
}
