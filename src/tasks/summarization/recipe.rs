//! The `finetune summarize` recipe: the shared sections (`[optimizer]`, `[checkpoint]`,
//! `[logging]`, the top-level keys) and its own: `task`, `[data]` (the Liputan6 folder and
//! splits), `[eval]` (dev ROUGE every so many updates), `[ext]` and `[abs]`.
use super::abs::AbsConfig;
use super::ext::ExtConfig;
use crate::error::{Error, Result};
use crate::model::Precision;
use crate::recipe::{
    resolve_precision, CheckpointSection, Fingerprint, LoggingSection, OptimizerSection, PrecisionSetting,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::Device;

/// Which summarizer a recipe trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// BertExt: scores the article's sentences, trained on the oracle labels.
    Ext,
    /// BertAbs: writes the summary, its encoder started from a BERT model.
    Abs,
    /// BertExtAbs: BertAbs whose encoder starts from a fine-tuned BertExt.
    Extabs,
}

/// A `finetune summarize` recipe (TOML).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeRecipe {
    /// `kind = "summarize"`: the recipe's kind ([`crate::recipe::kind`]); set by `load`
    /// when the file names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::recipe::RecipeKind>,
    /// The run's name: its folder under `output_dir` and under `[logging] tensorboard`.
    pub name: String,
    /// The seed every random draw of the run derives from.
    #[serde(default = "crate::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (checkpoints, best model, predictions, results) goes.
    #[serde(default = "crate::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// The model to start from (a BERT model; for `extabs`, a fine-tuned BertExt); `--init`
    /// overrides.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// The summarizer to train.
    pub task: Task,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` (CUDA only) or `fp32`, as in pretraining:
    /// the matrix products of the encoder, the PreSumm layers and the generator.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// Deterministic algorithms on CUDA (bit-exact resume), as in pretraining.
    #[serde(default)]
    pub deterministic: bool,
    /// The Liputan6 folder and the splits to train, select and test on.
    pub data: SummarizeData,
    /// The optimizers (abs/extabs: the encoder's with `lr`, the decoder's with `lr_dec`), their
    /// schedules, the batch and `max_steps`.
    pub optimizer: OptimizerSection,
    /// Model selection on dev ROUGE.
    pub eval: SummarizeEval,
    /// A checkpoint every this many updates.
    pub checkpoint: CheckpointSection,
    /// TensorBoard and the log lines.
    #[serde(default)]
    pub logging: LoggingSection,
    /// BertExt's settings (task `ext`).
    #[serde(default)]
    pub ext: ExtConfig,
    /// BertAbs's settings (tasks `abs` and `extabs`).
    #[serde(default)]
    pub abs: AbsConfig,
    /// The file it was read from (for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// The `[data]` table of a summarization recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeData {
    /// The Liputan6 folder holding the split folders.
    pub root: PathBuf,
    /// The split folder trained on.
    #[serde(default = "d_train")]
    pub train_split: String,
    /// The split folder scored at every evaluation to pick the best weights.
    #[serde(default = "d_dev")]
    pub dev_split: String,
    /// The split folders scored at the end, each with its own table and prediction files.
    #[serde(default = "d_test")]
    pub test_splits: Vec<String>,
}

fn d_train() -> String {
    "train".into()
}
fn d_dev() -> String {
    "dev".into()
}
fn d_test() -> Vec<String> {
    vec!["test".into()]
}

/// The `[eval]` table of a summarization recipe: dev ROUGE (the mean of ROUGE-1, -2 and -L)
/// before training, every `every` updates and at the last, the best weights kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeEval {
    /// Dev ROUGE every this many updates (and after the last).
    pub every: u64,
    /// Dev articles scored at each evaluation (default: all; abstractive decoding is slow).
    #[serde(default)]
    pub articles: Option<usize>,
    /// Evaluations without a better dev ROUGE after which training stops (default: never).
    #[serde(default)]
    pub patience: Option<u64>,
}

impl SummarizeRecipe {
    /// Reads a recipe and checks what serde cannot: the shared sections, `max_steps`, and for
    /// abs/extabs the decoder's schedule and BertAbs's sizes.
    pub fn load(path: &Path) -> Result<Self> {
        crate::recipe::expect_kind(path, crate::recipe::RecipeKind::Summarize)?;
        let mut recipe: SummarizeRecipe = crate::recipe::parse_toml(path)?;
        recipe.kind = Some(crate::recipe::RecipeKind::Summarize);
        recipe.path = path.to_path_buf();
        recipe.validate()?;
        Ok(recipe)
    }

    fn validate(&self) -> Result<()> {
        let path = &self.path;
        let o = &self.optimizer;
        crate::recipe::check_shared(path, &self.name, o, &self.checkpoint, &self.logging)?;
        o.required_max_steps(path)?;
        if self.eval.every == 0 || self.eval.patience == Some(0) || self.eval.articles == Some(0) {
            return Err(Error::field(path, "eval", "every, articles and patience must be positive"));
        }
        if self.task == Task::Ext {
            return o.refuse_decoder_keys(path);
        }
        match (o.lr_dec, o.warmup_dec) {
            (Some(lr), Some(w)) if lr > 0.0 && w > 0 => {}
            _ => return Err(Error::field(path, "optimizer.lr_dec", "task abs/extabs trains the decoder with its own schedule: set lr_dec and warmup_dec (positive; the Liputan6 paper: 0.1 and 10000)")),
        }
        let a = &self.abs;
        if a.layers <= 0
            || a.heads <= 0
            || a.ff <= 0
            || a.beam == 0
            || a.max_length == 0
            || a.max_target_tokens < 2
            || !(0.0..1.0).contains(&a.label_smoothing)
        {
            return Err(Error::field(path, "abs", "layers, heads, ff, beam and max_length must be positive, max_target_tokens at least 2, label_smoothing in [0, 1)"));
        }
        Ok(())
    }

    /// The precision of its matrix products on `device` (bf16 on CPU is refused).
    pub(crate) fn compute_precision(&self, device: Device) -> Result<Precision> {
        resolve_precision(self.precision, device, &self.path)
    }

    /// Updates in the whole run (checked present when the recipe is read).
    pub fn max_steps(&self) -> u64 {
        self.optimizer.max_steps.unwrap_or(0)
    }

    /// The settings whose change makes a resumed run another run, with the model the run starts
    /// from by its content ([`crate::model::model_dir::content_sha256`]), not by its path: a run
    /// resumed from another base model is another run, one whose model folder moved is not.
    pub(crate) fn fingerprint(&self, base_model_sha256: &str) -> Fingerprint {
        let v = |x: serde_json::Result<serde_json::Value>| x.expect("recipe sections serialize to JSON");
        Fingerprint::of(&[
            ("seed", v(serde_json::to_value(self.seed))),
            ("init", serde_json::json!({ "model_sha256": base_model_sha256 })),
            ("task", v(serde_json::to_value(self.task))),
            ("data", v(serde_json::to_value(&self.data))),
            ("optimizer", v(serde_json::to_value(&self.optimizer))),
            ("eval", v(serde_json::to_value(&self.eval))),
            ("ext", v(serde_json::to_value(&self.ext))),
            ("abs", v(serde_json::to_value(&self.abs))),
            ("precision", v(serde_json::to_value(self.precision))),
        ])
    }

    /// The sections every recipe shares, as the engine reads them.
    pub fn shared(&self) -> crate::recipe::SharedSections<'_> {
        crate::recipe::SharedSections {
            name: &self.name,
            seed: self.seed,
            optimizer: &self.optimizer,
            logging: &self.logging,
        }
    }

    /// `<output_dir>/<name>`: the run folder.
    pub fn run_dir(&self) -> PathBuf {
        self.output_dir.join(&self.name)
    }

    /// `<tensorboard>/<name>`: the run's TensorBoard folder.
    pub fn tensorboard_dir(&self) -> PathBuf {
        self.logging.tensorboard.join(&self.name)
    }
}
