//! The tokenizer: an uncased BERT WordPiece loaded from an HF `tokenizer.json` or a BERT
//! `vocab.txt` through the `tokenizers` crate, or any other `tokenizer.json` (XLM-R's
//! SentencePiece Unigram) whose special tokens are named by the directory's
//! `special_tokens_map.json` / `tokenizer_config.json`, its post-processor, or BERT's or
//! RoBERTa's usual names; with batch encoding into padded tensors and saving in the layout
//! transformers' `AutoTokenizer` loads.
use crate::error::{Error, Result};
use indolm_core::files::{read_to_string, write_atomic, write_json};
use indolm_core::outputs::RunFile;
use std::path::{Path, PathBuf};
use tch::Tensor;
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{AddedToken, Tokenizer};

/// BERT's special tokens; every vocabulary must have them.
pub(crate) const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// RoBERTa's (XLM-R's) names for the special tokens, in `SPECIAL_TOKENS`' order.
pub(crate) const ROBERTA_SPECIAL_TOKENS: [&str; 5] = ["<pad>", "<unk>", "<s>", "</s>", "<mask>"];

/// The files [`TextTokenizer::save`] writes (`vocab.txt` for WordPiece vocabularies).
pub(crate) const TOKENIZER_FILES: [&str; 4] =
    ["tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"];

indolm_core::declare_run_files!(
    TOKENIZER_DIRECTORY_FILES: RunFile::Named(TOKENIZER_FILES[0]),
    RunFile::Named(TOKENIZER_FILES[1]),
    RunFile::Named(TOKENIZER_FILES[2]),
    RunFile::Named(TOKENIZER_FILES[3]),
);

/// Whether [`TextTokenizer::save`] writes files of this name.
pub fn is_tokenizer_file(name: &str) -> bool {
    TOKENIZER_FILES.contains(&name)
}

/// The special-token keys of `special_tokens_map.json` / `tokenizer_config.json`, in
/// `SPECIAL_TOKENS`' order.
const SPECIAL_KEYS: [&str; 5] = ["pad_token", "unk_token", "cls_token", "sep_token", "mask_token"];

/// The text of the special tokens (`[PAD]` … for BERT, `<pad>` … for XLM-R), in the order of
/// [`SpecialIds`]' fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialNames(pub [String; 5]);

impl SpecialNames {
    /// The mask token's text (`[MASK]`, `<mask>`).
    pub fn mask(&self) -> &str {
        &self.0[4]
    }
}

/// Ids of the special tokens BERT needs (XLM-R's `<pad> <unk> <s> </s> <mask>` play the same
/// parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// `[PAD]`: fills rows up to the batch's longest.
    pub pad: i64,
    /// `[UNK]`: a word WordPiece cannot split into vocabulary pieces.
    pub unk: i64,
    /// `[CLS]`: first token of every input.
    pub cls: i64,
    /// `[SEP]`: last token of every input, and between the two texts of a pair.
    pub sep: i64,
    /// `[MASK]`: stands in for tokens to be predicted.
    pub mask: i64,
}

/// A padded batch: `input_ids`, `token_type_ids` and `attention_mask`, all [batch, longest].
#[derive(Debug)]
pub struct EncodedBatch {
    /// Token ids [batch, longest] (int64), padded with `[PAD]`.
    pub input_ids: Tensor,
    /// Segment ids [batch, longest]: 0 for the first text (and padding), 1 for the second of a pair.
    pub token_type_ids: Tensor,
    /// 1 at real tokens, 0 at padding [batch, longest].
    pub attention_mask: Tensor,
    /// Real (unpadded) length of each row, special tokens included.
    pub lengths: Vec<usize>,
}

/// A BERT WordPiece tokenizer (HF `tokenizers` pipeline) with the ids of its special tokens.
#[derive(Debug, Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    /// The file it was loaded from, for error messages.
    pub source: PathBuf,
    /// Ids of the special tokens, checked present when loaded.
    pub special: SpecialIds,
    /// Their texts, saved in `special_tokens_map.json`.
    pub special_names: SpecialNames,
    /// `tokenizer_config.json`'s `tokenizer_class` when one was read (saved back); WordPiece
    /// tokenizers are saved as `BertTokenizer`.
    pub tokenizer_class: Option<String>,
    /// Whether the normalizer lowercases (saved as `do_lower_case`).
    pub lowercase: bool,
}

