//! The one interface through which the evaluations score a language model, masked, causal or
//! encoder-decoder: [`LmScorer`]. A masked LM ([`crate::pll::PllScorer`]) scores sentences
//! by pseudo-log-likelihood, one position masked at a time, or with nothing masked (AUL, AULA); a
//! causal LM ([`crate::causal::CausalScorer`]) by log-likelihood after its prefix token; an
//! encoder-decoder ([`Seq2SeqScorer`], mT5/mT0) only IndoMMLU, as IndoMMLU's script scores mT0.
//! The bias evaluation and IndoMMLU each have one path, written against the trait, and
//! [`LoadedLm::load`] is the one place that tells the kinds of model folder apart.
mod causal;
mod masked;
mod seq2seq;

pub use seq2seq::{DecoderRow, Seq2SeqScorer};

use crate::causal::{CausalScorer, Convention};
use crate::indommlu::{Question, Setting};
use crate::pairs::BiasPair;
use crate::pll::{PllScorer, SentenceScore};
use crate::BiasMetric;
use indolm_torch::error::Result;
use indolm_torch::model::decoder::{is_causal_dir, load_causal_lm, CausalLm};
use indolm_torch::model::model_dir::{load_masked_lm, LoadedModel};
use indolm_torch::model::seq2seq::{is_seq2seq_dir, load_seq2seq_lm, Seq2SeqLm};
use std::path::Path;
use tch::Device;

/// What the evaluations need from a language model.
pub trait LmScorer {
    /// Whether it is scored as a causal LM is (letter or full-answer IndoMMLU, few-shot prompts):
    /// a causal or encoder-decoder LM; else a masked LM.
    fn is_causal(&self) -> bool;

    /// Refuses the bias metrics it cannot decide pairs by (a causal LM has no masks to score
    /// AUL, AULA or PLL-word-l2r with), before anything is scored.
    fn check_metrics(&self, _metrics: &[BiasMetric]) -> Result<()> {
        Ok(())
    }

    /// The scores of each pair's two sentences under each of `metrics`: per metric, in its
    /// order, the pro and anti sentences' scores pair by pair.
    fn pair_scores(&self, pairs: &[BiasPair], metrics: &[BiasMetric]) -> Result<Vec<Vec<SentenceScore>>>;

    /// One score per option (higher is better) for every question, in `setting`'s mode, each
    /// prompt with `setting.shots` demonstrations from `examples`.
    fn option_scores(&self, questions: &[Question], examples: &[Question], setting: Setting) -> Result<Vec<Vec<f64>>>;

    /// How a causal LM's sentences were scored, recorded with its bias reports; none for a
    /// masked LM.
    fn convention(&self) -> Option<Convention> {
        None
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
    pub(crate) fn require_trained_head(&self, dir: &Path, allow_random_head: bool) -> Result<Option<String>> {
        match self {
            LoadedLm::Masked(m) => m.require_trained_head(dir, allow_random_head),
            LoadedLm::Causal(_) | LoadedLm::Seq2Seq(_) => Ok(None),
        }
    }

    /// What scored, for messages: `masked LM`, the decoder family's name, or the
    /// encoder-decoder's (`mt5 encoder-decoder LM`).
    pub fn describe(&self) -> String {
        match self {
            LoadedLm::Masked(_) => "masked LM".into(),
            LoadedLm::Causal(lm) => format!("{} causal LM", lm.config.family.name()),
            LoadedLm::Seq2Seq(lm) => format!("{} encoder-decoder LM", lm.config.family.name()),
        }
    }

    /// Its scorer, with the device's token budget; an error for a causal LM whose tokenizer
    /// has neither BOS nor EOS (nothing to score a first token after).
    pub fn scorer(&self, device: Device) -> Result<Box<dyn LmScorer + '_>> {
        Ok(match self {
            LoadedLm::Masked(m) => Box::new(PllScorer::new(&m.model, &m.tokenizer, device)),
            LoadedLm::Causal(lm) => Box::new(CausalScorer::new(lm)?),
            LoadedLm::Seq2Seq(lm) => Box::new(Seq2SeqScorer::new(lm)),
        })
    }
}
