//! The `finetune summarize` recipe: the shared sections (`[optimizer]`, `[checkpoint]`,
//! `[logging]`, the top-level keys) and its own: `task`, `[data]` (the Liputan6 folder, the
//! splits, and the dev split that selects the weights of each test split), `[eval]` (dev ROUGE
//! every so many updates, BERTScore of the test rows), `[ext]` and `[abs]`.
use super::abs::AbsConfig;
use super::ext::ExtConfig;
use indolm_core::recipe::{CheckpointSection, Fingerprint, LoggingSection, OptimizerSection, PrecisionSetting};
use indolm_torch::device::resolve_precision;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::Precision;
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
    /// `kind = "summarize"`: the recipe's kind ([`indolm_core::recipe::kind`]); set by `load`
    /// when the file names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The run's name: its folder under `output_dir` and under `[logging] tensorboard`.
    pub name: String,
    /// The seed every random draw of the run derives from.
    #[serde(default = "indolm_core::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (checkpoints, best model, predictions, results) goes.
    #[serde(default = "indolm_core::recipe::default_output_dir")]
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
    /// The primary dev split: scored at every evaluation, its best weights in `best/`, the one
    /// early stopping (`[eval] patience`) watches, and the one that selects the weights of every
    /// test split `select_on` does not pair with another.
    #[serde(default = "d_dev")]
    pub dev_split: String,
    /// The split folders scored at the end, each with its own table and prediction files.
    #[serde(default = "d_test")]
    pub test_splits: Vec<String>,
    /// The dev split whose best weights each test split is scored with, one per test split in
    /// `test_splits`' order (the Liputan6 paper: `["canonical/dev", "xtreme/dev"]` for
    /// `["canonical/test", "xtreme/test"]`); empty (the default): `dev_split` for every one.
    /// Every dev split named here is scored at every evaluation, its best weights kept apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub select_on: Vec<String>,
}

impl SummarizeData {
    /// Each test split with the dev split that selects its weights, in `test_splits`' order.
    pub fn selection(&self) -> Vec<(&str, &str)> {
        self.test_splits
            .iter()
            .enumerate()
            .map(|(i, test)| (test.as_str(), self.select_on.get(i).unwrap_or(&self.dev_split).as_str()))
            .collect()
    }

    /// The dev splits scored at every evaluation: `dev_split` first, then each other one a test
    /// split selects on, once, in `test_splits`' order.
    pub fn dev_splits(&self) -> Vec<&str> {
        let mut out = vec![self.dev_split.as_str()];
        for (_, dev) in self.selection() {
            if !out.contains(&dev) {
                out.push(dev);
            }
        }
        out
    }
}

/// The folder under a run that holds the best weights on the dev split `dev`: `best` for the
/// primary dev split (`primary`), `best-<dev>` (a `/` or `\` in its name as `_`) for another.
pub(crate) fn best_dir_name(primary: &str, dev: &str) -> String {
    if dev == primary {
        indolm_core::run::layout::BEST_DIR.to_string()
    } else {
        format!("{}-{}", indolm_core::run::layout::BEST_DIR, split_stem(dev))
    }
}

/// A split's name as one file-name part: a `/` or `\` becomes `_` (`xtreme/dev` → `xtreme_dev`).
pub(crate) fn split_stem(split: &str) -> String {
    split.replace(['/', '\\'], "_")
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
/// before training, every `every` updates and at the last, the best weights kept; BERTScore of
/// the test rows with a model given.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummarizeEval {
    /// Dev ROUGE every this many updates (and after the last).
    pub every: u64,
    /// Articles of each dev split scored at each evaluation (default: all; abstractive decoding
    /// is slow).
    #[serde(default)]
    pub articles: Option<usize>,
    /// Evaluations without a better ROUGE on the primary dev split (`[data] dev_split`) after
    /// which training stops (default: never).
    #[serde(default)]
    pub patience: Option<u64>,
    /// A BERT or XLM-R folder (the Liputan6 paper's: bert-base-multilingual-cased): BERTScore
    /// precision, recall and F1 of every test row (the model's, Lead-N's and Oracle's) with it,
    /// `<q>` read as a space (default: none). Not part of what a run trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bertscore_model: Option<PathBuf>,
    /// The layer whose hidden states BERTScore compares (0: the embeddings); default:
    /// bert-score's for the model (9 for bert-base-multilingual-cased).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bertscore_layer: Option<usize>,
}

impl SummarizeRecipe {
    /// Reads a recipe and checks what serde cannot: the shared sections, `max_steps`, `[eval]`'s
    /// numbers and BERTScore keys, `[data] select_on`, and for abs/extabs the decoder's schedule
    /// and BertAbs's sizes. The split folders and the BERTScore model are checked by
    /// `finetune summarize` before it trains ([`Self::check_dev_folders`], [`Self::bertscore_scorer`]).
    pub fn load(path: &Path) -> Result<Self> {
        crate::registry::expect_kind(path, &super::TASK.kind)?;
        let mut recipe: SummarizeRecipe = indolm_core::recipe::parse_toml(path)?;
        recipe.kind = Some(super::TASK.kind.name.to_string());
        recipe.path = path.to_path_buf();
        recipe.validate()?;
        Ok(recipe)
    }

