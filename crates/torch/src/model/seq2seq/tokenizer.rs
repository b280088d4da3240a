//! An encoder-decoder's tokenizer: the directory's `tokenizer.json` as it is (mT5's Unigram with
//! its post-processor appending `</s>`), its own truncation and padding settings cleared as
//! transformers clears them for a call that asks for neither; a truncating copy gives what
//! `tokenizer(text, truncation=True, max_length=N)` gives.
use crate::error::{Error, Result};
use crate::model::hf_folder;
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// A `tokenizer.json`, encoding as transformers' fast tokenizer does.
#[derive(Debug, Clone)]
pub struct Seq2SeqTokenizer {
    inner: Tokenizer,
    /// The file it was loaded from.
    pub source: PathBuf,
}

impl Seq2SeqTokenizer {
    /// Loads `dir/tokenizer.json`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let (mut inner, source) = hf_folder::open_tokenizer(
            dir,
            "an encoder-decoder directory needs the fast tokenizer's tokenizer.json (spiece.model alone is not read)",
        )?;
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| Error::Tokenizer { path: source.clone(), message: e.to_string() })?;
        Ok(Seq2SeqTokenizer { inner, source })
    }

    /// A copy that truncates every text, special tokens included, to `max_length` tokens, cutting
    /// on the right: transformers' `tokenizer(text, truncation=True, max_length=max_length)`.
    pub fn truncating(&self, max_length: usize) -> Result<Self> {
        // Room for the special tokens a post-processor adds, which the limit counts.
        if max_length < 8 {
            return Err(Error::Tokenizer {
                path: self.source.clone(),
                message: format!("cannot truncate to {max_length} tokens (at least 8)"),
            });
        }
        let mut inner = self.inner.clone();
        let params = TruncationParams {
            direction: TruncationDirection::Right,
            max_length,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        };
        inner.with_truncation(Some(params)).map_err(|e| Error::Tokenizer {
            path: self.source.clone(),
            message: format!("truncating to {max_length} tokens: {e}"),
        })?;
        Ok(Seq2SeqTokenizer { inner, source: self.source.clone() })
    }

    /// Tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The ids of `text`, no special tokens added (`tokenizer(text, add_special_tokens=False)`).
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        self.ids(text, false)
    }

    /// The ids of `text` with the special tokens the post-processor adds (mT5's `</s>` at the
    /// end): transformers' `tokenizer(text)` and `tokenizer.encode(text)`.
    pub fn encode_with_special_tokens(&self, text: &str) -> Result<Vec<i64>> {
        self.ids(text, true)
    }

    /// The id of `token` when the vocabulary (added tokens included) holds it.
    pub fn token_id(&self, token: &str) -> Option<i64> {
        self.inner.token_to_id(token).map(i64::from)
    }

    /// The text of `ids`, special tokens left out when `skip_special_tokens` (transformers' fast
    /// `decode` without `clean_up_tokenization_spaces`); ids outside the vocabulary are refused.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String> {
        let vocab = self.vocab_size() as i64;
        let ids: Vec<u32> = ids
            .iter()
            .map(|&id| match (0..vocab).contains(&id) {
                true => Ok(id as u32),
                false => Err(Error::Tokenizer {
                    path: self.source.clone(),
                    message: format!("decoding id {id}, outside the vocabulary of {vocab}"),
                }),
            })
            .collect::<Result<_>>()?;
        self.inner
            .decode(&ids, skip_special_tokens)
            .map_err(|e| Error::Tokenizer { path: self.source.clone(), message: format!("decoding: {e}") })
    }

    /// The ids of `text`, with the post-processor's special tokens when `special`.
    fn ids(&self, text: &str, special: bool) -> Result<Vec<i64>> {
        Ok(hf_folder::ids(&hf_folder::encode(&self.inner, &self.source, text, special)?))
    }
}
