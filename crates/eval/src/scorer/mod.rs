//! The one interface through which the evaluations score a language model, masked, causal or
//! encoder-decoder: [`LmScorer`]. It knows sentences and continuations, nothing of the
//! evaluations built on it:
//! - [`LmScorer::sentence_scores`]: whole sentences under a [`SentenceRule`]. A masked LM
//!   ([`crate::pll::PllScorer`]) scores by pseudo-log-likelihood, one position masked at a
//!   time, or with nothing masked (AUL, AULA); a causal LM ([`crate::causal::CausalScorer`])
//!   by log-likelihood after its prefix token; an encoder-decoder ([`Seq2SeqScorer`]) scores none.
//! - [`LmScorer::next_token_log_probs`] and [`LmScorer::continuation_scores`]: candidate next
//!   tokens, and continuations, after a [`Context`] given as the model's token ids, which the
//!   caller makes with the model's own tokenizer ([`LmScorer::lm`]) as its reference does.
//!
//! The bias evaluation (`eval::bias`) and IndoMMLU (`eval::indommlu`) sit above
//! it, each with one path written against the trait; [`LoadedLm::load`] is the one place that
//! tells the kinds of model folder apart.
mod causal;
mod masked;
mod seq2seq;

pub use seq2seq::{DecoderRow, Seq2SeqScorer};

use crate::causal::{CausalScorer, Convention};
use crate::pll::{PllScorer, SentenceScore};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::Result;
use indolm_torch::model::decoder::{is_causal_dir, load_causal_lm, CausalLm};
use indolm_torch::model::model_dir::{load_masked_lm, LoadedModel};
use indolm_torch::model::seq2seq::{is_seq2seq_dir, load_seq2seq_lm, Seq2SeqLm};
use indolm_torch::model::BertForMaskedLM;
use std::path::Path;
use tch::Device;

/// The model a scorer reads: for callers that tokenize their inputs themselves (a reference
/// script's prompts) and name the model in messages.
#[derive(Clone, Copy)]
pub enum ScoredLm<'a> {
    /// A BERT-family masked LM and its tokenizer.
    Masked {
        /// The model.
        model: &'a BertForMaskedLM,
        /// Its tokenizer (`[CLS]`, `[SEP]`, `[MASK]`).
        tokenizer: &'a TextTokenizer,
    },
    /// A decoder-only LM.
    Causal(&'a CausalLm),
    /// An encoder-decoder LM (T5, mT5, mT0).
    EncoderDecoder(&'a Seq2SeqLm),
}

/// How a sentence's score is computed: the scoring rules of the literature a bias metric
/// decides by. A causal LM scores every rule that needs no mask ([`SentenceRule::EveryToken`],
/// [`SentenceRule::SharedTokens`]) by its log-likelihood after the prefix token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentenceRule {
    /// Every token but the special ones scored: a masked LM's PLL, each token masked in turn
    /// (Salazar et al. 2020).
    EveryToken,
    /// PLL-word-l2r (Kauf & Ivanova 2023): as [`SentenceRule::EveryToken`], each token masked
    /// with the later pieces of its word; masked LMs only.
    WordL2r,
    /// The sentences taken two by two, each scored only on the tokens it shares with the other
    /// (Nangia et al. 2020, CrowS-Pairs' rule).
    SharedTokens,
    /// AUL (Kaneko & Bollegala 2022): nothing masked, the sentence's own tokens; masked LMs only.
    AllUnmasked,
    /// AULA: as [`SentenceRule::AllUnmasked`], each token weighted by the attention it receives;
    /// masked LMs only.
    AllUnmaskedAttention,
}

/// A context a language model continues, as the model's token ids (special tokens included as
/// the caller wants them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// What an encoder-decoder's encoder reads; empty for a masked or causal LM.
    pub source: Vec<i64>,
    /// What comes before the continuation (non-empty): a causal LM's whole context; an
    /// encoder-decoder's decoder input so far (its start token at least); a masked LM's
    /// sequence from `[CLS]`, the continuation then followed by `[SEP]`.
    pub prefix: Vec<i64>,
}

/// A continuation to score: the index of its context and its token ids (non-empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuation {
    /// Its context among those given with it.
    pub context: usize,
    /// Its tokens, each scored given the context and the tokens before it.
    pub ids: Vec<i64>,
}

/// A continuation's log-likelihood: Σ ln p over its tokens (a masked LM's PLL, each token
/// masked in turn) and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContinuationScore {
    /// Σ ln p over the continuation's tokens (natural log).
    pub log_prob: f64,
    /// Its tokens (at least one).
    pub tokens: usize,
}

impl ContinuationScore {
    /// The mean log-probability per token.
    pub fn mean(&self) -> f64 {
        self.log_prob / self.tokens as f64
    }
}

/// What the evaluations need from a language model: scores of sentences and of continuations.
pub trait LmScorer {
    /// The model it scores with.
    fn lm(&self) -> ScoredLm<'_>;

    /// Whether it is prompted as a causal LM is (a continuation read after a context): a causal
    /// or encoder-decoder LM; else a masked LM.
    fn is_causal(&self) -> bool {
        !matches!(self.lm(), ScoredLm::Masked { .. })
    }

    /// The scores of `sentences` under each of `rules`: per rule, in its order, one per sentence
    /// in order. An error for a rule the model has no score for (a causal LM's masks, any rule
    /// of an encoder-decoder), or for an odd number of sentences under
    /// [`SentenceRule::SharedTokens`].
    fn sentence_scores(&self, sentences: &[&str], rules: &[SentenceRule]) -> Result<Vec<Vec<SentenceScore>>>;

