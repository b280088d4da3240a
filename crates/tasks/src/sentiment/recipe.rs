//! The `finetune sentiment` recipe: the shared sections (`[optimizer]`, `[checkpoint]`,
//! `[logging]`, the top-level keys) and its own: `[data]` (the NusaX folder, languages, setting),
//! `[eval]` (early stopping) and `[grid]`.
use super::data::NUSAX_LANGUAGES;
use indolm_core::recipe::{CheckpointSection, Fingerprint, LoggingSection, OptimizerSection, PrecisionSetting};
use indolm_torch::device::resolve_precision;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::Precision;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::Device;

/// The NusaX paper's training and testing arrangements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// One model per language, trained and tested on that language.
    Monolingual,
    /// One model trained on every language, tested on each.
    Multilingual,
    /// Per language, a model trained on all the other languages and tested on it.
    LeaveOneOut,
    /// Per language, a model trained on it and tested on every language (zero-shot on the others).
    CrossLingual,
}

/// A `finetune sentiment` recipe (TOML).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentimentRecipe {
    /// `kind = "sentiment"`: the recipe's kind ([`indolm_core::recipe::kind`]); set by `load`
    /// when the file names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The run's name: its folder under `output_dir` and under `[logging] tensorboard`.
    pub name: String,
    /// The seed every shuffle and libtorch reseed of the run derives from.
    #[serde(default = "indolm_core::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (one model per trained set, results) goes.
    #[serde(default = "indolm_core::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// The model to start from (an indolm checkpoint or an HF BERT directory); `--init` overrides.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` (CUDA only) or `fp32`, as in pretraining.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// Deterministic algorithms on CUDA (bit-exact resume), as in pretraining.
    #[serde(default)]
    pub deterministic: bool,
    /// The NusaX folder, the languages and the setting.
    pub data: SentimentData,
    /// AdamW, its schedule, the batch and `max_epochs`.
    pub optimizer: OptimizerSection,
    /// Model selection: validation macro-F1 after every epoch, early stopping.
    #[serde(default)]
    pub eval: SentimentEval,
    /// Learning rates × batch sizes to search (instead of the optimizer's own).
    #[serde(default)]
    pub grid: Option<Grid>,
    /// A checkpoint every this many updates.
    pub checkpoint: CheckpointSection,
    /// TensorBoard and the log lines.
    #[serde(default)]
    pub logging: LoggingSection,
    /// The file it was read from (for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// The `[data]` table of a sentiment recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentimentData {
    /// The folder with one sub-folder per language.
    pub root: PathBuf,
    /// Languages (folder names); all 12 NusaX languages when omitted.
    #[serde(default)]
    pub languages: Vec<String>,
    /// Which models are trained on which languages, and tested on which.
    pub setting: Setting,
    /// Texts are cut to this many tokens (with `[CLS]` and `[SEP]`).
    #[serde(default = "d_max_len")]
    pub max_len: usize,
}

fn d_max_len() -> usize {
    128
}

/// The `[eval]` table of a sentiment recipe: validation macro-F1 after every epoch, the best
/// weights kept, training stopped after `patience` epochs without a better one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentimentEval {
    /// Epochs without a better validation macro-F1 after which training stops.
    #[serde(default = "d_patience")]
    pub patience: u64,
}

fn d_patience() -> u64 {
    3
}

impl Default for SentimentEval {
    fn default() -> Self {
        SentimentEval { patience: d_patience() }
    }
}

/// A hyper-parameter grid: every learning rate with every batch size, the best on validation
/// macro-F1 kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// The learning rates tried.
    pub lr: Vec<f64>,
    /// The batch sizes tried.
    pub batch_size: Vec<usize>,
}

impl SentimentRecipe {
    /// Reads a recipe and checks it: the shared sections, `max_epochs` (not `max_steps`), the
    /// grid's values and the run's name.
    pub fn load(path: &Path) -> Result<Self> {
        crate::registry::expect_kind(path, &super::TASK.kind)?;
        let mut recipe: SentimentRecipe = indolm_core::recipe::parse_toml(path)?;
        recipe.kind = Some(super::TASK.kind.name.to_string());
        recipe.path = path.to_path_buf();
        recipe.validate()?;
        Ok(recipe)
    }

