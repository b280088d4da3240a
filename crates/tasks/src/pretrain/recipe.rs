//! The pretraining recipe: the TOML file that describes a run (model, tokenizer, data mixture,
//! masking, optimizer, precision, checkpoints, evaluations, logging). Unknown keys are rejected
//! with their name and line; `PretrainRecipe::load` validates and resolves presets and relative paths,
//! `PretrainRecipe::resolved_toml` prints what will actually run, and `PretrainRecipe::fingerprint` is what a
//! checkpoint records so that a resume with a changed recipe is refused key by key.
use indolm_core::recipe::Fingerprint;
use indolm_core::recipe::{check_name, parse_toml};
use indolm_core::recipe::{CheckpointSection, LoggingSection, OptimizerSection, PrecisionSetting};
use indolm_eval::settings::{BiasEvalSection, IndommluEvalSection, IndommluMode};
use indolm_torch::data::sources::SourceSpec;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::BertConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A pretraining recipe: what to train, on what, how, and what to evaluate at checkpoints.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PretrainRecipe {
    /// `kind = "pretrain"`: the recipe's kind ([`indolm_core::recipe::kind`]); set by `load`
    /// when the file names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Run name: checkpoints go to `<output_dir>/<name>/`.
    pub name: String,
    /// Every random choice of the run derives from it.
    #[serde(default = "indolm_core::recipe::default_seed")]
    pub seed: u64,
    /// Pretraining seeds as replicates: the same recipe trained once per seed, each as its own
    /// run `<name>-seed<N>` (`train` trains them in turn; `train --seed-index I` one of them,
    /// as a job array does). Empty: one run, `seed`, named `name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<u64>,
    /// Checkpoints go to `<output_dir>/<name>/`.
    #[serde(default = "indolm_core::recipe::default_output_dir")]
    pub output_dir: PathBuf,
    /// `[model]`: the architecture or the weights to start from.
    pub model: ModelSection,
    /// `[tokenizer]`.
    pub tokenizer: TokenizerSection,
    /// `[data]`: the corpus, its sources and their mixture weights.
    pub data: DataSection,
    /// `[masking]`: the masked-LM objective.
    #[serde(default)]
    pub masking: MaskingSection,
    /// `[optimizer]`: AdamW, the schedule, batch size and steps.
    pub optimizer: OptimizerSection,
    /// `auto` (bf16 on CUDA, fp32 on CPU), `bf16` or `fp32`.
    #[serde(default)]
    pub precision: PrecisionSetting,
    /// Ask libtorch for deterministic algorithms, so that a run resumed on CUDA is bit-identical
    /// to an uninterrupted one (on the CPU it always is). Off by default: it costs speed on GPUs.
    #[serde(default)]
    pub deterministic: bool,
    /// `[checkpoint]`: how often, how many kept.
    pub checkpoint: CheckpointSection,
    /// `[eval.*]`: what runs at each checkpoint.
    #[serde(default)]
    pub eval: EvalSection,
    /// `[logging]`: TensorBoard folder and cadence.
    #[serde(default)]
    pub logging: LoggingSection,
    /// Folder the recipe's relative paths are resolved against (set by `load`).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file it was read from (set by `load`; for errors).
    #[serde(skip)]
    pub path: PathBuf,
}

/// `[model]`: a preset or an HF `config.json`, optional overrides, optional starting weights.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// `indobert-base` (12 layers, 768 hidden, 12 heads, 3072 ff, 512 positions) or `tiny`.
    #[serde(default)]
    pub preset: Option<String>,
    /// An HF `config.json` instead of a preset.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// Start from these weights (a model directory) instead of random initialisation.
    #[serde(default)]
    pub init_from: Option<PathBuf>,
    /// The model's vocabulary when larger than the tokenizer's (with a preset; the extra rows
    /// are never produced by the tokenizer): to measure a real model's size with a small
    /// tokenizer, as the GPU throughput check does at IndoBERT's 31,923.
    #[serde(default)]
    pub vocab_size: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub num_hidden_layers: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub hidden_size: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub num_attention_heads: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub intermediate_size: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub max_position_embeddings: Option<i64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub hidden_dropout_prob: Option<f64>,
    /// Overrides the preset's or config's value.
    #[serde(default)]
    pub attention_probs_dropout_prob: Option<f64>,
}

