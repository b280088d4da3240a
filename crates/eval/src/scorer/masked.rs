//! A masked LM through the scoring interface: bias pairs by PLL (every token, CrowS' shared
//! tokens, or PLL-word-l2r) or with nothing masked (AUL and AULA from the same forward passes);
//! IndoMMLU zero-shot by option PLL or the option letter at one `[MASK]`. A scorer with a share
//! ([`PllScorer::shared`]) scores its share of the batches on each rank.
use super::LmScorer;
use crate::aul::UnmaskedScorer;
use crate::indommlu::{masked, shots_misfit, Question, Setting};
use crate::pairs::BiasPair;
use crate::pll::{crows_inputs, PllScorer, ScoringInput, SentenceScore};
use crate::BiasMetric;
use indolm_torch::error::Result;

impl LmScorer for PllScorer<'_> {
    fn is_causal(&self) -> bool {
        false
    }

    fn pair_scores(&self, pairs: &[BiasPair], metrics: &[BiasMetric]) -> Result<Vec<Vec<SentenceScore>>> {
        // AUL and AULA: one forward pass per sentence for both, if either is asked for.
        let without_masks = if metrics.iter().any(|m| matches!(m, BiasMetric::Aul | BiasMetric::Aula)) {
            let unmasked = UnmaskedScorer {
                token_budget: self.token_budget,
                share: self.share,
                ..UnmaskedScorer::new(self.model, self.tokenizer, self.device)
            };
            let mut sentences = Vec::with_capacity(pairs.len() * 2);
            for p in pairs {
                sentences.push(unmasked.input(&p.pro)?);
                sentences.push(unmasked.input(&p.anti)?);
            }
            unmasked.score_shared(&sentences)?
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(metrics.len());
        for metric in metrics {
            out.push(match metric {
                BiasMetric::Aul => without_masks.iter().map(|s| s.aul.clone()).collect(),
                BiasMetric::Aula => without_masks.iter().map(|s| s.aula.clone()).collect(),
                BiasMetric::Pppl | BiasMetric::PpplWordL2r | BiasMetric::Crows => {
                    let mut inputs: Vec<ScoringInput> = Vec::with_capacity(pairs.len() * 2);
                    for p in pairs {
                        match metric {
                            BiasMetric::Crows => {
                                let (a, b) = crows_inputs(self.tokenizer, &p.pro, &p.anti)?;
                                inputs.extend([a, b]);
                            }
                            BiasMetric::PpplWordL2r => {
                                inputs.push(self.word_l2r_input(&p.pro)?);
                                inputs.push(self.word_l2r_input(&p.anti)?);
                            }
                            _ => {
                                inputs.push(self.full_input(&p.pro)?);
                                inputs.push(self.full_input(&p.anti)?);
                            }
                        }
                    }
                    self.score_shared(&inputs)?
                }
            });
        }
        Ok(out)
    }

    fn option_scores(&self, questions: &[Question], _examples: &[Question], setting: Setting) -> Result<Vec<Vec<f64>>> {
        if setting.shots > 0 {
            return Err(shots_misfit());
        }
        masked::score_questions(self, questions, setting.mode)
    }
}