    /// How a causal LM's sentences are scored, recorded with the scores; none for other models.
    fn convention(&self) -> Option<Convention> {
        None
    }

    /// ln p of each of `candidates[i]` as the token that follows `contexts[i]` (a masked LM: at
    /// one `[MASK]` after the context, `[SEP]` closing the sequence).
    fn next_token_log_probs(&self, contexts: &[Context], candidates: &[Vec<i64>]) -> Result<Vec<Vec<f64>>>;

    /// The log-likelihood of each continuation after its context, each token given the context
    /// and the continuation's tokens before it (a masked LM: each masked in turn, `[SEP]` after).
    fn continuation_scores(
        &self,
        contexts: &[Context],
        continuations: &[Continuation],
    ) -> Result<Vec<ContinuationScore>>;
}

/// Refuses a context with nothing before its continuation (no position to read it from).
fn require_prefixes(contexts: &[Context]) -> Result<()> {
    match contexts.iter().position(|c| c.prefix.is_empty()) {
        Some(i) => Err(indolm_torch::error::Error::data(
            "continuation scoring",
            format!("context {i} has no tokens before its continuation"),
        )),
        None => Ok(()),
    }
}

/// A model folder loaded for scoring, as whichever kind of language model it holds.
pub enum LoadedLm {
    /// A BERT-family masked LM, its matrix products in the device's default precision.
    Masked(LoadedModel),
    /// A decoder family (Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3, BLOOM, XGLM, Falcon), a
    /// PEFT LoRA adapter merged over one included.
    Causal(CausalLm),
    /// An encoder-decoder (T5, mT5, mT0).
    Seq2Seq(Seq2SeqLm),
}

impl LoadedLm {
    /// Loads `dir` onto `device`: an encoder-decoder when its `config.json` names T5 or mT5, a
    /// causal LM when it names a decoder architecture or it is a PEFT adapter folder (merged
    /// into its base), else a masked LM.
    pub fn load(dir: &Path, device: Device) -> Result<Self> {
        if is_seq2seq_dir(dir) {
            return Ok(LoadedLm::Seq2Seq(load_seq2seq_lm(dir, device)?));
        }
        if is_causal_dir(dir) {
            return Ok(LoadedLm::Causal(load_causal_lm(dir, device)?));
        }
        let mut loaded = load_masked_lm(dir, device)?;
        loaded.model.set_precision(indolm_torch::device::default_precision(device));
        Ok(LoadedLm::Masked(loaded))
    }

    /// What loading had to do that the user should know (a missing head initialised, tensors
    /// not read, a LoRA adapter merged), one line each.
    pub fn notes(&self) -> Vec<String> {
        match self {
            LoadedLm::Masked(m) => m.notes.iter().map(|n| n.to_string()).collect(),
            LoadedLm::Causal(lm) => {
                let mut notes: Vec<String> = lm.adapter.iter().map(|a| a.to_string()).collect();
                if lm.not_text > 0 {
                    notes.push(format!(
                        "the text model of a multimodal checkpoint; {} vision tensor(s) not read",
                        lm.not_text
                    ));
                }
                if !lm.unused.is_empty() {
                    notes.push(format!(
                        "ignored {} tensor(s) the model does not use, e.g. {}",
                        lm.unused.len(),
                        lm.unused[0]
                    ));
                }
                notes
            }
            LoadedLm::Seq2Seq(lm) => match lm.unused.first() {
                Some(first) => {
                    vec![format!("ignored {} tensor(s) the model does not use, e.g. {first}", lm.unused.len())]
                }
                None => Vec::new(),
            },
        }
    }

    /// For scores read through the MLM head: refuses a masked LM whose head was initialised
    /// randomly unless `allow_random_head`, then the warning every output carries
    /// ([`LoadedModel::require_trained_head`]); none for a causal LM or an encoder-decoder.
    pub fn require_trained_head(&self, dir: &Path, allow_random_head: bool) -> Result<Option<String>> {
        match self {
            LoadedLm::Masked(m) => m.require_trained_head(dir, allow_random_head),
            LoadedLm::Causal(_) | LoadedLm::Seq2Seq(_) => Ok(None),
        }
    }

    /// What scored, for messages: `masked LM`, the decoder family's name, or the
    /// encoder-decoder's (`mt5 encoder-decoder LM`).
    pub(crate) fn describe(&self) -> String {
        match self {
            LoadedLm::Masked(_) => "masked LM".into(),
            LoadedLm::Causal(lm) => format!("{} causal LM", lm.config.family.name()),
            LoadedLm::Seq2Seq(lm) => format!("{} encoder-decoder LM", lm.config.family.name()),
        }
    }

    /// Its scorer, with the device's token budget; an error for a causal LM whose tokenizer
    /// has neither BOS nor EOS (nothing to score a first token after).
    pub(crate) fn scorer(&self, device: Device) -> Result<Box<dyn LmScorer + '_>> {
        Ok(match self {
            LoadedLm::Masked(m) => Box::new(PllScorer::new(&m.model, &m.tokenizer, device)),
            LoadedLm::Causal(lm) => Box::new(CausalScorer::new(lm)?),
            LoadedLm::Seq2Seq(lm) => Box::new(Seq2SeqScorer::new(lm)),
        })
    }
}
