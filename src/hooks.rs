//! Checkpoint hooks: evaluations the trainer runs on the model at every checkpoint (the bias
//! evaluation, IndoMMLU). The trait lives here, below both `train` and `eval`, so that the
//! evaluations implement it and the trainer calls it without either knowing the other; the
//! command line builds a recipe's hooks and hands them to the trainer.
use crate::data::tokenizer::TextTokenizer;
use crate::error::Result;
use crate::logger::Logger;
use crate::model::BertForMaskedLM;
use std::path::Path;

/// An evaluation run at every checkpoint.
pub trait CheckpointHook {
    /// What the hook does, for the log line that times it ("bias evaluation").
    fn name(&self) -> &str;

    /// Also run every this many steps between checkpoints (the records then go to
    /// `<run>/evals/step-<N>/`); `None`: at checkpoints only.
    fn every(&self) -> Option<u64> {
        None
    }

    /// Evaluates `model` at `step`; results go into `checkpoint_dir` (written atomically) and to
    /// `logger` (TensorBoard scalars and a summary line).
    fn run(
        &mut self,
        step: u64,
        model: &BertForMaskedLM,
        tokenizer: &TextTokenizer,
        checkpoint_dir: &Path,
        logger: &mut Logger,
    ) -> Result<()>;
}
