//! An encoder-decoder LM (mT5, mT0, T5) through the scoring interface: a context's source is the
//! encoder's input and its prefix the decoder's input so far; next tokens are read at the
//! prefix's last position, and a continuation's tokens teacher-forced after the prefix. No
//! sentence score is defined for an encoder-decoder. [`Seq2SeqScorer`] batches the forward
//! passes: encoder inputs right-padded under a token budget, each encoded once for all the
//! decoder rows that read it, the vocabulary projection only at the positions read, one transfer
//! to the host a batch.
use super::{require_prefixes, Context, Continuation, ContinuationScore, LmScorer, ScoredLm, SentenceRule};
use crate::pll::SentenceScore;
use indolm_torch::device::{read_back, to_device_queued};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::seq2seq::Seq2SeqLm;
use tch::{Kind, Tensor};

/// One decoder pass to read: the encoder input it attends to, its decoder input ids, and the
/// (position, token) pairs whose log-probabilities are wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderRow {
    /// The index of its encoder input.
    pub input: usize,
    /// The decoder's input ids (non-empty).
    pub ids: Vec<i64>,
    /// (decoder position, token): ln p(token) from the logits at that position.
    pub reads: Vec<(usize, i64)>,
}

/// Scores with an encoder-decoder LM.
pub struct Seq2SeqScorer<'a> {
    /// The model.
    pub model: &'a Seq2SeqLm,
    /// Padded encoder tokens per forward pass, each counted once per decoder row reading it.
    pub token_budget: usize,
    /// Logit elements (positions × vocabulary) computed at once; 2^28 fp32 values (1 GiB).
    pub logit_elements: i64,
}

impl<'a> Seq2SeqScorer<'a> {
    /// A scorer with a token budget for the device (4,096 padded tokens on CPU, 32,768 on CUDA).
    pub fn new(model: &'a Seq2SeqLm) -> Self {
        let token_budget = if model.device.is_cuda() { 32_768 } else { 4_096 };
        Seq2SeqScorer { model, token_budget, logit_elements: 1 << 28 }
    }

    /// The log-probabilities each of `rows` reads (in its `reads` order), every encoder input
    /// of `inputs` (non-empty) encoded once for the rows that read it. Inputs are batched
    /// shortest first under the token budget, an input counting once per row reading it.
    pub(crate) fn log_probs(&self, inputs: &[Vec<i64>], rows: &[DecoderRow]) -> Vec<Vec<f64>> {
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); inputs.len()];
        for (r, row) in rows.iter().enumerate() {
            readers[row.input].push(r);
        }
        let cost: Vec<usize> = inputs.iter().zip(&readers).map(|(ids, r)| ids.len() * r.len().max(1)).collect();
        let mut out: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
        for batch in indolm_torch::data::batching::by_length(&cost, self.token_budget) {
            let batch_rows: Vec<usize> = batch.iter().flat_map(|&i| readers[i].iter().copied()).collect();
            if batch_rows.is_empty() {
                continue;
            }
            let scored = self.batch(inputs, &batch, rows, &batch_rows);
            for (r, lps) in batch_rows.into_iter().zip(scored) {
                out[r] = lps;
            }
        }
        out
    }

    /// Right-pads `rows` into ids and a mask [rows, width] on the device, padding with `pad`.
    fn padded(&self, rows: &[&[i64]], pad: i64) -> (Tensor, Tensor) {
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(1).max(1);
        let n = rows.len();
        let mut ids = vec![pad; n * width];
        let mut mask = vec![0i64; n * width];
        for (r, row) in rows.iter().enumerate() {
            ids[r * width..r * width + row.len()].copy_from_slice(row);
            mask[r * width..r * width + row.len()].fill(1);
        }
        let (device, shape) = (self.model.device, [n as i64, width as i64]);
        (to_device_queued(&ids, &shape, device), to_device_queued(&mask, &shape, device))
    }

    /// One forward pass: the encoder over the inputs `batch`, the decoder over the rows
    /// `batch_rows` (each reading its input's encoding), the log-probabilities they read.
    fn batch(&self, inputs: &[Vec<i64>], batch: &[usize], rows: &[DecoderRow], batch_rows: &[usize]) -> Vec<Vec<f64>> {
        let model = self.model;
        let (device, pad) = (model.device, model.config.pad_token_id);
        let encoder_rows: Vec<&[i64]> = batch.iter().map(|&i| inputs[i].as_slice()).collect();
        let decoder_rows: Vec<&[i64]> = batch_rows.iter().map(|&r| rows[r].ids.as_slice()).collect();
        // Each decoder row's encoder row within the batch.
        let at: Vec<i64> = batch_rows
            .iter()
            .map(|&r| batch.iter().position(|&i| i == rows[r].input).expect("its input is in the batch") as i64)
            .collect();
        let width = decoder_rows.iter().map(|r| r.len()).max().unwrap_or(1).max(1);
        let (positions, tokens): (Vec<i64>, Vec<i64>) = batch_rows
            .iter()
            .enumerate()
            .flat_map(|(k, &r)| rows[r].reads.iter().map(move |&(p, t)| ((k * width + p) as i64, t)))
            .unzip();
        if positions.is_empty() {
            return vec![Vec::new(); batch_rows.len()];
        }
        let flat = tch::no_grad(|| {
            let (ids, mask) = self.padded(&encoder_rows, pad);
            let encoded = model.encode(&ids, &mask);
            let (decoder_ids, _) = self.padded(&decoder_rows, pad);
            let at = to_device_queued(&at, &[at.len() as i64], device);
            let hidden = model.decode(&decoder_ids, &encoded, &mask, &at);
            let d = hidden.size()[2];
            let positions = to_device_queued(&positions, &[positions.len() as i64], device);
            let hidden = hidden.reshape([-1, d]).index_select(0, &positions);
            let tokens = to_device_queued(&tokens, &[tokens.len() as i64], device);
            // The fp32 logits of at most `logit_elements` at a time (mT5's 250k vocabulary).
            let chunk = (self.logit_elements / model.config.vocab_size).max(1);
            let picked: Vec<Tensor> = hidden
                .split(chunk, 0)
                .iter()
                .zip(tokens.split(chunk, 0))
                .map(|(h, t)| {
                    model.logits(h).log_softmax(-1, Kind::Float).gather(1, &t.unsqueeze(1), false).squeeze_dim(1)
                })
                .collect();
            read_back(&[Tensor::cat(&picked, 0)]).remove(0)
        });
        let mut out = Vec::with_capacity(batch_rows.len());
        let mut from = 0;
        for &r in batch_rows {
            let n = rows[r].reads.len();
            out.push(flat[from..from + n].to_vec());
            from += n;
        }
        out
    }
}

