//! The Liputan6 paper's statistics (Koto, Lau and Baldwin 2020) as reports, from the released
//! layout on disk: per split and variant the articles, words, sentences and vocabulary of the
//! articles and of their summaries (Tables 1–2), the novel n-grams of the summaries for n = 1..4
//! (Tables 1 and 3) and per chronological fifth (Fig. 2), and the positions in the article of the
//! sentences an extractive summarizer or the Oracle picks (Fig. 4), as Markdown, JSON and bar
//! charts. The paper's own figures are printed beside ours when the data is the full release
//! (recognized by its article counts per split).
//!
//! The authors released no code for these figures (fajri91/sum_liputan6 has the download,
//! cleaning, Oracle-label and Xtreme-copy scripts), so text is read as their scripts read it
//! (`get_string`: tokens and sentences joined by spaces, lowercased, split on white space), and a
//! summary's novel n-grams are its distinct n-grams (across sentence boundaries) absent from its
//! article's, as a percentage of its distinct n-grams: the per-summary measure the paper's Xtreme
//! rule needs ("fewer than 90% novel 4-grams"). A set of summaries gets the mean of those
//! percentages, and beside it the pooled ratio PreSumm's `post_stats.py` computes. A BertExt
//! run's picked sentences are recovered from its `<split>.candidate` file: each `<q>`-separated
//! sentence matched, in order, to the article's sentences.
use super::chart::register_system_font;
use crate::summarization::data::load_article;
use crate::summarization::oracle::oracle_liputan6;
use ahash::AHashSet;
use indolm_core::files::{quoted, read_to_string, Staging};
use indolm_metrics::rouge::SENTENCE_SEPARATOR;
use indolm_torch::data::parallel::map_on_every_core;
use indolm_torch::error::{Error, IoContext, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The n-gram orders of the paper's tables.
pub(crate) const ORDERS: [usize; 4] = [1, 2, 3, 4];

/// The split folders of a variant, in the release's order.
const SPLITS: [&str; 3] = ["train", "dev", "test"];

/// The release's variants, each a folder of split folders.
const VARIANTS: [&str; 2] = ["canonical", "xtreme"];

/// Articles read by one worker at a time.
const CHUNK: usize = 512;

/// Chunks read together before their results are merged (bounds the vocabularies held).
const GROUP: usize = 64;

/// The release's articles per split (the paper's Table 1 and the release's README): canonical
/// train, dev, test, then the Xtreme dev and test sets.
const RELEASE: [usize; 5] = [193_883, 10_972, 10_972, 4_948, 3_862];

/// Words, sentences and vocabulary of the articles (or of the summaries) of a set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextStats {
    /// Mean words (the release's tokens, punctuation included) per text.
    pub mean_words: f64,
    /// Mean sentences per text.
    pub mean_sentences: f64,
    /// Distinct words over the set.
    pub vocabulary: usize,
}

/// The novel n-grams of a set's summaries, n = 1..4 (index 0 is n = 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NovelNgrams {
    /// The mean over the summaries of each one's percentage of novel n-grams (`None` when no
    /// summary has an n-gram of that order).
    pub mean: [Option<f64>; 4],
    /// All the summaries' novel n-grams as a percentage of all their n-grams.
    pub pooled: [Option<f64>; 4],
    /// The summaries with at least one n-gram of each order (those the mean is over).
    pub summaries: [usize; 4],
    /// The summaries with at least 90% novel 4-grams: those the Xtreme variant keeps.
    pub xtreme_eligible: usize,
}

/// The paper's Table 2 row for Liputan6.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperSizes {
    /// Mean words of an article.
    pub article_words: f64,
    /// Mean sentences of an article.
    pub article_sentences: f64,
    /// Article vocabulary, thousands of words.
    pub article_vocabulary_thousands: f64,
    /// Mean words of a summary.
    pub summary_words: f64,
    /// Mean sentences of a summary.
    pub summary_sentences: f64,
    /// Summary vocabulary, thousands of words.
    pub summary_vocabulary_thousands: f64,
}

/// What the paper reports for a set of the full release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperFigures {
    /// Where: the table or the README.
    pub source: String,
    /// Novel n-grams, %, n = 1..4.
    pub novel: Option<[f64; 4]>,
    /// The summaries the Xtreme variant keeps.
    pub xtreme_kept: Option<usize>,
    /// Table 2's sizes.
    pub sizes: Option<PaperSizes>,
}

/// The statistics of one set of articles: a split, or a variant's splits together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetStats {
    /// The split (`canonical/dev`), or the set (`canonical dev+test`).
    pub name: String,
    /// The split folders it holds.
    pub splits: Vec<String>,
    /// Its articles.
    pub articles: usize,
    /// Of the articles.
    pub article: TextStats,
    /// Of the summaries.
    pub summary: TextStats,
    /// The summaries' novel n-grams.
    pub novel: NovelNgrams,
    /// The paper's figures, when the set is one of the full release's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<PaperFigures>,
}

/// One chronological fifth of the articles (Fig. 2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fifth {
    /// 1 to 5, oldest first.
    pub fifth: usize,
    /// Its articles.
    pub articles: usize,
    /// Its first article's id.
    pub first_id: String,
    /// Its last article's id.
    pub last_id: String,
    /// Mean novel n-gram percentages, n = 1..4.
    pub novel_mean: [Option<f64>; 4],
}

/// The articles of every split read (each id once) in id order, cut into fifths (Fig. 2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chronology {
    /// Whether the ids were ordered as numbers (every id digits; Liputan6's grow with
    /// publication time) rather than as text.
    pub numeric_ids: bool,
    /// The articles ordered.
    pub articles: usize,
    /// The five fifths.
    pub fifths: Vec<Fifth>,
}

/// `indolm report liputan6-stats`: every figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Liputan6Stats {
    /// The data folder.
    pub data: PathBuf,
    /// Each split read.
    pub splits: Vec<SetStats>,
    /// Each variant's dev+test (Table 1's sets) and train+dev+test (Table 3's).
    pub combined: Vec<SetStats>,
    /// Fig. 2's fifths (none for fewer than 5 articles).
    pub chronology: Option<Chronology>,
}

