//! One batch of prompts generated to its end: the left-padded prompts run once through the model
//! into a key/value cache, then each row's chosen token runs through it, one a step. A row that
//! ends leaves the batch (its rows of the cache dropped): what transformers computes for the
//! others while it pads the finished rows.
use super::batching::left_padded;
use super::sampling::{choose, stream};
use super::stopping::{Stop, StopReason, Stopping};
use super::text::CompletionText;
use super::{Completion, Settings};
use indolm_torch::error::Result;
use indolm_torch::model::decoder::CausalLm;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Tensor};

/// A prompt being completed.
struct Row<'a> {
    /// Its new tokens so far.
    ids: Vec<i64>,
    /// Its stream of uniforms, when sampling.
    rng: Option<ChaCha8Rng>,
    /// Its text after the prompt's.
    text: CompletionText<'a>,
    /// How it ended, once it has.
    stop: Option<Stop>,
}

impl Row<'_> {
    /// The completion: its tokens, its text (without the EOS, cut before the stop string), why it
    /// ended.
    fn finish(self) -> Result<Completion> {
        let stop = self.stop.unwrap_or(Stop { reason: StopReason::Length, cut: None });
        let text = match stop.reason {
            StopReason::Eos => self.text.text(&self.ids[..self.ids.len().saturating_sub(1)])?,
            StopReason::Length => self.text.text(&self.ids)?,
            StopReason::StopString => {
                let text = self.text.text(&self.ids)?;
                let cut = stop.cut.and_then(|at| text.get(..at)).unwrap_or(&text);
                cut.to_string()
            }
        };
        Ok(Completion { ids: self.ids, text, stop: stop.reason })
    }
}

/// The completions of `prompts` (non-empty token ids) in one batch; `numbers` are the prompts'
/// places among all prompts, which number their random streams.
pub fn run(lm: &CausalLm, prompts: &[&[i64]], numbers: &[usize], settings: &Settings) -> Result<Vec<Completion>> {
    tch::no_grad(|| run_batch(lm, prompts, numbers, settings))
}

/// [`run`], its tensors out of autograd.
fn run_batch(lm: &CausalLm, prompts: &[&[i64]], numbers: &[usize], settings: &Settings) -> Result<Vec<Completion>> {
    let device = lm.device;
    let stopping =
        Stopping { eos: &settings.eos, stop_strings: &settings.stop_strings, max_new_tokens: settings.max_new_tokens };
    let mut rows = Vec::with_capacity(prompts.len());
    for (prompt, &number) in prompts.iter().zip(numbers) {
        rows.push(Row {
            ids: Vec::with_capacity(settings.max_new_tokens),
            rng: settings.sampling.map(|s| stream(s.seed, number)),
            text: CompletionText::new(&lm.tokenizer, prompt)?,
            stop: None,
        });
    }
    let (ids, mask, width) = left_padded(prompts, settings.pad, device);
    let mut cache = lm.new_cache(prompts.len() as i64, width + settings.max_new_tokens as i64);
    let mut logits = lm.logits(&lm.hidden_cached(&ids, &mask, &mut cache)?.select(1, -1));
    // The rows still generating, in the cache's order.
    let mut active: Vec<usize> = (0..rows.len()).collect();
    loop {
        let uniforms: Vec<f64> =
            active.iter().map(|&r| rows[r].rng.as_mut().map_or(0.0, |rng| rng.random::<f64>())).collect();
        let next = choose(&logits, settings.sampling.as_ref(), &uniforms)?;
        let mut staying = Vec::with_capacity(active.len());
        for (slot, (&r, &token)) in active.iter().zip(&next).enumerate() {
            let row = &mut rows[r];
            row.ids.push(token);
            let (ids, text) = (&row.ids, &row.text);
            let stop = stopping.after(ids, || text.text(ids))?;
            row.stop = stop;
            if stop.is_none() {
                staying.push(slot);
            }
        }
        if staying.is_empty() {
            break;
        }
        if staying.len() < active.len() {
            let keep: Vec<i64> = staying.iter().map(|&slot| slot as i64).collect();
            cache.keep(&Tensor::from_slice(&keep).to_device(device));
            active = staying.iter().map(|&slot| active[slot]).collect();
        }
        let tokens: Vec<i64> = active.iter().map(|&r| rows[r].ids.last().copied().unwrap_or(settings.pad)).collect();
        let n = tokens.len() as i64;
        let step = Tensor::from_slice(&tokens).view([n, 1]).to_device(device);
        let real = Tensor::ones([n, 1], (Kind::Int64, device));
        logits = lm.logits(&lm.hidden_cached(&step, &real, &mut cache)?.select(1, -1));
    }
    rows.into_iter().map(Row::finish).collect()
}
