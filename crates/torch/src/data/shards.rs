//! Prepared corpora: every source tokenized once into a memory-mapped shard of token ids
//! (`u16` when the vocabulary fits, else `u32`) with a document index, under
//! `corpora/<corpus>/`. A shard is keyed by the content of its source files and the
//! tokenizer, so re-running preparation skips what is up to date. Each document is followed
//! by `[SEP]` in the stream; training sequences are contiguous blocks of that stream.
use super::sources::{ReadStats, SourceSpec};
use super::tokenizer::TextTokenizer;
use crate::error::{Error, IoContext, Result};
use indolm_core::files::{read_to_string, remove_stale_temps, write_atomic, write_json, Staging};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const FORMAT_VERSION: u32 = 1;

/// How many bytes each token id takes in a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdWidth {
    /// Two bytes: vocabularies of up to 65,536 tokens.
    U16,
    /// Four bytes: larger vocabularies.
    U32,
}

impl IdWidth {
    /// The narrowest width that holds every id of a vocabulary of `vocab_size` tokens.
    pub fn for_vocab(vocab_size: usize) -> Self {
        if vocab_size <= u16::MAX as usize + 1 {
            IdWidth::U16
        } else {
            IdWidth::U32
        }
    }
    /// Bytes per id: 2 or 4.
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
    /// The shard layout's version; a shard of another version is prepared again.
    pub format_version: u32,
    /// The source's name in the recipe (also the shard's file name).
    pub source: String,
    /// The source's language tag (`id`, `jv`, `su`, ...).
    pub lang: String,
    /// [`content_sha256`] of the source files the shard was made from.
    pub content_sha256: String,
    /// [`tokenizer_sha256`] of the tokenizer that made it.
    pub tokenizer_sha256: String,
    /// Bytes per token id in `<source>.bin`.
    pub width: IdWidth,
    /// Token ids in the stream, the `[SEP]` after each document included.
    pub tokens: u64,
    /// Documents in the stream.
    pub documents: u64,
    /// How many of the tokens are `[UNK]`.
    pub unk_tokens: u64,
    /// What reading the source files found (files, documents, paragraphs, bad lines).
    pub read: ReadStats,
}

/// A prepared source, memory-mapped.
pub struct Shard {
    /// Its `<source>.json`.
    pub meta: ShardMeta,
    ids: memmap2::Mmap,
    /// The token file, `<source>.bin`.
    pub path: PathBuf,
}

impl Shard {
    /// The number of token ids in the shard.
    pub fn len(&self) -> usize {
        self.meta.tokens as usize
    }

    /// Whether the shard holds no tokens.
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

/// SHA-256 of the tokenizer's JSON: a shard is only read with the tokenizer that made it.
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
    /// The shard on disk was made from the same files and tokenizer, and was kept.
    UpToDate(ShardMeta),
    /// The source was tokenized into a new shard.
    Written(ShardMeta),
    /// The source's files are not the `required_content`; nothing was read or written.
    ContentDiffers {
        /// The content key of the files as they are now.
        found: String,
    },
}

/// Tokenizes `source` into `dir` unless an up-to-date shard is there. Paragraphs are
/// tokenized in parallel batches (the `tokenizers` crate uses every core). With
/// `required_content` (a resumed run's), files of other content are reported, not prepared.
pub fn prepare_source(
    source: &SourceSpec,
    base: &Path,
    dir: &Path,
    tokenizer: &TextTokenizer,
    required_content: Option<&str>,
    progress: impl FnMut(u64),
) -> Result<Prepared> {
    let files = source.files(base)?;
    let content = content_sha256(&files)?;
    if required_content.is_some_and(|required| required != content) {
        return Ok(Prepared::ContentDiffers { found: content });
    }
    let tok_hash = tokenizer_sha256(tokenizer)?;
    let bin = shard_path(dir, &source.name);
    let meta_path = bin.with_extension("json");
    if let Some(meta) = up_to_date(&meta_path, &bin, &content, &tok_hash) {
        return Ok(Prepared::UpToDate(meta));
    }
    std::fs::create_dir_all(dir).with_path(dir)?;
    // The metadata is the commit point of a shard: it goes first and comes back last, so a
    // preparation killed at any point leaves no metadata and is redone, never taken as done.
    if meta_path.exists() {
        std::fs::remove_file(&meta_path).with_path(&meta_path)?;
    }
    remove_stale_temps(&bin)?; // a killed preparation's token file (the corpus lock is held)
    let width = IdWidth::for_vocab(tokenizer.vocab_size());
    let staging = Staging::new(&bin); // deleted if reading or writing fails
    let mut writer = ShardWriter::create(staging.path(), tokenizer, width, progress)?;
    let read = source.read_documents(base, |doc| writer.add(doc))?;
    let written = writer.finish()?;
    if written.tokens == 0 {
        return Err(Error::data(format!("source `{}`", source.name), "no text found in its files"));
    }
    let idx: Vec<u8> = written.offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
    write_atomic(&bin.with_extension("idx"), &idx)?;
    staging.commit()?;
    let meta = ShardMeta {
        format_version: FORMAT_VERSION,
        source: source.name.clone(),
        lang: source.lang.clone(),
        content_sha256: content,
        tokenizer_sha256: tok_hash,
        width,
        tokens: written.tokens,
        documents: (written.offsets.len() - 1) as u64,
        unk_tokens: written.unk,
        read,
    };
    write_json(&meta_path, &meta)?;
    Ok(Prepared::Written(meta))
}

