//! Model directories: an indolm checkpoint or an HF BERT directory (`config.json`,
//! `model.safetensors` or sharded safetensors, `tokenizer.json` or `vocab.txt`), or an HF
//! RoBERTa-family one (XLM-R, multilingual-E5: BERT's network under `roberta.*` / `lm_head.*`).
//! Loading accepts HF's name variants (`gamma`/`beta`, no `bert.` prefix, tied decoder copies,
//! RoBERTa's names, mapped here to BERT's) and reports what it had to initialise; saving writes
//! HF's canonical names of the model's family.
use super::bert::BertForMaskedLM;
use super::config::BertConfig;
use super::notes::{Component, LoadNote};
use super::weights;
use crate::data::tokenizer::TextTokenizer;
use crate::error::{Error, IoContext, Result};
use indolm_core::files::write_atomic;
use indolm_core::outputs::RunFile;
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

/// What every output of a score from a randomly initialised MLM head carries.
pub(crate) const RANDOM_HEAD_WARNING: &str = "the MLM head was initialised randomly (the checkpoint has none, e.g. an encoder-only or sentence-embedding model such as multilingual-E5): these scores come from an untrained projection, not from the model";

impl LoadedModel {
    /// Refuses a model whose MLM head was initialised randomly for anything scored through the
    /// head (pseudo-log-likelihoods, bias win rates, fill-mask), unless `allow_random_head`:
    /// then `Some(RANDOM_HEAD_WARNING)`, for the caller to put on every output. `dir`: the
    /// model directory, for the message.
    pub fn require_trained_head(&self, dir: &Path, allow_random_head: bool) -> Result<Option<String>> {
        let Some(missing) = self.notes.iter().find(|n| n.initialises(Component::MlmHead)) else {
            return Ok(None);
        };
        if allow_random_head {
            return Ok(Some(RANDOM_HEAD_WARNING.to_string()));
        }
        let LoadNote::Initialised { tensors, .. } = missing else { unreachable!("initialises() matched") };
        Err(Error::invalid(
            dir,
            format!(
                "this model has no trained MLM head ({} of its tensors missing, e.g. {}; HF names lm_head.* for XLM-R, cls.predictions.* for BERT): pseudo-log-likelihood scores would come from a random projection; pass --allow-random-head to score it anyway (every output then says so)",
                tensors.len(),
                tensors.first().map_or("", String::as_str)
            ),
        ))
    }
}

/// Tensors HF checkpoints may carry that the model being loaded does not use.
const IGNORED: &[&str] = &[
    "bert.embeddings.position_ids",
    "bert.embeddings.token_type_ids",
    "bert.pooler.",
    "cls.seq_relationship.",
    "cls.predictions.",
    "classifier.",
];

