//! A prepared Liputan6 split tokenized for one model: every article's encoder input (its token
//! ids and its sentences' `[CLS]` positions, cut at the encoder's positions) and its reference
//! summary as BertAbs's whole target, encoded once on every core and kept beside the data as
//! `<root>/<split>.indolm-encoded-<key>.bin` (memory-mapped), with `<…>.json` recording what it
//! was made from: the prepared split's fingerprint, the tokenizer's SHA-256 and the encoder's
//! positions. `key` hashes the last two, so models with other tokenizers keep their own file.
//! Training batches are cut from it without tokenizing anything. A folder that cannot be
//! written costs one note; the encoding is then kept in memory for the run.
//!
//! The `.bin` layout (little-endian): an index of `articles + 1` rows of three `u64` (where each
//! article's ids, target and `[CLS]` positions start in their streams; the last row holds the
//! streams' lengths), then the id stream and the target stream (`u16` or `u32` per id, as in
//! pretraining shards), then the `[CLS]` stream (`u32`).
use super::input::TargetMarkers;
use super::input::{encode_article, encode_target, EncodedArticle};
use super::prepared::PreparedSplit;
use indolm_core::files::{read_to_string, write_json, Staging};
use indolm_torch::data::parallel::map_on_every_core;
use indolm_torch::data::shards::{tokenizer_sha256, IdWidth};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{IoContext, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const VERSION: u32 = 1;

/// `<…>.json`: what the `.bin` beside it was made from, and its streams' lengths.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct EncodedMeta {
    /// Layout version; another version is encoded again.
    version: u32,
    /// [`PreparedSplit::fingerprint`] of the articles encoded.
    prepared_sha256: String,
    /// [`tokenizer_sha256`] of the tokenizer that encoded them.
    tokenizer_sha256: String,
    /// The encoder's positions, where the articles were cut.
    max_positions: usize,
    /// Bytes per id in the id and target streams.
    width: IdWidth,
    /// Articles encoded.
    articles: usize,
    /// Ids in the id stream.
    ids: u64,
    /// Ids in the target stream.
    targets: u64,
    /// Positions in the `[CLS]` stream.
    cls: u64,
}

impl EncodedMeta {
    const INDEX_ROW: usize = 3 * 8;

    fn ids_at(&self) -> usize {
        (self.articles + 1) * Self::INDEX_ROW
    }
    fn targets_at(&self) -> usize {
        self.ids_at() + self.ids as usize * self.width.bytes()
    }
    fn cls_at(&self) -> usize {
        self.targets_at() + self.targets as usize * self.width.bytes()
    }
    fn file_bytes(&self) -> usize {
        self.cls_at() + self.cls as usize * 4
    }
}

/// The encoded bytes: the cache file mapped, or (when it could not be written) in memory.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A split's articles and targets as token ids, in the prepared split's order.
pub struct EncodedSplit {
    meta: EncodedMeta,
    bytes: Bytes,
    /// Whether it was read from the cache (else encoded now).
    pub from_cache: bool,
    /// Seconds spent encoding or opening it.
    pub seconds: f64,
    /// The cache file (absent when it could not be written).
    pub path: Option<PathBuf>,
}

impl EncodedSplit {
    /// Articles in the split.
    pub(crate) fn len(&self) -> usize {
        self.meta.articles
    }

    /// Whether the split has no article.
    pub fn is_empty(&self) -> bool {
        self.meta.articles == 0
    }

