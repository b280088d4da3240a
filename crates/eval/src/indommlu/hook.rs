//! The `[eval.indommlu]` checkpoint hook: a fixed, seeded subsample of the questions scored at
//! every checkpoint, the files into the checkpoint's folder, the curves to TensorBoard. In a
//! data-parallel run every rank scores its share of the batches and rank 0 writes.
use super::evaluation::{evaluate, write_evaluation, Evaluated};
use super::questions::{load, Question};
use super::scoring::OptionScores;
use super::setting::Setting;
use crate::pll::PllScorer;
use crate::IndommluMode;
use indolm_core::logger::Logger;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::Result;
use indolm_torch::hooks::{CheckpointHook, Ranks};
use indolm_torch::model::BertForMaskedLM;
use std::path::Path;
use tch::Device;

/// The `[eval.indommlu]` checkpoint hook: a fixed, seeded subsample of the questions.
pub struct IndommluHook {
    /// The questions scored at every checkpoint, in CSV order.
    pub questions: Vec<Question>,
    /// How the options are scored.
    pub mode: IndommluMode,
    /// Where the model runs.
    pub device: Device,
}

impl IndommluHook {
    /// Loads the questions from `path` and keeps `subsample` of them (all when 0 or more than
    /// there are), drawn with `seed`.
    pub fn new(path: &Path, mode: IndommluMode, subsample: usize, seed: u64, device: Device) -> Result<Self> {
        use rand::seq::SliceRandom;
        let mut questions = load(path)?;
        if subsample > 0 && subsample < questions.len() {
            questions.shuffle(&mut indolm_core::seeds::stream_rng(
                seed,
                indolm_core::seeds::salt::INDOMMLU_SUBSAMPLE,
                0,
            ));
            questions.truncate(subsample);
            questions.sort_by_key(|q| q.row);
        }
        Ok(IndommluHook { questions, mode, device })
    }
}

impl CheckpointHook for IndommluHook {
    fn name(&self) -> &str {
        "IndoMMLU evaluation"
    }
    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        dir: &Path,
        logger: &mut Logger,
        ranks: &Ranks<'_>,
    ) -> Result<()> {
        let scorer = PllScorer::new(model, tokenizer, self.device).shared(ranks);
        let setting = Setting::masked(self.mode);
        if !ranks.leader() {
            // The same scoring, and so the same collectives, as rank 0's; rank 0 aggregates.
            scorer.option_scores(&self.questions, &[], setting)?;
            return Ok(());
        }
        let Evaluated { report, records, .. } = evaluate(&scorer, &self.questions, &[], setting, Some(step))?;
        write_evaluation(dir, &report, &records)?;
        for a in &report.areas {
            logger.scalar(&format!("indommlu/{}", a.area.replace(' ', "_")), a.accuracy, step);
        }
        logger.scalar("indommlu/average", report.average, step);
        logger.scalar("indommlu/ece", report.ece, step);
        logger.println(&format!(
            "step {step}: IndoMMLU average {:.1} (random {:.1})",
            report.average, report.random_average
        ));
        Ok(())
    }
}