impl LmScorer for Seq2SeqScorer<'_> {
    fn lm(&self) -> ScoredLm<'_> {
        ScoredLm::EncoderDecoder(self.model)
    }

    /// None: no reference defines a sentence score for an encoder-decoder.
    fn sentence_scores(&self, _sentences: &[&str], _rules: &[SentenceRule]) -> Result<Vec<Vec<SentenceScore>>> {
        Err(Error::data(
            "sentence scoring",
            format!(
                "an encoder-decoder LM ({}) has no sentence score: no reference defines one",
                self.model.config.family.name()
            ),
        ))
    }

    /// Each context's source encoded once, its prefix decoded, the candidates read at the
    /// prefix's last position.
    fn next_token_log_probs(&self, contexts: &[Context], candidates: &[Vec<i64>]) -> Result<Vec<Vec<f64>>> {
        require_prefixes(contexts)?;
        let inputs: Vec<Vec<i64>> = contexts.iter().map(|c| c.source.clone()).collect();
        let rows: Vec<DecoderRow> = contexts
            .iter()
            .zip(candidates)
            .enumerate()
            .map(|(i, (c, wanted))| {
                let last = c.prefix.len() - 1;
                DecoderRow { input: i, ids: c.prefix.clone(), reads: wanted.iter().map(|&t| (last, t)).collect() }
            })
            .collect();
        Ok(self.log_probs(&inputs, &rows))
    }

    /// Each continuation teacher-forced: the decoder reads the prefix and the continuation but
    /// its last token, each continuation token read at the position before it.
    fn continuation_scores(
        &self,
        contexts: &[Context],
        continuations: &[Continuation],
    ) -> Result<Vec<ContinuationScore>> {
        require_prefixes(contexts)?;
        let inputs: Vec<Vec<i64>> = contexts.iter().map(|c| c.source.clone()).collect();
        let rows: Vec<DecoderRow> = continuations
            .iter()
            .map(|c| {
                let prefix = &contexts[c.context].prefix;
                let ids = prefix.iter().chain(&c.ids[..c.ids.len().saturating_sub(1)]).copied().collect();
                let reads = c.ids.iter().enumerate().map(|(t, &id)| (prefix.len() - 1 + t, id)).collect();
                DecoderRow { input: c.context, ids, reads }
            })
            .collect();
        Ok(self
            .log_probs(&inputs, &rows)
            .into_iter()
            .map(|lps| ContinuationScore { log_prob: lps.iter().sum::<f64>(), tokens: lps.len() })
            .collect())
    }
}