/// What one article contributes.
#[derive(Debug, Clone)]
struct ArticleRecord {
    id: String,
    article_words: usize,
    article_sentences: usize,
    summary_words: usize,
    summary_sentences: usize,
    /// Distinct summary n-grams, n = 1..4.
    total: [usize; 4],
    /// Those absent from the article.
    novel: [usize; 4],
}

/// A split read: its articles' records in file-name order and its vocabularies.
struct SplitRead {
    name: String,
    records: Vec<ArticleRecord>,
    article_vocabulary: AHashSet<String>,
    summary_vocabulary: AHashSet<String>,
}

/// Whether CPython's `str.split()` splits at `c`: Unicode white space and `\x1c`–`\x1f`.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The words of sentences as the release's scripts make them (`get_string`): tokens joined by
/// spaces, sentences joined by spaces, lowercased, split on white space.
fn words(sentences: &[Vec<String>]) -> Vec<String> {
    let text = sentences.iter().map(|s| s.join(" ")).collect::<Vec<_>>().join(" ").to_lowercase();
    text.split(python_space).filter(|w| !w.is_empty()).map(String::from).collect()
}

/// The distinct n-grams of `summary` and how many of them `article` lacks, n = 1..4.
fn novelty(summary: &[String], article: &[String]) -> ([usize; 4], [usize; 4]) {
    let (mut total, mut novel) = ([0; 4], [0; 4]);
    for (k, &n) in ORDERS.iter().enumerate() {
        let source: AHashSet<&[String]> = article.windows(n).collect();
        let grams: AHashSet<&[String]> = summary.windows(n).collect();
        total[k] = grams.len();
        novel[k] = grams.iter().filter(|g| !source.contains(*g)).count();
    }
    (total, novel)
}

/// The `*.json` articles of `<data>/<split>` in file-name order (as the summarization tasks read
/// a split).
fn split_files(data: &Path, split: &str) -> Result<Vec<PathBuf>> {
    let dir = data.join(split);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_path(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::invalid(&dir, "no .json articles in this folder"));
    }
    Ok(files)
}

/// The records and vocabularies of some article files.
fn read_chunk(files: &[PathBuf]) -> Result<(Vec<ArticleRecord>, AHashSet<String>, AHashSet<String>)> {
    let (mut records, mut article_vocabulary, mut summary_vocabulary) = (Vec::new(), AHashSet::new(), AHashSet::new());
    for file in files {
        let a = load_article(file)?;
        let (article, summary) = (words(&a.article), words(&a.summary));
        let (total, novel) = novelty(&summary, &article);
        records.push(ArticleRecord {
            id: a.id,
            article_words: article.len(),
            article_sentences: a.article.len(),
            summary_words: summary.len(),
            summary_sentences: a.summary.len(),
            total,
            novel,
        });
        article_vocabulary.extend(article);
        summary_vocabulary.extend(summary);
    }
    Ok((records, article_vocabulary, summary_vocabulary))
}

/// Reads a split on every core, a group of chunks at a time.
fn read_split(data: &Path, split: &str) -> Result<SplitRead> {
    let files = split_files(data, split)?;
    let mut read = SplitRead {
        name: split.to_string(),
        records: Vec::with_capacity(files.len()),
        article_vocabulary: AHashSet::new(),
        summary_vocabulary: AHashSet::new(),
    };
    let chunks: Vec<&[PathBuf]> = files.chunks(CHUNK).collect();
    for group in chunks.chunks(GROUP) {
        for (records, article, summary) in map_on_every_core(group, |chunk| read_chunk(chunk))? {
            read.records.extend(records);
            read.article_vocabulary.extend(article);
            read.summary_vocabulary.extend(summary);
        }
    }
    Ok(read)
}

/// The split folders under `data` when none are named: each variant's `train`, `dev` and `test`
/// that exist (`canonical/`, `xtreme/`), else `data`'s own.
fn default_splits(data: &Path) -> Result<Vec<String>> {
    let variants: Vec<&str> = VARIANTS.into_iter().filter(|v| data.join(v).is_dir()).collect();
    let found: Vec<String> = if variants.is_empty() {
        SPLITS.into_iter().filter(|s| data.join(s).is_dir()).map(String::from).collect()
    } else {
        variants
            .iter()
            .flat_map(|v| SPLITS.into_iter().map(move |s| format!("{v}/{s}")))
            .filter(|s| data.join(s).is_dir())
            .collect()
    };
    if found.is_empty() {
        return Err(Error::invalid(
            data,
            "no split folders: expected train/, dev/ and test/, or canonical/ and xtreme/ holding them (or name them with --split)",
        ));
    }
    Ok(found)
}

/// A split's variant: its folder before the last `/` (`canonical/dev` → `canonical`; `dev` → ``).
fn variant_of(split: &str) -> &str {
    split.rsplit_once('/').map_or("", |(v, _)| v)
}

/// A split's last folder (`canonical/dev` → `dev`).
fn last_of(split: &str) -> &str {
    split.rsplit_once('/').map_or(split, |(_, s)| s)
}

/// Each variant's `dev+test` set (when it has both) and `train+dev+test` set (when it also has
/// train), named and with their splits, in the order the variants first appear.
fn combined_sets(splits: &[String]) -> Vec<(String, Vec<String>)> {
    let mut variants: Vec<&str> = Vec::new();
    for s in splits {
        if !variants.contains(&variant_of(s)) {
            variants.push(variant_of(s));
        }
    }
    let mut out = Vec::new();
    for v in variants {
        let member = |name: &str| splits.iter().find(|s| variant_of(s) == v && last_of(s) == name).cloned();
        let prefix = if v.is_empty() { String::new() } else { format!("{v} ") };
        if let (Some(dev), Some(test)) = (member("dev"), member("test")) {
            out.push((format!("{prefix}dev+test"), vec![dev.clone(), test.clone()]));
            if let Some(train) = member("train") {
                out.push((format!("{prefix}train+dev+test"), vec![train, dev, test]));
            }
        }
    }
    out
}

