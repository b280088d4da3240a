//! Sentence scores from a causal LM, as lm-evaluation-harness (0.4.9+) scores CrowS-Pairs: the
//! context is one prefix token — BOS if the tokenizer has one, else EOS — and the sentence is
//! tokenized without special tokens and without an EOS after it; its score is
//! Σ ln p(token | prefix, earlier tokens) over its tokens (also reported per token, the mean,
//! and as perplexity exp(−mean)). Sentences are batched shortest first under a token budget,
//! right-padded with an attention mask; the vocabulary projection runs only at the positions
//! that predict a sentence token, and each batch comes back to the host once.
use crate::error::{Error, Result};
use crate::model::decoder::{CausalLm, SpecialToken};
use tch::{Device, Kind, Tensor};

/// How a sentence was scored, recorded with the scores.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Convention {
    /// The token every sentence is scored after.
    pub prefix_token_id: i64,
    /// Its text (`<s>`, `<|endoftext|>`).
    pub prefix_token: String,
    /// Which special token it is: "bos" or "eos".
    pub prefix_is: String,
    /// The sentence score: "sum" of token log-probabilities ("mean" and perplexity are
    /// derived from it).
    pub score: String,
}

/// One sentence's score.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CausalScore {
    /// The sentence's token ids (no special tokens).
    pub ids: Vec<i64>,
    /// ln p of each token given the prefix and the tokens before it.
    pub log_probs: Vec<f64>,
    /// Their sum, natural log (≤ 0).
    pub sum: f64,
    /// Tokens the model ranks first (its argmax is the token): rank-1 accuracy, a fluency control.
    pub correct: usize,
}

impl CausalScore {
    /// Tokens scored.
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }

    /// The per-token mean log-probability.
    pub fn mean(&self) -> f64 {
        self.sum / self.tokens().max(1) as f64
    }

    /// Perplexity exp(−mean).
    pub fn perplexity(&self) -> f64 {
        (-self.mean()).exp()
    }

    /// As the bias evaluation's sentence score: `pll` is the log-likelihood sum, so its PPPL
    /// rule is the perplexity rule and CrowS' rule compares sums.
    pub fn as_sentence_score(&self) -> crate::eval::pll::SentenceScore {
        crate::eval::pll::SentenceScore { pll: self.sum, tokens: self.tokens(), correct: self.correct }
    }
}

/// Scores sentences with a causal LM.
pub struct CausalScorer<'a> {
    /// The model.
    pub model: &'a CausalLm,
    /// Padded tokens per forward pass.
    pub token_budget: usize,
    /// Logit elements (positions × vocabulary) computed at once; 2^28 fp32 values (1 GiB).
    pub logit_elements: i64,
    prefix: SpecialToken,
    prefix_is: &'static str,
}

impl<'a> CausalScorer<'a> {
    /// A scorer with a token budget for the device (4,096 padded tokens on CPU, 32,768 on CUDA);
    /// an error if the tokenizer has neither BOS nor EOS.
    pub fn new(model: &'a CausalLm) -> Result<Self> {
        let t = &model.tokenizer;
        let (prefix, prefix_is) = match (&t.bos, &t.eos) {
            (Some(b), _) => (b.clone(), "bos"),
            (None, Some(e)) => (e.clone(), "eos"),
            (None, None) => {
                return Err(Error::Tokenizer {
                    path: t.source.clone(),
                    message: "neither a BOS nor an EOS token (tokenizer_config.json, special_tokens_map.json or config.json): nothing to score the first token after".into(),
                })
            }
        };
        let token_budget = if model.device.is_cuda() { 32_768 } else { 4_096 };
        Ok(CausalScorer { model, token_budget, logit_elements: 1 << 28, prefix, prefix_is })
    }

    /// The convention the scores follow.
    pub fn convention(&self) -> Convention {
        Convention {
            prefix_token_id: self.prefix.id,
            prefix_token: self.prefix.token.clone(),
            prefix_is: self.prefix_is.into(),
            score: "sum".into(),
        }
    }

