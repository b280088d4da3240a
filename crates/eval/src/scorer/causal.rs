//! A causal LM through the scoring interface: each sentence by its log-likelihood after the
//! prefix token, the same under every rule that needs no mask (lm-evaluation-harness's rule for
//! CrowS-Pairs); next tokens from the distribution after the whole context, and continuations by
//! the log-probabilities of their tokens after the context, in the rows of one sequence each.
use super::{Context, Continuation, ContinuationScore, LmScorer, ScoredLm, SentenceRule};
use crate::causal::{CausalScorer, Convention};
use crate::pll::SentenceScore;
use indolm_torch::error::{Error, Result};

impl LmScorer for CausalScorer<'_> {
    fn lm(&self) -> ScoredLm<'_> {
        ScoredLm::Causal(self.model)
    }

    /// One log-likelihood per sentence, the same under every rule asked (their decisions differ).
    fn sentence_scores(&self, sentences: &[&str], rules: &[SentenceRule]) -> Result<Vec<Vec<SentenceScore>>> {
        if let Some(rule) = rules.iter().find(|r| !matches!(r, SentenceRule::EveryToken | SentenceRule::SharedTokens)) {
            return Err(Error::data(
                "causal LM scoring",
                format!("{rule:?} masks tokens or reads attention, which needs a masked LM"),
            ));
        }
        let ids = sentences.iter().map(|s| self.encode(s)).collect::<Result<Vec<_>>>()?;
        let scores: Vec<SentenceScore> = self.score_ids(&ids).iter().map(|s| s.as_sentence_score()).collect();
        Ok(vec![scores; rules.len()])
    }

    fn convention(&self) -> Option<Convention> {
        Some(CausalScorer::convention(self))
    }

    /// The next-token distribution at each context's last position.
    fn next_token_log_probs(&self, contexts: &[Context], candidates: &[Vec<i64>]) -> Result<Vec<Vec<f64>>> {
        let rows: Vec<Vec<i64>> = contexts.iter().map(|c| c.prefix.clone()).collect();
        Ok(CausalScorer::next_token_log_probs(self, &rows, candidates))
    }

    /// Each continuation read in one row, its context then its tokens; the log-probabilities
    /// of the row's tokens after its first, of which the continuation's are the last.
    fn continuation_scores(
        &self,
        contexts: &[Context],
        continuations: &[Continuation],
    ) -> Result<Vec<ContinuationScore>> {
        let rows: Vec<Vec<i64>> =
            continuations.iter().map(|c| contexts[c.context].prefix.iter().chain(&c.ids).copied().collect()).collect();
        Ok(self
            .score_rows(&rows)
            .into_iter()
            .zip(continuations)
            .map(|((lps, _), c)| {
                let lps = &lps[lps.len() - c.ids.len()..];
                ContinuationScore { log_prob: lps.iter().sum::<f64>(), tokens: lps.len() }
            })
            .collect())
    }
}