/// `[tokenizer]`: the WordPiece tokenizer the corpus is prepared with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenizerSection {
    /// A directory with tokenizer.json or vocab.txt, or one of those files.
    pub path: PathBuf,
}

/// `[data]`: the corpus and its sources.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    /// Prepared shards go to `<corpora_dir>/<corpus>/`.
    pub corpus: String,
    /// The folder holding every prepared corpus.
    #[serde(default = "d_corpora")]
    pub corpora_dir: PathBuf,
    /// Tokens per training sequence, `[CLS]` and `[SEP]` included.
    pub seq_len: usize,
    /// Share of each source's blocks kept out of training for the held-out MLM loss.
    #[serde(default = "d_heldout")]
    pub heldout_fraction: f64,
    /// `[[data.sources]]`: each source's files, format, language and mixture weight.
    pub sources: Vec<SourceSpec>,
}

fn d_heldout() -> f64 {
    0.01
}
fn d_corpora() -> PathBuf {
    "corpora".into()
}

/// `[masking]`: BERT's dynamic masking; a key left out takes BERT's value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MaskingSection {
    /// Share of ordinary tokens chosen for prediction.
    pub probability: f64,
    /// Share of chosen tokens replaced by `[MASK]`.
    pub mask_fraction: f64,
    /// Share of chosen tokens replaced by a random token (the rest stay as they are).
    pub random_fraction: f64,
    /// Mask all pieces of a word together.
    pub whole_word: bool,
}

impl Default for MaskingSection {
    /// BERT's: 15% of tokens, of which 80% `[MASK]`, 10% random, 10% unchanged.
    fn default() -> Self {
        MaskingSection { probability: 0.15, mask_fraction: 0.8, random_fraction: 0.1, whole_word: false }
    }
}

/// `[eval.*]`: the evaluations run during training.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct EvalSection {
    /// `[eval.mlm]`: the held-out masked-LM loss.
    #[serde(default)]
    pub mlm: Option<MlmEvalSection>,
    /// `[eval.bias]`: the IndoBias-Pairs win rates at every checkpoint.
    #[serde(default)]
    pub bias: Option<BiasEvalSection>,
    /// `[eval.indommlu]`: IndoMMLU accuracy at every checkpoint.
    #[serde(default)]
    pub indommlu: Option<IndommluEvalSection>,
}

/// `[eval.mlm]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MlmEvalSection {
    /// Held-out sequences per source scored at each checkpoint.
    #[serde(default = "d_eval_seqs")]
    pub sequences_per_source: usize,
    /// Also evaluate every N steps between checkpoints (0: only at checkpoints).
    #[serde(default)]
    pub every: u64,
}

fn d_eval_seqs() -> usize {
    32
}

