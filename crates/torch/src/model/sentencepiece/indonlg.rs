//! IndoNLG's tokenizer (`IndoNLGTokenizer`, modules/tokenization_indonlg.py of
//! indobenchmark/indonlg, which IndoBART, IndoBART-v2 and IndoGPT name in their
//! `tokenizer_config.json`) as it behaves under transformers' slow `PreTrainedTokenizer`: ordinary
//! pieces are the SentencePiece BPE model's (`sentencepiece.bpe.model`, exactly 40,000 pieces
//! with `<s>`, `</s>`, `<pad>` and `<unk>` among them); `[java]`, `[sunda]`, `[indonesia]` and
//! `<mask>` are hard-coded as ids 40000 to 40003 right after them, so `vocab_size` is 40,004.
//! The eight special tokens are split out of a text before the model sees the rest (leftmost
//! first, none stripped of spaces), `encode_with_special_tokens` is `<s> X </s>`, and `decode`
//! hands every token, special ones included unless skipped, to SentencePiece's decoder.
use super::processor::SentencePieceModel;
use crate::error::{Error, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The model file's name in an IndoNLG folder.
pub const MODEL_FILE: &str = "sentencepiece.bpe.model";

/// The class `tokenizer_config.json` names.
pub const CLASS: &str = "IndoNLGTokenizer";

/// The pieces the class's hard-coded ids assume (its `vocab_size` is `4 + len(sp_model)`, and
/// under transformers 5 it cannot be built on any other size: listing the vocabulary asks the
/// model for ids 40,000 on, or for ids between its last piece and 40,000).
pub const PIECES: usize = 40_000;

/// The class's hard-coded tokens and ids (`special_tokens_to_ids`).
pub const HARD_CODED: [(&str, u32); 4] =
    [("[java]", 40_000), ("[sunda]", 40_001), ("[indonesia]", 40_002), ("<mask>", 40_003)];

/// The class's special tokens by constructor argument, with their defaults; a
/// `tokenizer_config.json` setting any other value is refused.
const DEFAULTS: [(&str, &str); 7] = [
    ("bos_token", "<s>"),
    ("eos_token", "</s>"),
    ("unk_token", "<unk>"),
    ("sep_token", "</s>"),
    ("pad_token", "<pad>"),
    ("cls_token", "<s>"),
    ("mask_token", "<mask>"),
];

/// IndoNLG's tokenizer.
#[derive(Debug, Clone)]
pub struct IndoNlgTokenizer {
    sp: SentencePieceModel,
    /// The added (special) tokens and their ids: transformers' `added_tokens_decoder`.
    added: Vec<(&'static str, u32)>,
    bos: u32,
    eos: u32,
}

/// Whether `dir` holds IndoNLG's tokenizer: its model file and a `tokenizer_config.json` naming
/// the class. `Err` for a config that cannot be read; `Ok(None)` for a folder of another kind,
/// `Ok(Some(class))` with the class it names when that is another.
pub fn folder_class(dir: &Path) -> Result<Option<String>> {
    let config = dir.join("tokenizer_config.json");
    if !dir.join(MODEL_FILE).is_file() || !config.is_file() {
        return Ok(None);
    }
    let value = indolm_core::json_fields::read_object(&config)?;
    Ok(value.get("tokenizer_class").and_then(Value::as_str).map(str::to_string))
}

impl IndoNlgTokenizer {
    /// The tokenizer of the folder `dir`: `sentencepiece.bpe.model`, with `tokenizer_config.json`
    /// checked to name the class and to keep its special tokens.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config_path = dir.join("tokenizer_config.json");
        let config = indolm_core::json_fields::read_object(&config_path)?;
        check_config(&config_path, &config)?;
        Self::open(&dir.join(MODEL_FILE))
    }

    /// The tokenizer on the SentencePiece model file `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let sp = SentencePieceModel::open(path)?;
        let fail = |message: String| Error::Tokenizer { path: path.to_path_buf(), message };
        if sp.len() != PIECES {
            return Err(fail(format!(
                "{} pieces, expected {PIECES}: IndoNLGTokenizer hard-codes [java], [sunda], [indonesia] and <mask> as ids 40000 to 40003, right after the model's pieces",
                sp.len()
            )));
        }
        let mut added = Vec::new();
        for (_, token) in DEFAULTS {
            if added.iter().any(|(t, _)| *t == token) {
                continue;
            }
            let id = HARD_CODED.iter().find(|(t, _)| *t == token).map(|&(_, id)| id);
            let id = match id {
                Some(id) => id,
                None if sp.contains(token) => sp.piece_to_id(token),
                None => return Err(fail(format!("has no piece {token}, which IndoNLGTokenizer takes from it"))),
            };
            added.push((token, id));
        }
        for (token, id) in HARD_CODED {
            if !added.iter().any(|(t, _)| *t == token) {
                added.push((token, id));
            }
        }
        let id_of = |token: &str| added.iter().find(|(t, _)| *t == token).map(|&(_, id)| id).unwrap_or_default();
        let (bos, eos) = (id_of("<s>"), id_of("</s>"));
        Ok(IndoNlgTokenizer { sp, added, bos, eos })
    }

    /// The SentencePiece model file.
    pub fn source(&self) -> &Path {
        self.sp.path()
    }

    /// The SentencePiece model.
    pub fn model(&self) -> &SentencePieceModel {
        &self.sp
    }

    /// `vocab_size`: the model's pieces and the four hard-coded tokens.
    pub fn vocab_size(&self) -> usize {
        self.sp.len() + HARD_CODED.len()
    }

    /// The id of an added token.
    fn added_id(&self, token: &str) -> Option<u32> {
        self.added.iter().find(|(t, _)| *t == token).map(|&(_, id)| id)
    }

    /// `convert_tokens_to_ids` of one token: an added token's id, a hard-coded one's, else the
    /// model's `PieceToId` (the unknown id for a piece it lacks).
    fn token_to_id(&self, token: &str) -> u32 {
        self.added_id(token)
            .or_else(|| HARD_CODED.iter().find(|(t, _)| *t == token).map(|&(_, id)| id))
            .unwrap_or_else(|| self.sp.piece_to_id(token))
    }

    /// `tokenize(text)`: the special tokens split out, the rest by the SentencePiece model.
    pub fn tokenize(&self, text: &str) -> Result<Vec<String>> {
        let mut tokens = Vec::new();
        for (chunk, special) in split_on(text, &self.added) {
            match special {
                true => tokens.push(chunk.to_string()),
                false => tokens.extend(self.sp.encode(chunk)?.into_iter().map(|p| p.piece)),
            }
        }
        Ok(tokens)
    }

    /// `encode(text, add_special_tokens=False)`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.tokenize(text)?.iter().map(|t| self.token_to_id(t)).collect())
    }

    /// `encode(text)`: `<s> X </s>` (`build_inputs_with_special_tokens`).
    pub fn encode_with_special_tokens(&self, text: &str) -> Result<Vec<u32>> {
        Ok([vec![self.bos], self.encode(text)?, vec![self.eos]].concat())
    }

    /// The id of `token` when it is one of the class's tokens or a piece of the model.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        match self.sp.contains(token) || self.added_id(token).is_some() || HARD_CODED.iter().any(|(t, _)| *t == token) {
            true => Some(self.token_to_id(token)),
            false => None,
        }
    }

    /// `decode(ids, skip_special_tokens)`: each id's token (an added token's text, else the
    /// model's piece; the special tokens left out when skipping, `<unk>` among them), all decoded
    /// together by SentencePiece. An id that is neither a piece nor hard-coded is refused, as
    /// the model's `IdToPiece` refuses it.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String> {
        let mut tokens: Vec<&str> = Vec::with_capacity(ids.len());
        for &id in ids {
            let added = self.added.iter().find(|&&(_, a)| i64::from(a) == id).map(|&(t, _)| t);
            match added {
                Some(_) if skip_special_tokens => {}
                Some(token) => tokens.push(token),
                None => {
                    let piece = u32::try_from(id).ok().and_then(|id| self.sp.id_to_piece(id));
                    tokens.push(piece.ok_or_else(|| Error::Tokenizer {
                        path: PathBuf::from(self.source()),
                        message: format!(
                            "decoding id {id}, which is neither one of the model's {} pieces nor one of the ids 40000 to 40003",
                            self.sp.len()
                        ),
                    })?);
                }
            }
        }
        Ok(self.sp.decode_pieces(&tokens))
    }
}

