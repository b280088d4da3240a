//! WordPiece training, deterministic: the algorithm of HF's `BertWordPieceTokenizer` trainer
//! (BPE merges over words, `##` continuation pieces, an alphabet limited to the 1,000 most
//! frequent characters, a minimum pair frequency), with every tie broken by a fixed order, so
//! the same text always gives the same vocabulary. (The `tokenizers` crate's trainer breaks
//! ties by hash order, which changes from run to run.) Words come from the same BERT
//! normalizer and pre-tokenizer the tokenizer uses.
use super::tokenizer::{bert_pipeline, TextTokenizer, SPECIAL_TOKENS};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

/// IndoBERT's (IndoLEM) vocabulary size.
pub const DEFAULT_VOCAB_SIZE: usize = 31_923;
const PREFIX: &str = "##";
const ALPHABET_LIMIT: usize = 1000;

/// What a trained vocabulary looks like.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// The vocabulary's size, special tokens and alphabet included (merging stops there, or
    /// earlier when no pair is frequent enough).
    pub vocab_size: usize,
    /// The fewest occurrences a pair needs to be merged.
    pub min_frequency: u64,
    /// Lowercase (and strip accents) before counting, as uncased BERT does.
    pub lowercase: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { vocab_size: DEFAULT_VOCAB_SIZE, min_frequency: 2, lowercase: true }
    }
}

/// Word frequencies after BERT normalization and pre-tokenization.
fn count_words(texts: &[String], normalizer: &BertNormalizer) -> Result<HashMap<String, u64>> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for text in texts {
        let mut normalized = NormalizedString::from(text.as_str());
        normalizer.normalize(&mut normalized).map_err(|e| Error::data("tokenizer training", e.to_string()))?;
        let mut pre = PreTokenizedString::from(normalized);
        BertPreTokenizer.pre_tokenize(&mut pre).map_err(|e| Error::data("tokenizer training", e.to_string()))?;
        for (word, _, _) in pre.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            *counts.entry(word.to_string()).or_default() += 1;
        }
    }
    Ok(counts)
}

struct Vocab {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Vocab {
    fn id(&mut self, token: &str) -> u32 {
        if let Some(&id) = self.ids.get(token) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.tokens.push(token.to_string());
        self.ids.insert(token.to_string(), id);
        id
    }
}

type Pair = (u32, u32);

fn pairs_of(symbols: &[u32]) -> impl Iterator<Item = Pair> + '_ {
    symbols.windows(2).map(|w| (w[0], w[1]))
}

/// Trains the WordPiece vocabulary (special tokens first, then the alphabet, then merges).
pub fn train_vocab(texts: &[String], options: &TrainOptions) -> Result<Vec<String>> {
    let normalizer = BertNormalizer::new(true, true, None, options.lowercase);
    let counts = count_words(texts, &normalizer)?;
    let mut words: Vec<(&String, u64)> = counts.iter().map(|(w, &c)| (w, c)).collect();
    words.sort_unstable();
    let alphabet = alphabet(&words);
    let mut vocab = Vocab { tokens: Vec::new(), ids: HashMap::new() };
    for t in SPECIAL_TOKENS {
        vocab.id(t);
    }
    for &ch in &alphabet {
        vocab.id(&ch.to_string());
    }
    let symbols = word_symbols(&words, &alphabet, &mut vocab);
    let mut merges = Merges::new(symbols);
    while vocab.tokens.len() < options.vocab_size {
        let Some((count, pair)) = merges.most_frequent() else { break };
        if count < options.min_frequency as i64 || count <= 0 {
            break;
        }
        let (a, b) = (&vocab.tokens[pair.0 as usize], &vocab.tokens[pair.1 as usize]);
        let merged = format!("{a}{}", b.strip_prefix(PREFIX).unwrap_or(b));
        let new_id = vocab.id(&merged);
        merges.merge(pair, new_id);
    }
    Ok(vocab.tokens)
}

/// The alphabet: the most frequent characters (ties by character), in character order.
fn alphabet(words: &[(&String, u64)]) -> Vec<char> {
    let mut char_counts: HashMap<char, u64> = HashMap::new();
    for (word, count) in words {
        for ch in word.chars() {
            *char_counts.entry(ch).or_default() += count;
        }
    }
    let mut alphabet: Vec<(char, u64)> = char_counts.into_iter().collect();
    alphabet.sort_unstable_by_key(|&(ch, n)| (Reverse(n), ch));
    alphabet.truncate(ALPHABET_LIMIT);
    alphabet.sort_unstable();
    alphabet.into_iter().map(|(ch, _)| ch).collect()
}

/// Words as symbol sequences with their counts: the first character plain, the others
/// `##`-prefixed, characters outside the alphabet dropped.
fn word_symbols(words: &[(&String, u64)], alphabet: &[char], vocab: &mut Vocab) -> Vec<(Vec<u32>, i64)> {
    let allowed: HashSet<char> = alphabet.iter().copied().collect();
    let mut symbols: Vec<(Vec<u32>, i64)> = Vec::with_capacity(words.len());
    for (word, count) in words {
        let mut seq = Vec::new();
        for (i, ch) in word.chars().enumerate() {
            if !allowed.contains(&ch) {
                continue;
            }
            let piece = if i == 0 { ch.to_string() } else { format!("{PREFIX}{ch}") };
            seq.push(vocab.id(&piece));
        }
        symbols.push((seq, *count as i64));
    }
    symbols
}

