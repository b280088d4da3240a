//! An encoder-decoder's tokenizer: the directory's `tokenizer.json` as it is (mT5's Unigram with
//! its post-processor appending `</s>`), its own truncation and padding settings cleared as
//! transformers clears them for a call that asks for neither; a truncating copy gives what
//! `tokenizer(text, truncation=True, max_length=N)` gives. A folder without `tokenizer.json`
//! whose `tokenizer_config.json` names `IndoNLGTokenizer` (IndoBART-v2's, IndoGPT's) is read
//! from its `sentencepiece.bpe.model` as that class reads it ([`IndoNlgTokenizer`]).
use crate::error::{Error, Result};
use crate::model::hf_folder;
use crate::model::sentencepiece::indonlg::{self, IndoNlgTokenizer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// An encoder-decoder's tokenizer: a `tokenizer.json` encoding as transformers' fast tokenizer
/// does, or IndoNLG's SentencePiece tokenizer as its class does.
#[derive(Debug, Clone)]
pub struct Seq2SeqTokenizer {
    inner: Inner,
    /// The file it was loaded from (`tokenizer.json`, or IndoNLG's `sentencepiece.bpe.model`).
    pub source: PathBuf,
}

/// The two kinds of folder tokenizer.
#[derive(Debug, Clone)]
enum Inner {
    /// `tokenizer.json` (boxed: a `Tokenizer` is over a kilobyte).
    Fast(Box<Tokenizer>),
    /// `sentencepiece.bpe.model` read as `IndoNLGTokenizer`.
    IndoNlg(Arc<IndoNlgTokenizer>),
}

impl Seq2SeqTokenizer {
    /// Loads `dir/tokenizer.json`; without one, IndoNLG's `sentencepiece.bpe.model` when
    /// `tokenizer_config.json` names `IndoNLGTokenizer`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        if !dir.join("tokenizer.json").exists() {
            match indonlg::folder_class(dir)? {
                Some(class) if class == indonlg::CLASS => {
                    let tokenizer = IndoNlgTokenizer::from_dir(dir)?;
                    let source = tokenizer.source().to_path_buf();
                    return Ok(Seq2SeqTokenizer { inner: Inner::IndoNlg(Arc::new(tokenizer)), source });
                }
                Some(class) => {
                    return Err(Error::MissingFile {
                        path: dir.join("tokenizer.json"),
                        hint: format!(
                            "an encoder-decoder directory needs tokenizer.json; its {} is read only for {}, and tokenizer_config.json names {class}",
                            indonlg::MODEL_FILE,
                            indonlg::CLASS
                        ),
                    })
                }
                None => {}
            }
        }
        let (mut inner, source) = hf_folder::open_tokenizer(
            dir,
            "an encoder-decoder directory needs the fast tokenizer's tokenizer.json, or IndoNLG's sentencepiece.bpe.model with a tokenizer_config.json naming IndoNLGTokenizer (spiece.model alone is not read)",
        )?;
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| Error::Tokenizer { path: source.clone(), message: e.to_string() })?;
        Ok(Seq2SeqTokenizer { inner: Inner::Fast(Box::new(inner)), source })
    }

    /// The `tokenizer.json` tokenizer, or an error saying `what` IndoNLG's does not do.
    fn fast(&self, what: &str) -> Result<&Tokenizer> {
        match &self.inner {
            Inner::Fast(t) => Ok(t),
            Inner::IndoNlg(_) => Err(Error::Tokenizer {
                path: self.source.clone(),
                message: format!("IndoNLG's tokenizer does not {what} (only a tokenizer.json does)"),
            }),
        }
    }

    /// A copy that truncates every text, special tokens included, to `max_length` tokens, cutting
    /// on the right: transformers' `tokenizer(text, truncation=True, max_length=max_length)`.
    /// Refused for IndoNLG's tokenizer, which no caller truncates.
    pub fn truncating(&self, max_length: usize) -> Result<Self> {
        let fast = self.fast("truncate")?;
        // Room for the special tokens a post-processor adds, which the limit counts.
        if max_length < 8 {
            return Err(Error::Tokenizer {
                path: self.source.clone(),
                message: format!("cannot truncate to {max_length} tokens (at least 8)"),
            });
        }
        let mut inner = Tokenizer::clone(fast);
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
        Ok(Seq2SeqTokenizer { inner: Inner::Fast(Box::new(inner)), source: self.source.clone() })
    }

    /// Tokens in the vocabulary, added tokens included (IndoNLG's: its model's pieces and the
    /// four hard-coded tokens).
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Fast(t) => t.get_vocab_size(true),
            Inner::IndoNlg(t) => t.vocab_size(),
        }
    }

    /// The ids of `text`, no special tokens added (`tokenizer(text, add_special_tokens=False)`).
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        self.ids(text, false)
    }

    /// The ids of `text` with the special tokens the post-processor adds (mT5's `</s>` at the
    /// end; IndoNLG's `<s>` and `</s>` around it): transformers' `tokenizer(text)` and
    /// `tokenizer.encode(text)`.
    pub fn encode_with_special_tokens(&self, text: &str) -> Result<Vec<i64>> {
        self.ids(text, true)
    }

    /// The id of `token` when the vocabulary (added tokens included) holds it.
    pub fn token_id(&self, token: &str) -> Option<i64> {
        match &self.inner {
            Inner::Fast(t) => t.token_to_id(token).map(i64::from),
            Inner::IndoNlg(t) => t.token_id(token).map(i64::from),
        }
    }

    /// The text of `ids`, special tokens left out when `skip_special_tokens` (transformers' fast
    /// `decode` without `clean_up_tokenization_spaces`, or IndoNLG's class's); ids outside the
    /// vocabulary are refused.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String> {
        let inner = match &self.inner {
            Inner::Fast(t) => t,
            Inner::IndoNlg(t) => return t.decode(ids, skip_special_tokens),
        };
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
        inner
            .decode(&ids, skip_special_tokens)
            .map_err(|e| Error::Tokenizer { path: self.source.clone(), message: format!("decoding: {e}") })
    }

    /// The ids of `text`, with the post-processor's special tokens when `special`.
    fn ids(&self, text: &str, special: bool) -> Result<Vec<i64>> {
        match &self.inner {
            Inner::Fast(t) => Ok(hf_folder::ids(&hf_folder::encode(t, &self.source, text, special)?)),
            Inner::IndoNlg(t) => {
                let ids = if special { t.encode_with_special_tokens(text)? } else { t.encode(text)? };
                Ok(ids.into_iter().map(i64::from).collect())
            }
        }
    }
}
