//! The network a translation recipe trains and the files its directory keeps: an mBART
//! (`MBartForConditionalGeneration`: mBART-50, or IndoBART's layout) loaded trainable from an HF
//! directory, its `tokenizer.json`, and the directory's configuration and tokenizer files carried
//! as they were read, so that every checkpoint and the selected model are HF directories
//! transformers loads.
use indolm_core::files::write_atomic;
use indolm_torch::error::{Error, IoContext, Result};
use indolm_torch::model::model_dir::{copy_into, WEIGHTS_FILE};
use indolm_torch::model::seq2seq::mbart::{load_mbart, Mbart, MbartConfig};
use indolm_torch::model::seq2seq::Seq2SeqTokenizer;
use indolm_torch::model::weights;
use std::path::Path;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// The files of the start directory a saved model carries over unchanged (besides the weights,
/// which it writes): the configurations and the tokenizer's files.
const CARRIED_FILES: [&str; 6] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentencepiece.bpe.model",
];

/// The largest carried file read (mBART-50's `tokenizer.json` is 17 MB).
const MAX_CARRIED_BYTES: u64 = 256 << 20;

indolm_core::declare_run_files!(
    TRANSLATION_MODEL_FILES: indolm_core::outputs::RunFile::Named("generation_config.json"),
    indolm_core::outputs::RunFile::Named("sentencepiece.bpe.model"),
);

/// Refuses a tokenizer with more tokens than the model's `vocab_size` (its last ids would index
/// past the embedding table).
pub fn check_fits(tokenizer: &Seq2SeqTokenizer, config: &MbartConfig) -> Result<()> {
    if tokenizer.vocab_size() as i64 > config.vocab_size {
        return Err(Error::field(
            &config.path,
            "vocab_size",
            format!(
                "the tokenizer ({}) has {} tokens but the model's vocab_size is {}",
                tokenizer.source.display(),
                tokenizer.vocab_size(),
                config.vocab_size
            ),
        ));
    }
    Ok(())
}

/// The id of a language-marking token of `tokenizer`, or an error naming the tokenizer and the
/// recipe's field.
pub fn language_id(tokenizer: &Seq2SeqTokenizer, token: &str, field: &str, recipe: &Path) -> Result<i64> {
    tokenizer.token_id(token).ok_or_else(|| {
        Error::field(
            recipe,
            field,
            format!("`{token}` is not a token of {} (a language id must be one token)", tokenizer.source.display()),
        )
    })
}

/// An mBART in training with its tokenizer.
pub struct TranslationModel {
    /// Its variables under HF's names.
    pub vs: VarStore,
    /// The network.
    pub net: Mbart,
    /// The directory's tokenizer.
    pub tokenizer: Seq2SeqTokenizer,
    /// `forced_eos_token_id` of the generation configuration, else of the model's (mBART-50's is
    /// `</s>`), for generation.
    pub forced_eos_token_id: Option<i64>,
    /// The carried files, as read.
    carried: Vec<(&'static str, Vec<u8>)>,
}

impl TranslationModel {
    /// Loads the mBART directory `dir` onto `device` (fp32, trainable): `config.json`, the
    /// weights, `tokenizer.json` (which must fit the embedding table) and the other carried files.
    pub fn load(dir: &Path, device: Device) -> Result<Self> {
        let (vs, net) = load_mbart(dir, device)?;
        let tokenizer = Seq2SeqTokenizer::from_dir(dir)?;
        let config_path = dir.join("config.json");
        check_fits(&tokenizer, &net.config)?;
        // `generate` reads the generation config where the folder has one, else the model's.
        let generation_path = dir.join("generation_config.json");
        let settings_path = if generation_path.is_file() { generation_path } else { config_path.clone() };
        let settings = indolm_core::json_fields::read_object(&settings_path)?;
        let forced_eos_token_id = match settings.get("forced_eos_token_id") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_i64().filter(|id| (0..net.config.vocab_size).contains(id)) {
                Some(id) => Some(id),
                None => {
                    return Err(Error::field(
                        &settings_path,
                        "forced_eos_token_id",
                        format!("expected a token id below {}, found {v}", net.config.vocab_size),
                    ))
                }
            },
        };
        let mut carried = Vec::new();
        for name in CARRIED_FILES {
            let path = dir.join(name);
            if !path.is_file() {
                continue;
            }
            let size = std::fs::metadata(&path).with_path(&path)?.len();
            if size > MAX_CARRIED_BYTES {
                return Err(Error::invalid(
                    &path,
                    format!("{size} bytes, more than the {MAX_CARRIED_BYTES} a model's side file is read to"),
                ));
            }
            carried.push((name, std::fs::read(&path).with_path(&path)?));
        }
        Ok(TranslationModel { vs, net, tokenizer, forced_eos_token_id, carried })
    }

    /// The variables the optimizer updates, by name (`final_logits_bias` is a buffer).
    pub fn trainable(&self) -> std::collections::BTreeMap<String, Tensor> {
        self.vs.variables().into_iter().filter(|(_, t)| t.requires_grad()).collect()
    }

    /// Writes the model's directory into `dir`: the carried files as they were read and
    /// `model.safetensors` (fp32, HF's names), each written to a temporary name and renamed.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_path(dir)?;
        for (name, bytes) in &self.carried {
            write_atomic(&dir.join(name), bytes)?;
        }
        let mut named: Vec<(String, Tensor)> =
            self.vs.variables().into_iter().map(|(n, t)| (n, t.detach().to_kind(Kind::Float))).collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        weights::write_file(&dir.join(WEIGHTS_FILE), &named)
    }

    /// Loads weights [`Self::save`] wrote (a checkpoint, or the best weights).
    pub fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(WEIGHTS_FILE);
        copy_into(&self.vs, weights::read_file(&path)?, &path, &[]).map(|_| ())
    }
}
