//! IndoMMLU's option scores with any language model: [`OptionScores`], which makes each kind of
//! model's inputs as IndoMMLU's reference scores that kind ([`super::masked`], [`super::causal`],
//! [`super::seq2seq`]) and reads them through the general scoring interface ([`LmScorer`]).
use super::questions::Question;
use super::setting::{shots_misfit, Setting};
use super::{causal, masked, seq2seq};
use crate::scorer::{LmScorer, ScoredLm};
use indolm_torch::error::Result;

/// IndoMMLU's scores of a scorer's model; every [`LmScorer`] has them.
pub trait OptionScores {
    /// One score per option (higher is better) for every question, in `setting`'s mode, each
    /// prompt with `setting.shots` demonstrations from `examples` (a masked LM takes none).
    fn option_scores(&self, questions: &[Question], examples: &[Question], setting: Setting) -> Result<Vec<Vec<f64>>>;
}

impl<S: LmScorer + ?Sized> OptionScores for S {
    fn option_scores(&self, questions: &[Question], examples: &[Question], setting: Setting) -> Result<Vec<Vec<f64>>> {
        match self.lm() {
            ScoredLm::Masked { model, tokenizer } => {
                if setting.shots > 0 {
                    return Err(shots_misfit());
                }
                masked::score_questions(self, tokenizer, model.max_positions(), questions, setting.mode)
            }
            ScoredLm::Causal(lm) => causal::score_questions(self, lm, questions, examples, setting.mode, setting.shots),
            ScoredLm::EncoderDecoder(lm) => {
                seq2seq::score_questions(self, lm, questions, examples, setting.mode, setting.shots)
            }
        }
    }
}
