//! The `[eval.bias]` checkpoint hook: the pairs scored at every checkpoint (and every `every`
//! steps between), the records and report written into the checkpoint's folder, the curves to
//! TensorBoard. In a data-parallel run every rank scores its share of the batches; rank 0
//! aggregates the combined scores (the bootstrap drawn from the recipe's seed, as one process
//! draws it) and writes.
use super::report::Bootstrap;
use super::scoring::{evaluate_under, score_pairs_under, Evaluation};
use crate::pairs::PairSet;
use crate::pll::PllScorer;
use crate::BiasMetric;
use indolm_core::logger::Logger;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::Result;
use indolm_torch::hooks::{CheckpointHook, Ranks};
use indolm_torch::model::BertForMaskedLM;
use std::path::{Path, PathBuf};
use tch::Device;

/// The `[eval.bias]` checkpoint hook.
pub struct BiasHook {
    /// The pairs scored at every checkpoint.
    pub pairs: PairSet,
    /// How each pair is decided: the main metric first, then the extra ones.
    pub metrics: Vec<BiasMetric>,
    /// Languages to evaluate (names or codes); empty: all.
    pub languages: Vec<String>,
    /// Where scoring runs.
    pub device: Device,
    /// The intervals' bootstrap (the recipe's seed).
    pub bootstrap: Bootstrap,
    /// Evaluate every this many steps between checkpoints too (`[eval.bias] every`).
    pub every: Option<u64>,
    /// The curves, one board per metric: the main metric's one TensorBoard run per language
    /// under the run's folder, each extra metric's under `<metric>/`.
    pub boards: Vec<super::board::BiasBoard>,
}

impl BiasHook {
    /// A hook logging its curves under `tensorboard_dir` (`runs/<run>`).
    pub fn new(
        pairs: PairSet,
        section: &crate::settings::BiasEvalSection,
        seed: u64,
        device: Device,
        tensorboard_dir: PathBuf,
    ) -> Self {
        let mut metrics = vec![section.metric];
        for &m in &section.extra_metrics {
            if !metrics.contains(&m) {
                metrics.push(m);
            }
        }
        let boards = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| {
                super::board::BiasBoard::new(if i == 0 {
                    tensorboard_dir.clone()
                } else {
                    tensorboard_dir.join(m.to_string())
                })
            })
            .collect();
        BiasHook {
            pairs,
            metrics,
            languages: section.languages.clone(),
            device,
            bootstrap: Bootstrap { seed, resamples: section.resamples },
            every: section.every,
            boards,
        }
    }
}

impl CheckpointHook for BiasHook {
    fn name(&self) -> &str {
        "bias evaluation"
    }

    fn every(&self) -> Option<u64> {
        self.every
    }

    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        checkpoint_dir: &Path,
        logger: &mut Logger,
        ranks: &Ranks<'_>,
    ) -> Result<()> {
        let scorer = PllScorer::new(model, tokenizer, self.device).shared(ranks);
        if !ranks.leader() {
            // The same scoring, and so the same collectives, as rank 0's; rank 0 aggregates.
            score_pairs_under(&scorer, &self.pairs, &self.metrics, &self.languages)?;
            return Ok(());
        }
        let evaluations =
            evaluate_under(&scorer, &self.pairs, &self.metrics, &self.languages, Some(step), self.bootstrap)?;
        Evaluation::write_all(&evaluations, checkpoint_dir)?;
        for (evaluation, board) in evaluations.iter().zip(&mut self.boards) {
            board.log(&evaluation.report, step);
            logger.println(&format!(
                "step {step}: bias win rate ({}) {}",
                evaluation.report.metric,
                evaluation.report.summary_line()
            ));
        }
        Ok(())
    }
}