    fn validate(&self) -> Result<()> {
        let path = &self.path;
        let o = &self.optimizer;
        indolm_core::recipe::check_shared(path, &self.name, o, &self.checkpoint, &self.logging)?;
        o.required_max_steps(path)?;
        if self.eval.every == 0 || self.eval.patience == Some(0) || self.eval.articles == Some(0) {
            return Err(Error::field(path, "eval", "every, articles and patience must be positive"));
        }
        if self.eval.bertscore_layer.is_some() && self.eval.bertscore_model.is_none() {
            let message = "set bertscore_model too: the model it is a layer of";
            return Err(Error::field(path, "eval.bertscore_layer", message));
        }
        self.validate_selection()?;
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

    /// `[data] select_on`: one dev split per test split, none empty, and no two dev splits whose
    /// best weights would share a folder.
    fn validate_selection(&self) -> Result<()> {
        let (path, d) = (&self.path, &self.data);
        let key = "data.select_on";
        if d.select_on.is_empty() {
            return Ok(());
        }
        if d.select_on.len() != d.test_splits.len() {
            return Err(Error::field(
                path,
                key,
                format!(
                    "{} dev split(s) for {} test split(s): name one dev split per test split, in test_splits' order",
                    d.select_on.len(),
                    d.test_splits.len()
                ),
            ));
        }
        if d.select_on.iter().any(|s| s.trim().is_empty()) {
            return Err(Error::field(path, key, "an empty dev split name"));
        }
        let devs = d.dev_splits();
        let folders: Vec<String> = devs.iter().map(|dev| best_dir_name(&d.dev_split, dev)).collect();
        for (i, folder) in folders.iter().enumerate() {
            if let Some(j) = folders[i + 1..].iter().position(|f| f == folder) {
                let (a, b) = (devs[i], devs[i + 1 + j]);
                return Err(Error::field(
                    path,
                    key,
                    format!("`{a}` and `{b}` would keep their best weights in the same folder `{folder}`: rename one"),
                ));
            }
        }
        Ok(())
    }

    /// Refuses, naming the recipe and its key, a dev split that is not a folder of `[data] root`
    /// (before anything is trained; the articles in it are checked as they are read).
    pub(crate) fn check_dev_folders(&self) -> Result<()> {
        let d = &self.data;
        let missing = |split: &str| !d.root.join(split).is_dir();
        if missing(&d.dev_split) {
            return Err(Error::field(
                &self.path,
                "data.dev_split",
                format!("`{}` is not a folder of {}", d.dev_split, d.root.display()),
            ));
        }
        for (test, dev) in d.selection() {
            if missing(dev) {
                return Err(Error::field(
                    &self.path,
                    "data.select_on",
                    format!("`{test}` selects on `{dev}`, which is not a folder of {}", d.root.display()),
                ));
            }
        }
        Ok(())
    }

    /// The BERTScore scorer of `[eval] bertscore_model` on `device` (`None` when not given); a
    /// model that does not load, or a layer it lacks, is an error naming the recipe and the key.
    pub fn bertscore_scorer(&self, device: Device) -> Result<Option<indolm_eval::bertscore::Scorer>> {
        let Some(model) = &self.eval.bertscore_model else { return Ok(None) };
        let scorer = indolm_eval::bertscore::Scorer::new(model, self.eval.bertscore_layer, device);
        scorer.map(Some).map_err(|e| match e {
            Error::Argument { message, .. } => Error::field(&self.path, "eval.bertscore_layer", message),
            other => Error::field(
                &self.path,
                "eval.bertscore_model",
                format!("{other} (a BERT or XLM-R folder to score BERTScore with; leave the key out for none)"),
            ),
        })
    }

    /// The precision of its matrix products on `device` (bf16 on CPU is refused).
    pub(crate) fn compute_precision(&self, device: Device) -> Result<Precision> {
        resolve_precision(self.precision, device, &self.path)
    }

    /// Updates in the whole run (checked present when the recipe is read).
    pub(crate) fn max_steps(&self) -> u64 {
        self.optimizer.max_steps.unwrap_or(0)
    }

    /// The settings whose change makes a resumed run another run, with the model the run starts
    /// from by its content ([`indolm_torch::model::model_dir::content_sha256`]), not by its path: a run
    /// resumed from another base model is another run, one whose model folder moved is not.
    pub fn fingerprint(&self, base_model_sha256: &str) -> Fingerprint {
        let v = |x: serde_json::Result<serde_json::Value>| x.expect("recipe sections serialize to JSON");
        // BERTScore of the test rows is not part of what a run trains: changing it resumes.
        let mut eval = v(serde_json::to_value(&self.eval));
        if let Some(keys) = eval.as_object_mut() {
            keys.remove("bertscore_model");
            keys.remove("bertscore_layer");
        }
        Fingerprint::of(&[
            ("seed", v(serde_json::to_value(self.seed))),
            ("init", serde_json::json!({ "model_sha256": base_model_sha256 })),
            ("task", v(serde_json::to_value(self.task))),
            ("data", v(serde_json::to_value(&self.data))),
            ("optimizer", v(serde_json::to_value(&self.optimizer))),
            ("eval", eval),
            ("ext", v(serde_json::to_value(&self.ext))),
            ("abs", v(serde_json::to_value(&self.abs))),
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