    fn validate(&self) -> Result<()> {
        let path = &self.path;
        let o = &self.optimizer;
        indolm_core::recipe::check_shared(path, &self.name, o, &self.checkpoint, &self.logging)?;
        o.refuse_decoder_keys(path)?;
        if o.max_steps.is_some() {
            return Err(Error::field(path, "optimizer.max_steps", "a sentiment run counts epochs: use max_epochs"));
        }
        if o.max_epochs.is_none_or(|e| e == 0) {
            return Err(Error::field(
                path,
                "optimizer.max_epochs",
                "missing or 0: the most epochs one fine-tuning runs",
            ));
        }
        if self.eval.patience == 0 {
            return Err(Error::field(path, "eval.patience", "must be > 0"));
        }
        if self.data.max_len < 3 {
            return Err(Error::field(path, "data.max_len", "must be at least 3 ([CLS], a token, [SEP])"));
        }
        if let Some(g) = &self.grid {
            if g.lr.is_empty() || g.batch_size.is_empty() || g.lr.iter().any(|&l| l <= 0.0) || g.batch_size.contains(&0)
            {
                return Err(Error::field(path, "grid", "lr and batch_size each need at least one value, all positive"));
            }
        }
        Ok(())
    }

    /// The precision of its matrix products on `device` (bf16 on CPU is refused).
    pub(crate) fn compute_precision(&self, device: Device) -> Result<Precision> {
        resolve_precision(self.precision, device, &self.path)
    }

    /// The recipe's languages, or all 12 NusaX languages when it names none.
    pub fn languages(&self) -> Vec<String> {
        if self.data.languages.is_empty() {
            NUSAX_LANGUAGES.iter().map(|s| s.to_string()).collect()
        } else {
            self.data.languages.clone()
        }
    }

    /// The learning rates and batch sizes to train with: the grid's, or the optimizer's own.
    pub(crate) fn grid_points(&self) -> Vec<(f64, usize)> {
        match &self.grid {
            Some(g) => g.lr.iter().flat_map(|&lr| g.batch_size.iter().map(move |&b| (lr, b))).collect(),
            None => vec![(self.optimizer.lr, self.optimizer.batch_size)],
        }
    }

    /// The settings whose change makes a resumed run another run, with the model the run starts
    /// from by its content ([`indolm_torch::model::model_dir::content_sha256`]), not by its path: a run
    /// resumed from another base model is another run, one whose model folder moved is not.
    pub fn fingerprint(&self, base_model_sha256: &str) -> Fingerprint {
        let v = |x: serde_json::Result<serde_json::Value>| x.expect("recipe sections serialize to JSON");
        Fingerprint::of(&[
            ("seed", v(serde_json::to_value(self.seed))),
            ("init", serde_json::json!({ "model_sha256": base_model_sha256 })),
            ("data", v(serde_json::to_value(&self.data))),
            ("optimizer", v(serde_json::to_value(&self.optimizer))),
            ("eval", v(serde_json::to_value(&self.eval))),
            ("grid", v(serde_json::to_value(&self.grid))),
            ("precision", v(serde_json::to_value(self.precision))),
        ])
    }

    /// The sections every recipe shares, as the engine reads them.
    pub(crate) fn shared(&self) -> indolm_core::recipe::SharedSections<'_> {
        indolm_core::recipe::SharedSections {
            name: &self.name,
            seed: self.seed,
            optimizer: &self.optimizer,
            logging: &self.logging,
        }
    }

    /// `<output_dir>/<name>`: the run folder.
    pub(crate) fn run_dir(&self) -> PathBuf {
        self.output_dir.join(&self.name)
    }

    /// `<tensorboard>/<name>`: the run's TensorBoard folder.
    pub(crate) fn tensorboard_dir(&self) -> PathBuf {
        self.logging.tensorboard.join(&self.name)
    }
}