/// The novel n-grams of `records`' summaries.
fn novel_of(records: &[&ArticleRecord]) -> NovelNgrams {
    // Per order: the mean of the per-summary percentages (in reading order), the pooled ratio,
    // and the summaries the mean is over.
    let order = |k: usize| {
        let (mut sum, mut count, mut novel, mut total) = (0.0, 0usize, 0usize, 0usize);
        for r in records {
            if r.total[k] > 0 {
                sum += 100.0 * r.novel[k] as f64 / r.total[k] as f64;
                count += 1;
            }
            novel += r.novel[k];
            total += r.total[k];
        }
        ((count > 0).then(|| sum / count as f64), (total > 0).then(|| 100.0 * novel as f64 / total as f64), count)
    };
    let figures: [(Option<f64>, Option<f64>, usize); 4] = std::array::from_fn(order);
    let xtreme_eligible = records.iter().filter(|r| r.total[3] > 0 && r.novel[3] * 10 >= r.total[3] * 9).count();
    NovelNgrams {
        mean: figures.map(|f| f.0),
        pooled: figures.map(|f| f.1),
        summaries: figures.map(|f| f.2),
        xtreme_eligible,
    }
}

/// The distinct words of several vocabularies.
fn union_size<'a>(sets: impl Iterator<Item = &'a AHashSet<String>>) -> usize {
    let sets: Vec<&AHashSet<String>> = sets.collect();
    match sets.as_slice() {
        [one] => one.len(),
        _ => sets.iter().flat_map(|s| s.iter().map(String::as_str)).collect::<AHashSet<&str>>().len(),
    }
}

/// The statistics of the articles of `members`, in their order.
fn set_stats(name: &str, members: &[&SplitRead]) -> SetStats {
    let records: Vec<&ArticleRecord> = members.iter().flat_map(|m| &m.records).collect();
    let n = records.len() as f64;
    let sum = |f: fn(&ArticleRecord) -> usize| records.iter().map(|r| f(r)).sum::<usize>() as f64;
    let article = TextStats {
        mean_words: sum(|r| r.article_words) / n,
        mean_sentences: sum(|r| r.article_sentences) / n,
        vocabulary: union_size(members.iter().map(|m| &m.article_vocabulary)),
    };
    let summary = TextStats {
        mean_words: sum(|r| r.summary_words) / n,
        mean_sentences: sum(|r| r.summary_sentences) / n,
        vocabulary: union_size(members.iter().map(|m| &m.summary_vocabulary)),
    };
    let counts: Vec<(&str, usize)> = members.iter().map(|m| (last_of(&m.name), m.records.len())).collect();
    SetStats {
        name: name.to_string(),
        splits: members.iter().map(|m| m.name.clone()).collect(),
        articles: records.len(),
        article,
        summary,
        novel: novel_of(&records),
        paper: paper_figures(&counts),
    }
}

/// The paper's figures for a set of the full release, recognized by its splits' names and
/// article counts: the canonical dev and test sets (how many the Xtreme variant keeps), each
/// variant's dev+test (Table 1) and the canonical train+dev+test (Tables 2 and 3).
fn paper_figures(splits: &[(&str, usize)]) -> Option<PaperFigures> {
    let [train, dev, test, xtreme_dev, xtreme_test] = RELEASE;
    let figures = |source: &str, novel, xtreme_kept, sizes| {
        Some(PaperFigures { source: source.to_string(), novel, xtreme_kept, sizes })
    };
    match splits {
        [("dev", n)] if *n == dev => figures("README: Xtreme dev", None, Some(xtreme_dev), None),
        [("test", n)] if *n == test => figures("README: Xtreme test", None, Some(xtreme_test), None),
        [("dev", d), ("test", t)] if (*d, *t) == (dev, test) => {
            figures("Table 1: canonical", Some([16.2, 52.5, 71.8, 82.4]), Some(xtreme_dev + xtreme_test), None)
        }
        [("dev", d), ("test", t)] if (*d, *t) == (xtreme_dev, xtreme_test) => {
            figures("Table 1: Xtreme", Some([22.2, 66.7, 87.5, 96.6]), None, None)
        }
        [("train", a), ("dev", d), ("test", t)] if (*a, *d, *t) == (train, dev, test) => {
            let sizes = PaperSizes {
                article_words: 232.91,
                article_sentences: 12.60,
                article_vocabulary_thousands: 311.0,
                summary_words: 30.43,
                summary_sentences: 2.09,
                summary_vocabulary_thousands: 100.0,
            };
            figures("Tables 2–3: Liputan6", Some([12.9, 41.6, 57.6, 66.9]), None, Some(sizes))
        }
        _ => None,
    }
}

/// Fig. 2: the records of every split (each id once, an empty id never a duplicate) ordered by
/// id, numerically when every id is digits, and cut into fifths; none for fewer than 5.
fn chronology(reads: &[SplitRead]) -> Option<Chronology> {
    let mut seen: AHashSet<&str> = AHashSet::new();
    let mut kept: Vec<&ArticleRecord> = Vec::new();
    for r in reads.iter().flat_map(|s| &s.records) {
        if r.id.is_empty() || seen.insert(r.id.as_str()) {
            kept.push(r);
        }
    }
    let n = kept.len();
    if n < 5 {
        return None;
    }
    let numeric_ids = kept.iter().all(|r| !r.id.is_empty() && r.id.bytes().all(|b| b.is_ascii_digit()));
    if numeric_ids {
        // As numbers of any length: fewer significant digits first, then the digits.
        let key = |id: &str| {
            let digits = id.trim_start_matches('0');
            (digits.len(), digits.to_string())
        };
        kept.sort_by_cached_key(|r| key(&r.id));
    } else {
        kept.sort_by(|a, b| a.id.cmp(&b.id));
    }
    let fifths = (0..5)
        .map(|k| {
            let part = &kept[k * n / 5..(k + 1) * n / 5];
            Fifth {
                fifth: k + 1,
                articles: part.len(),
                first_id: part.first().map(|r| r.id.clone()).unwrap_or_default(),
                last_id: part.last().map(|r| r.id.clone()).unwrap_or_default(),
                novel_mean: novel_of(part).mean,
            }
        })
        .collect();
    Some(Chronology { numeric_ids, articles: n, fifths })
}

