//! Model directories: an indolm checkpoint or an HF BERT directory (`config.json`,
//! `model.safetensors` or sharded safetensors, `tokenizer.json` or `vocab.txt`). Loading
//! accepts HF's name variants (`gamma`/`beta`, no `bert.` prefix, tied decoder copies) and
//! reports what it had to initialise; saving writes HF's canonical names.
use super::bert::BertForMaskedLM;
use super::config::BertConfig;
use super::notes::{Component, LoadNote};
use super::weights;
use crate::data::tokenizer::TextTokenizer;
use crate::error::{Error, IoContext, Result};
use crate::files::write_atomic;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// A masked LM with its variables, configuration, tokenizer and the notes from loading it.
pub struct LoadedModel {
    /// Its variables, on the device it was loaded to.
    pub vs: VarStore,
    /// The network.
    pub model: BertForMaskedLM,
    /// The directory's validated `config.json`.
    pub config: BertConfig,
    /// The directory's tokenizer.
    pub tokenizer: TextTokenizer,
    /// What loading had to do that the user should know (missing heads, ignored tensors).
    pub notes: Vec<LoadNote>,
}

/// Tensors HF checkpoints may carry that the model being loaded does not use.
const IGNORED: &[&str] = &["bert.embeddings.position_ids", "cls.seq_relationship.", "cls.predictions.", "classifier."];

/// Loads a masked LM from `dir` onto `device`.
pub fn load_masked_lm(dir: &Path, device: Device) -> Result<LoadedModel> {
    let ModelFiles { config, tokenizer, weights_path, tensors } = read_model_files(dir)?;
    let with_pooler = tensors.contains_key("bert.pooler.dense.weight");
    let vs = VarStore::new(device);
    let model = BertForMaskedLM::new(&vs.root(), &config, with_pooler);
    let notes = copy_into(&vs, tensors, &weights_path, &[Component::MlmHead])?;
    Ok(LoadedModel { vs, model, config, tokenizer, notes })
}

/// A model directory's parts before a network is built on them: configuration, tokenizer and
/// its weights under canonical names.
pub struct ModelFiles {
    /// The validated `config.json`.
    pub config: BertConfig,
    /// The tokenizer, checked to fit `vocab_size`.
    pub tokenizer: TextTokenizer,
    /// The weights file read (`model.safetensors`, or the index of sharded weights), for messages.
    pub weights_path: PathBuf,
    /// Every tensor under its canonical name (`bert.` prefix, LayerNorm `weight`/`bias`).
    pub tensors: BTreeMap<String, Tensor>,
}

/// Reads a model directory (indolm or HF) without building a network.
pub fn read_model_files(dir: &Path) -> Result<ModelFiles> {
    if !dir.is_dir() {
        return Err(Error::MissingFile {
            path: dir.into(),
            hint: "expected a model directory (an indolm checkpoint or an HF BERT directory)".into(),
        });
    }
    let config_path = dir.join("config.json");
    if !config_path.exists() {
        return Err(Error::MissingFile {
            path: config_path,
            hint: "a model directory holds config.json, model.safetensors and vocab.txt or tokenizer.json".into(),
        });
    }
    let config = BertConfig::from_file(&config_path)?;
    let tokenizer = TextTokenizer::from_dir(dir)?;
    check_vocab(&config, &config_path, &tokenizer)?;
    let (weights_path, tensors) = weights::read_model_weights(dir)?;
    Ok(ModelFiles { config, tokenizer, weights_path, tensors: canonical_names(tensors) })
}

/// The tokenizer must not produce ids outside the embedding table.
pub fn check_vocab(config: &BertConfig, config_path: &Path, tokenizer: &TextTokenizer) -> Result<()> {
    let n = tokenizer.vocab_size() as i64;
    if n > config.vocab_size {
        return Err(Error::field(
            config_path,
            "vocab_size",
            format!(
                "the tokenizer ({}) has {n} tokens but the model's vocab_size is {} (vocab/config mismatch)",
                tokenizer.source.display(),
                config.vocab_size
            ),
        ));
    }
    Ok(())
}

/// Renames HF's older variants to the canonical names: LayerNorm `gamma`/`beta`, and a bare
/// `BertModel` state dict (no `bert.` prefix).
fn canonical_names(tensors: BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    let bare =
        !tensors.keys().any(|k| k.starts_with("bert.")) && tensors.contains_key("embeddings.word_embeddings.weight");
    tensors
        .into_iter()
        .map(|(name, t)| {
            let name = if let Some(stem) = name.strip_suffix(".gamma") {
                format!("{stem}.weight")
            } else if let Some(stem) = name.strip_suffix(".beta") {
                format!("{stem}.bias")
            } else {
                name
            };
            let name = if bare && !name.starts_with("cls.") { format!("bert.{name}") } else { name };
            (name, t)
        })
        .collect()
}