/// RoBERTa-family names (prefixes) and the BERT names the network's variables have: the one
/// table both loading and saving use.
const ROBERTA_NAMES: &[(&str, &str)] = &[
    ("roberta.", "bert."),
    ("lm_head.dense.", "cls.predictions.transform.dense."),
    ("lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("lm_head.decoder.", "cls.predictions.decoder."),
    ("lm_head.bias", "cls.predictions.bias"),
];

/// The HF name of variable `name` in a model of `model_type` (`config.json`'s): RoBERTa's for
/// the RoBERTa family, else `name` itself.
fn hf_name(name: String, model_type: Option<&str>) -> String {
    if !matches!(model_type, Some("xlm-roberta" | "roberta")) {
        return name;
    }
    for (roberta, bert) in ROBERTA_NAMES {
        if let Some(rest) = name.strip_prefix(bert) {
            return format!("{roberta}{rest}");
        }
    }
    name
}

/// Loads a masked LM from `dir` onto `device`.
pub fn load_masked_lm(dir: &Path, device: Device) -> Result<LoadedModel> {
    let ModelFiles { config, tokenizer, weights_path, tensors, mut notes } = read_model_files(dir)?;
    let with_pooler = tensors.contains_key("bert.pooler.dense.weight");
    let vs = VarStore::new(device);
    let model = BertForMaskedLM::new(&vs.root(), &config, with_pooler);
    notes.extend(copy_into(&vs, tensors, &weights_path, &[Component::MlmHead])?);
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
    /// What reading found that the user should know (a vocabulary smaller than the embedding).
    pub notes: Vec<LoadNote>,
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
    let notes = check_vocab(&config, &config_path, &tokenizer)?.into_iter().collect();
    verify_recorded_checksums(dir)?;
    let (weights_path, tensors) = weights::read_model_weights(dir)?;
    Ok(ModelFiles { config, tokenizer, weights_path, tensors: canonical_names(tensors), notes })
}

/// A model directory's identity, for a run that starts from it: the SHA-256 of the names and
/// SHA-256s of the files a model is read from (`config.json`; `model.safetensors` or
/// `pytorch_model.bin`, or the index and its shards; `tokenizer.json` and `vocab.txt` where present). A copy or a moved folder has
/// the same identity; another weight, configuration or vocabulary gives another.
pub fn content_sha256(dir: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut files = vec![dir.join("config.json")];
    let (weights_file, shards) = weights::weight_files(dir)?;
    let sharded = shards != [weights_file.clone()];
    files.push(weights_file); // the file, or the index before its shards
    if sharded {
        files.extend(shards);
    }
    files.extend(["tokenizer.json", "vocab.txt"].iter().map(|f| dir.join(f)).filter(|p| p.exists()));
    let mut hasher = Sha256::new();
    for file in &files {
        let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        hasher.update(format!("{name}\t{}\n", indolm_core::files::sha256_file(file)?).as_bytes());
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// PreSumm's inputs alternate segment ids 0 and 1 between sentences: an encoder with a single
/// token type (XLM-R and RoBERTa have one) cannot take them, and `what` (BertExt, BertAbs) is
/// refused on it with the field named, instead of an index error deep in libtorch.
pub fn require_two_token_types(config: &BertConfig, dir: &Path, what: &str) -> Result<()> {
    if config.type_vocab_size >= 2 {
        return Ok(());
    }
    Err(Error::field(
        dir.join("config.json"),
        "type_vocab_size",
        format!(
            "{what} alternates segment ids 0 and 1 between sentences, which needs 2 token types; this {:?} encoder has {}",
            config.model_type, config.type_vocab_size
        ),
    ))
}

/// An indolm checkpoint records the SHA-256 of its weights in `trainer_state.json`: a
/// checkpoint whose `model.safetensors` no longer matches is refused, whatever command reads it.
/// Other directories (HF, exports, fine-tuned models) carry no record and pass.
fn verify_recorded_checksums(dir: &Path) -> Result<()> {
    let state_path = dir.join("trainer_state.json");
    let Ok(text) = std::fs::read_to_string(&state_path) else { return Ok(()) };
    let state: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::json(&state_path, &e))?;
    let file = "model.safetensors";
    if let Some(expected) = state["checksums"][file].as_str() {
        let found = indolm_core::files::sha256_file(&dir.join(file))?;
        if found != expected {
            return Err(Error::invalid(
                dir.join(file),
                format!("checksum mismatch with {} (expected {expected}, found {found}): the file is corrupt; use another checkpoint or copy this one again", state_path.display()),
            ));
        }
    }
    Ok(())
}

/// The tokenizer must not produce ids outside the embedding table. One with fewer tokens than
/// the table is legal (HF pads embeddings) but unusual for BERT, and what a cut-short
/// `vocab.txt` looks like: it gets a note.
pub fn check_vocab(config: &BertConfig, config_path: &Path, tokenizer: &TextTokenizer) -> Result<Option<LoadNote>> {
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
    Ok((n < config.vocab_size).then(|| LoadNote::SmallVocabulary {
        tokenizer: tokenizer.source.clone(),
        tokens: n,
        rows: config.vocab_size,
    }))
}

/// Renames HF's older variants to the canonical names: LayerNorm `gamma`/`beta`, a bare
/// `BertModel` (or `XLMRobertaModel`) state dict (no `bert.` prefix), and RoBERTa's names
/// (`roberta.*`, `lm_head.*`; see `ROBERTA_NAMES`).
fn canonical_names(tensors: BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    let tensors: BTreeMap<String, Tensor> = tensors
        .into_iter()
        .map(|(name, t)| {
            for (roberta, bert) in ROBERTA_NAMES {
                if let Some(rest) = name.strip_prefix(roberta) {
                    return (format!("{bert}{rest}"), t);
                }
            }
            (name, t)
        })
        .collect();
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

/// A model directory's configuration file.
pub(crate) const CONFIG_FILE: &str = "config.json";
/// A model directory's weights, in one file.
pub const WEIGHTS_FILE: &str = "model.safetensors";

indolm_core::declare_run_files!(MODEL_DIRECTORY_FILES: RunFile::Named(CONFIG_FILE), RunFile::Named(WEIGHTS_FILE));

/// Writes `config.json`, `model.safetensors` (HF names, fp32) and the tokenizer files into `dir`
/// (created if needed; each file written atomically).
pub fn save_model_files(dir: &Path, config: &BertConfig, vs: &VarStore, tokenizer: &TextTokenizer) -> Result<()> {
    save_model_files_as(dir, &config.to_hf_json(), vs, tokenizer)
}

/// As `save_model_files`, with the `config.json` text given (another architecture). Its
/// `model_type` names the family whose tensor names are written (RoBERTa's or BERT's).
pub fn save_model_files_as(dir: &Path, config_json: &str, vs: &VarStore, tokenizer: &TextTokenizer) -> Result<()> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let model_type = serde_json::from_str::<serde_json::Value>(config_json)
        .ok()
        .and_then(|c| c.get("model_type").and_then(|t| t.as_str()).map(String::from));
    write_atomic(&dir.join(CONFIG_FILE), config_json.as_bytes())?;
    let mut named: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (hf_name(n, model_type.as_deref()), t.detach().to_kind(Kind::Float)))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    weights::write_file(&dir.join(WEIGHTS_FILE), &named)?;
    tokenizer.save(dir)
}

/// Whether a model directory written by indolm (`export-hf`, `import-hf`, `init`) holds files
/// of this name: the configuration, the weights and the tokenizer's files.
pub fn is_model_file(name: &str) -> bool {
    name == CONFIG_FILE || name == WEIGHTS_FILE || crate::data::tokenizer::is_tokenizer_file(name)
}

/// The files of an HF model directory besides its weights that `indolm convert` carries over:
/// the configurations, and every tokenizer file transformers reads.
pub fn is_hf_side_file(name: &str) -> bool {
    (is_model_file(name) && name != WEIGHTS_FILE)
        || [
            "generation_config.json",
            "tokenizer.model",
            "sentencepiece.bpe.model",
            "spiece.model",
            "merges.txt",
            "vocab.json",
            "added_tokens.json",
            "chat_template.jinja",
            "chat_template.json",
        ]
        .contains(&name)
}

/// Whether `name` is a file `indolm convert` writes: the weights, or a file carried over.
pub fn is_converted_file(name: &str) -> bool {
    name == WEIGHTS_FILE || is_hf_side_file(name)
}

/// Writes a model directory as a whole: into a temporary sibling, then renamed to `out`, so an
/// interrupted export never leaves a half-written directory. A non-empty `out` is refused unless
/// `overwrite`, and even then when it holds a file a model directory does not (a checkpoint's
/// state, a user's notes), or is the working directory, one of `reads` (what the command reads)
/// or a folder above either ([`indolm_core::outputs::write_dir`]).
pub fn save_model_dir(
    out: &Path,
    overwrite: bool,
    reads: &[&Path],
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    indolm_core::outputs::write_dir(out, overwrite, reads, is_model_file, write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::Init;

    const WORDS: &str = "bert.embeddings.word_embeddings.weight";
    const HEAD_BIAS: &str = "cls.predictions.bias";

    fn t(values: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(values).view(shape)
    }

    /// A store with a word-embedding table [3, 2] and an MLM head bias [3], both zeros.
    fn store() -> VarStore {
        let vs = VarStore::new(Device::Cpu);
        let root = vs.root();
        let _ = (&root / "bert" / "embeddings" / "word_embeddings").var("weight", &[3, 2], Init::Const(0.0));
        let _ = (&root / "cls" / "predictions").var("bias", &[3], Init::Const(0.0));
        vs
    }

    fn var(vs: &VarStore, name: &str) -> Vec<f32> {
        Vec::<f32>::try_from(vs.variables()[name].reshape([-1])).unwrap()
    }

    fn map(entries: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
        entries.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
    }

    fn words() -> Tensor {
        t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])
    }

    #[test]
    fn canonical_names_rename_gamma_beta_and_prefix_a_bare_state_dict() {
        let bare = canonical_names(map(vec![
            ("embeddings.word_embeddings.weight", words()),
            ("embeddings.LayerNorm.gamma", t(&[1.0], &[1])),
            ("encoder.layer.0.output.LayerNorm.beta", t(&[0.0], &[1])),
            ("cls.predictions.bias", t(&[0.0], &[1])),
        ]));
        assert_eq!(
            bare.keys().map(String::as_str).collect::<Vec<_>>(),
            vec![
                "bert.embeddings.LayerNorm.weight",
                "bert.embeddings.word_embeddings.weight",
                "bert.encoder.layer.0.output.LayerNorm.bias",
                "cls.predictions.bias",
            ]
        );
        // Prefixed names stay; so does a dict that is not a bare BertModel (no word embeddings).
        let prefixed = canonical_names(map(vec![(WORDS, words()), ("bert.pooler.dense.weight", t(&[1.0], &[1]))]));
        assert_eq!(
            prefixed.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight"]
        );
        let other = canonical_names(map(vec![("classifier.weight", t(&[1.0], &[1]))]));
        assert_eq!(other.keys().map(String::as_str).collect::<Vec<_>>(), vec!["classifier.weight"]);
    }

    #[test]
    fn copy_into_fills_variables_and_sorts_leftovers_into_notes() {
        let vs = store();
        let tensors = map(vec![
            (WORDS, words()),
            // HF's decoder copies: the bias under its other name, the weight equal to the embeddings.
            ("cls.predictions.decoder.bias", t(&[7.0, 8.0, 9.0], &[3])),
            ("cls.predictions.decoder.weight", words()),
            ("cls.seq_relationship.weight", t(&[1.0], &[1])),
            ("bert.embeddings.position_ids", t(&[0.0], &[1])),
            ("mystery.weight", t(&[1.0], &[1])),
        ]);
        let notes = copy_into(&vs, tensors, Path::new("m.safetensors"), &[Component::MlmHead]).unwrap();
        assert_eq!(var(&vs, WORDS), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(var(&vs, HEAD_BIAS), vec![7.0, 8.0, 9.0]);
        assert_eq!(
            notes,
            vec![
                LoadNote::IgnoredUnused {
                    tensors: vec!["bert.embeddings.position_ids".into(), "cls.seq_relationship.weight".into()]
                },
                LoadNote::IgnoredUnexpected { tensors: vec!["mystery.weight".into()] },
            ]
        );
    }

    #[test]
    fn copy_into_notes_a_missing_optional_component_and_refuses_the_rest() {
        let path = Path::new("m.safetensors");
        let notes = copy_into(&store(), map(vec![(WORDS, words())]), path, &[Component::MlmHead]).unwrap();
        assert_eq!(
            notes,
            vec![LoadNote::Initialised { component: Component::MlmHead, tensors: vec![HEAD_BIAS.into()] }]
        );
        // Not optional: an error naming the tensor.
        let err = copy_into(&store(), map(vec![(WORDS, words())]), path, &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            "m.safetensors: 1 encoder tensor(s) missing, e.g. cls.predictions.bias (is this a BERT checkpoint?)"
        );
        let err = copy_into(&store(), map(vec![(HEAD_BIAS, t(&[0.0; 3], &[3]))]), path, &[Component::MlmHead])
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 encoder tensor(s) missing, e.g. bert.embeddings.word_embeddings.weight"), "{err}");
    }

    #[test]
    fn copy_into_refuses_wrong_shapes_and_untied_decoders() {
        let path = Path::new("m.safetensors");
        let err = copy_into(&store(), map(vec![(WORDS, t(&[0.0; 4], &[2, 2]))]), path, &[Component::MlmHead])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "m.safetensors: tensor `bert.embeddings.word_embeddings.weight` has shape [2, 2], expected [3, 2]"
        );
        let untied = map(vec![(WORDS, words()), ("cls.predictions.decoder.weight", words() * 2.0)]);
        let err = copy_into(&store(), untied, path, &[Component::MlmHead]).unwrap_err().to_string();
        assert!(err.contains("untied output embeddings are not supported"), "{err}");
    }
}
