//! A Liputan6 split ready for training: every article read (on all cores) with its oracle
//! labels (the released `extractive_summary`, else the release script's greedy oracle), cached
//! beside the data as `<root>/<split>.indolm-prepared.jsonl.gz` with its fingerprint in
//! `<root>/<split>.indolm-prepared.json`: the file names, sizes and modification times of the
//! split folder, hashed. A run whose folder still has that fingerprint reads the one cache file
//! instead of 193,883 JSON files and labels nothing; a changed, added or removed file makes it
//! prepare the split again. A data folder that cannot be written costs one note, never the run.
use super::data::{load_article, Article};
use super::oracle::oracle_liputan6;
use indolm_core::files::{read_to_string, write_json, Staging};
use indolm_torch::data::parallel::map_on_every_core;
use indolm_torch::error::{Error, IoContext, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The articles of a split with their oracle labels, and how they were obtained.
pub struct PreparedSplit {
    /// The articles, in file-name order.
    pub articles: Vec<Article>,
    /// Each article's oracle sentence indices (in the release script's selection order).
    pub oracles: Vec<Vec<usize>>,
    /// SHA-256 of the split folder's listing (names, sizes, modification times): what a cache
    /// derived from these articles (their token ids) is keyed by.
    pub fingerprint: String,
    /// Whether they came from the cache.
    pub from_cache: bool,
    /// Seconds spent reading (and labelling, when not cached).
    pub seconds: f64,
}

/// One cached article.
#[derive(Serialize, Deserialize)]
struct CachedArticle {
    id: String,
    file: String,
    article: Vec<Vec<String>>,
    summary: Vec<Vec<String>>,
    extractive: Option<Vec<usize>>,
    oracle: Vec<usize>,
}

/// An article and its oracle labels.
type Labelled = (Article, Vec<usize>);

/// The cache's fingerprint file.
#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Fingerprint {
    /// Format version of the cache.
    version: u32,
    /// Article files.
    files: usize,
    /// SHA-256 over every file's `name size mtime_ns` line, in name order.
    listing_sha256: String,
}

const VERSION: u32 = 1;

fn cache_paths(root: &Path, split: &str) -> (PathBuf, PathBuf) {
    (root.join(format!("{split}.indolm-prepared.jsonl.gz")), root.join(format!("{split}.indolm-prepared.json")))
}

/// The split folder's `*.json` files in name order, and its fingerprint.
fn listing(dir: &Path) -> Result<(Vec<PathBuf>, Fingerprint)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_path(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::invalid(dir, "no .json articles in this folder"));
    }
    let mut hash = Sha256::new();
    for f in &files {
        let meta = std::fs::metadata(f).with_path(f)?;
        let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
        let name = f.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        hash.update(format!("{name} {} {}\n", meta.len(), mtime.as_nanos()).as_bytes());
    }
    let listing_sha256 = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((files.clone(), Fingerprint { version: VERSION, files: files.len(), listing_sha256 }))
}

/// Reads `files` and labels each article, on every core, keeping the file order; the first
/// bad file (in that order) is the error.
fn read_and_label(files: &[PathBuf]) -> Result<Vec<Labelled>> {
    map_on_every_core(files, |f| {
        let a = load_article(f)?;
        let oracle = a.extractive.clone().unwrap_or_else(|| oracle_liputan6(&a.article, &a.summary));
        Ok((a, oracle))
    })
}

fn read_cache(data: &Path, dir: &Path) -> Result<Vec<Labelled>> {
    let file = std::fs::File::open(data).with_path(data)?;
    let reader = BufReader::with_capacity(1 << 20, flate2::read::GzDecoder::new(file));
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_path(data)?;
        let c: CachedArticle = serde_json::from_str(&line).map_err(|e| Error::Json {
            path: data.into(),
            line: i + 1,
            column: e.column(),
            message: e.to_string(),
        })?;
        let article = Article {
            id: c.id,
            path: dir.join(&c.file),
            article: c.article,
            summary: c.summary,
            extractive: c.extractive,
        };
        out.push((article, c.oracle));
    }
    Ok(out)
}

