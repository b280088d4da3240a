//! Prepared corpora: every source tokenized once into a memory-mapped shard of token ids
//! (`u16` when the vocabulary fits, else `u32`) with a document index, under
//! `corpora/<corpus>/`. A shard is keyed by the content of its source files and the
//! tokenizer, so re-running preparation skips what is up to date. Each document is followed
//! by `[SEP]` in the stream; training sequences are contiguous blocks of that stream.
use super::sources::{ReadStats, SourceSpec};
use super::tokenizer::TextTokenizer;
use crate::error::{Error, IoContext, Result};
use crate::files::{read_to_string, tmp_path, write_atomic, write_json};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdWidth {
    U16,
    U32,
}

impl IdWidth {
    pub fn for_vocab(vocab_size: usize) -> Self {
        if vocab_size <= u16::MAX as usize + 1 {
            IdWidth::U16
        } else {
            IdWidth::U32
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            IdWidth::U16 => 2,
            IdWidth::U32 => 4,
        }
    }
}

/// `<source>.json`: what a shard holds and what it was made from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardMeta {
    pub format_version: u32,
    pub source: String,
    pub lang: String,
    pub content_sha256: String,
    pub tokenizer_sha256: String,
    pub width: IdWidth,
    pub tokens: u64,
    pub documents: u64,
    pub unk_tokens: u64,
    pub read: ReadStats,
}

/// A prepared source, memory-mapped.
pub struct Shard {
    pub meta: ShardMeta,
    ids: memmap2::Mmap,
    pub path: PathBuf,
}

impl Shard {
    pub fn len(&self) -> usize {
        self.meta.tokens as usize
    }

    pub fn is_empty(&self) -> bool {
        self.meta.tokens == 0
    }

    /// Token ids `[start, start + n)` as i64.
    pub fn slice(&self, start: usize, n: usize) -> Vec<i64> {
        let w = self.meta.width.bytes();
        let bytes = &self.ids[start * w..(start + n) * w];
        match self.meta.width {
            IdWidth::U16 => bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as i64).collect(),
            IdWidth::U32 => {
                bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect()
            }
        }
    }

    /// Document start offsets (and the end), from `<source>.idx`.
    pub fn document_offsets(&self) -> Result<Vec<u64>> {
        let path = self.path.with_extension("idx");
        let bytes = std::fs::read(&path).with_path(&path)?;
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
    }
}

