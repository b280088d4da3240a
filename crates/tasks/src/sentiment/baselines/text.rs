//! Word features as the NusaX authors' classical baselines build them (IndoNLP/nusax,
//! `code/notebook/sentiment_analysis_nusax_classical.ipynb`): each text is tokenized with NLTK's
//! `word_tokenize` and its tokens joined by spaces, then scikit-learn's `CountVectorizer()` or
//! `TfidfVectorizer()` with their defaults, fit on the training split: lowercased, tokens of the
//! pattern `(?u)\b\w\w+\b`, unigrams, every token kept (`min_df=1`, `max_df=1.0`), columns in
//! sorted token order; TF-IDF with the smooth idf `ln((1 + n) / (1 + df)) + 1` and each row
//! scaled to unit l2 norm.
//!
//! `word_tokenize` only inserts spaces and rewrites quotes, so what it changes in the word tokens
//! is where it cuts a word: `n't` off its word (`don't` gives `do`, where the pattern alone gives
//! `don`) when whitespace follows, and `cannot`, `gimme`, `gonna`, `gotta`, `lemme` and `wanna`
//! in two. [`word_tokens`] applies those cuts (NLTK 3.9's rules) and then the pattern; it gives
//! scikit-learn's tokens of NLTK's output on every text of NusaX sentiment. Two approximations,
//! neither met in NusaX (plain ASCII): Python's `\w` is taken as Rust's alphanumeric (which also
//! counts the combining marks Unicode calls alphabetic, such as Indic vowel signs), and a period
//! followed by whitespace is taken as the end of a sentence, as NLTK's Punkt model mostly decides.
use super::sparse::Csr;
use indolm_torch::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Python's `\w` (as used by scikit-learn's token pattern): `_` or a letter or digit.
fn is_word(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Python's `\s`: Unicode whitespace and the separators U+001C to U+001F.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The characters NLTK's tokenizer pads with a space before it cuts `n't`: `;@#$%&`, `?!`, `*`,
/// brackets, double quotes (rewritten as `''`), the typographic quotes and the dashes
/// U+2012 to U+2015.
const PADDED: &str = ";@#$%&?!*[](){}<>\"`«“‘„»”’\u{2012}\u{2013}\u{2014}\u{2015}";

/// What may close a sentence after its final period.
const CLOSERS: &str = "])}>\"'»”’";

/// Whether NLTK's tokenizer has whitespace right before `chars[k]` (`k` past the end: the end of
/// the sentence, which it pads with a space) when its contraction rules run. A loop over a run of
/// `'s`, `'m` and `'d` (each split off as a word), not a call each: a line of a million of them
/// is one pass, not a million frames of stack.
fn space_before(chars: &[char], mut k: usize) -> bool {
    loop {
        let Some(&c) = chars.get(k) else { return true };
        let next = chars.get(k + 1).copied();
        if is_space(c) || PADDED.contains(c) {
            return true;
        }
        return match c {
            // ` , ` unless a digit follows (`3,5` stays one token).
            ',' | ':' => !next.is_some_and(char::is_numeric),
            '-' => next == Some('-'),
            '.' => {
                // An ellipsis, or a sentence's final period (closing quotes and brackets may follow).
                next == Some('.') || chars[k + 1..].iter().find(|c| !CLOSERS.contains(**c)).is_none_or(|&c| is_space(c))
            }
            // A closing quote, `''`, or `'s`, `'m`, `'d` split off as words of their own.
            '\'' => match next {
                None => true,
                Some(n) if is_space(n) || n == '\'' => true,
                Some('s' | 'S' | 'm' | 'M' | 'd' | 'D') => {
                    k += 2;
                    continue;
                }
                Some(_) => false,
            },
            _ => false,
        };
    }
}

/// The words NLTK's contraction rules cut in two, lowercased, with the length of the first part.
const CONTRACTIONS: [(&str, usize); 5] = [("cannot", 3), ("gimme", 3), ("gonna", 3), ("gotta", 3), ("lemme", 3)];

/// scikit-learn's `CountVectorizer` tokens (lowercased, `\b\w\w+\b`) of
/// `" ".join(nltk.word_tokenize(text))`, in order (see the module's documentation).
pub(crate) fn word_tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < n {
        if !is_word(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && is_word(chars[i]) {
            i += 1;
        }
        let mut end = i;
        // `n't` (or `N'T`) then whitespace: NLTK cuts it off, and the `n` leaves the word.
        let nt = end - start >= 2
            && end + 2 <= n
            && chars[end] == '\''
            && matches!((chars[end - 1], chars[end + 1]), ('n', 't') | ('N', 'T'))
            && space_before(&chars, end + 2);
        if nt {
            end -= 1;
        }
        let word: String = chars[start..end].iter().collect::<String>().to_lowercase();
        let cut = CONTRACTIONS.iter().find(|(w, _)| *w == word).map(|&(_, at)| at).or_else(|| {
            // `wanna` only before whitespace.
            (word == "wanna" && (nt || space_before(&chars, end))).then_some(3)
        });
        match cut {
            Some(at) => {
                pieces.push((start, start + at));
                pieces.push((start + at, end));
            }
            None => pieces.push((start, end)),
        }
    }
    let mut tokens = Vec::new();
    for (start, end) in pieces {
        // Lowercasing may turn a letter into several characters, not all of them word characters
        // (`İ` is `i` and a combining dot): the pattern runs on the lowercased text.
        let lower = chars[start..end].iter().collect::<String>().to_lowercase();
        for token in lower.split(|c: char| !is_word(c)) {
            if token.chars().count() >= 2 {
                tokens.push(token.to_string());
            }
        }
    }
    tokens
}

/// The two feature kinds of the paper's Table 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FeatureKind {
    /// Word counts (`CountVectorizer()`).
    Bow,
    /// Counts times the smooth idf, each row of unit l2 norm (`TfidfVectorizer()`).
    Tfidf,
}