    /// The ids of `text` (no special tokens); an error for a sentence with no tokens or longer
    /// than the model's positions.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        let ids = self.model.tokenizer.encode(text)?;
        if ids.is_empty() {
            return Err(Error::data("causal LM scoring", format!("the sentence {text:?} has no tokens")));
        }
        if let Some(max) = self.model.config.max_positions {
            if ids.len() as i64 + 1 > max {
                return Err(Error::data(
                    "causal LM scoring",
                    format!("the sentence {text:?} has {} tokens, more than the model's {} positions (with the prefix token)", ids.len(), max),
                ));
            }
        }
        Ok(ids)
    }

    /// Scores each sentence.
    pub fn score_texts(&self, texts: &[&str]) -> Result<Vec<CausalScore>> {
        let ids = texts.iter().map(|t| self.encode(t)).collect::<Result<Vec<_>>>()?;
        Ok(self.score_ids(&ids))
    }

    /// Scores tokenized sentences (each non-empty).
    pub fn score_ids(&self, sentences: &[Vec<i64>]) -> Vec<CausalScore> {
        let lengths: Vec<usize> = sentences.iter().map(|s| s.len() + 1).collect();
        let mut out: Vec<Option<CausalScore>> = vec![None; sentences.len()];
        for batch in crate::data::batching::by_length(&lengths, self.token_budget) {
            let rows: Vec<&[i64]> = batch.iter().map(|&i| sentences[i].as_slice()).collect();
            for (&i, (log_probs, correct)) in batch.iter().zip(self.score_batch(&rows)) {
                let sum = log_probs.iter().sum();
                out[i] = Some(CausalScore { ids: sentences[i].clone(), log_probs, sum, correct });
            }
        }
        out.into_iter().map(|s| s.expect("every sentence is in a batch")).collect()
    }

    /// ln p of each row's tokens and how many the model ranks first: one forward pass over
    /// [prefix, tokens…] rows, right-padded.
    fn score_batch(&self, rows: &[&[i64]]) -> Vec<(Vec<f64>, usize)> {
        let width = rows.iter().map(|r| r.len() + 1).max().unwrap_or(1);
        let n = rows.len();
        let pad = self.prefix.id;
        let mut ids = vec![pad; n * width];
        let mut mask = vec![0i64; n * width];
        // Position p of a row predicts its token p + 1.
        let mut from = Vec::new();
        let mut targets = Vec::new();
        for (r, row) in rows.iter().enumerate() {
            ids[r * width + 1..r * width + 1 + row.len()].copy_from_slice(row);
            mask[r * width..r * width + row.len() + 1].iter_mut().for_each(|m| *m = 1);
            for (p, &t) in row.iter().enumerate() {
                from.push((r * width + p) as i64);
                targets.push(t);
            }
        }
        let device = self.model.device;
        let shape = [n as i64, width as i64];
        let (flat, firsts) = tch::no_grad(|| {
            let ids = Tensor::from_slice(&ids).view(shape).to_device(device);
            let mask = Tensor::from_slice(&mask).view(shape).to_device(device);
            let hidden = self.model.hidden(&ids, &mask);
            let hidden = hidden
                .reshape([n as i64 * width as i64, -1])
                .index_select(0, &Tensor::from_slice(&from).to_device(device));
            let targets = Tensor::from_slice(&targets).to_device(device);
            // The fp32 logits of at most `logit_elements` at a time (a 256k vocabulary would
            // otherwise need gigabytes per batch); the chunks stay on the device.
            let rows = (self.logit_elements / self.model.config.vocab_size).max(1);
            let (mut lps, mut firsts) = (Vec::new(), Vec::new());
            for (h, t) in hidden.split(rows, 0).iter().zip(targets.split(rows, 0)) {
                let log_probs = self.model.logits(h).log_softmax(-1, Kind::Float);
                firsts.push(log_probs.argmax(-1, false).eq_tensor(&t));
                lps.push(log_probs.gather(1, &t.unsqueeze(1), false).squeeze_dim(1));
            }
            let lp = Tensor::cat(&lps, 0).to_kind(Kind::Double).to_device(Device::Cpu);
            (lp, Tensor::cat(&firsts, 0).to_device(Device::Cpu))
        });
        let flat = Vec::<f64>::try_from(flat).expect("a vector of log-probabilities");
        let firsts = Vec::<bool>::try_from(firsts).expect("a vector of booleans");
        let mut out = Vec::with_capacity(n);
        let mut at = 0;
        for row in rows {
            out.push((flat[at..at + row.len()].to_vec(), firsts[at..at + row.len()].iter().filter(|&&f| f).count()));
            at += row.len();
        }
        out
    }
}