fn write_cache(data: &Path, meta: &Path, fingerprint: &Fingerprint, prepared: &[Labelled]) -> Result<()> {
    // The fingerprint goes first (deleted) and last (written): a half-written cache is never used.
    if meta.exists() {
        std::fs::remove_file(meta).with_path(meta)?;
    }
    let staging = Staging::new(data);
    {
        let file = std::fs::File::create(staging.path()).with_path(data)?;
        let mut gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
        for (a, oracle) in prepared {
            let c = CachedArticle {
                id: a.id.clone(),
                file: a.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
                article: a.article.clone(),
                summary: a.summary.clone(),
                extractive: a.extractive.clone(),
                oracle: oracle.clone(),
            };
            serde_json::to_writer(&mut gz, &c).map_err(|e| Error::invalid(data, e.to_string()))?;
            gz.write_all(b"\n").with_path(data)?;
        }
        gz.finish().with_path(data)?.flush().with_path(data)?;
    }
    staging.commit()?;
    write_json(meta, fingerprint)
}

/// The split `<root>/<split>/` with oracle labels: from the cache when the folder still has its
/// fingerprint, else read and labelled on every core and cached (`note` hears about a cache that
/// could not be written).
pub fn prepare_split(root: &Path, split: &str, note: &dyn Fn(&str)) -> Result<PreparedSplit> {
    let started = Instant::now();
    let dir = root.join(split);
    let (files, fingerprint) = listing(&dir)?;
    let (data, meta) = cache_paths(root, split);
    let cached: Option<Fingerprint> = read_to_string(&meta).ok().and_then(|t| serde_json::from_str(&t).ok());
    if cached.as_ref() == Some(&fingerprint) && data.exists() {
        let prepared = read_cache(&data, &dir)?;
        if prepared.len() == fingerprint.files {
            let (articles, oracles) = prepared.into_iter().unzip();
            return Ok(PreparedSplit {
                articles,
                oracles,
                fingerprint: fingerprint.listing_sha256,
                from_cache: true,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
    }
    let prepared = read_and_label(&files)?;
    if let Err(e) = write_cache(&data, &meta, &fingerprint, &prepared) {
        note(&format!("note: the prepared {split} split could not be cached beside the data ({e}); it will be read again next time"));
    }
    let (articles, oracles) = prepared.into_iter().unzip();
    Ok(PreparedSplit {
        articles,
        oracles,
        fingerprint: fingerprint.listing_sha256,
        from_cache: false,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, article: &[&str], summary: &[&str], extractive: Option<&[usize]>) {
        let split =
            |s: &[&str]| -> Vec<Vec<String>> { s.iter().map(|x| x.split(' ').map(String::from).collect()).collect() };
        let mut v = serde_json::json!({"id": name, "url": "", "clean_article": split(article), "clean_summary": split(summary)});
        if let Some(e) = extractive {
            v["extractive_summary"] = serde_json::json!(e);
        }
        std::fs::write(dir.join(format!("{name}.json")), v.to_string()).unwrap();
    }

    #[test]
    fn the_cache_is_used_while_the_folder_is_unchanged_and_redone_after_a_change() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("train");
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "a", &["satu dua tiga", "empat lima", "enam tujuh"], &["empat lima"], None);
        write(&dir, "b", &["x y", "z w"], &["x y"], Some(&[1]));
        let quiet = |_: &str| {};
        let first = prepare_split(root.path(), "train", &quiet).unwrap();
        assert!(!first.from_cache);
        assert_eq!(first.oracles[1], vec![1], "a released extractive_summary is kept");
        assert_eq!(first.oracles[0], oracle_liputan6(&first.articles[0].article, &first.articles[0].summary));
        let second = prepare_split(root.path(), "train", &quiet).unwrap();
        assert!(second.from_cache);
        assert_eq!(second.articles, first.articles);
        assert_eq!(second.oracles, first.oracles);
        // A new file: prepared again, with it.
        write(&dir, "c", &["p q r"], &["p q r"], None);
        let third = prepare_split(root.path(), "train", &quiet).unwrap();
        assert!(!third.from_cache);
        assert_eq!(third.articles.len(), 3);
        // An unwritable cache is a note, not an error.
        let notes = std::cell::RefCell::new(Vec::new());
        let (data, meta) = cache_paths(root.path(), "train");
        std::fs::remove_file(&data).unwrap();
        std::fs::remove_file(&meta).unwrap();
        std::fs::create_dir(&data).unwrap(); // a folder where the cache file would go
        write(&dir, "d", &["s t"], &["s t"], None);
        let fourth = prepare_split(root.path(), "train", &|n: &str| notes.borrow_mut().push(n.to_string())).unwrap();
        assert_eq!(fourth.articles.len(), 4);
        assert!(notes.borrow()[0].contains("could not be cached"), "{:?}", notes.borrow());
        // A bad file is named.
        std::fs::write(dir.join("e.json"), "{").unwrap();
        let err = prepare_split(root.path(), "train", &quiet).err().unwrap().to_string();
        assert!(err.contains("e.json"), "{err}");
    }
}