impl FeatureKind {
    /// Both, in the order the paper lists them (and ties between them go to the first).
    pub const ALL: [FeatureKind; 2] = [FeatureKind::Bow, FeatureKind::Tfidf];

    /// The name used in tables and JSON (`bow`, `tfidf`).
    pub fn name(self) -> &'static str {
        match self {
            FeatureKind::Bow => "bow",
            FeatureKind::Tfidf => "tfidf",
        }
    }
}

/// A vectorizer fit on the training texts: the sorted vocabulary and, for TF-IDF, its idf.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectorizer {
    kind: FeatureKind,
    /// The tokens, sorted (by code point, as Python sorts strings): column `i` is `vocabulary[i]`.
    vocabulary: Vec<String>,
    /// The column of each token.
    columns: HashMap<String, usize>,
    /// The idf of each column (TF-IDF only).
    idf: Option<Vec<f64>>,
}

impl Vectorizer {
    /// Fits on `texts` (the training split): every token seen is a column; the idf counts the
    /// texts holding each. An error when no text has a token (scikit-learn's "empty vocabulary").
    pub(crate) fn fit(texts: &[&str], kind: FeatureKind) -> Result<Vectorizer> {
        let tokenized: Vec<Vec<String>> = texts.iter().map(|t| word_tokens(t)).collect();
        let mut vocabulary: Vec<String> = tokenized.iter().flatten().cloned().collect();
        vocabulary.sort_unstable();
        vocabulary.dedup();
        if vocabulary.is_empty() {
            return Err(Error::data(
                "baseline features",
                format!(
                    "empty vocabulary: none of the {} training texts has a word of two or more letters",
                    texts.len()
                ),
            ));
        }
        let columns: HashMap<String, usize> = vocabulary.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect();
        let mut vectorizer = Vectorizer { kind, vocabulary, columns, idf: None };
        if kind == FeatureKind::Tfidf {
            let counts = vectorizer.counts(&tokenized);
            let mut df = vec![0usize; vectorizer.vocabulary.len()];
            for &c in &counts.indices {
                df[c] += 1;
            }
            // scikit-learn: idf = full(n + 1) / (df + 1), its log, plus 1.
            let n = (texts.len() + 1) as f64;
            vectorizer.idf = Some(df.iter().map(|&d| (n / (d as f64 + 1.0)).ln() + 1.0).collect());
        }
        Ok(vectorizer)
    }

    /// The feature kind.
    pub(crate) fn kind(&self) -> FeatureKind {
        self.kind
    }

    /// The columns' tokens, in column order.
    pub fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    /// The idf of each column (TF-IDF only).
    pub fn idf(&self) -> Option<&[f64]> {
        self.idf.as_deref()
    }

    /// The texts' features: one row per text; tokens not in the vocabulary are left out.
    pub(crate) fn transform(&self, texts: &[&str]) -> Csr {
        let tokenized: Vec<Vec<String>> = texts.iter().map(|t| word_tokens(t)).collect();
        let mut x = self.counts(&tokenized);
        if let Some(idf) = &self.idf {
            for (v, &c) in x.values.iter_mut().zip(&x.indices) {
                *v *= idf[c];
            }
            // scikit-learn's `inplace_csr_row_normalize_l2`: the squares summed in column order;
            // an all-zero row stays.
            for r in 0..x.rows() {
                let (start, end) = (x.indptr[r], x.indptr[r + 1]);
                let mut sum = 0.0;
                for v in &x.values[start..end] {
                    sum += v * v;
                }
                if sum == 0.0 {
                    continue;
                }
                let norm = sum.sqrt();
                for v in &mut x.values[start..end] {
                    *v /= norm;
                }
            }
        }
        x
    }