impl TextTokenizer {
    /// Loads `tokenizer.json` if the directory has one, else `vocab.txt` (lowercasing unless
    /// `tokenizer_config.json` says `"do_lower_case": false`).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let json = dir.join("tokenizer.json");
        let vocab = dir.join("vocab.txt");
        if json.exists() {
            let mut tokenizer = Self::from_tokenizer_json_declared(&json, declared_special_names(dir)?)?;
            tokenizer.tokenizer_class = read_tokenizer_class(dir)?;
            // HF's slow tokenizer reads vocab.txt and its fast one tokenizer.json: when both are
            // here they must be the same vocabulary (a cut-short copy of one is not).
            if let Ok(text) = std::fs::read_to_string(&vocab) {
                let lines = text.lines().count();
                if lines != tokenizer.vocab_size() {
                    return Err(Error::invalid(
                        &vocab,
                        format!(
                            "{lines} tokens, but tokenizer.json beside it has {}: one of the two is damaged or from another model; copy the directory again",
                            tokenizer.vocab_size()
                        ),
                    ));
                }
            }
            return Ok(tokenizer);
        }
        if vocab.exists() {
            return Self::from_vocab_txt(&vocab, read_do_lower_case(dir)?);
        }
        Err(Error::MissingFile { path: vocab, hint: "a model directory needs tokenizer.json or vocab.txt".into() })
    }

    /// A model directory, a `tokenizer.json`, or a `vocab.txt` (uncased).
    pub fn from_path(path: &Path) -> Result<Self> {
        if path.is_dir() {
            Self::from_dir(path)
        } else if path.extension().is_some_and(|e| e == "json") {
            Self::from_tokenizer_json(path)
        } else {
            Self::from_vocab_txt(path, true)
        }
    }

    /// Loads an HF `tokenizer.json`; `lowercase` comes from its BERT normalizer (false for any
    /// other normalizer).
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        Self::from_tokenizer_json_declared(path, [None, None, None, None, None])
    }

    /// As `from_tokenizer_json`, with special-token texts a directory's files declare.
    fn from_tokenizer_json_declared(path: &Path, declared: [Option<String>; 5]) -> Result<Self> {
        if !path.exists() {
            return Err(Error::MissingFile { path: path.into(), hint: String::new() });
        }
        let inner =
            Tokenizer::from_file(path).map_err(|e| Error::Tokenizer { path: path.into(), message: e.to_string() })?;
        let lowercase = match inner.get_normalizer() {
            Some(tokenizers::NormalizerWrapper::BertNormalizer(n)) => n.lowercase,
            _ => false,
        };
        Self::with_special_ids(inner, path, lowercase, declared)
    }

    /// The pipeline HF builds from a `vocab.txt` (see `bert_pipeline`), WordPiece with `[UNK]`
    /// and `##` continuation.
    pub fn from_vocab_txt(path: &Path, lowercase: bool) -> Result<Self> {
        if !path.exists() {
            return Err(Error::MissingFile { path: path.into(), hint: String::new() });
        }
        let path_str = path.to_str().ok_or_else(|| Error::invalid(path, "path is not valid UTF-8"))?;
        let model = WordPiece::from_file(path_str)
            .unk_token("[UNK]".into())
            .build()
            .map_err(|e| Error::Tokenizer { path: path.into(), message: e.to_string() })?;
        let inner = bert_pipeline(model, lowercase);
        Self::with_special_ids(inner, path, lowercase, Default::default())
    }

    /// Wraps a tokenizer built in code (e.g. just trained), checking its special tokens.
    pub(crate) fn from_tokenizer(inner: Tokenizer, source: &Path, lowercase: bool) -> Result<Self> {
        Self::with_special_ids(inner, source, lowercase, Default::default())
    }

    /// Finds the special tokens: each as `declared` (a directory's files) if it is, else the
    /// post-processor's `cls`/`sep` (BERT's, RoBERTa's or a template's first and last special
    /// token), else BERT's name if the vocabulary has it, else RoBERTa's.
    fn with_special_ids(inner: Tokenizer, path: &Path, lowercase: bool, declared: [Option<String>; 5]) -> Result<Self> {
        let (cls, sep) = post_processor_cls_sep(&inner);
        let from_processor = [None, None, cls, sep, None];
        let names: Vec<String> = (0..5)
            .map(|i| {
                declared[i].clone().or_else(|| from_processor[i].clone()).unwrap_or_else(|| {
                    if inner.token_to_id(SPECIAL_TOKENS[i]).is_some()
                        || inner.token_to_id(ROBERTA_SPECIAL_TOKENS[i]).is_none()
                    {
                        SPECIAL_TOKENS[i].to_string()
                    } else {
                        ROBERTA_SPECIAL_TOKENS[i].to_string()
                    }
                })
            })
            .collect();
        let id = |i: usize| {
            let token = &names[i];
            inner.token_to_id(token).map(i64::from).ok_or_else(|| Error::Tokenizer {
                path: path.into(),
                message: format!(
                    "the vocabulary has no {token} token for its {} (BERT needs {}, XLM-R {})",
                    SPECIAL_KEYS[i],
                    SPECIAL_TOKENS.join(" "),
                    ROBERTA_SPECIAL_TOKENS.join(" ")
                ),
            })
        };
        let special = SpecialIds { pad: id(0)?, unk: id(1)?, cls: id(2)?, sep: id(3)?, mask: id(4)? };
        let special_names = SpecialNames(names.try_into().expect("five names"));
        Ok(TextTokenizer { inner, source: path.into(), special, special_names, tokenizer_class: None, lowercase })
    }

    /// `text` with BERT's `[MASK]` written as this tokenizer's mask token (`<mask>` for XLM-R),
    /// so users mark masks the same way whatever the model.
    pub fn with_model_mask(&self, text: &str) -> String {
        if self.special_names.mask() == "[MASK]" {
            text.to_string()
        } else {
            text.replace("[MASK]", self.special_names.mask())
        }
    }

    /// Whether the model is a WordPiece (BERT's `vocab.txt` describes it).
    fn is_wordpiece(&self) -> bool {
        matches!(self.inner.get_model(), tokenizers::ModelWrapper::WordPiece(_))
    }

    /// Number of ids the tokenizer can produce (largest id + 1).
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab(true).values().map(|&i| i as usize + 1).max().unwrap_or(0)
    }

    /// The id of a vocabulary entry (special tokens included), if it has one.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The vocabulary entry with id `id`, if any.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    fn encode_input<'s>(
        &self,
        input: impl Into<tokenizers::EncodeInput<'s>>,
        special: bool,
    ) -> Result<tokenizers::Encoding> {
        self.inner
            .encode(input, special)
            .map_err(|e| Error::Tokenizer { path: self.source.clone(), message: e.to_string() })
    }

    /// Ids of one text with `[CLS]` and `[SEP]`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.encode_input(text, true)?.get_ids().to_vec())
    }

    /// Ids and token type ids of a pair: `[CLS] a [SEP] b [SEP]`, types 0 then 1.
    pub fn encode_pair(&self, a: &str, b: &str) -> Result<(Vec<u32>, Vec<u32>)> {
        let enc = self.encode_input((a, b), true)?;
        Ok((enc.get_ids().to_vec(), enc.get_type_ids().to_vec()))
    }

    /// Ids of one text with `[CLS]` and `[SEP]`, and the word each piece belongs to (`None` for
    /// the special tokens): transformers' `word_ids()`.
    pub fn encode_with_word_ids(&self, text: &str) -> Result<(Vec<u32>, Vec<Option<u32>>)> {
        let enc = self.encode_input(text, true)?;
        Ok((enc.get_ids().to_vec(), enc.get_word_ids().to_vec()))
    }

    /// Word-piece ids without special tokens.
    pub fn encode_plain(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.encode_input(text, false)?.get_ids().to_vec())
    }

    /// Word pieces (strings) without special tokens, with the word index of each piece.
    pub fn pieces(&self, text: &str) -> Result<(Vec<String>, Vec<Option<u32>>)> {
        let enc = self.encode_input(text, false)?;
        Ok((enc.get_tokens().to_vec(), enc.get_word_ids().to_vec()))
    }

    /// Word-piece ids of many texts (no special tokens), encoded in parallel.
    pub(crate) fn encode_plain_batch(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .inner
            .encode_batch(texts.to_vec(), false)
            .map_err(|e| Error::Tokenizer { path: self.source.clone(), message: e.to_string() })?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// The tokenizer as `tokenizer.json` text.
    pub(crate) fn to_json(&self) -> Result<String> {
        self.inner.to_string(false).map_err(|e| Error::Tokenizer { path: self.source.clone(), message: e.to_string() })
    }

    /// Text of `ids` through the tokenizer's decoder (WordPiece: `##` pieces joined to the word
    /// before), special tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| Error::Tokenizer { path: self.source.clone(), message: e.to_string() })
    }

    /// Encodes texts (or pairs, when `seconds` is given) into a batch padded to its longest row.
    /// Each row is truncated to `max_len` tokens, special tokens included; pairs are
    /// truncated longest-first, as HF does.
    pub fn batch(&self, firsts: &[&str], seconds: Option<&[&str]>, max_len: usize) -> Result<EncodedBatch> {
        if max_len < 3 {
            return Err(Error::data("tokenizer batch", format!("max_len must be at least 3, found {max_len}")));
        }
        let mut rows: Vec<(Vec<i64>, Vec<i64>)> = Vec::with_capacity(firsts.len());
        for (i, a) in firsts.iter().enumerate() {
            let row = match seconds {
                None => self.single_row(a, max_len)?,
                Some(bs) => {
                    let mut ids_a: Vec<i64> = self.encode_plain(a)?.into_iter().map(i64::from).collect();
                    let mut ids_b: Vec<i64> = self.encode_plain(bs[i])?.into_iter().map(i64::from).collect();
                    while ids_a.len() + ids_b.len() > max_len.saturating_sub(3) {
                        if ids_a.len() >= ids_b.len() {
                            ids_a.pop();
                        } else {
                            ids_b.pop();
                        }
                    }
                    let mut ids = vec![self.special.cls];
                    ids.extend(&ids_a);
                    ids.push(self.special.sep);
                    let mut types = vec![0; ids.len()];
                    ids.extend(&ids_b);
                    ids.push(self.special.sep);
                    types.resize(ids.len(), 1);
                    (ids, types)
                }
            };
            rows.push(row);
        }
        Ok(pad_rows(rows, self.special.pad))
    }

    /// One text's row of a batch, before padding: `[CLS] text [SEP]` cut to `max_len` tokens
    /// (at least 3), and its token types (all 0).
    pub fn single_row(&self, text: &str, max_len: usize) -> Result<(Vec<i64>, Vec<i64>)> {
        let pieces = self.encode_plain(text)?;
        let mut ids = Vec::with_capacity(pieces.len().min(max_len.saturating_sub(2)) + 2);
        ids.push(self.special.cls);
        ids.extend(pieces.into_iter().take(max_len.saturating_sub(2)).map(i64::from));
        ids.push(self.special.sep);
        let types = vec![0; ids.len()];
        Ok((ids, types))
    }

    /// Writes `tokenizer.json`, `vocab.txt`, `tokenizer_config.json` and
    /// `special_tokens_map.json` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let json = self
            .inner
            .to_string(true)
            .map_err(|e| Error::Tokenizer { path: self.source.clone(), message: e.to_string() })?;
        write_atomic(&dir.join("tokenizer.json"), json.as_bytes())?;
        let specials: serde_json::Map<String, serde_json::Value> =
            SPECIAL_KEYS.iter().zip(&self.special_names.0).map(|(k, v)| (k.to_string(), v.clone().into())).collect();
        let mut config = if self.is_wordpiece() {
            write_atomic(&dir.join("vocab.txt"), self.vocab_txt()?.as_bytes())?;
            serde_json::json!({
                "tokenizer_class": self.tokenizer_class.as_deref().unwrap_or("BertTokenizer"),
                "do_lower_case": self.lowercase,
                "strip_accents": null,
                "tokenize_chinese_chars": true,
                "model_max_length": 512,
            })
        } else {
            // tokenizer.json is the whole tokenizer; the class only tells AutoTokenizer which
            // wrapper to put around it.
            let class = self.tokenizer_class.as_deref().unwrap_or("PreTrainedTokenizerFast");
            let mut config = serde_json::json!({"tokenizer_class": class, "model_max_length": 512});
            if let (Some(bos), Some(eos)) =
                (self.id_to_token(self.special.cls as u32), self.id_to_token(self.special.sep as u32))
            {
                config["bos_token"] = bos.into();
                config["eos_token"] = eos.into();
            }
            config
        };
        config.as_object_mut().expect("an object").extend(specials.clone());
        let specials = serde_json::Value::Object(specials);
        write_json(&dir.join("tokenizer_config.json"), &config)?;
        write_json(&dir.join("special_tokens_map.json"), &specials)
    }

    /// One token a line, line number = id; fails if the ids have gaps.
    fn vocab_txt(&self) -> Result<String> {
        let vocab = self.inner.get_vocab(true);
        let mut by_id = vec![None; self.vocab_size()];
        for (token, id) in vocab {
            by_id[id as usize] = Some(token);
        }
        let mut out = String::new();
        for (id, token) in by_id.into_iter().enumerate() {
            let token = token.ok_or_else(|| Error::Tokenizer {
                path: self.source.clone(),
                message: format!("no token has id {id}; cannot write vocab.txt"),
            })?;
            out.push_str(&token);
            out.push('\n');
        }
        Ok(out)
    }
}