/// `indolm report liputan6-stats`: the statistics of `splits` of `data` (default: every split
/// folder found: each variant's train, dev and test, else the folder's own).
pub fn liputan6_stats(data: &Path, splits: &[String]) -> Result<Liputan6Stats> {
    if !data.is_dir() {
        return Err(Error::MissingFile {
            path: data.to_path_buf(),
            hint: "expected the release's folder (canonical/, xtreme/) or one variant's (train/, dev/, test/)".into(),
        });
    }
    let splits = if splits.is_empty() { default_splits(data)? } else { splits.to_vec() };
    for (i, s) in splits.iter().enumerate() {
        if s.is_empty() || splits[..i].contains(s) {
            return Err(Error::argument("--split", format!("{s:?} is empty or named twice")));
        }
    }
    let reads: Vec<SplitRead> = splits.iter().map(|s| read_split(data, s)).collect::<Result<_>>()?;
    let find = |name: &str| reads.iter().find(|r| r.name == name).expect("every member split was read");
    Ok(Liputan6Stats {
        data: data.to_path_buf(),
        splits: reads.iter().map(|r| set_stats(&r.name, &[r])).collect(),
        combined: combined_sets(&splits)
            .iter()
            .map(|(name, members)| set_stats(name, &members.iter().map(|m| find(m)).collect::<Vec<_>>()))
            .collect(),
        chronology: chronology(&reads),
    })
}

/// `n` with thousands separated by commas (193,883).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A percentage with two decimals, `–` when absent.
fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"))
}

impl Liputan6Stats {
    /// Every set: the splits, then the combined sets.
    fn sets(&self) -> impl Iterator<Item = &SetStats> {
        self.splits.iter().chain(&self.combined)
    }

    /// The report: the sizes table (Table 2's columns), the novel n-grams table (Table 1's),
    /// the paper's rows under ours when the data is the release, and Fig. 2's fifths.
    pub fn markdown(&self) -> String {
        let articles: usize = self.splits.iter().map(|s| s.articles).sum();
        let mut out = format!(
            "Liputan6 statistics of {} ({} splits, {} articles)\n\n",
            self.data.display(),
            self.splits.len(),
            thousands(articles)
        );
        out.push_str(
            "| Set | Articles | Article words | Article sentences | Article vocabulary | Summary words | Summary sentences | Summary vocabulary |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in self.sets() {
            let (a, m) = (&s.article, &s.summary);
            out.push_str(&format!(
                "| {} | {} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {} |\n",
                s.name,
                thousands(s.articles),
                a.mean_words,
                a.mean_sentences,
                thousands(a.vocabulary),
                m.mean_words,
                m.mean_sentences,
                thousands(m.vocabulary)
            ));
            if let Some((p, sizes)) = s.paper.as_ref().and_then(|p| p.sizes.as_ref().map(|z| (p, z))) {
                out.push_str(&format!(
                    "| paper, {} (split not stated) | {} | {:.2} | {:.2} | {:.0}K | {:.2} | {:.2} | {:.0}K |\n",
                    p.source,
                    thousands(RELEASE[..3].iter().sum()),
                    sizes.article_words,
                    sizes.article_sentences,
                    sizes.article_vocabulary_thousands,
                    sizes.summary_words,
                    sizes.summary_sentences,
                    sizes.summary_vocabulary_thousands
                ));
            }
        }
        out.push_str(
            "\nWords: the release's tokens (punctuation included) as its scripts read them: joined by spaces, \
             lowercased, split on white space. Vocabulary: distinct words.\n\n",
        );
        out.push_str(
            "| Set | Novel 1-grams % | 2-grams | 3-grams | 4-grams | Pooled 1-grams % | 2-grams | 3-grams | 4-grams | ≥ 90% novel 4-grams |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in self.sets() {
            let n = &s.novel;
            let cells: Vec<String> = n.mean.iter().chain(&n.pooled).map(|v| percent(*v)).collect();
            out.push_str(&format!(
                "| {} | {} | {} of {} |\n",
                s.name,
                cells.join(" | "),
                thousands(n.xtreme_eligible),
                thousands(s.articles)
            ));
            if let Some(p) = &s.paper {
                let novel: Vec<String> = match p.novel {
                    Some(v) => v.iter().map(|x| format!("{x:.1}")).collect(),
                    None => vec!["–".to_string(); 4],
                };
                // The paper does not say whether it averaged or pooled: its figures go under both.
                let kept = p.xtreme_kept.map_or_else(|| "–".to_string(), thousands);
                let novel = novel.join(" | ");
                out.push_str(&format!("| paper, {} | {novel} | {novel} | {kept} |\n", p.source));
            }
        }
        out.push_str(
            "\nNovel n-grams: a summary's distinct n-grams (across its sentences) absent from its article's, as a \
             percentage of its distinct n-grams, averaged over the summaries (the measure of the paper's Xtreme rule); \
             pooled: all the summaries' novel n-grams over all their n-grams (PreSumm's post_stats.py). ≥ 90% novel \
             4-grams: the summaries the Xtreme variant keeps. The paper's Table 1 is over dev and test together; it \
             does not say whether it averaged or pooled, so its figures stand under both.\n",
        );
        if let Some(c) = &self.chronology {
            out.push_str(&format!(
                "\nNovel n-grams by chronological fifth (Fig. 2): {} articles (each id once) ordered by id {}.\n\n\
                 | Fifth | Articles | Ids | 1-grams % | 2-grams | 3-grams | 4-grams |\n|---|---:|---|---:|---:|---:|---:|\n",
                thousands(c.articles),
                if c.numeric_ids { "as a number" } else { "as text" }
            ));
            for f in &c.fifths {
                let cells: Vec<String> = f.novel_mean.iter().map(|v| percent(*v)).collect();
                out.push_str(&format!(
                    "| {} | {} | {} … {} | {} |\n",
                    f.fifth,
                    thousands(f.articles),
                    f.first_id,
                    f.last_id,
                    cells.join(" | ")
                ));
            }
        }
        out
    }