pub fn tokenizer_sha256(tokenizer: &TextTokenizer) -> Result<String> {
    Ok(hex(&Sha256::digest(tokenizer.to_json()?.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 over the names, sizes and bytes of the source files.
pub fn content_sha256(files: &[PathBuf]) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for file in files {
        hasher.update(file.to_string_lossy().as_bytes());
        let mut f = std::fs::File::open(file).with_path(file)?;
        loop {
            let n = f.read(&mut buf).with_path(file)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
    }
    Ok(hex(&hasher.finalize()))
}

/// Paths of a source's shard files in `dir`.
fn shard_path(dir: &Path, source: &str) -> PathBuf {
    dir.join(format!("{source}.bin"))
}

/// Outcome of preparing one source.
pub enum Prepared {
    UpToDate(ShardMeta),
    Written(ShardMeta),
}

/// Tokenizes `source` into `dir` unless an up-to-date shard is there. Paragraphs are
/// tokenized in parallel batches (the `tokenizers` crate uses every core).
pub fn prepare_source(
    source: &SourceSpec,
    base: &Path,
    dir: &Path,
    tokenizer: &TextTokenizer,
    mut progress: impl FnMut(u64),
) -> Result<Prepared> {
    let files = source.files(base)?;
    let content = content_sha256(&files)?;
    let tok_hash = tokenizer_sha256(tokenizer)?;
    let bin = shard_path(dir, &source.name);
    let meta_path = bin.with_extension("json");
    if let Ok(text) = read_to_string(&meta_path) {
        if let Ok(meta) = serde_json::from_str::<ShardMeta>(&text) {
            if meta.format_version == FORMAT_VERSION
                && meta.content_sha256 == content
                && meta.tokenizer_sha256 == tok_hash
                && bin.exists()
            {
                return Ok(Prepared::UpToDate(meta));
            }
        }
    }
    std::fs::create_dir_all(dir).with_path(dir)?;
    let width = IdWidth::for_vocab(tokenizer.vocab_size());
    let tmp_bin = tmp_path(&bin);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp_bin).with_path(&tmp_bin)?);
    let mut offsets: Vec<u64> = vec![0];
    let (mut tokens, mut unk) = (0u64, 0u64);
    let sep = tokenizer.special.sep as u32;
    let unk_id = tokenizer.special.unk as u32;
    let mut pending: Vec<Vec<String>> = Vec::new();
    let mut pending_paragraphs = 0;
    let mut write_error: Option<Error> = None;
    let mut flush =
        |docs: &mut Vec<Vec<String>>, tokens: &mut u64, unk: &mut u64, offsets: &mut Vec<u64>| -> Result<()> {
            let paragraphs: Vec<&str> = docs.iter().flatten().map(String::as_str).collect();
            let encoded = tokenizer.encode_plain_batch(&paragraphs)?;
            let mut next = encoded.into_iter();
            for doc in docs.drain(..) {
                let mut ids: Vec<u32> = Vec::new();
                for _ in 0..doc.len() {
                    ids.extend(next.next().expect("one encoding per paragraph"));
                }
                ids.push(sep);
                *unk += ids.iter().filter(|&&i| i == unk_id).count() as u64;
                *tokens += ids.len() as u64;
                offsets.push(*tokens);
                for id in ids {
                    match width {
                        IdWidth::U16 => out.write_all(&(id as u16).to_le_bytes()),
                        IdWidth::U32 => out.write_all(&id.to_le_bytes()),
                    }
                    .with_path(&tmp_bin)?;
                }
            }
            progress(*tokens);
            Ok(())
        };
    let read = source.read_documents(base, |doc| {
        if write_error.is_some() {
            return;
        }
        pending_paragraphs += doc.len();
        pending.push(doc);
        if pending_paragraphs >= 4096 {
            pending_paragraphs = 0;
            if let Err(e) = flush(&mut pending, &mut tokens, &mut unk, &mut offsets) {
                write_error = Some(e);
            }
        }
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    flush(&mut pending, &mut tokens, &mut unk, &mut offsets)?;
    drop(flush);
    let file = out.into_inner().map_err(|e| Error::io(&tmp_bin, e.into_error()))?;
    file.sync_all().with_path(&tmp_bin)?;
    if tokens == 0 {
        let _ = std::fs::remove_file(&tmp_bin);
        return Err(Error::data(format!("source `{}`", source.name), "no text found in its files"));
    }
    let idx: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
    write_atomic(&bin.with_extension("idx"), &idx)?;
    std::fs::rename(&tmp_bin, &bin).with_path(&bin)?;
    let meta = ShardMeta {
        format_version: FORMAT_VERSION,
        source: source.name.clone(),
        lang: source.lang.clone(),
        content_sha256: content,
        tokenizer_sha256: tok_hash,
        width,
        tokens,
        documents: (offsets.len() - 1) as u64,
        unk_tokens: unk,
        read,
    };
    // The metadata is written last: a shard without it is never taken as prepared.
    write_json(&meta_path, &meta)?;
    Ok(Prepared::Written(meta))
}

/// Opens a prepared shard, checking it was made with `tokenizer`.
pub fn open_shard(dir: &Path, source: &str, tokenizer: &TextTokenizer) -> Result<Shard> {
    let bin = shard_path(dir, source);
    let meta_path = bin.with_extension("json");
    if !meta_path.exists() {
        return Err(Error::MissingFile {
            path: meta_path,
            hint: "the corpus is not prepared: run `indolm corpus prepare <recipe>`".into(),
        });
    }
    let meta: ShardMeta =
        serde_json::from_str(&read_to_string(&meta_path)?).map_err(|e| Error::json(&meta_path, &e))?;
    if meta.tokenizer_sha256 != tokenizer_sha256(tokenizer)? {
        return Err(Error::invalid(
            &meta_path,
            format!(
                "shard `{source}` was prepared with a different tokenizer than {}; prepare the corpus again",
                tokenizer.source.display()
            ),
        ));
    }
    let file = std::fs::File::open(&bin).with_path(&bin)?;
    // SAFETY: shards are written once under a temporary name and never modified in place.
    let ids = unsafe { memmap2::Mmap::map(&file) }.with_path(&bin)?;
    if ids.len() as u64 != meta.tokens * meta.width.bytes() as u64 {
        return Err(Error::invalid(
            &bin,
            format!("expected {} tokens of {} bytes, found {} bytes", meta.tokens, meta.width.bytes(), ids.len()),
        ));
    }
    Ok(Shard { meta, ids, path: bin })
}