/// The BERT pipeline around a WordPiece model, as HF builds it from a `vocab.txt`: BERT
/// normalizer (clean text, CJK splitting, lowercasing and accent stripping when uncased), BERT
/// pre-tokenizer, the special tokens, `[CLS] A [SEP] B [SEP]` post-processing, WordPiece decoder.
pub(crate) fn bert_pipeline(model: WordPiece, lowercase: bool) -> Tokenizer {
    let mut inner = Tokenizer::new(model);
    inner.with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)));
    inner.with_pre_tokenizer(Some(BertPreTokenizer));
    inner.with_decoder(Some(WordPieceDecoder::default()));
    let special: Vec<AddedToken> = SPECIAL_TOKENS.iter().map(|t| AddedToken::from(*t, true)).collect();
    inner.add_special_tokens(&special);
    if let (Some(cls), Some(sep)) = (inner.token_to_id("[CLS]"), inner.token_to_id("[SEP]")) {
        inner.with_post_processor(Some(BertProcessing::new(("[SEP]".into(), sep), ("[CLS]".into(), cls))));
    }
    inner
}

/// Pads rows of (ids, token types) to the longest into tensors, with the attention mask.
pub fn pad_rows(rows: Vec<(Vec<i64>, Vec<i64>)>, pad_id: i64) -> EncodedBatch {
    let longest = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let n = rows.len();
    let (mut ids, mut types, mut mask) =
        (Vec::with_capacity(n * longest), Vec::with_capacity(n * longest), Vec::with_capacity(n * longest));
    let mut lengths = Vec::with_capacity(n);
    for (row_ids, row_types) in rows {
        let pad = longest - row_ids.len();
        lengths.push(row_ids.len());
        mask.extend(std::iter::repeat_n(1i64, row_ids.len()).chain(std::iter::repeat_n(0, pad)));
        ids.extend(row_ids.into_iter().chain(std::iter::repeat_n(pad_id, pad)));
        types.extend(row_types.into_iter().chain(std::iter::repeat_n(0, pad)));
    }
    let shape = [n as i64, longest as i64];
    EncodedBatch {
        input_ids: Tensor::from_slice(&ids).view(shape),
        token_type_ids: Tensor::from_slice(&types).view(shape),
        attention_mask: Tensor::from_slice(&mask).view(shape),
        lengths,
    }
}