    /// Token ids over all articles (the encoders' input, padding excluded).
    pub fn tokens(&self) -> u64 {
        self.meta.ids
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    /// Where article `i`'s ids, target and `[CLS]` positions start in their streams.
    fn starts(&self, i: usize) -> [u64; 3] {
        let at = i * EncodedMeta::INDEX_ROW;
        [self.u64_at(at), self.u64_at(at + 8), self.u64_at(at + 16)]
    }

    fn ids(&self, stream_at: usize, from: u64, to: u64) -> Vec<i64> {
        let w = self.meta.width.bytes();
        let bytes = &self.bytes[stream_at + from as usize * w..stream_at + to as usize * w];
        match self.meta.width {
            IdWidth::U16 => bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]) as i64).collect(),
            IdWidth::U32 => {
                bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64).collect()
            }
        }
    }

    /// Article `i`'s encoder input, as `input::encode_article` gives it.
    pub(crate) fn article(&self, i: usize) -> EncodedArticle {
        let ([ids, _, cls], [ids_end, _, cls_end]) = (self.starts(i), self.starts(i + 1));
        let at = self.meta.cls_at();
        let positions = self.bytes[at + cls as usize * 4..at + cls_end as usize * 4]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .collect();
        EncodedArticle::from_ids_and_cls(self.ids(self.meta.ids_at(), ids, ids_end), positions)
    }

    /// Article `i`'s whole target, as `input::encode_target` gives it.
    pub(crate) fn target(&self, i: usize) -> Vec<i64> {
        let ([_, from, _], [_, to, _]) = (self.starts(i), self.starts(i + 1));
        self.ids(self.meta.targets_at(), from, to)
    }
}