/// The merge loop's state: every word as symbols with its count, each adjacent pair's total
/// count and the words it occurs in, and the candidate pairs by count.
struct Merges {
    symbols: Vec<(Vec<u32>, i64)>,
    pair_counts: HashMap<Pair, i64>,
    where_found: HashMap<Pair, HashSet<usize>>,
    /// Max-heap by count, ties to the smaller pair of ids; stale entries are re-pushed.
    heap: BinaryHeap<(i64, Reverse<Pair>)>,
}

impl Merges {
    fn new(symbols: Vec<(Vec<u32>, i64)>) -> Self {
        let mut pair_counts: HashMap<Pair, i64> = HashMap::new();
        let mut where_found: HashMap<Pair, HashSet<usize>> = HashMap::new();
        for (w, (seq, count)) in symbols.iter().enumerate() {
            for pair in pairs_of(seq) {
                *pair_counts.entry(pair).or_default() += count;
                where_found.entry(pair).or_default().insert(w);
            }
        }
        let heap = pair_counts.iter().map(|(&p, &c)| (c, Reverse(p))).collect();
        Merges { symbols, pair_counts, where_found, heap }
    }

    /// The most frequent pair and its count (ties to the smaller pair of ids), or `None` when
    /// no pair is left. A heap entry whose count has changed since is pushed again with its
    /// current count (if any remains) and skipped.
    fn most_frequent(&mut self) -> Option<(i64, Pair)> {
        loop {
            let (count, Reverse(pair)) = self.heap.pop()?;
            let current = self.pair_counts.get(&pair).copied().unwrap_or(0);
            if current == count {
                return Some((count, pair));
            }
            if current > 0 {
                self.heap.push((current, Reverse(pair)));
            }
        }
    }

    /// Replaces `pair` with `new_id` in every word that holds it, in word order, updating the
    /// pair counts and pushing the changed pairs (in pair order) onto the heap.
    fn merge(&mut self, pair: Pair, new_id: u32) {
        let mut affected: Vec<usize> =
            self.where_found.remove(&pair).map(|s| s.into_iter().collect()).unwrap_or_default();
        affected.sort_unstable();
        let mut touched: HashSet<Pair> = HashSet::new();
        for w in affected {
            let (seq, n) = &mut self.symbols[w];
            if !pairs_of(seq).any(|p| p == pair) {
                continue;
            }
            for p in pairs_of(seq) {
                *self.pair_counts.get_mut(&p).expect("counted") -= *n;
                touched.insert(p);
            }
            *seq = merged(seq, pair, new_id);
            for p in pairs_of(seq) {
                *self.pair_counts.entry(p).or_default() += *n;
                self.where_found.entry(p).or_default().insert(w);
                touched.insert(p);
            }
        }
        self.pair_counts.remove(&pair);
        let mut touched: Vec<Pair> = touched.into_iter().filter(|p| *p != pair).collect();
        touched.sort_unstable();
        for p in touched {
            let c = self.pair_counts.get(&p).copied().unwrap_or(0);
            if c > 0 {
                self.heap.push((c, Reverse(p)));
            }
        }
    }
}

/// `seq` with every occurrence of `pair` (left to right, not overlapping) replaced by `new_id`.
fn merged(seq: &[u32], pair: Pair, new_id: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(seq.len());
    let mut i = 0;
    while i < seq.len() {
        if i + 1 < seq.len() && (seq[i], seq[i + 1]) == pair {
            out.push(new_id);
            i += 2;
        } else {
            out.push(seq[i]);
            i += 1;
        }
    }
    out
}

/// Trains a WordPiece tokenizer on `texts` (one paragraph each).
pub fn train_wordpiece(texts: &[String], options: &TrainOptions) -> Result<TextTokenizer> {
    if options.vocab_size <= SPECIAL_TOKENS.len() {
        return Err(Error::data(
            "--vocab-size",
            format!("must exceed the {} special tokens, found {}", SPECIAL_TOKENS.len(), options.vocab_size),
        ));
    }
    if texts.is_empty() {
        return Err(Error::data("tokenizer training", "no text to train on"));
    }
    let tokens = train_vocab(texts, options)?;
    let source = Path::new("<trained>");
    let vocab: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let model = WordPiece::builder()
        .vocab(vocab.into_iter().collect::<ahash::AHashMap<_, _>>())
        .unk_token("[UNK]".into())
        .continuing_subword_prefix(PREFIX.into())
        .build()
        .map_err(|e| Error::Tokenizer { path: source.into(), message: e.to_string() })?;
    let tokenizer = bert_pipeline(model, options.lowercase);
    TextTokenizer::from_tokenizer(tokenizer, source, options.lowercase)
}