    /// Fig. 2 as a bar chart: each fifth's novel n-gram percentages, a bar per order.
    pub fn fifths_chart(&self) -> Result<BarChart> {
        let c = self.chronology.as_ref().ok_or_else(|| {
            Error::data("report liputan6-stats", "Fig. 2 needs at least 5 articles to cut into fifths")
        })?;
        Ok(BarChart {
            title: "Novel n-grams of the summaries by chronological fifth (Liputan6 Fig. 2)".into(),
            x_label: format!(
                "fifth of the articles, ordered by id {}",
                if c.numeric_ids { "(number)" } else { "(text)" }
            ),
            y_label: "% novel n-grams (mean over summaries)".into(),
            categories: c.fifths.iter().map(|f| f.fifth.to_string()).collect(),
            series: ORDERS
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    let values: Vec<f64> = c.fifths.iter().map(|f| f.novel_mean[k].unwrap_or(f64::NAN)).collect();
                    (format!("{n}-grams"), values)
                })
                .collect(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Fig. 4: the positions of the picked sentences.

/// An extractive system's summaries to place: a `finetune summarize` run folder (its
/// `<split>.candidate`) or a `.candidate` file, with its name in the tables.
#[derive(Debug, Clone, PartialEq)]
pub struct PicksSource {
    /// Its name in the tables and the chart.
    pub name: String,
    /// The run folder or the file.
    pub path: PathBuf,
}

impl std::str::FromStr for PicksSource {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, path) = match s.split_once('=') {
            Some((name, path)) => (name.to_string(), PathBuf::from(path)),
            None => {
                let path = PathBuf::from(s);
                // A `.candidate` file is named by its run folder.
                let named: &Path = match path.extension() {
                    Some(e) if e == "candidate" => {
                        path.parent().filter(|p| p.file_name().is_some()).unwrap_or(path.as_path())
                    }
                    _ => path.as_path(),
                };
                (named.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(), path)
            }
        };
        if name.is_empty() || path.as_os_str().is_empty() {
            return Err(format!("expected PATH or NAME=PATH (a run folder or a .candidate file), found {s:?}"));
        }
        Ok(PicksSource { name, path })
    }
}

/// One system's positions: counts and shares per position bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemPositions {
    /// `Oracle`, or the source's name.
    pub name: String,
    /// Where its picks came from.
    pub source: String,
    /// Articles.
    pub articles: usize,
    /// Sentences picked in all.
    pub picked: usize,
    /// Picks at positions 1..N, then after N.
    pub counts: Vec<usize>,
    /// The same as percentages of the picks.
    pub percent: Vec<f64>,
    /// Mean picks per article.
    pub per_article: f64,
    /// % of the picks at positions 1 and 2.
    pub first_two: f64,
    /// % of the articles whose picks include sentences 1 and 2.
    pub with_both_first_two: f64,
    /// % of the articles whose picks include sentence 1 or 2.
    pub with_first_or_second: f64,
}

/// A figure of the paper's Fig. 4 discussion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperPositions {
    /// Fig. 4a (canonical test) or 4b (canonical train).
    pub source: String,
    /// Oracle or BertExt.
    pub system: String,
    /// "x% of summaries involve the first two sentences".
    pub first_two: f64,
}

/// `indolm report extraction-positions`: every system's histogram on one split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PositionReport {
    /// The data folder.
    pub data: PathBuf,
    /// The split.
    pub split: String,
    /// Its articles.
    pub articles: usize,
    /// Positions with a bin each (then one for the rest).
    pub positions: usize,
    /// Articles whose Oracle label was computed (no `extractive_summary`).
    pub oracle_recomputed: usize,
    /// The Oracle first, then each source.
    pub systems: Vec<SystemPositions>,
    /// The paper's figures, when the split is the release's canonical test or train split.
    pub paper: Vec<PaperPositions>,
}

/// The sentences of `article` a summary line picks: each `<q>`-separated sentence matched to the
/// first article sentence (tokens joined by spaces) after the previous match; an empty line
/// picks nothing. Why not, when a sentence matches none.
fn match_picks(article: &[Vec<String>], line: &str) -> std::result::Result<Vec<usize>, String> {
    if line.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<String> = article.iter().map(|s| s.join(" ")).collect();
    let (mut picked, mut next) = (Vec::new(), 0);
    for segment in line.split(SENTENCE_SEPARATOR) {
        match (next..texts.len()).find(|&j| texts[j] == segment) {
            Some(j) => {
                picked.push(j);
                next = j + 1;
            }
            None => {
                return Err(format!(
                    "sentence {} is not one of the article's sentences after position {next}",
                    quoted(segment)
                ))
            }
        }
    }
    Ok(picked)
}

/// The histogram of `picks` (sentence indices per article) over `bins` positions and the rest.
fn histogram(name: &str, source: String, picks: &[Vec<usize>], bins: usize) -> Result<SystemPositions> {
    let mut counts = vec![0usize; bins + 1];
    for &j in picks.iter().flatten() {
        counts[j.min(bins)] += 1;
    }
    let picked: usize = counts.iter().sum();
    if picked == 0 {
        return Err(Error::data(format!("{name} ({source})"), "no sentence is picked in any article"));
    }
    let articles = picks.len();
    let share = |n: usize, of: usize| 100.0 * n as f64 / of as f64;
    let first_two = picks.iter().flatten().filter(|&&j| j < 2).count();
    let both = picks.iter().filter(|p| p.contains(&0) && p.contains(&1)).count();
    let either = picks.iter().filter(|p| p.contains(&0) || p.contains(&1)).count();
    Ok(SystemPositions {
        name: name.to_string(),
        source,
        articles,
        picked,
        percent: counts.iter().map(|&c| share(c, picked)).collect(),
        counts,
        per_article: picked as f64 / articles as f64,
        first_two: share(first_two, picked),
        with_both_first_two: share(both, articles),
        with_first_or_second: share(either, articles),
    })
}