/// The `cls` and `sep` tokens of the post-processor (BERT's or RoBERTa's processing; a
/// template's first and last special token of a single text), if it names them.
fn post_processor_cls_sep(inner: &Tokenizer) -> (Option<String>, Option<String>) {
    let Some(value) = inner.get_post_processor().and_then(|p| serde_json::to_value(p).ok()) else {
        return (None, None);
    };
    let token = |v: &serde_json::Value| v.get(0).and_then(|t| t.as_str()).map(String::from);
    match value.get("type").and_then(|t| t.as_str()) {
        Some("BertProcessing" | "RobertaProcessing") => (token(&value["cls"]), token(&value["sep"])),
        Some("TemplateProcessing") => {
            let specials: Vec<String> = value["single"]
                .as_array()
                .map(|pieces| {
                    pieces
                        .iter()
                        .filter_map(|p| p.get("SpecialToken").and_then(|s| s["id"].as_str()).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            match specials.as_slice() {
                [first, .., last] => (Some(first.clone()), Some(last.clone())),
                _ => (None, None),
            }
        }
        _ => (None, None),
    }
}

/// The special tokens `special_tokens_map.json`, else `tokenizer_config.json`, of `dir` name
/// (a string, or an object with `content`), in `SPECIAL_KEYS` order.
fn declared_special_names(dir: &Path) -> Result<[Option<String>; 5]> {
    let mut names: [Option<String>; 5] = Default::default();
    for file in ["special_tokens_map.json", "tokenizer_config.json"] {
        let path = dir.join(file);
        if !path.exists() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
        for (slot, key) in names.iter_mut().zip(SPECIAL_KEYS) {
            if slot.is_some() {
                continue;
            }
            *slot = match value.get(key) {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(v) => match v.get("content").and_then(|c| c.as_str()) {
                    Some(s) => Some(s.to_string()),
                    None => {
                        return Err(Error::field(
                            &path,
                            key,
                            format!("expected a token or {{\"content\": …}}, found {v}"),
                        ))
                    }
                },
            };
        }
    }
    Ok(names)
}

/// `tokenizer_config.json`'s `tokenizer_class`, if the directory has one.
fn read_tokenizer_class(dir: &Path) -> Result<Option<String>> {
    let path = dir.join("tokenizer_config.json");
    if !path.exists() {
        return Ok(None);
    }
    let value: serde_json::Value = serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    Ok(value.get("tokenizer_class").and_then(|c| c.as_str()).map(String::from))
}

fn read_do_lower_case(dir: &Path) -> Result<bool> {
    let path = dir.join("tokenizer_config.json");
    if !path.exists() {
        return Ok(true);
    }
    let value: serde_json::Value = serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
    match value.get("do_lower_case") {
        None => Ok(true),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(other) => Err(Error::field(&path, "do_lower_case", format!("expected true or false, found {other}"))),
    }
}

/// An uncased tokenizer for unit tests (this crate's and the crates' above; not an API), built in memory: the special tokens take ids 0–4 in
/// `SPECIAL_TOKENS` order (`[PAD]` 0, `[UNK]` 1, `[CLS]` 2, `[SEP]` 3, `[MASK]` 4), then `words`
/// from 5 (word pieces as `##piece`).
#[doc(hidden)]
pub fn test_tokenizer(words: &[&str]) -> TextTokenizer {
    let vocab: ahash::AHashMap<String, u32> =
        SPECIAL_TOKENS.iter().chain(words).enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
    let model = WordPiece::builder().vocab(vocab).unk_token("[UNK]".into()).build().expect("a WordPiece model");
    TextTokenizer::from_tokenizer(bert_pipeline(model, true), Path::new("<test vocabulary>"), true)
        .expect("the special tokens are in the vocabulary")
}

#[cfg(test)]
mod tests {
    use super::*;

    // ids: 5 saya, 6 makan, 7 nasi, 8 ##nya, 9 goreng.
    fn tokenizer() -> TextTokenizer {
        test_tokenizer(&["saya", "makan", "nasi", "##nya", "goreng"])
    }

    fn rows(t: &Tensor) -> Vec<Vec<i64>> {
        Vec::<Vec<i64>>::try_from(t).unwrap()
    }

    #[test]
    fn special_ids_vocabulary_size_and_lowercasing() {
        let t = tokenizer();
        assert_eq!(t.special, SpecialIds { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 });
        assert_eq!(t.vocab_size(), 10);
        assert_eq!(t.encode("SAYA makan nasinya!").unwrap(), vec![2, 5, 6, 7, 8, 1, 3]);
        assert_eq!(t.encode_plain("kopi").unwrap(), vec![1], "an unknown word is [UNK]");
        assert_eq!((t.token_to_id("##nya"), t.id_to_token(9).as_deref()), (Some(8), Some("goreng")));
        assert_eq!(t.decode(&[2, 5, 6, 7, 8, 3]).unwrap(), "saya makan nasinya");
    }

    #[test]
    fn single_texts_are_truncated_then_wrapped_and_padded() {
        let t = tokenizer();
        // "saya makan nasinya" is 4 pieces; max_len 5 leaves room for 3 between [CLS] and [SEP].
        let b = t.batch(&["saya makan nasinya", "nasi"], None, 5).unwrap();
        assert_eq!(rows(&b.input_ids), vec![vec![2, 5, 6, 7, 3], vec![2, 7, 3, 0, 0]]);
        assert_eq!(rows(&b.attention_mask), vec![vec![1, 1, 1, 1, 1], vec![1, 1, 1, 0, 0]]);
        assert_eq!(rows(&b.token_type_ids), vec![vec![0; 5], vec![0; 5]]);
        assert_eq!(b.lengths, vec![5, 3]);
        let err = t.batch(&["saya"], None, 2).unwrap_err().to_string();
        assert!(err.contains("max_len must be at least 3"), "{err}");
    }

    #[test]
    fn pairs_are_truncated_longest_first() {
        let t = tokenizer();
        // a = saya makan nasi ##nya (4), b = nasi goreng (2); max_len 7 leaves 4 for both:
        // a loses its last two pieces (4 > 2, then 3 > 2), b keeps both.
        let b = t.batch(&["saya makan nasinya"], Some(&["nasi goreng"]), 7).unwrap();
        assert_eq!(rows(&b.input_ids), vec![vec![2, 5, 6, 3, 7, 9, 3]]);
        assert_eq!(rows(&b.token_type_ids), vec![vec![0, 0, 0, 0, 1, 1, 1]]);
        // With room for everything nothing is cut.
        let b = t.batch(&["saya"], Some(&["nasi goreng"]), 16).unwrap();
        assert_eq!(rows(&b.input_ids), vec![vec![2, 5, 3, 7, 9, 3]]);
        assert_eq!(t.encode_pair("saya", "nasi goreng").unwrap(), (vec![2, 5, 3, 7, 9, 3], vec![0, 0, 0, 1, 1, 1]));
    }

    #[test]
    fn pad_rows_pads_ids_types_and_mask_to_the_longest() {
        let b = pad_rows(vec![(vec![2, 5, 3], vec![0, 0, 1]), (vec![2, 3], vec![0, 0])], 0);
        assert_eq!(rows(&b.input_ids), vec![vec![2, 5, 3], vec![2, 3, 0]]);
        assert_eq!(rows(&b.token_type_ids), vec![vec![0, 0, 1], vec![0, 0, 0]]);
        assert_eq!(rows(&b.attention_mask), vec![vec![1, 1, 1], vec![1, 1, 0]]);
        assert_eq!(b.lengths, vec![3, 2]);
        let empty = pad_rows(Vec::new(), 0);
        assert_eq!(empty.input_ids.size(), vec![0, 0]);
    }
}
