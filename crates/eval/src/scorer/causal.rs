//! A causal LM through the scoring interface: each bias sentence by its log-likelihood after
//! the prefix token (`pppl` then decides by perplexity, `crows` by the sums, as
//! lm-evaluation-harness scores CrowS-Pairs); IndoMMLU as IndoMMLU's own `evaluate.py`.
use super::LmScorer;
use crate::causal::{CausalScorer, Convention};
use crate::indommlu::{causal, Question, Setting};
use crate::pairs::BiasPair;
use crate::pll::SentenceScore;
use crate::BiasMetric;
use indolm_torch::error::{Error, Result};

impl LmScorer for CausalScorer<'_> {
    fn is_causal(&self) -> bool {
        true
    }

    fn check_metrics(&self, metrics: &[BiasMetric]) -> Result<()> {
        match metrics.iter().find(|m| !matches!(m, BiasMetric::Pppl | BiasMetric::Crows)) {
            Some(m) => Err(Error::argument(
                "--metric",
                format!("`{m}` needs a masked LM; a causal LM is evaluated under pppl (perplexity) or crows (log-likelihood sums)"),
            )),
            None => Ok(()),
        }
    }

    /// One log-likelihood per sentence, the same under `pppl` and `crows` (their rules differ).
    fn pair_scores(&self, pairs: &[BiasPair], metrics: &[BiasMetric]) -> Result<Vec<Vec<SentenceScore>>> {
        self.check_metrics(metrics)?;
        let mut ids = Vec::with_capacity(pairs.len() * 2);
        for p in pairs {
            ids.push(self.encode(&p.pro)?);
            ids.push(self.encode(&p.anti)?);
        }
        let scores: Vec<SentenceScore> = self.score_ids(&ids).iter().map(|s| s.as_sentence_score()).collect();
        Ok(vec![scores; metrics.len()])
    }

    fn option_scores(&self, questions: &[Question], examples: &[Question], setting: Setting) -> Result<Vec<Vec<f64>>> {
        causal::score_questions(self, questions, examples, setting.mode, setting.shots)
    }

    fn convention(&self) -> Option<Convention> {
        Some(CausalScorer::convention(self))
    }
}
