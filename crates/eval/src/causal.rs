//! Sentence scores from a causal LM, as lm-evaluation-harness (0.4.9+) scores CrowS-Pairs: the
//! context is one prefix token — BOS if the tokenizer has one, else EOS — and the sentence is
//! tokenized without special tokens and without an EOS after it; its score is
//! Σ ln p(token | prefix, earlier tokens) over its tokens (also reported per token, the mean,
//! and as perplexity exp(−mean)). Sentences are batched shortest first under a token budget,
//! right-padded with an attention mask; a sentence's last token, only ever a target, is left out
//! of the forward pass, the vocabulary projection runs only at the positions that predict a
//! sentence token, and each batch comes back to the host once. The same machinery scores whole
//! rows (a context and its continuation) and reads next-token distributions after a context.
use indolm_torch::device::{read_back, to_device_queued};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::{CausalLm, SpecialToken};
use tch::{Kind, Tensor};

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
    pub(crate) fn as_sentence_score(&self) -> crate::pll::SentenceScore {
        crate::pll::SentenceScore { pll: self.sum, tokens: self.tokens(), correct: self.correct }
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
            return Err(Error::data(
                "causal LM scoring",
                format!("the sentence {} has no tokens", indolm_core::files::quoted(text)),
            ));
        }
        if let Some(max) = self.model.config.max_positions {
            if ids.len() as i64 + 1 > max {
                return Err(Error::data(
                    "causal LM scoring",
                    format!(
                        "the sentence {} has {} tokens, more than the model's {} positions (with the prefix token)",
                        indolm_core::files::quoted(text),
                        ids.len(),
                        max
                    ),
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

    /// Scores tokenized sentences (each non-empty), each after the prefix token.
    pub fn score_ids(&self, sentences: &[Vec<i64>]) -> Vec<CausalScore> {
        let rows: Vec<Vec<i64>> =
            sentences.iter().map(|s| std::iter::once(self.prefix.id).chain(s.iter().copied()).collect()).collect();
        self.score_rows(&rows)
            .into_iter()
            .zip(sentences)
            .map(|((log_probs, correct), s)| {
                let sum = log_probs.iter().sum();
                CausalScore { ids: s.clone(), log_probs, sum, correct }
            })
            .collect()
    }

    /// ln p of every token of each row after its first (the first is context only) and how
    /// many of them the model ranks first; rows of at least two tokens, batched shortest first
    /// under the token budget.
    pub(crate) fn score_rows(&self, rows: &[Vec<i64>]) -> Vec<(Vec<f64>, usize)> {
        self.in_batches(rows, |batch| {
            let chunk: Vec<&[i64]> = batch.iter().map(|&i| rows[i].as_slice()).collect();
            self.score_batch(&chunk)
        })
    }

    /// ln p of each of `candidates[i]` as the token after the whole of `rows[i]` (non-empty):
    /// the next-token distribution at each row's last position, batched under the token
    /// budget, one transfer to the host a batch.
    pub fn next_token_log_probs(&self, rows: &[Vec<i64>], candidates: &[Vec<i64>]) -> Vec<Vec<f64>> {
        self.in_batches(rows, |batch| {
            let chunk: Vec<&[i64]> = batch.iter().map(|&i| rows[i].as_slice()).collect();
            let wanted: Vec<&[i64]> = batch.iter().map(|&i| candidates[i].as_slice()).collect();
            self.next_token_batch(&chunk, &wanted)
        })
    }

    /// `score` run on batches of row indices (shortest rows first, under the token budget), its
    /// results put back in the rows' order.
    fn in_batches<T>(&self, rows: &[Vec<i64>], score: impl Fn(&[usize]) -> Vec<T>) -> Vec<T> {
        let lengths: Vec<usize> = rows.iter().map(Vec::len).collect();
        let mut out: Vec<Option<T>> = (0..rows.len()).map(|_| None).collect();
        for batch in indolm_torch::data::batching::by_length(&lengths, self.token_budget) {
            for (&i, scored) in batch.iter().zip(score(&batch)) {
                out[i] = Some(scored);
            }
        }
        out.into_iter().map(|s| s.expect("every row is in a batch")).collect()
    }

    /// Right-pads `rows` into ids and attention mask [rows, width] on the device.
    fn padded(&self, rows: &[&[i64]]) -> (Tensor, Tensor, usize) {
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(1);
        let n = rows.len();
        let mut ids = vec![self.prefix.id; n * width];
        let mut mask = vec![0i64; n * width];
        for (r, row) in rows.iter().enumerate() {
            ids[r * width..r * width + row.len()].copy_from_slice(row);
            mask[r * width..r * width + row.len()].iter_mut().for_each(|m| *m = 1);
        }
        let (device, shape) = (self.model.device, [n as i64, width as i64]);
        (to_device_queued(&ids, &shape, device), to_device_queued(&mask, &shape, device), width)
    }

    /// The final hidden states of `rows` at the flat positions `at` (row × width + position).
    fn hidden_at(&self, rows: &[&[i64]], at: impl Fn(usize) -> Vec<i64>) -> Tensor {
        let (ids, mask, width) = self.padded(rows);
        let hidden = self.model.hidden(&ids, &mask);
        hidden.reshape([(rows.len() * width) as i64, -1]).index_select(0, &{
            let at = at(width);
            to_device_queued(&at, &[at.len() as i64], self.model.device)
        })
    }

    /// ln p of each row's tokens after its first and how many the model ranks first: one
    /// forward pass over the right-padded rows.
    fn score_batch(&self, rows: &[&[i64]]) -> Vec<(Vec<f64>, usize)> {
        // Position p of a row predicts its token p + 1. A row's last token is only a target:
        // nothing attends from it, so it is left out of the forward pass.
        let inputs: Vec<&[i64]> = rows.iter().map(|row| &row[..row.len() - 1]).collect();
        let from = |width: usize| -> Vec<i64> {
            inputs.iter().enumerate().flat_map(|(r, row)| (0..row.len()).map(move |p| (r * width + p) as i64)).collect()
        };
        let targets: Vec<i64> = rows.iter().flat_map(|row| row[1..].iter().copied()).collect();
        let device = self.model.device;
        let (flat, firsts) = tch::no_grad(|| {
            let hidden = self.hidden_at(&inputs, from);
            let targets = to_device_queued(&targets, &[targets.len() as i64], device);
            // The fp32 logits of at most `logit_elements` at a time (a 256k vocabulary would
            // otherwise need gigabytes per batch); the chunks stay on the device.
            let chunk = (self.logit_elements / self.model.config.vocab_size).max(1);
            let (mut lps, mut firsts) = (Vec::new(), Vec::new());
            for (h, t) in hidden.split(chunk, 0).iter().zip(targets.split(chunk, 0)) {
                let log_probs = self.model.logits(h).log_softmax(-1, Kind::Float);
                firsts.push(log_probs.argmax(-1, false).eq_tensor(&t));
                lps.push(log_probs.gather(1, &t.unsqueeze(1), false).squeeze_dim(1));
            }
            let [lp, hits]: [Vec<f64>; 2] =
                read_back(&[Tensor::cat(&lps, 0), Tensor::cat(&firsts, 0)]).try_into().expect("two rows");
            (lp, hits)
        });
        let mut out = Vec::with_capacity(rows.len());
        let mut at = 0;
        for row in rows {
            let n = row.len() - 1;
            out.push((flat[at..at + n].to_vec(), firsts[at..at + n].iter().filter(|&&h| h == 1.0).count()));
            at += n;
        }
        out
    }

    /// ln p of each row's candidates after its last token: one forward pass, the vocabulary
    /// projection at one position a row.
    fn next_token_batch(&self, rows: &[&[i64]], candidates: &[&[i64]]) -> Vec<Vec<f64>> {
        let k = candidates.iter().map(|c| c.len()).max().unwrap_or(0).max(1);
        // Each row's candidates, padded to k with its first (the extra columns are dropped).
        let index: Vec<i64> =
            candidates.iter().flat_map(|c| (0..k).map(move |j| c.get(j).or(c.first()).copied().unwrap_or(0))).collect();
        let last = |width: usize| -> Vec<i64> {
            rows.iter().enumerate().map(|(r, row)| (r * width + row.len() - 1) as i64).collect()
        };
        let device = self.model.device;
        let flat = tch::no_grad(|| {
            let hidden = self.hidden_at(rows, last);
            let index = to_device_queued(&index, &[rows.len() as i64, k as i64], device);
            let picked = self.model.logits(&hidden).log_softmax(-1, Kind::Float).gather(1, &index, false);
            read_back(&[picked.view([-1])]).remove(0)
        });
        candidates.iter().enumerate().map(|(r, c)| flat[r * k..r * k + c.len()].to_vec()).collect()
    }
}