    /// The token counts of tokenized texts, by column.
    fn counts(&self, tokenized: &[Vec<String>]) -> Csr {
        let mut x = Csr::new(self.vocabulary.len());
        for tokens in tokenized {
            let mut counts: Vec<(usize, f64)> = Vec::new();
            let mut seen: HashMap<usize, usize> = HashMap::new();
            for t in tokens {
                if let Some(&c) = self.columns.get(t) {
                    match seen.get(&c) {
                        Some(&at) => counts[at].1 += 1.0,
                        None => {
                            seen.insert(c, counts.len());
                            counts.push((c, 1.0));
                        }
                    }
                }
            }
            counts.sort_unstable_by_key(|&(c, _)| c);
            x.push_row(counts);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_keeps_words_of_two_or_more_characters_lowercased() {
        assert_eq!(
            word_tokens("Makanannya ENAK sekali, 5 bintang! a_b x 12"),
            ["makanannya", "enak", "sekali", "bintang", "a_b", "12"]
        );
        assert_eq!(word_tokens("harga3,500rb"), ["harga3", "500rb"]);
        assert!(word_tokens(" . ! ").is_empty());
    }

    #[test]
    fn nltk_cuts_n_t_before_whitespace_and_punctuation() {
        // As checked against NLTK's tokenizer and scikit-learn's analyzer.
        assert_eq!(word_tokens("I don't know."), ["do", "know"]);
        assert_eq!(word_tokens("I don't\nknow"), ["do", "know"]);
        assert_eq!(word_tokens("can't, won't; DON'T! Don't"), ["ca", "wo", "do", "do"]);
        assert_eq!(word_tokens("isn't\""), ["is"]);
        assert_eq!(word_tokens("don't'"), ["do"]);
        assert_eq!(word_tokens("don't--"), ["do"]);
        assert_eq!(word_tokens("don't(x"), ["do"]);
        assert_eq!(word_tokens("don't:x"), ["do"]);
        // Not cut: a word character, a digit after the colon or comma, a single dash.
        assert_eq!(word_tokens("don'ts"), ["don", "ts"]);
        assert_eq!(word_tokens("don't:5"), ["don"]);
        assert_eq!(word_tokens("don't,5"), ["don"]);
        assert_eq!(word_tokens("don't-"), ["don"]);
        assert_eq!(word_tokens("don't.x"), ["don"]);
        assert_eq!(word_tokens("DoN't go"), ["don", "go"]);
    }

    #[test]
    fn nltk_contractions_are_cut_in_two() {
        assert_eq!(word_tokens("cannot"), ["can", "not"]);
        assert_eq!(word_tokens("Gotta go, gonna"), ["got", "ta", "go", "gon", "na"]);
        assert_eq!(word_tokens("I wanna go"), ["wan", "na", "go"]);
        assert_eq!(word_tokens("wanna."), ["wan", "na"]);
        // Inside a longer word, nothing is cut.
        assert_eq!(word_tokens("sibawanna bawanna."), ["sibawanna", "bawanna"]);
        assert_eq!(word_tokens("'tis"), ["tis"]);
    }

    #[test]
    fn long_lines_are_tokenized_in_one_pass() {
        // `n't` then a million `'s`: NLTK splits each off (sklearn then drops them, one letter);
        // a call a `'s` overflowed the stack.
        let start = std::time::Instant::now();
        let quotes = format!("don't{} go", "'s".repeat(1_000_000));
        assert_eq!(word_tokens(&quotes), ["do", "go"]);
        // A 10 MB line of words, and a word of a million letters.
        let words = "Makanannya enak sekali. ".repeat(420_000);
        assert_eq!(word_tokens(&words).len(), 3 * 420_000);
        let one = format!("x{}", "a".repeat(1_000_000));
        assert_eq!(word_tokens(&one), std::slice::from_ref(&one));
        let train = [words.as_str(), one.as_str(), "enak"];
        let tfidf = Vectorizer::fit(&train, FeatureKind::Tfidf).unwrap();
        assert_eq!(tfidf.vocabulary().len(), 4);
        assert_eq!(tfidf.transform(&[quotes.as_str(), words.as_str()]).row(1).indices, &[0, 1, 2]);
        assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
    }

    #[test]
    fn counts_and_tfidf_as_scikit_learn() {
        let train = ["a rumah rumah besar", "rumah kecil", "x"];
        let bow = Vectorizer::fit(&train, FeatureKind::Bow).unwrap();
        assert_eq!(bow.vocabulary(), ["besar", "kecil", "rumah"]);
        let x = bow.transform(&["rumah besar rumah baru", "baru"]);
        assert_eq!(x.row(0).indices, &[0, 2]);
        assert_eq!(x.row(0).values, &[1.0, 2.0]);
        assert!(x.row(1).indices.is_empty());
        let tfidf = Vectorizer::fit(&train, FeatureKind::Tfidf).unwrap();
        // n = 3; df: besar 1, kecil 1, rumah 2.
        let idf = [(4.0f64 / 2.0).ln() + 1.0, (4.0f64 / 2.0).ln() + 1.0, (4.0f64 / 3.0).ln() + 1.0];
        assert_eq!(tfidf.idf().unwrap(), &idf);
        let y = tfidf.transform(&["rumah besar rumah"]);
        let (a, b) = (idf[0], 2.0 * idf[2]);
        let norm = (a * a + b * b).sqrt();
        assert_eq!(y.row(0).values, &[a / norm, b / norm]);
        assert!(Vectorizer::fit(&["a b", "!"], FeatureKind::Bow).is_err());
    }
}
