//! The `finetune translation` recipe: the shared sections (`[optimizer]`, `[checkpoint]`,
//! `[logging]`, the top-level keys) and its own: `[data]` (the NusaX folder, the directions, the
//! lowercasing and length of IndoNLG's data loader), `[model]` (the language-id tokens, the
//! paper's row to print beside ours) and `[eval]` (selection, early stopping, beam search).
use super::data::{code, english_directions, Direction, Table};
use super::paper::System;
use indolm_core::recipe::{CheckpointSection, Fingerprint, LoggingSection, OptimizerSection, PrecisionSetting};
use indolm_torch::device::resolve_precision;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::Precision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::Device;

/// A `finetune translation` recipe (TOML).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TranslationRecipe {
    /// `kind = "translation"` (required: no older recipe lacks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The run's name: its folder under `output_dir` and under `[logging] tensorboard`.
    pub name: String,
    /// The seed every shuffle and libtorch reseed of the run derives from.
    #[serde(default = "indolm_core::recipe::default_seed")]
    pub seed: u64,
    /// Where the run's folder (one sub-folder per direction, results) goes.
    #[serde(default = "indolm_core::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// The model to start from (an HF mBART directory: mBART-50, or IndoBART's layout); `--init`
    /// overrides.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` (CUDA only) or `fp32`.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// Deterministic algorithms on CUDA (bit-exact resume).
    #[serde(default)]
    pub deterministic: bool,
    /// The NusaX folder and the directions.
    pub data: TranslationData,
    /// The language-id tokens and the paper's row.
    #[serde(default)]
    pub model: TranslationModelSection,
    /// The optimizer (Adam as IndoNLG: `weight_decay = 0`), its schedule (`epoch-decay` with
    /// Table 11's γ), the batch and `max_epochs`.
    pub optimizer: OptimizerSection,
    /// Selection on the validation split, early stopping, decoding of the test split.
    #[serde(default)]
    pub eval: TranslationEval,
    /// A checkpoint every this many updates.
    pub checkpoint: CheckpointSection,
    /// TensorBoard and the log lines.
    #[serde(default)]
    pub logging: LoggingSection,
    /// The file it was read from (for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// The `[data]` table of a translation recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TranslationData {
    /// The NusaX folder (`<root>/mt/{train,valid,test}.csv`).
    pub root: PathBuf,
    /// The directions, one model each: `sun-ind` (the paper's codes), `x-ind` / `ind-x` for
    /// every direction of Table 4 / Table 6, or `x-eng` / `eng-x` for Table 5's English side.
    pub directions: Vec<String>,
    /// Lowercase source and target before tokenizing, as IndoNLG's `MachineTranslationDataset`
    /// does (its BLEU is then lowercased BLEU).
    #[serde(default = "d_true")]
    pub lowercase: bool,
    /// The longest encoder and decoder sequence, special tokens included (IndoNLG's
    /// `max_seq_len`); also the longest generated sequence.
    #[serde(default = "d_max_len")]
    pub max_len: usize,
}

fn d_true() -> bool {
    true
}

fn d_max_len() -> usize {
    512
}

/// The `[model]` table of a translation recipe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TranslationModelSection {
    /// The token marking each language (by the paper's code: `ind = "id_ID"`), appended to the
    /// source and leading the target as mBART does; each must be one token of the model's
    /// tokenizer.
    #[serde(default)]
    pub language_tokens: BTreeMap<String, String>,
    /// The paper's system this recipe reproduces (`mbart50`, `indo-bart-v2`): its figures are
    /// printed beside ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<System>,
}

/// How the validation split selects the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// IndoNLG's: SacreBLEU of the teacher-forced argmax at every label position (one forward
    /// pass, no decoding).
    #[default]
    TeacherForced,
    /// SacreBLEU of greedy decoding.
    Greedy,
}

/// The `[eval]` table of a translation recipe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TranslationEval {
    /// Epochs without a better validation SacreBLEU after which training stops (Table 11's
    /// early stop).
    #[serde(default = "d_patience")]
    pub patience: u64,
    /// What the validation split measures after every epoch.
    #[serde(default)]
    pub selection: Selection,
    /// Beams of the test split's search (IndoNLG's `beam_size`).
    #[serde(default = "d_beam_size")]
    pub beam_size: i64,
    /// The length penalty of the test split's search.
    #[serde(default = "d_length_penalty")]
    pub length_penalty: f64,
    /// Sentences decoded or scored together.
    #[serde(default = "d_batch_size")]
    pub batch_size: usize,
}

fn d_patience() -> u64 {
    10
}

fn d_beam_size() -> i64 {
    5
}

fn d_length_penalty() -> f64 {
    1.0
}

fn d_batch_size() -> usize {
    16
}