impl PretrainRecipe {
    /// The sections every recipe shares, as the engine reads them.
    pub(crate) fn shared(&self) -> indolm_core::recipe::SharedSections<'_> {
        indolm_core::recipe::SharedSections {
            name: &self.name,
            seed: self.seed,
            optimizer: &self.optimizer,
            logging: &self.logging,
        }
    }

    /// Updates in the whole run (`optimizer.max_steps`, checked present when the recipe is read).
    pub(crate) fn max_steps(&self) -> u64 {
        self.optimizer.max_steps.unwrap_or(0)
    }

    /// Parses and validates a recipe file. Relative paths in it are resolved against the
    /// project root (the current directory), as the shipped recipes are written.
    pub fn load(path: &Path) -> Result<Self> {
        crate::registry::expect_kind(path, &super::TASK.kind)?;
        let mut recipe: PretrainRecipe = parse_toml(path)?;
        recipe.kind = Some(super::TASK.kind.name.to_string());
        recipe.base_dir = PathBuf::from(".");
        recipe.path = path.to_path_buf();
        recipe.validate(path)?;
        Ok(recipe)
    }

    /// The recipe of one seed's run: `seed` set, and the name `<name>-seed<N>` (so that runs of
    /// one composition differing only by seed sit side by side).
    pub(crate) fn with_seed(mut self, seed: u64, path: &Path) -> Result<Self> {
        self.name = format!("{}-seed{seed}", self.name);
        self.seed = seed;
        check_name(path, "name", &self.name)?;
        Ok(self)
    }

    /// The seed `--seed-index I` picks: `seeds[I]`.
    pub(crate) fn seed_at(&self, index: usize, path: &Path) -> Result<u64> {
        match self.seeds.get(index) {
            Some(&s) => Ok(s),
            None if self.seeds.is_empty() => Err(Error::field(
                path,
                "seeds",
                "--seed-index needs the recipe to list its seeds (`seeds = [3407, 1, 2]`)",
            )),
            None => Err(Error::field(
                path,
                "seeds",
                format!(
                    "--seed-index {index} is past the {} seeds listed (indices 0 to {})",
                    self.seeds.len(),
                    self.seeds.len() - 1
                ),
            )),
        }
    }

    fn validate(&self, path: &Path) -> Result<()> {
        indolm_core::recipe::check_shared(path, &self.name, &self.optimizer, &self.checkpoint, &self.logging)?;
        if let Some((i, s)) = self.seeds.iter().enumerate().find(|(i, s)| self.seeds[..*i].contains(s)) {
            return Err(Error::field(
                path,
                "seeds",
                format!("seed {s} is listed twice (again at index {i}): each seed is one run"),
            ));
        }
        if let Some(&s) = self.seeds.iter().max_by_key(|s| s.to_string().len()) {
            check_name(path, "name", &format!("{}-seed{s}", self.name))?;
        }
        self.optimizer.required_max_steps(path)?;
        self.optimizer.refuse_decoder_keys(path)?;
        let checks: [(bool, &str, String); 4] = [
            (
                (0.0..1.0).contains(&self.masking.probability) && self.masking.probability > 0.0,
                "masking.probability",
                format!("must be in (0, 1), found {}", self.masking.probability),
            ),
            (
                self.masking.mask_fraction + self.masking.random_fraction <= 1.0,
                "masking.mask_fraction",
                "mask_fraction + random_fraction must be <= 1".into(),
            ),
            (!self.data.sources.is_empty(), "data.sources", "at least one source is needed".into()),
            (
                self.data.seq_len >= indolm_torch::data::mixture::MIN_SEQ_LEN,
                "data.seq_len",
                format!("expected at least {}, found {}", indolm_torch::data::mixture::MIN_SEQ_LEN, self.data.seq_len),
            ),
        ];
        for (ok, field, message) in checks {
            if !ok {
                return Err(Error::field(path, field, message));
            }
        }
        if let Some(bias) = &self.eval.bias {
            if bias.every == Some(0) {
                return Err(Error::field(
                    path,
                    "eval.bias.every",
                    "must be > 0 (leave it out to evaluate at checkpoints only)",
                ));
            }
            if bias.resamples == 0 {
                return Err(Error::field(path, "eval.bias.resamples", "must be > 0"));
            }
        }
        if self.eval.indommlu.as_ref().is_some_and(|m| m.mode == IndommluMode::FullAnswer) {
            return Err(Error::field(
                path,
                "eval.indommlu.mode",
                "full-answer is for causal LMs; a pretraining checkpoint is a masked LM: use \"option-pll\" or \"letter\"",
            ));
        }
        check_name(path, "data.corpus", &self.data.corpus)?;
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.data.sources {
            check_name(path, "data.sources.name", &s.name)?;
            if !seen.insert(s.name.as_str()) {
                return Err(Error::field(
                    path,
                    format!("data.sources[{}]", s.name),
                    "two sources have this name; each source's shards are stored under its name",
                ));
            }
            if s.weight <= 0.0 {
                return Err(Error::field(
                    path,
                    format!("data.sources[{}].weight", s.name),
                    format!("must be > 0, found {}", s.weight),
                ));
            }
        }
        if self.model.preset.is_some() == self.model.config.is_some() {
            return Err(Error::field(path, "model", "give exactly one of `preset` or `config`"));
        }
        Ok(())
    }

    /// The model configuration for a tokenizer of `vocab_size` ids.
    pub(crate) fn model_config(&self, vocab_size: usize, recipe_path: &Path) -> Result<BertConfig> {
        let m = &self.model;
        let mut c = match (&m.preset, &m.config) {
            (Some(p), _) => match p.as_str() {
                "indobert-base" | "bert-base" => BertConfig::base(vocab_size as i64),
                "tiny" => {
                    let mut c = BertConfig::new(vocab_size as i64, 128, 2, 2, 512);
                    c.max_position_embeddings = 128;
                    c
                }
                other => {
                    return Err(Error::field(
                        recipe_path,
                        "model.preset",
                        format!("unknown preset {other:?}, expected indobert-base or tiny"),
                    ))
                }
            },
            (None, Some(path)) => BertConfig::from_file(&self.base_dir.join(path))?,
            (None, None) => unreachable!("validated"),
        };
        if m.preset.is_some() {
            c.vocab_size = vocab_size as i64;
            if let Some(v) = m.vocab_size {
                if v < vocab_size as i64 {
                    return Err(Error::field(
                        recipe_path,
                        "model.vocab_size",
                        format!("{v} is smaller than the tokenizer's vocabulary ({vocab_size}); it may only be larger"),
                    ));
                }
                c.vocab_size = v;
            }
        } else if m.vocab_size.is_some() {
            return Err(Error::field(
                recipe_path,
                "model.vocab_size",
                "applies to a preset; a config.json sets its own vocab_size",
            ));
        }
        let set = |slot: &mut i64, v: Option<i64>| {
            if let Some(v) = v {
                *slot = v
            }
        };
        set(&mut c.num_hidden_layers, m.num_hidden_layers);
        set(&mut c.hidden_size, m.hidden_size);
        set(&mut c.num_attention_heads, m.num_attention_heads);
        set(&mut c.intermediate_size, m.intermediate_size);
        set(&mut c.max_position_embeddings, m.max_position_embeddings);
        if let Some(p) = m.hidden_dropout_prob {
            c.hidden_dropout_prob = p;
        }
        if let Some(p) = m.attention_probs_dropout_prob {
            c.attention_probs_dropout_prob = p;
        }
        c.validate(recipe_path)?;
        if self.data.seq_len as i64 > c.max_position_embeddings {
            return Err(Error::field(
                recipe_path,
                "data.seq_len",
                format!(
                    "{} exceeds the model's max_position_embeddings {}",
                    self.data.seq_len, c.max_position_embeddings
                ),
            ));
        }
        Ok(c)
    }

    /// `p` relative to the recipe's base folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        self.base_dir.join(p)
    }

    /// `<output_dir>/<name>`: checkpoints and `train_log.jsonl`.
    pub(crate) fn run_dir(&self) -> PathBuf {
        self.resolve(&self.output_dir).join(&self.name)
    }

    /// `<corpora_dir>/<corpus>`: the prepared shards.
    pub(crate) fn corpus_dir(&self) -> PathBuf {
        self.resolve(&self.data.corpora_dir).join(&self.data.corpus)
    }

    /// `<tensorboard>/<name>`: the run's TensorBoard events.
    pub(crate) fn tensorboard_dir(&self) -> PathBuf {
        self.resolve(&self.logging.tensorboard).join(&self.name)
    }

    /// The recipe as it will run (defaults filled in), as TOML.
    pub(crate) fn resolved_toml(&self) -> String {
        toml::to_string_pretty(self).expect("recipes serialize")
    }

    /// The sections whose change makes a resumed run a different run, as values (checkpoint,
    /// eval and logging settings may change on resume).
    pub fn fingerprint(&self) -> Fingerprint {
        let value = |v: serde_json::Result<serde_json::Value>| v.expect("recipe sections serialize to JSON");
        Fingerprint::Values(BTreeMap::from([
            ("seed".to_string(), value(serde_json::to_value(self.seed))),
            ("model".to_string(), value(serde_json::to_value(&self.model))),
            ("tokenizer".to_string(), value(serde_json::to_value(&self.tokenizer))),
            ("data".to_string(), value(serde_json::to_value(&self.data))),
            ("masking".to_string(), value(serde_json::to_value(&self.masking))),
            ("optimizer".to_string(), value(serde_json::to_value(&self.optimizer))),
            ("precision".to_string(), value(serde_json::to_value(self.precision))),
        ]))
    }

    /// The sections as checkpoints written before key-by-key comparison recorded them (their
    /// `Debug` text), to compare a resumed run with such a checkpoint.
    fn legacy_fingerprint(&self) -> Vec<(String, String)> {
        vec![
            ("seed".into(), format!("{:?}", self.seed)),
            ("model".into(), format!("{:?}", self.model)),
            ("tokenizer".into(), format!("{:?}", self.tokenizer)),
            ("data".into(), format!("{:?}", self.data)),
            ("masking".into(), format!("{:?}", self.masking)),
            ("optimizer".into(), format!("{:?}", self.optimizer)),
            ("precision".into(), format!("{:?}", self.precision)),
        ]
    }

    /// The keys (dotted, e.g. `optimizer.lr`) in which this recipe differs from the one a
    /// checkpoint recorded, each with the recorded and the new value.
    pub(crate) fn differences_from(&self, recorded: &Fingerprint) -> Vec<String> {
        match (recorded, self.fingerprint()) {
            (Fingerprint::Values(old), Fingerprint::Values(new)) => {
                indolm_core::recipe::fingerprint::differences(old, &new)
            }
            (Fingerprint::Legacy(old), _) => old
                .iter()
                .zip(self.legacy_fingerprint())
                .filter(|(old, new)| old.1 != new.1)
                .map(|(old, _)| old.0.clone())
                .collect(),
            (Fingerprint::Values(_), Fingerprint::Legacy(_)) => unreachable!("fingerprint() gives values"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(lr: &str, weight: &str, every: u64) -> PretrainRecipe {
        let text = format!(
            r#"name = "t"
[model]
preset = "tiny"
[tokenizer]
path = "tok"
[data]
corpus = "c"
seq_len = 64
[[data.sources]]
name = "a"
lang = "id"
paths = ["a.txt"]
weight = {weight}
[optimizer]
lr = {lr}
batch_size = 4
warmup_steps = 1
max_steps = 10
[checkpoint]
every = {every}
"#
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn a_changed_recipe_names_each_differing_key_with_both_values() {
        let old = recipe("1e-3", "1.0", 5);
        assert!(old.differences_from(&old.fingerprint()).is_empty());
        let changed = recipe("2e-3", "0.5", 5);
        assert_eq!(
            changed.differences_from(&old.fingerprint()),
            vec!["data.sources[0].weight (1.0 -> 0.5)".to_string(), "optimizer.lr (0.001 -> 0.002)".to_string()]
        );
        // Checkpoint cadence may change on resume: it is not part of the fingerprint.
        assert!(recipe("1e-3", "1.0", 50).differences_from(&old.fingerprint()).is_empty());
        // So may the cut of the global batch into micro-batches, but not the global batch.
        let (b, a) = (old.optimizer.batch_size, old.optimizer.grad_accumulation);
        let mut halved = old.clone();
        (halved.optimizer.batch_size, halved.optimizer.grad_accumulation) = (b / 2, a * 2);
        assert!(
            halved.differences_from(&old.fingerprint()).is_empty(),
            "{:?}",
            halved.differences_from(&old.fingerprint())
        );
        halved.optimizer.grad_accumulation = a;
        assert_eq!(
            halved.differences_from(&old.fingerprint()),
            vec![format!("optimizer.sequences_per_update ({} -> {})", b * a, b / 2 * a)]
        );
    }

    #[test]
    fn checkpoints_of_earlier_versions_are_compared_by_section() {
        let old = recipe("1e-3", "1.0", 5);
        let legacy = Fingerprint::Legacy(old.legacy_fingerprint());
        assert!(old.differences_from(&legacy).is_empty());
        assert_eq!(recipe("2e-3", "1.0", 5).differences_from(&legacy), vec!["optimizer".to_string()]);
        // The JSON a checkpoint of an earlier version holds reads as the legacy form.
        let json = serde_json::to_string(&old.legacy_fingerprint()).unwrap();
        assert_eq!(serde_json::from_str::<Fingerprint>(&json).unwrap(), legacy);
    }

    #[test]
    fn a_causal_only_indommlu_mode_is_refused_for_pretraining_checkpoints() {
        let mut r = recipe("1e-3", "1.0", 5);
        r.eval.indommlu =
            Some(IndommluEvalSection { data: "q.csv".into(), mode: IndommluMode::FullAnswer, subsample: 10 });
        let err = r.validate(Path::new("r.toml")).unwrap_err().to_string();
        assert!(err.contains("eval.indommlu.mode") && err.contains("option-pll"), "{err}");
        r.eval.indommlu.as_mut().unwrap().mode = IndommluMode::Letter;
        assert!(r.validate(Path::new("r.toml")).is_ok());
    }

    #[test]
    fn masking_keys_left_out_take_bert_s_values() {
        let m: MaskingSection = toml::from_str("whole_word = true").unwrap();
        assert_eq!(m, MaskingSection { whole_word: true, ..MaskingSection::default() });
        assert_eq!((m.probability, m.mask_fraction, m.random_fraction), (0.15, 0.8, 0.1));
    }
}