/// The file a source's picks are read from: a run folder's `<split>.candidate` (`/` as `_`, as
/// `finetune summarize` writes it), or the file itself.
fn candidate_file(source: &PicksSource, split: &str) -> Result<PathBuf> {
    let file = if source.path.is_dir() {
        source.path.join(format!("{}.candidate", split.replace(['/', '\\'], "_")))
    } else {
        source.path.clone()
    };
    if !file.is_file() {
        return Err(Error::MissingFile {
            path: file,
            hint: format!(
                "expected a `finetune summarize` run folder with `{}.candidate`, or a .candidate file",
                split.replace(['/', '\\'], "_")
            ),
        });
    }
    Ok(file)
}

/// `indolm report extraction-positions`: the positions of the sentences the Oracle (the released
/// labels, else the release script's) and each source pick in the articles of `<data>/<split>`,
/// in bins 1..`positions` and one for the rest.
pub fn extraction_positions(
    data: &Path,
    split: &str,
    sources: &[PicksSource],
    positions: usize,
) -> Result<PositionReport> {
    if positions == 0 {
        return Err(Error::argument("--positions", "must be at least 1"));
    }
    for (i, s) in sources.iter().enumerate() {
        if s.name == "Oracle" || sources[..i].iter().any(|o| o.name == s.name) {
            return Err(Error::argument(
                "RUN_OR_FILE",
                format!("{:?} names two systems (or the Oracle): name them NAME=PATH", s.name),
            ));
        }
    }
    let files = split_files(data, split)?;
    let mut candidates: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for source in sources {
        let file = candidate_file(source, split)?;
        let lines: Vec<String> = read_to_string(&file)?.lines().map(String::from).collect();
        if lines.len() != files.len() {
            return Err(Error::invalid(
                &file,
                format!(
                    "{} summary lines for the {} articles of {split}: not the summaries of this split",
                    lines.len(),
                    files.len()
                ),
            ));
        }
        candidates.push((file, lines));
    }
    let indices: Vec<usize> = (0..files.len()).collect();
    let per_article = map_on_every_core(&indices, |&i| {
        let a = load_article(&files[i])?;
        let recomputed = a.extractive.is_none();
        let oracle = a.extractive.clone().unwrap_or_else(|| oracle_liputan6(&a.article, &a.summary));
        let picks = candidates
            .iter()
            .map(|(file, lines)| {
                match_picks(&a.article, &lines[i]).map_err(|why| {
                    Error::invalid(
                        file,
                        format!(
                            "line {}: {why} ({}): not an extractive summary of this article (a BertExt run's \
                             `.candidate`, sentences separated by `<q>`)",
                            i + 1,
                            files[i].display()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((oracle, recomputed, picks))
    })?;
    let oracle: Vec<Vec<usize>> = per_article.iter().map(|(o, _, _)| o.clone()).collect();
    let oracle_recomputed = per_article.iter().filter(|(_, r, _)| *r).count();
    let labels = match oracle_recomputed {
        0 => "the released extractive_summary labels".to_string(),
        n if n == files.len() => "labels computed as the release's 2_create_extractive_label.py does".to_string(),
        n => format!("the released extractive_summary labels, {n} computed as the release's script does"),
    };
    let mut systems = vec![histogram("Oracle", labels, &oracle, positions)?];
    for (k, (source, (file, _))) in sources.iter().zip(&candidates).enumerate() {
        let picks: Vec<Vec<usize>> = per_article.iter().map(|(_, _, p)| p[k].clone()).collect();
        systems.push(histogram(&source.name, file.display().to_string(), &picks, positions)?);
    }
    let paper_row = |source: &str, system: &str, first_two| PaperPositions {
        source: source.into(),
        system: system.into(),
        first_two,
    };
    let paper = match (last_of(split), files.len()) {
        ("test", n) if n == RELEASE[2] => vec![
            paper_row("Fig. 4a: canonical test", "Oracle", 42.54),
            paper_row("Fig. 4a: canonical test", "BertExt (mBERT)", 65.47),
        ],
        ("train", n) if n == RELEASE[0] => vec![paper_row("Fig. 4b: canonical train", "Oracle", 43.14)],
        _ => Vec::new(),
    };
    Ok(PositionReport {
        data: data.to_path_buf(),
        split: split.to_string(),
        articles: files.len(),
        positions,
        oracle_recomputed,
        systems,
        paper,
    })
}

impl PositionReport {
    /// The bins' names: `1` … `N`, then `>N`.
    fn bins(&self) -> Vec<String> {
        (1..=self.positions).map(|p| p.to_string()).chain([format!(">{}", self.positions)]).collect()
    }

    /// The report: the histogram (a column per system), then each system's summary figures with
    /// the paper's under them when the split is the release's.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "Positions of the picked sentences in {} of {} ({} articles), % of the picked sentences\n\n| Position |",
            self.split,
            self.data.display(),
            thousands(self.articles)
        );
        for s in &self.systems {
            out.push_str(&format!(" {} |", s.name));
        }
        out.push_str(&format!("\n|---|{}\n", "---:|".repeat(self.systems.len())));
        for (b, bin) in self.bins().iter().enumerate() {
            out.push_str(&format!("| {bin} |"));
            for s in &self.systems {
                out.push_str(&format!(" {:.2} |", s.percent[b]));
            }
            out.push('\n');
        }
        out.push_str(
            "\n| System | Articles | Picked | Per article | Positions 1–2 % of picks | Articles with 1 and 2 % | Articles with 1 or 2 % |\n\
             |---|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in &self.systems {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
                s.name,
                thousands(s.articles),
                thousands(s.picked),
                s.per_article,
                s.first_two,
                s.with_both_first_two,
                s.with_first_or_second
            ));
        }
        for p in &self.paper {
            let (source, system, share) = (&p.source, &p.system, p.first_two);
            out.push_str(&format!("| paper, {source}: {system} | – | – | – | {share:.2} | – | – |\n"));
        }
        out.push('\n');
        for s in &self.systems {
            out.push_str(&format!("{}: {}.\n", s.name, s.source));
        }
        out.push_str(
            "Positions count from 1 in the article as released; a summary's sentences are matched in order to the \
             article's, identical sentences to the earliest.",
        );
        if !self.paper.is_empty() {
            out.push_str(
                " The paper says \"x% of summaries involve the first two sentences\"; set beside the share of picks at \
                 positions 1–2 here, as the likeliest reading of its Fig. 4.",
            );
        }
        out.push('\n');
        out
    }

    /// Fig. 4 as a bar chart: a bar per system at each position bin.
    pub fn chart(&self) -> BarChart {
        BarChart {
            title: format!("Positions of the picked sentences, {} (Liputan6 Fig. 4)", self.split),
            x_label: "sentence position in the article".into(),
            y_label: "% of the picked sentences".into(),
            categories: self.bins(),
            series: self.systems.iter().map(|s| (s.name.clone(), s.percent.clone())).collect(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Grouped bar charts.

/// A grouped bar chart of percentages: a bar per series in each category (a value that is not
/// finite draws no bar).
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Printed at the top.
    pub title: String,
    /// Under the categories.
    pub x_label: String,
    /// Above the y axis.
    pub y_label: String,
    /// The groups, left to right.
    pub categories: Vec<String>,
    /// (legend label, a value per category).
    pub series: Vec<(String, Vec<f64>)>,
}

/// The pixel size of every bar chart.
pub const CHART_SIZE: (u32, u32) = (960, 540);

/// Room left of the plot (tick labels), right of it, above it (title, legend, y label) and under
/// it (category labels, x label).
const PLOT_MARGINS: (i32, i32, i32, i32) = (72, 24, 96, 64);

/// The y axis's top (a multiple of 10, at least 10) and its tick step.
fn y_scale(chart: &BarChart) -> (f64, f64) {
    let max = chart.series.iter().flat_map(|(_, v)| v).copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    let top = ((max / 10.0).ceil() * 10.0).max(10.0);
    (top, if top <= 50.0 { 10.0 } else { 20.0 })
}

/// Draws `chart` on `root` ([`CHART_SIZE`]).
fn draw_bars<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &BarChart) -> std::result::Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (w, h) = (CHART_SIZE.0 as i32, CHART_SIZE.1 as i32);
    let (left, right, top, bottom) = PLOT_MARGINS;
    let (x0, x1, y0, y1) = (left, w - right, top, h - bottom);
    let anchored = |size: u32, across: HPos, down: VPos| {
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(across, down))
    };
    root.fill(&WHITE).map_err(e)?;
    root.draw(&Text::new(chart.title.clone(), (w / 2, 10), anchored(20, HPos::Center, VPos::Top))).map_err(e)?;
    // The legend: a square and the label, left to right.
    let mut x = x0;
    for (i, (label, _)) in chart.series.iter().enumerate() {
        root.draw(&Rectangle::new([(x, 44), (x + 14, 58)], Palette99::pick(i).to_rgba().filled())).map_err(e)?;
        root.draw(&Text::new(label.clone(), (x + 20, 51), anchored(15, HPos::Left, VPos::Center))).map_err(e)?;
        x += 44 + 8 * label.chars().count() as i32;
    }
    root.draw(&Text::new(chart.y_label.clone(), (x0, y0 - 12), anchored(14, HPos::Left, VPos::Bottom))).map_err(e)?;
    let (y_top, step) = y_scale(chart);
    let y_of = |v: f64| y1 - (v.clamp(0.0, y_top) / y_top * f64::from(y1 - y0)).round() as i32;
    let mut tick = 0.0;
    while tick <= y_top + 1e-9 {
        let y = y_of(tick);
        root.draw(&PathElement::new(vec![(x0, y), (x1, y)], RGBColor(225, 225, 225).stroke_width(1))).map_err(e)?;
        root.draw(&Text::new(format!("{tick:.0}"), (x0 - 6, y), anchored(12, HPos::Right, VPos::Center))).map_err(e)?;
        tick += step;
    }
    let groups = chart.categories.len().max(1) as f64;
    let group = f64::from(x1 - x0) / groups;
    let bar = group * 0.8 / chart.series.len().max(1) as f64;
    for (c, category) in chart.categories.iter().enumerate() {
        let start = f64::from(x0) + group * c as f64 + group * 0.1;
        for (s, (_, values)) in chart.series.iter().enumerate() {
            let Some(&v) = values.get(c).filter(|v| v.is_finite()) else { continue };
            let (bx0, bx1) = ((start + bar * s as f64).round() as i32, (start + bar * (s + 1) as f64).round() as i32);
            let fill = Palette99::pick(s).to_rgba().filled();
            root.draw(&Rectangle::new([(bx0, y_of(v)), (bx1.max(bx0 + 1), y1)], fill)).map_err(e)?;
        }
        let centre = (f64::from(x0) + group * (c as f64 + 0.5)).round() as i32;
        root.draw(&Text::new(category.clone(), (centre, y1 + 6), anchored(13, HPos::Center, VPos::Top))).map_err(e)?;
    }
    root.draw(&PathElement::new(vec![(x0, y0), (x0, y1), (x1, y1)], BLACK.stroke_width(1))).map_err(e)?;
    root.draw(&Text::new(chart.x_label.clone(), ((x0 + x1) / 2, h - 10), anchored(14, HPos::Center, VPos::Bottom)))
        .map_err(e)?;
    root.present().map_err(e)
}

/// `out`'s extension when it names a chart indolm draws (`png` or `svg`); else an error naming
/// `flag`, the option that gave it (checked before a report does its work).
pub fn chart_format(out: &Path, flag: &str) -> Result<String> {
    let ext = out.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    if ext != "png" && ext != "svg" {
        return Err(Error::argument(flag, format!("expected a .png or .svg file name, found extension {ext:?}")));
    }
    Ok(ext)
}

/// Draws `chart` to `out` (`.png` or `.svg`, [`CHART_SIZE`]) through a temporary name renamed
/// into place; `flag` names the option that gave `out`, for the error about its extension.
pub fn write_bar_chart(chart: &BarChart, out: &Path, flag: &str) -> Result<()> {
    let ext = chart_format(out, flag)?;
    register_system_font()?;
    let staging = Staging::keeping_extension(out);
    let tmp = staging.path().to_path_buf();
    let result = if ext == "png" {
        draw_bars(BitMapBackend::new(&tmp, CHART_SIZE).into_drawing_area(), chart)
    } else {
        draw_bars(SVGBackend::new(&tmp, CHART_SIZE).into_drawing_area(), chart)
    };
    if let Err(message) = result {
        return Err(Error::invalid(out, format!("drawing failed: {message}")));
    }
    staging.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sents(sentences: &[&str]) -> Vec<Vec<String>> {
        sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
    }

    #[test]
    fn words_are_split_as_python_splits_them() {
        let text = vec![vec!["Hujan".to_string(), "a\u{1c}b".to_string(), String::new()], vec!["x  y".to_string()]];
        assert_eq!(words(&text), vec!["hujan", "a", "b", "x", "y"]);
    }

    #[test]
    fn novel_ngrams_by_hand() {
        // Summary "a b c . d a" against the article "a b c . x": unigrams {a, b, c, ., d}, d new;
        // bigrams {ab, bc, c., .d, da}, the last two new; trigrams {abc, bc., c.d, .da}, the last
        // two new; 4-grams {abc., bc.d, c.da}, the last two new.
        let article = words(&sents(&["a b c .", "x"]));
        let summary = words(&sents(&["a b c .", "d a"]));
        let (total, novel) = novelty(&summary, &article);
        assert_eq!(total, [5, 5, 4, 3]);
        assert_eq!(novel, [1, 2, 2, 2]);
        // Repeated n-grams count once; a summary shorter than n has none of that order.
        let (total, novel) = novelty(&words(&sents(&["z z z"])), &article);
        assert_eq!((total, novel), ([1, 1, 1, 0], [1, 1, 1, 0]));
    }

    #[test]
    fn sets_are_averaged_per_summary_and_pooled() {
        let record = |total: [usize; 4], novel: [usize; 4]| ArticleRecord {
            id: String::new(),
            article_words: 0,
            article_sentences: 0,
            summary_words: 0,
            summary_sentences: 0,
            total,
            novel,
        };
        let (a, b) = (record([4, 3, 2, 10], [1, 3, 2, 9]), record([1, 0, 0, 0], [1, 0, 0, 0]));
        let n = novel_of(&[&a, &b]);
        assert_eq!(n.mean, [Some(62.5), Some(100.0), Some(100.0), Some(90.0)]);
        assert_eq!(n.pooled, [Some(40.0), Some(100.0), Some(100.0), Some(90.0)]);
        assert_eq!(n.summaries, [2, 1, 1, 1]);
        // 9 of 10 novel 4-grams is 90%: kept; none is not.
        assert_eq!(n.xtreme_eligible, 1);
        assert_eq!(novel_of(&[&b]).mean[3], None);
    }

    #[test]
    fn combined_sets_per_variant() {
        let splits: Vec<String> =
            ["canonical/train", "canonical/dev", "canonical/test", "xtreme/dev", "xtreme/test", "other/dev"]
                .map(String::from)
                .to_vec();
        let names: Vec<String> = combined_sets(&splits).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["canonical dev+test", "canonical train+dev+test", "xtreme dev+test"]);
        let plain: Vec<String> = ["test", "dev"].map(String::from).to_vec();
        assert_eq!(combined_sets(&plain), vec![("dev+test".to_string(), vec!["dev".to_string(), "test".to_string()])]);
    }

    #[test]
    fn the_release_is_recognized_by_its_counts() {
        let table1 = paper_figures(&[("dev", 10_972), ("test", 10_972)]).unwrap();
        assert_eq!(table1.novel, Some([16.2, 52.5, 71.8, 82.4]));
        assert_eq!(table1.xtreme_kept, Some(8_810));
        let xtreme = paper_figures(&[("dev", 4_948), ("test", 3_862)]).unwrap();
        assert_eq!(xtreme.novel, Some([22.2, 66.7, 87.5, 96.6]));
        let all = paper_figures(&[("train", 193_883), ("dev", 10_972), ("test", 10_972)]).unwrap();
        assert_eq!(all.novel, Some([12.9, 41.6, 57.6, 66.9]));
        assert!(all.sizes.is_some());
        assert_eq!(paper_figures(&[("test", 10_972)]).unwrap().xtreme_kept, Some(3_862));
        assert_eq!(paper_figures(&[("dev", 10_971), ("test", 10_972)]), None);
        assert_eq!(paper_figures(&[("train", 35)]), None);
    }

    #[test]
    fn picks_are_matched_in_order() {
        let article = sents(&["a b .", "c d .", "a b .", "e ."]);
        assert_eq!(match_picks(&article, "a b .<q>e ."), Ok(vec![0, 3]));
        // The same sentence twice: the earliest after the previous match.
        assert_eq!(match_picks(&article, "a b .<q>a b ."), Ok(vec![0, 2]));
        assert_eq!(match_picks(&article, ""), Ok(vec![]));
        assert!(match_picks(&article, "e .<q>c d .").unwrap_err().contains("after position 4"));
        assert!(match_picks(&article, "a b").is_err());
    }

    #[test]
    fn histograms_bin_the_later_positions_together() {
        let h = histogram("x", String::new(), &[vec![0, 1, 7], vec![1, 2]], 3).unwrap();
        assert_eq!(h.counts, vec![1, 2, 1, 1]);
        assert_eq!(h.percent, vec![20.0, 40.0, 20.0, 20.0]);
        assert_eq!((h.first_two, h.with_both_first_two, h.with_first_or_second), (60.0, 50.0, 100.0));
        assert_eq!(h.per_article, 2.5);
        assert!(histogram("x", String::new(), &[vec![]], 3).is_err());
    }

    #[test]
    fn picks_sources_are_named_by_their_run() {
        let s: PicksSource = "checkpoints/run-a/canonical_test.candidate".parse().unwrap();
        assert_eq!(s.name, "run-a");
        let s: PicksSource = "checkpoints/run-a".parse().unwrap();
        assert_eq!(s.name, "run-a");
        let s: PicksSource = "Mine=x.candidate".parse().unwrap();
        assert_eq!((s.name.as_str(), s.path.as_path()), ("Mine", Path::new("x.candidate")));
        assert!("=x".parse::<PicksSource>().is_err());
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(193_883), "193,883");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
