//! AUL and AULA (Kaneko & Bollegala 2022, their `evaluate.py`): a sentence scored by a masked
//! LM in one forward pass with nothing masked. AUL is the mean log-probability of the
//! sentence's own tokens, `[CLS]` and `[SEP]` left out; AULA weights each token's
//! log-probability by the attention it receives, averaged over layers, heads and query rows
//! (weights taken at positions 1..n−1 as they are, not renormalised), then takes the mean. Both
//! come from the same pass, with the rank-1 accuracy of the tokens. Sentences are batched by
//! length under a token budget and padded; padded keys receive no attention and padded query
//! rows are left out of the average. The ranks of a data-parallel run share the batches
//! ([`UnmaskedScorer::score_shared`]).
use crate::pll::SentenceScore;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::{read_back, to_device_queued};
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::Share;
use indolm_torch::model::BertForMaskedLM;
use tch::{Device, Kind, Tensor};

/// A sentence's AUL and AULA as sums over its scored tokens (their means are the scores), with
/// the same token count and rank-1 hits.
#[derive(Debug, Clone, PartialEq)]
pub struct UnmaskedScores {
    /// Σ ln p(token) over positions 1..n−1, nothing masked.
    pub aul: SentenceScore,
    /// Σ attention(token) · ln p(token) over the same positions.
    pub aula: SentenceScore,
}

/// Values per sentence in a scoring's table: the AUL sum, the AULA sum, the tokens scored and
/// those the model ranks first.
const VALUES: usize = 4;

/// Each sentence's scores from its [`VALUES`] values.
fn scores_of(values: &[f64]) -> Vec<UnmaskedScores> {
    values
        .chunks(VALUES)
        .map(|v| {
            let (tokens, correct) = (v[2] as usize, v[3] as usize);
            UnmaskedScores {
                aul: SentenceScore { pll: v[0], tokens, correct },
                aula: SentenceScore { pll: v[1], tokens, correct },
            }
        })
        .collect()
}

/// Scores sentences with nothing masked: one forward pass per batch.
pub struct UnmaskedScorer<'a> {
    /// The masked LM.
    pub model: &'a BertForMaskedLM,
    /// Its tokenizer.
    pub tokenizer: &'a TextTokenizer,
    /// Where the forward passes run.
    pub device: Device,
    /// Padded tokens per forward pass.
    pub token_budget: usize,
    /// The ranks that share the scoring ([`UnmaskedScorer::score_shared`]); none: this
    /// process scores everything.
    pub share: Option<&'a dyn Share>,
}

impl<'a> UnmaskedScorer<'a> {
    /// A scorer with the PLL scorer's token budget for the device.
    pub fn new(model: &'a BertForMaskedLM, tokenizer: &'a TextTokenizer, device: Device) -> Self {
        let token_budget = if device.is_cuda() { 65_536 } else { 4_096 };
        UnmaskedScorer { model, tokenizer, device, token_budget, share: None }
    }

    /// A sentence's ids with `[CLS]` and `[SEP]`, refused when empty or longer than the model's
    /// positions.
    pub fn input(&self, text: &str) -> Result<Vec<i64>> {
        let ids: Vec<i64> = self.tokenizer.encode(text)?.into_iter().map(i64::from).collect();
        if ids.len() <= 2 {
            return Err(Error::data(
                "AUL scoring",
                format!("the sentence {} has no tokens", indolm_core::files::quoted(text)),
            ));
        }
        let max_len = self.model.max_positions();
        if ids.len() > max_len {
            return Err(Error::data(
                "AUL scoring",
                format!(
                    "the sentence {} has {} tokens, more than the model's {max_len}",
                    indolm_core::files::quoted(text),
                    ids.len()
                ),
            ));
        }
        Ok(ids)
    }

    /// Scores every sentence (ids from [`UnmaskedScorer::input`]), in this process alone.
    pub fn score(&self, sentences: &[Vec<i64>]) -> Vec<UnmaskedScores> {
        let mut values = vec![0.0; VALUES * sentences.len()];
        for items in self.batches(sentences) {
            self.score_into(sentences, &items, &mut values);
        }
        scores_of(&values)
    }