fn cache_paths(root: &Path, split: &str, tokenizer_sha256: &str, max_positions: usize) -> (PathBuf, PathBuf) {
    let key: String = Sha256::digest(format!("{tokenizer_sha256} {max_positions}").as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let stem = format!("{split}.indolm-encoded-{key}");
    (root.join(format!("{stem}.bin")), root.join(format!("{stem}.json")))
}

/// The articles of `prepared` (the split `<root>/<split>/`) encoded for `tokenizer` and an
/// encoder of `max_positions`: from the cache when it was made from the same articles, tokenizer
/// and positions, else encoded on every core and cached (`note` hears about a cache that could
/// not be written).
pub fn encode_split(
    root: &Path,
    split: &str,
    prepared: &PreparedSplit,
    tokenizer: &TextTokenizer,
    max_positions: usize,
    note: &dyn Fn(&str),
) -> Result<EncodedSplit> {
    let started = Instant::now();
    let tokenizer_sha256 = tokenizer_sha256(tokenizer)?;
    let (data, meta_path) = cache_paths(root, split, &tokenizer_sha256, max_positions);
    let wanted = |m: &EncodedMeta| {
        m.version == VERSION
            && m.prepared_sha256 == prepared.fingerprint
            && m.tokenizer_sha256 == tokenizer_sha256
            && m.max_positions == max_positions
            && m.articles == prepared.articles.len()
    };
    let cached: Option<EncodedMeta> = read_to_string(&meta_path).ok().and_then(|t| serde_json::from_str(&t).ok());
    if let Some(meta) = cached.filter(wanted) {
        if let Ok(bytes) = map(&data) {
            if bytes.len() == meta.file_bytes() {
                let seconds = started.elapsed().as_secs_f64();
                return Ok(EncodedSplit { meta, bytes, from_cache: true, seconds, path: Some(data) });
            }
        }
    }
    let (markers, _) = TargetMarkers::of(tokenizer);
    let encoded: Vec<(EncodedArticle, Vec<i64>)> = map_on_every_core(&prepared.articles, |a| {
        Ok((encode_article(tokenizer, max_positions, &a.article)?, encode_target(tokenizer, markers, &a.summary)?))
    })?;
    let meta = EncodedMeta {
        version: VERSION,
        prepared_sha256: prepared.fingerprint.clone(),
        tokenizer_sha256,
        max_positions,
        width: IdWidth::for_vocab(tokenizer.vocab_size()),
        articles: encoded.len(),
        ids: encoded.iter().map(|(a, _)| a.len() as u64).sum(),
        targets: encoded.iter().map(|(_, t)| t.len() as u64).sum(),
        cls: encoded.iter().map(|(a, _)| a.cls().len() as u64).sum(),
    };
    let bytes = layout(&meta, &encoded);
    drop(encoded);
    let (bytes, path) = match write_cache(&data, &meta_path, &meta, &bytes).and_then(|()| map(&data)) {
        Ok(mapped) => (mapped, Some(data)),
        Err(e) => {
            note(&format!(
                "note: the {split} split's token ids could not be cached beside the data ({e}); they will be encoded again next time"
            ));
            (Bytes::Owned(bytes), None)
        }
    };
    Ok(EncodedSplit { meta, bytes, from_cache: false, seconds: started.elapsed().as_secs_f64(), path })
}

fn map(path: &Path) -> Result<Bytes> {
    let file = std::fs::File::open(path).with_path(path)?;
    // SAFETY: the cache is written under a temporary name and renamed, never modified in place.
    Ok(Bytes::Mapped(unsafe { memmap2::Mmap::map(&file) }.with_path(path)?))
}

/// The `.bin` bytes of `encoded` (see the module's layout).
fn layout(meta: &EncodedMeta, encoded: &[(EncodedArticle, Vec<i64>)]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(meta.file_bytes());
    let (mut ids, mut targets, mut cls) = (0u64, 0u64, 0u64);
    for (article, target) in encoded {
        for start in [ids, targets, cls] {
            bytes.extend_from_slice(&start.to_le_bytes());
        }
        ids += article.len() as u64;
        targets += target.len() as u64;
        cls += article.cls().len() as u64;
    }
    for end in [ids, targets, cls] {
        bytes.extend_from_slice(&end.to_le_bytes());
    }
    let push_id = |bytes: &mut Vec<u8>, id: i64| match meta.width {
        IdWidth::U16 => bytes.extend_from_slice(&(id as u16).to_le_bytes()),
        IdWidth::U32 => bytes.extend_from_slice(&(id as u32).to_le_bytes()),
    };
    for (article, _) in encoded {
        article.ids().iter().for_each(|&id| push_id(&mut bytes, id));
    }
    for (_, target) in encoded {
        target.iter().for_each(|&id| push_id(&mut bytes, id));
    }
    for (article, _) in encoded {
        article.cls().iter().for_each(|&p| bytes.extend_from_slice(&(p as u32).to_le_bytes()));
    }
    bytes
}

fn write_cache(data: &Path, meta_path: &Path, meta: &EncodedMeta, bytes: &[u8]) -> Result<()> {
    // The record goes first (deleted) and last (written): a half-written cache is never used.
    if meta_path.exists() {
        std::fs::remove_file(meta_path).with_path(meta_path)?;
    }
    let staging = Staging::new(data);
    let mut file = std::fs::File::create(staging.path()).with_path(data)?;
    file.write_all(bytes).with_path(data)?;
    file.sync_all().with_path(data)?;
    drop(file);
    staging.commit()?;
    write_json(meta_path, meta)
}

#[cfg(test)]
mod tests {
    use super::super::input::{batch_of, encode_articles, targets_of};
    use super::super::prepared::prepare_split;
    use super::*;
    use indolm_torch::data::tokenizer::test_tokenizer;
    use tch::{Device, Tensor};

    fn write(dir: &Path, name: &str, article: &[&str], summary: &[&str]) {
        let split =
            |s: &[&str]| -> Vec<Vec<String>> { s.iter().map(|x| x.split(' ').map(String::from).collect()).collect() };
        let v = serde_json::json!({"id": name, "url": "", "clean_article": split(article), "clean_summary": split(summary)});
        std::fs::write(dir.join(format!("{name}.json")), v.to_string()).unwrap();
    }

    fn rows(t: &Tensor) -> Vec<Vec<i64>> {
        Vec::<Vec<i64>>::try_from(t).unwrap()
    }

    #[test]
    fn batches_from_the_cache_equal_batches_tokenized_from_the_text() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("train");
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "a", &["a b c d a b", "c d", "a a a b"], &["c d", "a"]);
        write(&dir, "b", &["d"], &["d d d d d d d d"]);
        write(&dir, "c", &["b c", "d a b", "c", "a b c d"], &["b"]);
        let t = test_tokenizer(&["a", "b", "c", "d"]);
        let (markers, _) = TargetMarkers::of(&t);
        let quiet = |_: &str| {};
        let prepared = prepare_split(root.path(), "train", &quiet).unwrap();
        let texts: Vec<&[Vec<String>]> = prepared.articles.iter().map(|a| a.article.as_slice()).collect();
        for max_positions in [512, 9] {
            let first = encode_split(root.path(), "train", &prepared, &t, max_positions, &quiet).unwrap();
            assert!(!first.from_cache);
            let again = encode_split(root.path(), "train", &prepared, &t, max_positions, &quiet).unwrap();
            assert!(again.from_cache, "the second run reads the cache");
            for split in [&first, &again] {
                let cut: Vec<EncodedArticle> = (0..split.len()).map(|i| split.article(i)).collect();
                let batch = batch_of(t.special.pad, &cut.iter().collect::<Vec<_>>(), Device::Cpu);
                let direct = encode_articles(&t, max_positions, &texts, Device::Cpu).unwrap();
                assert_eq!(rows(&batch.input_ids), rows(&direct.input_ids));
                assert_eq!(rows(&batch.segments), rows(&direct.segments));
                assert_eq!(rows(&batch.attention), rows(&direct.attention));
                assert_eq!(rows(&batch.cls_positions), rows(&direct.cls_positions));
                assert_eq!(batch.sentences, direct.sentences);
                for (i, a) in prepared.articles.iter().enumerate() {
                    assert_eq!(split.target(i), encode_target(&t, markers, &a.summary).unwrap());
                }
            }
            let whole: Vec<Vec<i64>> = (0..first.len()).map(|i| first.target(i)).collect();
            let cut = targets_of(&whole.iter().map(Vec::as_slice).collect::<Vec<_>>(), 4, markers.eos, 0, Device::Cpu);
            assert_eq!(rows(&cut)[1], vec![markers.bos, 8, 8, markers.eos], "cut to 4 with eos last");
        }
        // Another tokenizer gets its own file; a changed split is encoded again.
        let other = test_tokenizer(&["a", "b", "c", "d", "e"]);
        assert!(!encode_split(root.path(), "train", &prepared, &other, 512, &quiet).unwrap().from_cache);
        write(&dir, "d", &["a"], &["a"]);
        let changed = prepare_split(root.path(), "train", &quiet).unwrap();
        let encoded = encode_split(root.path(), "train", &changed, &t, 512, &quiet).unwrap();
        assert!(!encoded.from_cache);
        assert_eq!(encoded.len(), 4);
        // A truncated cache file is not used.
        let path = encoded.path.clone().unwrap();
        drop(encoded);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        assert!(!encode_split(root.path(), "train", &changed, &t, 512, &quiet).unwrap().from_cache);
    }

    #[test]
    fn an_unwritable_folder_keeps_the_encoding_in_memory_with_a_note() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("train");
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "a", &["a b", "c d"], &["c d"]);
        let t = test_tokenizer(&["a", "b", "c", "d"]);
        let prepared = prepare_split(root.path(), "train", &|_| {}).unwrap();
        let (data, _) = cache_paths(root.path(), "train", &tokenizer_sha256(&t).unwrap(), 512);
        std::fs::create_dir(&data).unwrap(); // a folder where the cache file would go
        let notes = std::cell::RefCell::new(Vec::<String>::new());
        let encoded =
            encode_split(root.path(), "train", &prepared, &t, 512, &|n: &str| notes.borrow_mut().push(n.into()))
                .unwrap();
        assert!(encoded.path.is_none());
        assert!(notes.borrow()[0].contains("could not be cached"), "{:?}", notes.borrow());
        assert_eq!(encoded.article(0).ids(), encode_article(&t, 512, &prepared.articles[0].article).unwrap().ids());
    }
}
