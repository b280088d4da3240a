//! A causal LM's tokenizer: the directory's `tokenizer.json` loaded as it is (byte-level BPE,
//! SentencePiece-style BPE, Unigram — whatever pipeline it describes), encoding without special
//! tokens (or with them, as `tokenizer(text)` does) and decoding; and its BOS/EOS tokens as
//! transformers' tokenizer sees them: `tokenizer_config.json`, else `special_tokens_map.json` (a
//! `null` there means "none"), else `config.json`'s ids.
use crate::error::{Error, Result};
use crate::model::hf_folder;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// A special token: its id and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    /// Its id.
    pub id: i64,
    /// Its text (`<s>`), or `#id` when only the id is known.
    pub token: String,
}

/// A `tokenizer.json` with the model's BOS and EOS tokens.
#[derive(Debug, Clone)]
pub struct CausalTokenizer {
    inner: Tokenizer,
    /// The file it was loaded from.
    pub source: PathBuf,
    /// Beginning of sequence, if the tokenizer has one.
    pub bos: Option<SpecialToken>,
    /// End of sequence, if the tokenizer has one.
    pub eos: Option<SpecialToken>,
}

/// What a tokenizer file says about one special token: absent, explicitly none, or a text.
enum Said {
    Absent,
    Null,
    Token(String),
}

fn said(path: &Path, key: &str) -> Result<Said> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(Said::Absent) };
    let v: Value = serde_json::from_str(&text).map_err(|e| Error::json(path, &e))?;
    Ok(match v.get(key) {
        None => Said::Absent,
        Some(Value::Null) => Said::Null,
        Some(Value::String(s)) => Said::Token(s.clone()),
        Some(o) => match o.get("content").and_then(Value::as_str) {
            Some(s) => Said::Token(s.to_string()),
            None => {
                return Err(Error::field(
                    path,
                    key,
                    format!("expected a token string or {{\"content\": ...}}, found {o}"),
                ))
            }
        },
    })
}

impl CausalTokenizer {
    /// Loads `dir/tokenizer.json`; the BOS/EOS fallbacks are `config.json`'s ids.
    pub fn from_dir(dir: &Path, bos_id: Option<i64>, eos_id: Option<i64>) -> Result<Self> {
        let (inner, source) = hf_folder::open_tokenizer(
            dir,
            "a causal LM directory needs the fast tokenizer's tokenizer.json (tokenizer.model alone is not read)",
        )?;
        let mut tok = CausalTokenizer { inner, source, bos: None, eos: None };
        tok.bos = tok.special(dir, "bos_token", bos_id)?;
        tok.eos = tok.special(dir, "eos_token", eos_id)?;
        Ok(tok)
    }

    fn special(&self, dir: &Path, key: &str, fallback: Option<i64>) -> Result<Option<SpecialToken>> {
        for file in ["tokenizer_config.json", "special_tokens_map.json"] {
            let path = dir.join(file);
            match said(&path, key)? {
                Said::Absent => continue,
                Said::Null => return Ok(None),
                Said::Token(token) => {
                    let id = self.inner.token_to_id(&token).ok_or_else(|| {
                        Error::field(&path, key, format!("`{token}` is not in {}", self.source.display()))
                    })?;
                    return Ok(Some(SpecialToken { id: id as i64, token }));
                }
            }
        }
        Ok(fallback.map(|id| SpecialToken {
            id,
            token: self.inner.id_to_token(id as u32).unwrap_or_else(|| format!("#{id}")),
        }))
    }

    /// Tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The ids of `text`, no special tokens added.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        Ok(hf_folder::ids(&hf_folder::encode(&self.inner, &self.source, text, false)?))
    }

    /// The text of `ids`, special tokens skipped: transformers' `tokenizer.decode(ids,
    /// skip_special_tokens=True)` (without `clean_up_tokenization_spaces`, off by default in
    /// transformers 5). Ids the tokenizer does not know (rows of an embedding table padded past
    /// the vocabulary) decode to nothing, as there.
    pub fn decode(&self, ids: &[i64]) -> Result<String> {
        let ids: Vec<u32> = ids.iter().filter_map(|&i| u32::try_from(i).ok()).collect();
        self.inner.decode(&ids, true).map_err(|e| Error::Tokenizer {
            path: self.source.clone(),
            message: format!("decoding {} tokens: {e}", ids.len()),
        })
    }

    /// The ids of `text` with the special tokens `tokenizer.json`'s post-processor adds: what
    /// transformers' `tokenizer(text)` returns (Llama's and Gemma's BOS; nothing for Qwen or
    /// BLOOM).
    pub fn encode_with_special_tokens(&self, text: &str) -> Result<Vec<i64>> {
        Ok(self.encode_marked(text)?.into_iter().map(|(id, _)| id).collect())
    }

    /// The token an answer letter is read from, as IndoMMLU's evaluate.py takes
    /// `tokenizer.encode(letter)[-1]`: the last token of the letter encoded with special tokens,
    /// skipping special tokens the post-processor appends (an EOS there would stand for every
    /// letter).
    pub fn answer_letter_id(&self, letter: &str) -> Result<i64> {
        self.encode_marked(letter)?.into_iter().rev().find(|&(_, special)| !special).map(|(id, _)| id).ok_or_else(
            || Error::Tokenizer { path: self.source.clone(), message: format!("the letter {letter:?} has no tokens") },
        )
    }

    /// Ids with special tokens added, each marked whether the post-processor added it.
    fn encode_marked(&self, text: &str) -> Result<Vec<(i64, bool)>> {
        let enc = hf_folder::encode(&self.inner, &self.source, text, true)?;
        Ok(enc.get_ids().iter().zip(enc.get_special_tokens_mask()).map(|(&i, &m)| (i as i64, m == 1)).collect())
    }

    /// The token scoring starts after (lm-evaluation-harness's `prefix_token_id`): BOS if the
    /// tokenizer has one, else EOS.
    pub fn prefix(&self) -> Option<&SpecialToken> {
        self.bos.as_ref().or(self.eos.as_ref())
    }
}