    /// [`UnmaskedScorer::score`] with the batches shared among the ranks of
    /// [`UnmaskedScorer::share`]: every rank plans the batches as one process does and scores its
    /// own; each sentence's sums come from one batch and are combined exactly, so the scores are
    /// bit for bit one process's. Alone when there is no share.
    pub(crate) fn score_shared(&self, sentences: &[Vec<i64>]) -> Result<Vec<UnmaskedScores>> {
        let Some(share) = self.share else { return Ok(self.score(sentences)) };
        let mut values = vec![0.0; VALUES * sentences.len()];
        for items in self.batches(sentences) {
            if share.take(items.len()) {
                self.score_into(sentences, &items, &mut values);
            }
        }
        share.combine(&mut values, "the AUL scores")?;
        Ok(scores_of(&values))
    }

    /// The sentences' batches: by length under the token budget.
    fn batches(&self, sentences: &[Vec<i64>]) -> Vec<Vec<usize>> {
        let lengths: Vec<usize> = sentences.iter().map(Vec::len).collect();
        indolm_torch::data::batching::by_length(&lengths, self.token_budget)
    }

    /// Scores the sentences `items` (one batch) into `values`, [`VALUES`] per sentence.
    fn score_into(&self, sentences: &[Vec<i64>], items: &[usize], values: &mut [f64]) {
        for (&i, s) in items.iter().zip(self.score_batch(sentences, items)) {
            let row = [s.aul.pll, s.aula.pll, s.aul.tokens as f64, s.aul.correct as f64];
            values[VALUES * i..VALUES * (i + 1)].copy_from_slice(&row);
        }
    }

    fn score_batch(&self, sentences: &[Vec<i64>], items: &[usize]) -> Vec<UnmaskedScores> {
        let width = items.iter().map(|&i| sentences[i].len()).max().unwrap_or(0);
        let n = items.len();
        let mut ids = vec![self.tokenizer.special.pad; n * width];
        let mut mask = vec![0i64; n * width];
        let (mut flat_positions, mut targets, mut owner) = (Vec::new(), Vec::new(), Vec::new());
        for (r, &i) in items.iter().enumerate() {
            let src = &sentences[i];
            ids[r * width..r * width + src.len()].copy_from_slice(src);
            mask[r * width..r * width + src.len()].iter_mut().for_each(|m| *m = 1);
            for (p, &token) in src.iter().enumerate().take(src.len() - 1).skip(1) {
                flat_positions.push((r * width + p) as i64);
                targets.push(token);
                owner.push(r);
            }
        }
        let shape = [n as i64, width as i64];
        let (lp, weights, firsts) = tch::no_grad(|| {
            let ids = to_device_queued(&ids, &shape, self.device);
            let mask = to_device_queued(&mask, &shape, self.device);
            let (hidden, attentions) = self.model.bert.forward_with_attentions(&ids, &mask);
            // Σ over layers of the head-averaged maps [batch, query, key], then the mean over
            // layers and over each row's real queries: the attention each key receives.
            let mut received = Tensor::zeros([n as i64, width as i64, width as i64], (Kind::Float, self.device));
            for probs in &attentions {
                received += probs.mean_dim(1, false, Kind::Float);
            }
            let real = mask.to_kind(Kind::Float);
            let received = (received * real.unsqueeze(2)).sum_dim_intlist(1, false, Kind::Float)
                / (real.sum_dim_intlist(1, true, Kind::Float) * attentions.len() as f64);
            let flat = to_device_queued(&flat_positions, &[flat_positions.len() as i64], self.device);
            let targets = to_device_queued(&targets, &[targets.len() as i64], self.device);
            let log_probs = self.model.logits_at(&hidden, &flat).log_softmax(-1, Kind::Float);
            let lp = log_probs.gather(1, &targets.unsqueeze(1), false).squeeze_dim(1);
            let weights = received.reshape([-1]).index_select(0, &flat);
            let firsts = log_probs.argmax(-1, false).eq_tensor(&targets);
            let [lp, weights, firsts]: [Vec<f64>; 3] =
                read_back(&[lp, weights, firsts]).try_into().expect("three rows");
            (lp, weights, firsts)
        });
        let firsts: Vec<bool> = firsts.into_iter().map(|h| h == 1.0).collect();
        let mut sums = vec![(0.0f64, 0.0f64, 0usize, 0usize); n];
        for (k, &r) in owner.iter().enumerate() {
            let s = &mut sums[r];
            s.0 += lp[k];
            s.1 += weights[k] * lp[k];
            s.2 += 1;
            s.3 += firsts[k] as usize;
        }
        sums.into_iter()
            .map(|(aul, aula, tokens, correct)| UnmaskedScores {
                aul: SentenceScore { pll: aul, tokens, correct },
                aula: SentenceScore { pll: aula, tokens, correct },
            })
            .collect()
    }
}