impl Default for TranslationEval {
    fn default() -> Self {
        TranslationEval {
            patience: d_patience(),
            selection: Selection::default(),
            beam_size: d_beam_size(),
            length_penalty: d_length_penalty(),
            batch_size: d_batch_size(),
        }
    }
}

impl TranslationRecipe {
    /// Reads a recipe and checks it: the shared sections, `max_epochs`, the directions and their
    /// language tokens, the decoding settings.
    pub fn load(path: &Path) -> Result<Self> {
        crate::registry::expect_kind(path, &super::TASK.kind)?;
        let mut recipe: TranslationRecipe = indolm_core::recipe::parse_toml(path)?;
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
            return Err(Error::field(path, "optimizer.max_steps", "a translation run counts epochs: use max_epochs"));
        }
        if o.max_epochs.is_none_or(|e| e == 0) {
            return Err(Error::field(
                path,
                "optimizer.max_epochs",
                "missing or 0: the most epochs one direction trains",
            ));
        }
        let e = &self.eval;
        let checks = [
            (e.patience > 0, "eval.patience", "must be > 0".to_string()),
            (e.beam_size >= 1 && e.beam_size <= 64, "eval.beam_size", format!("{}: from 1 to 64", e.beam_size)),
            (e.length_penalty.is_finite(), "eval.length_penalty", format!("{}: must be finite", e.length_penalty)),
            (e.batch_size >= 1, "eval.batch_size", "must be > 0".to_string()),
            (
                (3..=65_536).contains(&self.data.max_len),
                "data.max_len",
                format!("{}: from 3 (a token, </s> and the language id) to 65536", self.data.max_len),
            ),
        ];
        if let Some((_, field, why)) = checks.into_iter().find(|(ok, _, _)| !ok) {
            return Err(Error::field(path, field, why));
        }
        let directions = self.directions()?;
        for direction in &directions {
            for language in [direction.source, direction.target] {
                if !self.model.language_tokens.contains_key(code(language)) {
                    return Err(Error::field(
                        path,
                        format!("model.language_tokens.{}", code(language)),
                        format!(
                            "missing: direction {} needs the token that marks {language} (mBART-50: id_ID for Indonesian, en_XX for English)",
                            direction.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The recipe's directions in its order (a set's name expanded to its directions), each once.
    pub fn directions(&self) -> Result<Vec<Direction>> {
        let mut out: Vec<Direction> = Vec::new();
        for (i, name) in self.data.directions.iter().enumerate() {
            if self.data.directions[..i].contains(name) {
                return Err(Error::field(&self.path, "data.directions", format!("`{name}` is listed twice")));
            }
            let expanded = match name.as_str() {
                "x-ind" => Table::IntoIndonesian.directions(),
                "ind-x" => Table::FromIndonesian.directions(),
                "x-eng" => english_directions(true),
                "eng-x" => english_directions(false),
                _ => vec![Direction::parse(name).ok_or_else(|| {
                    Error::field(
                        &self.path,
                        "data.directions",
                        format!(
                            "`{name}` is not a direction: `<from>-<to>` in the paper's codes (ace ban bbc bjn bug eng ind jav mad min nij sun), or x-ind / ind-x (Tables 4 and 6) or x-eng / eng-x (Table 5) for a whole set"
                        ),
                    )
                })?],
            };
            // A direction two sets share (ind-eng is in ind-x and in x-eng) is trained once.
            for d in expanded {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
        }
        if out.is_empty() {
            return Err(Error::field(&self.path, "data.directions", "empty: name at least one direction"));
        }
        Ok(out)
    }

    /// The token marking `language` (a column name); validation made sure there is one.
    pub(crate) fn language_token(&self, language: &str) -> &str {
        self.model.language_tokens.get(code(language)).map(String::as_str).unwrap_or_default()
    }

    /// The precision of its matrix products on `device` (bf16 on CPU is refused).
    pub(crate) fn compute_precision(&self, device: Device) -> Result<Precision> {
        resolve_precision(self.precision, device, &self.path)
    }

    /// The settings whose change makes a resumed run another run, the model it starts from by
    /// its content (see the sentiment recipe's).
    pub fn fingerprint(&self, base_model_sha256: &str) -> Fingerprint {
        let v = |x: serde_json::Result<serde_json::Value>| x.expect("recipe sections serialize to JSON");
        Fingerprint::of(&[
            ("seed", v(serde_json::to_value(self.seed))),
            ("init", serde_json::json!({ "model_sha256": base_model_sha256 })),
            ("data", v(serde_json::to_value(&self.data))),
            ("model", v(serde_json::to_value(&self.model))),
            ("optimizer", v(serde_json::to_value(&self.optimizer))),
            ("eval", v(serde_json::to_value(&self.eval))),
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