/// `text` cut around the `added` tokens, as transformers' `Trie.split` cuts it for these: the
/// leftmost token found first (none of them starts inside another, so that is also the longest),
/// empty pieces left out; each piece marked whether it is a token.
fn split_on<'t>(text: &'t str, added: &[(&str, u32)]) -> Vec<(&'t str, bool)> {
    let mut out = Vec::new();
    let (mut start, mut at) = (0, 0);
    while at < text.len() {
        let found = added.iter().map(|(t, _)| *t).filter(|t| text[at..].starts_with(t)).max_by_key(|t| t.len());
        match found {
            Some(token) => {
                if start < at {
                    out.push((&text[start..at], false));
                }
                out.push((&text[at..at + token.len()], true));
                at += token.len();
                start = at;
            }
            None => at += text[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    if start < text.len() {
        out.push((&text[start..], false));
    }
    out
}

/// Refuses a `tokenizer_config.json` that names another class, or changes a special token
/// (indolm reads the class with its defaults).
fn check_config(path: &Path, config: &Value) -> Result<()> {
    let class = config.get("tokenizer_class").and_then(Value::as_str);
    if class != Some(CLASS) {
        return Err(Error::field(
            path,
            "tokenizer_class",
            format!("expected \"{CLASS}\", found {}", config.get("tokenizer_class").unwrap_or(&Value::Null)),
        ));
    }
    let content = |v: &Value| v.as_str().or_else(|| v.get("content").and_then(Value::as_str)).map(str::to_string);
    for (key, default) in DEFAULTS {
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            if content(v).as_deref() != Some(default) {
                return Err(Error::field(
                    path,
                    key,
                    format!("IndoNLGTokenizer's is \"{default}\", found {v}; indolm reads the class with its own"),
                ));
            }
        }
    }
    if let Some(v) = config.get("additional_special_tokens").filter(|v| !v.is_null()) {
        let found: Option<Vec<String>> = v.as_array().map(|a| a.iter().filter_map(content).collect());
        let expected: Vec<String> = HARD_CODED.iter().map(|(t, _)| t.to_string()).collect();
        if found.as_ref() != Some(&expected) {
            return Err(Error::field(
                path,
                "additional_special_tokens",
                format!("IndoNLGTokenizer's are {expected:?}, found {v}; indolm reads the class with its own"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_tokens_are_cut_out_leftmost_first() {
        let added = [("<s>", 0), ("</s>", 2), ("<mask>", 40003), ("[java]", 40000)];
        let cut = |t| split_on(t, &added);
        assert_eq!(cut("a<s>b"), vec![("a", false), ("<s>", true), ("b", false)]);
        assert_eq!(cut("<<s>></s>"), vec![("<", false), ("<s>", true), (">", false), ("</s>", true)]);
        assert_eq!(cut("[java] x <mask>"), vec![("[java]", true), (" x ", false), ("<mask>", true)]);
        assert_eq!(cut(""), vec![]);
        assert_eq!(cut("é<s"), vec![("é<s", false)]);
    }

    #[test]
    fn a_config_changing_the_class_or_its_tokens_is_refused() {
        let path = Path::new("tokenizer_config.json");
        let check = |v: Value| check_config(path, &v).map_err(|e| e.to_string());
        assert!(check(serde_json::json!({"tokenizer_class": "IndoNLGTokenizer"})).is_ok());
        assert!(check(serde_json::json!({"tokenizer_class": "IndoNLGTokenizer", "bos_token": {"content": "<s>"},
            "additional_special_tokens": ["[java]", "[sunda]", "[indonesia]", "<mask>"]}))
        .is_ok());
        let e = check(serde_json::json!({"tokenizer_class": "MBart50Tokenizer"})).unwrap_err();
        assert_eq!(
            e,
            "tokenizer_config.json: field `tokenizer_class`: expected \"IndoNLGTokenizer\", found \"MBart50Tokenizer\""
        );
        let e = check(serde_json::json!({"tokenizer_class": "IndoNLGTokenizer", "eos_token": "<eos>"})).unwrap_err();
        assert!(e.contains("field `eos_token`: IndoNLGTokenizer's is \"</s>\", found \"<eos>\""), "{e}");
        let e = check(serde_json::json!({"tokenizer_class": "IndoNLGTokenizer", "additional_special_tokens": []}))
            .unwrap_err();
        assert!(e.contains("additional_special_tokens"), "{e}");
    }
}
