//! What loading a Hugging Face model folder shares between causal LMs (`decoder`) and
//! encoder-decoders (`seq2seq`): its `config.json` (required, the hint saying what such a folder
//! holds; or peeked at to recognise the folder's kind), its `tokenizer.json` loaded as it is, the
//! check that the tokenizer fits the embedding table, and encoding with the file named in errors.
//! The weights of both are memory-mapped by [`crate::model::decoder::load::Weights`].
use crate::error::{Error, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokenizers::{Encoding, Tokenizer};

/// `dir/config.json`, which must exist (`holds`: what such a folder holds, for the message).
pub(crate) fn config_path(dir: &Path, holds: &str) -> Result<PathBuf> {
    let path = dir.join("config.json");
    if !path.exists() {
        return Err(Error::MissingFile { path, hint: holds.into() });
    }
    Ok(path)
}

/// `dir/config.json` parsed, `None` when it is missing or not JSON (to recognise a folder's kind
/// without failing on other folders).
pub(crate) fn peek_config(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// `dir/tokenizer.json` as it is, and its path (`hint`: what the folder may hold instead that is
/// not read, for the message when it is missing).
pub(crate) fn open_tokenizer(dir: &Path, hint: &str) -> Result<(Tokenizer, PathBuf)> {
    let source = dir.join("tokenizer.json");
    if !source.exists() {
        return Err(Error::MissingFile { path: source, hint: hint.into() });
    }
    let tokenizer =
        Tokenizer::from_file(&source).map_err(|e| Error::Tokenizer { path: source.clone(), message: e.to_string() })?;
    Ok((tokenizer, source))
}

/// Refuses a tokenizer (`source`, of `tokens` tokens) with more tokens than the model's
/// `vocab_size` (read from `config_path`): its last ids would index past the embedding table.
pub(crate) fn check_tokenizer_fits(config_path: &Path, source: &Path, tokens: usize, vocab_size: i64) -> Result<()> {
    if tokens as i64 > vocab_size {
        return Err(Error::field(
            config_path,
            "vocab_size",
            format!(
                "the tokenizer ({}) has {tokens} tokens but the model's vocab_size is {vocab_size}",
                source.display()
            ),
        ));
    }
    Ok(())
}

/// `text` encoded by `tokenizer` (loaded from `source`), with the post-processor's special tokens
/// when `special`.
pub fn encode(tokenizer: &Tokenizer, source: &Path, text: &str, special: bool) -> Result<Encoding> {
    tokenizer.encode(text, special).map_err(|e| Error::Tokenizer {
        path: source.to_path_buf(),
        message: format!("encoding {}: {e}", indolm_core::files::quoted(text)),
    })
}

/// The ids of an encoding.
pub(crate) fn ids(encoding: &Encoding) -> Vec<i64> {
    encoding.get_ids().iter().map(|&i| i as i64).collect()
}
