//! Text generation with a causal LM ([`indolm_torch::model::decoder`]). Prompts come in as token ids —
//! the seam where a chat template or any other prompt builder plugs in; [`encode`] tokenizes a
//! plain prompt as transformers' `tokenizer(prompt)` does. They are batched under a token budget
//! and left-padded (`batching`), run once into a key/value cache and continued a token at a time
//! (`decoding`), each token the argmax or a draw from transformers' warped distribution with a
//! seeded stream per prompt (`sampling`), until an EOS id, a stop string or `max_new_tokens`
//! (`stopping`); a completion's text is what it adds after its prompt's (`text`). The model's
//! defaults come from its `generation_config.json` and `config.json` (`config`); prompt files and
//! completion records are JSON Lines (`prompts`); a chat prompt is rendered with the model's chat
//! template as transformers' `apply_chat_template` renders it, then tokenized (`chat`); [`run`]
//! completes a file of prompts end to end (`indolm generate`), with a local or a served model.
pub mod backend;
pub mod batching;
pub mod chat;
pub mod config;
pub(crate) mod decoding;
pub mod prompts;
pub mod run;
pub(crate) mod sampling;
pub(crate) mod stopping;
pub mod text;

pub use config::GenerationDefaults;
pub use sampling::Sampling;
pub use stopping::StopReason;

use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::CausalLm;

/// How to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// New tokens at most a completion (at least 1).
    pub max_new_tokens: usize,
    /// How to sample; `None`: greedy.
    pub sampling: Option<Sampling>,
    /// Token ids that end a completion (kept as its last token, left out of its text).
    pub eos: Vec<i64>,
    /// Texts that end a completion (its text cut before the first one found).
    pub stop_strings: Vec<String>,
    /// The id left padding is filled with (masked out: any id of the vocabulary).
    pub pad: i64,
    /// Padded tokens a batch may hold: rows × (its longest prompt + `max_new_tokens`).
    pub token_budget: usize,
    /// Rows a batch may hold at most.
    pub batch_size: usize,
}

impl Settings {
    /// Refuses settings that cannot generate with `lm`: no new token, no row, a sampling
    /// parameter transformers refuses, a pad id outside the vocabulary.
    pub(crate) fn check(&self, lm: &CausalLm) -> Result<()> {
        if self.max_new_tokens == 0 {
            return Err(Error::argument("max_new_tokens", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(Error::argument("batch_size", "must be at least 1"));
        }
        if let Some(sampling) = &self.sampling {
            sampling.check()?;
        }
        if !(0..lm.config.vocab_size).contains(&self.pad) {
            return Err(Error::argument(
                "pad",
                format!("token id {} is outside the model's vocabulary of {}", self.pad, lm.config.vocab_size),
            ));
        }
        Ok(())
    }
}

/// One prompt's completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The new tokens, the EOS that ended it included.
    pub ids: Vec<i64>,
    /// What it adds after the prompt's text (special tokens skipped, cut before the stop string
    /// that ended it).
    pub text: String,
    /// Why it ended.
    pub stop: StopReason,
}

impl Completion {
    /// Its new tokens (what `max_new_tokens` bounds; the EOS that ended it counted).
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }
}

/// `text` as the prompt of a completion: its token ids as transformers' `tokenizer(text)` gives
/// them, with the special tokens the tokenizer adds (Llama's BOS; none for Qwen).
pub fn encode(lm: &CausalLm, text: &str) -> Result<Vec<i64>> {
    lm.tokenizer.encode_with_special_tokens(text)
}

/// The completions of `prompts` (token ids, none empty), in their order: batched under the token
/// budget (similar lengths together), left-padded, each batch generated to its end; `progress`
/// is told how many prompts each finished batch completed.
pub fn generate(
    lm: &CausalLm,
    prompts: &[Vec<i64>],
    settings: &Settings,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Completion>> {
    settings.check(lm)?;
    if let Some(i) = prompts.iter().position(Vec::is_empty) {
        return Err(Error::data("generation", format!("prompt {} has no tokens", i + 1)));
    }
    let lengths: Vec<usize> = prompts.iter().map(Vec::len).collect();
    let mut out: Vec<Option<Completion>> = vec![None; prompts.len()];
    for batch in batching::plan(&lengths, settings.max_new_tokens, settings.token_budget, settings.batch_size) {
        let rows: Vec<&[i64]> = batch.iter().map(|&i| prompts[i].as_slice()).collect();
        for (&i, completion) in batch.iter().zip(decoding::run(lm, &rows, &batch, settings)?) {
            out[i] = Some(completion);
        }
        progress(batch.len());
    }
    Ok(out.into_iter().flatten().collect())
}

/// A progress bar over `n` prompts on a terminal's stderr (hidden elsewhere, and for fewer than
/// two prompts): `generate`'s and IndoBias-QA's.
pub(crate) fn progress_bar(n: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n as u64).with_style(
        indicatif::ProgressStyle::default_bar()
            .template("{bar:30} {pos}/{len} prompts [{elapsed_precise} < {eta_precise}]")
            .expect("valid template"),
    );
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) || n < 2 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}