/// The metadata at `meta_path` if the shard it describes is current and whole: this format
/// version, the same source content and tokenizer, and the token file `bin` and its index of
/// the sizes the metadata gives (so a damaged shard is prepared again, not trained on).
fn up_to_date(meta_path: &Path, bin: &Path, content: &str, tok_hash: &str) -> Option<ShardMeta> {
    let meta: ShardMeta = serde_json::from_str(&read_to_string(meta_path).ok()?).ok()?;
    let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len());
    let current = meta.format_version == FORMAT_VERSION
        && meta.content_sha256 == content
        && meta.tokenizer_sha256 == tok_hash
        && size(bin) == Some(meta.tokens * meta.width.bytes() as u64)
        && size(&bin.with_extension("idx")) == Some((meta.documents + 1) * 8);
    current.then_some(meta)
}

/// What [`ShardWriter`] wrote: tokens, `[UNK]` tokens, and the offset of every document's
/// start followed by the end.
struct Written {
    tokens: u64,
    unk: u64,
    offsets: Vec<u64>,
}

/// Writes a shard's token stream to a (temporary) file: documents are gathered until they hold
/// 4096 paragraphs, tokenized as one batch, and written each followed by `[SEP]`, every id
/// little-endian in `width` bytes. Reports the tokens written so far after each batch.
struct ShardWriter<'t, P: FnMut(u64)> {
    tokenizer: &'t TextTokenizer,
    width: IdWidth,
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    written: Written,
    pending: Vec<Vec<String>>,
    pending_paragraphs: usize,
    /// The first error; the documents after it are dropped and `finish` returns it.
    error: Option<Error>,
    progress: P,
}

impl<'t, P: FnMut(u64)> ShardWriter<'t, P> {
    fn create(path: &Path, tokenizer: &'t TextTokenizer, width: IdWidth, progress: P) -> Result<Self> {
        let out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).with_path(path)?);
        Ok(ShardWriter {
            tokenizer,
            width,
            path: path.to_path_buf(),
            out,
            written: Written { tokens: 0, unk: 0, offsets: vec![0] },
            pending: Vec::new(),
            pending_paragraphs: 0,
            error: None,
            progress,
        })
    }

    /// Queues one document (its paragraphs), writing the queue once it is large enough.
    fn add(&mut self, doc: Vec<String>) {
        if self.error.is_some() {
            return;
        }
        self.pending_paragraphs += doc.len();
        self.pending.push(doc);
        if self.pending_paragraphs >= 4096 {
            self.pending_paragraphs = 0;
            if let Err(e) = self.flush() {
                self.error = Some(e);
            }
        }
    }

    /// Tokenizes and writes the queued documents.
    fn flush(&mut self) -> Result<()> {
        let paragraphs: Vec<&str> = self.pending.iter().flatten().map(String::as_str).collect();
        let encoded = self.tokenizer.encode_plain_batch(&paragraphs)?;
        let mut next = encoded.into_iter();
        for doc in std::mem::take(&mut self.pending) {
            let mut ids: Vec<u32> = Vec::new();
            for _ in 0..doc.len() {
                ids.extend(next.next().expect("one encoding per paragraph"));
            }
            self.write_document(ids)?;
        }
        (self.progress)(self.written.tokens);
        Ok(())
    }

    /// Writes one document's ids and its `[SEP]`, counting them.
    fn write_document(&mut self, mut ids: Vec<u32>) -> Result<()> {
        ids.push(self.tokenizer.special.sep as u32);
        let unk_id = self.tokenizer.special.unk as u32;
        let w = &mut self.written;
        w.unk += ids.iter().filter(|&&i| i == unk_id).count() as u64;
        w.tokens += ids.len() as u64;
        w.offsets.push(w.tokens);
        for id in ids {
            match self.width {
                IdWidth::U16 => self.out.write_all(&(id as u16).to_le_bytes()),
                IdWidth::U32 => self.out.write_all(&id.to_le_bytes()),
            }
            .with_path(&self.path)?;
        }
        Ok(())
    }

    /// Writes what is queued and syncs the file; the first error of `add`, if any, instead.
    fn finish(mut self) -> Result<Written> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush()?;
        let file = self.out.into_inner().map_err(|e| Error::io(&self.path, e.into_error()))?;
        file.sync_all().with_path(&self.path)?;
        Ok(self.written)
    }
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
            format!(
                "expected {} tokens of {} bytes, found {} bytes: the shard is damaged; preparing the corpus again (`indolm corpus prepare <recipe>`, or `train`) rebuilds it",
                meta.tokens,
                meta.width.bytes(),
                ids.len()
            ),
        ));
    }
    Ok(Shard { meta, ids, path: bin })
}