/// Copies checkpoint tensors into the variables of `vs`, checking every shape. The variables of
/// an `optional` component may be missing: they keep their random initialisation, with a note;
/// any other missing tensor is an error. Tied decoder copies must equal what they are tied to.
pub fn copy_into(
    vs: &VarStore,
    mut tensors: BTreeMap<String, Tensor>,
    path: &Path,
    optional: &[Component],
) -> Result<Vec<LoadNote>> {
    let mut notes = Vec::new();
    // The decoder bias is the head's `bias` under another name; the decoder weight is tied to
    // the word embeddings.
    if let Some(bias) = tensors.remove("cls.predictions.decoder.bias") {
        tensors.entry("cls.predictions.bias".into()).or_insert(bias);
    }
    if let Some(decoder) = tensors.remove("cls.predictions.decoder.weight") {
        if let Some(words) = tensors.get("bert.embeddings.word_embeddings.weight") {
            if decoder.size() != words.size() || !decoder.to_kind(Kind::Float).equal(&words.to_kind(Kind::Float)) {
                return Err(Error::invalid(path, "cls.predictions.decoder.weight differs from bert.embeddings.word_embeddings.weight: untied output embeddings are not supported (indolm ties them, as BERT does)"));
            }
        }
    }
    let mut missing = Vec::new();
    tch::no_grad(|| -> Result<()> {
        for (name, mut var) in vs.variables() {
            let Some(src) = tensors.remove(&name) else {
                missing.push(name);
                continue;
            };
            if src.size() != var.size() {
                return Err(Error::Shape { path: path.into(), tensor: name, expected: var.size(), found: src.size() });
            }
            var.f_copy_(&src.to_kind(var.kind())).map_err(|e| Error::torch(format!("copying `{name}`"), e))?;
        }
        Ok(())
    })?;
    // Sorted, so that notes and errors name the same tensors every run (the store is a hash map).
    missing.sort();
    let (optional_missing, other_missing): (Vec<String>, Vec<String>) =
        missing.into_iter().partition(|n| optional.iter().any(|c| n.starts_with(c.prefix())));
    if !other_missing.is_empty() {
        let shown: Vec<&str> = other_missing.iter().take(6).map(String::as_str).collect();
        return Err(Error::invalid(
            path,
            format!(
                "{} encoder tensor(s) missing, e.g. {} (is this a BERT checkpoint?)",
                other_missing.len(),
                shown.join(", ")
            ),
        ));
    }
    for component in optional {
        let names: Vec<String> =
            optional_missing.iter().filter(|n| n.starts_with(component.prefix())).cloned().collect();
        if !names.is_empty() {
            notes.extend(LoadNote::initialised(*component, names));
        }
    }
    let (known, unknown): (Vec<String>, Vec<String>) =
        tensors.into_keys().partition(|n| IGNORED.iter().any(|p| n.starts_with(p)));
    if !known.is_empty() {
        notes.push(LoadNote::IgnoredUnused { tensors: known });
    }
    if !unknown.is_empty() {
        notes.push(LoadNote::IgnoredUnexpected { tensors: unknown });
    }
    Ok(notes)
}

/// Writes `config.json`, `model.safetensors` (HF names, fp32) and the tokenizer files into `dir`
/// (created if needed; each file written atomically).
pub fn save_model_files(dir: &Path, config: &BertConfig, vs: &VarStore, tokenizer: &TextTokenizer) -> Result<()> {
    save_model_files_as(dir, &config.to_hf_json(), vs, tokenizer)
}

/// As `save_model_files`, with the `config.json` text given (another architecture).
pub fn save_model_files_as(dir: &Path, config_json: &str, vs: &VarStore, tokenizer: &TextTokenizer) -> Result<()> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    write_atomic(&dir.join("config.json"), config_json.as_bytes())?;
    let mut named: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (n, t.detach().to_kind(Kind::Float))).collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    weights::write_file(&dir.join("model.safetensors"), &named)?;
    tokenizer.save(dir)
}

/// Writes a model directory as a whole: into a temporary sibling, then renamed to `out`, so an
/// interrupted export never leaves a half-written directory. Refuses to replace a non-empty
/// directory unless `overwrite`.
pub fn save_model_dir(out: &Path, overwrite: bool, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if out.exists() {
        let non_empty = std::fs::read_dir(out).with_path(out)?.next().is_some();
        if non_empty && !overwrite {
            return Err(Error::invalid(
                out,
                "output directory exists and is not empty (pass --overwrite to replace it)",
            ));
        }
    }
    let staging: PathBuf = crate::files::tmp_path(out);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_path(&staging)?;
    }
    write(&staging)?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_path(out)?;
    }
    std::fs::rename(&staging, out).with_path(out)
}
