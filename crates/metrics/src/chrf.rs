//! Corpus chrF and chrF++ exactly as the `sacrebleu` package
//! ([`crate::bleu::SACREBLEU_VERSION`]) computes them: character n-grams up to order 6 of each
//! line without its whitespace (Python's `str.split()`), word n-grams (chrF++: up to order 2) of
//! its words with one punctuation mark split off their ends, and for each line the reference
//! whose F-score is best; the matches are summed over the corpus, and the F-beta of the precision
//! and recall averaged over the orders that have n-grams on both sides (or, with
//! `eps_smoothing`, the mean of the orders' F-scores) is the score.
//!
//! [`corpus_chrf`] scores hypotheses against one or more reference streams into a [`ChrfScore`],
//! printed as sacrebleu prints it, with sacrebleu's signature ([`ChrfScore::signature`]).
use crate::bleu::{check_streams, python_split, SACREBLEU_VERSION};
use indolm_core::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::Hash;

/// What [`corpus_chrf`] is asked: the default is `sacrebleu.corpus_chrf`'s (and `CHRF()`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChrfOptions {
    /// The largest character n-gram order (6).
    pub char_order: usize,
    /// The largest word n-gram order: 0 for chrF, 2 for chrF++.
    pub word_order: usize,
    /// How many times recall weighs as much as precision (2).
    pub beta: u32,
    /// Lowercase every line first (Python's `str.lower`, as [`str::to_lowercase`]).
    pub lowercase: bool,
    /// Keep whitespace in the character n-grams (sacrebleu's `whitespace`, off).
    pub whitespace: bool,
    /// The mean of each order's F-score, 1e-16 standing for a missing one (chrF++.py's and
    /// NLTK's way), instead of averaging over the orders present on both sides (off).
    pub eps_smoothing: bool,
}

impl Default for ChrfOptions {
    fn default() -> Self {
        ChrfOptions { char_order: 6, word_order: 0, beta: 2, lowercase: false, whitespace: false, eps_smoothing: false }
    }
}

impl ChrfOptions {
    /// chrF++: the defaults with word n-grams up to order 2.
    pub fn plus_plus() -> Self {
        ChrfOptions { word_order: 2, ..ChrfOptions::default() }
    }

    /// Refuses no order at all (sacrebleu divides by zero).
    pub fn check(&self) -> Result<()> {
        if self.char_order + self.word_order == 0 {
            return Err(Error::argument(
                "char_order",
                "there must be character or word n-grams (an order of 1 or more)",
            ));
        }
        Ok(())
    }

    /// The n-grams of `line` of each order, characters first, then words.
    fn ngrams(&self, line: &str) -> Vec<HashMap<String, u64>> {
        let chars: Vec<char> =
            if self.whitespace { line.chars().collect() } else { python_split(line).flat_map(str::chars).collect() };
        let mut all: Vec<HashMap<String, u64>> =
            (1..=self.char_order).map(|n| counts(chars.windows(n).map(|g| g.iter().collect::<String>()))).collect();
        if self.word_order > 0 {
            let words = split_punctuation(line);
            all.extend((1..=self.word_order).map(|n| counts(words.windows(n).map(|g| g.join(" ")))));
        }
        all
    }
}

/// The count of each item.
fn counts<T: Hash + Eq>(items: impl Iterator<Item = T>) -> HashMap<T, u64> {
    let mut counts = HashMap::new();
    for item in items {
        *counts.entry(item).or_insert(0) += 1;
    }
    counts
}

/// ASCII punctuation, Python's `string.punctuation`.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
}

/// The words of `line` for chrF++ (sacrebleu's `_remove_punctuation`): a word of two characters
/// or more loses a punctuation mark at its end, or else at its start, to a word of its own.
fn split_punctuation(line: &str) -> Vec<&str> {
    let mut words = Vec::new();
    for word in python_split(line) {
        let mut chars = word.chars();
        let (first, last) = (chars.next(), chars.next_back());
        match (first, last) {
            (Some(_), Some(last)) if is_punctuation(last) => {
                let cut = word.len() - last.len_utf8();
                words.extend([&word[..cut], &word[cut..]]);
            }
            (Some(first), Some(_)) if is_punctuation(first) => {
                let cut = first.len_utf8();
                words.extend([&word[..cut], &word[cut..]]);
            }
            _ => words.push(word),
        }
    }
    words
}

/// chrF of summed statistics (sacrebleu's `_compute_f_score`), in its order of operations:
/// (hypothesis n-grams, reference n-grams, matches) of each order.
fn f_score(statistics: &[[u64; 3]], options: &ChrfOptions) -> f64 {
    const EPS: f64 = 1e-16;
    let factor = f64::from(options.beta * options.beta);
    let (mut score, mut avg_precision, mut avg_recall, mut effective_order) = (0.0, 0.0, 0.0, 0u32);
    for &[hyp, reference, matches] in statistics {
        let precision = if hyp > 0 { matches as f64 / hyp as f64 } else { EPS };
        let recall = if reference > 0 { matches as f64 / reference as f64 } else { EPS };
        let denominator = factor * precision + recall;
        score += if denominator > 0.0 { (1.0 + factor) * precision * recall / denominator } else { EPS };
        if hyp > 0 && reference > 0 {
            avg_precision += precision;
            avg_recall += recall;
            effective_order += 1;
        }
    }
    if options.eps_smoothing {
        return 100.0 * score / statistics.len() as f64;
    }
    if effective_order == 0 {
        (avg_precision, avg_recall) = (0.0, 0.0);
    } else {
        avg_precision /= f64::from(effective_order);
        avg_recall /= f64::from(effective_order);
    }
    if avg_precision + avg_recall == 0.0 {
        return 0.0;
    }
    let mut score = (1.0 + factor) * avg_precision * avg_recall;
    score /= factor * avg_precision + avg_recall;
    100.0 * score
}

/// One order's (hypothesis, reference, matches) of `hyp` against `reference`: no hypothesis
/// n-gram counts where the reference has none of the order (sacrebleu's `_get_match_statistics`).
fn match_statistics(hyp: &HashMap<String, u64>, reference: &HashMap<String, u64>) -> [u64; 3] {
    let mut hyp_count = 0;
    let mut matches = 0;
    for (gram, &count) in hyp {
        hyp_count += count;
        if let Some(&in_reference) = reference.get(gram) {
            matches += count.min(in_reference);
        }
    }
    let hyp_count = if reference.is_empty() { 0 } else { hyp_count };
    [hyp_count, reference.values().sum(), matches]
}

/// chrF of a corpus with its summed statistics, as sacrebleu's `CHRFScore`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChrfScore {
    /// chrF, 0–100.
    pub score: f64,
    /// (hypothesis n-grams, reference n-grams, matches) of each order, summed over the lines
    /// (each line's best reference): character orders from 1, then word orders from 1.
    pub statistics: Vec<[u64; 3]>,
    /// The reference streams.
    pub nrefs: usize,
    /// How it was computed.
    pub options: ChrfOptions,
}

impl ChrfScore {
    /// Its name as sacrebleu prints it: `chrF2`, `chrF2++` with word order 2.
    pub fn name(&self) -> String {
        format!("chrF{}{}", self.options.beta, "+".repeat(self.options.word_order))
    }

    /// sacrebleu's signature of the computation, as `CHRF(...).get_signature()` prints it, e.g.
    /// `nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0` (beta is not in it).
    pub fn signature(&self) -> String {
        let o = &self.options;
        format!(
            "nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:{SACREBLEU_VERSION}",
            self.nrefs,
            if o.lowercase { "lc" } else { "mixed" },
            if o.eps_smoothing { "no" } else { "yes" },
            o.char_order,
            o.word_order,
            if o.whitespace { "yes" } else { "no" }
        )
    }
}

/// As sacrebleu's `str(CHRFScore)`: `chrF2 = 31.05`.
impl std::fmt::Display for ChrfScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = {:.2}", self.name(), self.score)
    }
}

/// Corpus chrF of `hypotheses` against the reference streams `references` (each stream one
/// reference per hypothesis, aligned with them), as `sacrebleu.corpus_chrf` (or `CHRF(...)`'s
/// `corpus_score`) with `options`. Refused: no hypotheses, no stream, a stream of another length
/// than the hypotheses (sacrebleu would silently score the shorter), no order.
pub fn corpus_chrf<H, R, S>(hypotheses: &[H], references: &[R], options: &ChrfOptions) -> Result<ChrfScore>
where
    H: AsRef<str>,
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    options.check()?;
    check_streams("chrF", hypotheses.len(), references.iter().map(|r| r.as_ref().len()))?;
    let read = |line: &str| if options.lowercase { line.to_lowercase() } else { line.to_string() };
    let mut sums = vec![[0u64; 3]; options.char_order + options.word_order];
    for (i, hypothesis) in hypotheses.iter().enumerate() {
        let hyp = options.ngrams(&read(hypothesis.as_ref()));
        // The first reference with the best F-score.
        let mut best: Option<(f64, Vec<[u64; 3]>)> = None;
        for stream in references {
            let reference = options.ngrams(&read(stream.as_ref()[i].as_ref()));
            let stats: Vec<[u64; 3]> = hyp.iter().zip(&reference).map(|(h, r)| match_statistics(h, r)).collect();
            let f = f_score(&stats, options);
            if best.as_ref().is_none_or(|(best_f, _)| f > *best_f) {
                best = Some((f, stats));
            }
        }
        for (sum, stats) in sums.iter_mut().zip(best.map(|(_, stats)| stats).unwrap_or_default()) {
            for (s, v) in sum.iter_mut().zip(stats) {
                *s += v;
            }
        }
    }
    Ok(ChrfScore { score: f_score(&sums, options), statistics: sums, nrefs: references.len(), options: *options })
}

/// chrF of one hypothesis against its references, as `sacrebleu.sentence_chrf` with `options`.
pub fn sentence_chrf<S: AsRef<str>>(hypothesis: &str, references: &[S], options: &ChrfOptions) -> Result<ChrfScore> {
    let streams: Vec<[&str; 1]> = references.iter().map(|r| [r.as_ref()]).collect();
    corpus_chrf(&[hypothesis], &streams, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrf(hypotheses: &[&str], references: &[Vec<&str>], options: &ChrfOptions) -> ChrfScore {
        corpus_chrf(hypotheses, references, options).unwrap()
    }

    #[test]
    fn an_identical_corpus_scores_100() {
        let lines = ["Saya makan nasi goreng.", "Dia pergi ke pasar."];
        let score = chrf(&lines, &[lines.to_vec()], &ChrfOptions::default());
        assert_eq!(score.score, 100.0);
        assert_eq!(score.to_string(), "chrF2 = 100.00");
        assert_eq!(score.signature(), "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
        let plus = chrf(&lines, &[lines.to_vec()], &ChrfOptions::plus_plus());
        assert_eq!((plus.score, plus.to_string()), (100.0, "chrF2++ = 100.00".to_string()));
        assert_eq!(plus.signature(), "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0");
    }

    #[test]
    fn whitespace_is_left_out_of_the_character_ngrams() {
        // "ab c" is "abc" without its space: unigrams a b c, bigrams ab bc, the trigram abc.
        let score = chrf(&["ab c"], &[vec!["a\u{1c}bc"]], &ChrfOptions::default());
        assert_eq!(score.score, 100.0);
        assert_eq!(&score.statistics[..4], [[3, 3, 3], [2, 2, 2], [1, 1, 1], [0, 0, 0]]);
        let with_space = ChrfOptions { whitespace: true, ..ChrfOptions::default() };
        assert_eq!(chrf(&["ab c"], &[vec!["ab c"]], &with_space).statistics[0], [4, 4, 4]);
    }

    #[test]
    fn precision_and_recall_are_averaged_over_the_orders_both_sides_have() {
        // Hypothesis "ab", reference "abcd": P 1 for orders 1 and 2; R 2/4 and 1/3; orders 3–6
        // have no hypothesis n-gram.
        let score = chrf(&["ab"], &[vec!["abcd"]], &ChrfOptions::default());
        let (p, r) = ((1.0 + 1.0) / 2.0, (0.5 + 1.0 / 3.0) / 2.0);
        let expected = 100.0 * ((1.0 + 4.0) * p * r / (4.0 * p + r));
        assert!((score.score - expected).abs() < 1e-12, "{} vs {expected}", score.score);
        let eps = chrf(&["ab"], &[vec!["abcd"]], &ChrfOptions { eps_smoothing: true, ..ChrfOptions::default() });
        assert!(eps.score < score.score);
        assert!(eps.signature().contains("|eff:no|"));
    }

    #[test]
    fn empty_hypotheses_or_references_score_0() {
        assert_eq!(chrf(&["", "x"], &[vec!["abc", "y"]], &ChrfOptions::default()).score, 0.0);
        let score = chrf(&["abc"], &[vec![""]], &ChrfOptions::default());
        assert_eq!((score.score, score.statistics[0]), (0.0, [0, 0, 0]), "no reference n-gram: no hypothesis count");
    }

    #[test]
    fn the_reference_with_the_best_f_score_is_taken_the_first_of_equals() {
        let score = chrf(&["abc"], &[vec!["xyz"], vec!["abc"], vec!["abc d"]], &ChrfOptions::default());
        assert_eq!((score.score, score.nrefs), (100.0, 3));
        assert_eq!(score.statistics[0], [3, 3, 3]);
        assert!(score.signature().starts_with("nrefs:3|"));
    }

    #[test]
    fn chrf_plus_plus_splits_one_punctuation_mark_off_a_word() {
        assert_eq!(
            split_punctuation("(hai) kata-kata, \"ya\" ! …"),
            ["(hai", ")", "kata-kata", ",", "\"ya", "\"", "!", "…"]
        );
        assert_eq!(split_punctuation(".5 a."), [".", "5", "a", "."]);
        // Word bigrams: "saya makan" matches; the period is a word of its own.
        let score = chrf(&["saya makan."], &[vec!["saya makan ."]], &ChrfOptions::plus_plus());
        assert_eq!(&score.statistics[6..], [[3, 3, 3], [2, 2, 2]]);
    }

    #[test]
    fn lowercase_beta_and_bad_input() {
        let lower = ChrfOptions { lowercase: true, beta: 1, ..ChrfOptions::default() };
        let score = chrf(&["ABC"], &[vec!["abc"]], &lower);
        assert_eq!((score.score, score.to_string()), (100.0, "chrF1 = 100.00".to_string()));
        assert!(score.signature().contains("|case:lc|"));
        let none: [[&str; 1]; 0] = [];
        assert!(corpus_chrf(&["a"], &none, &ChrfOptions::default()).is_err());
        let err = corpus_chrf(&["a", "b"], &[["a"]], &ChrfOptions::default()).unwrap_err().to_string();
        assert!(err.contains("reference stream 1 has 1 lines but there are 2 hypotheses"), "{err}");
        let no_order = ChrfOptions { char_order: 0, ..ChrfOptions::default() };
        assert!(corpus_chrf(&["a"], &[["a"]], &no_order).is_err());
        assert_eq!(sentence_chrf("abc", &["abc"], &ChrfOptions::default()).unwrap().score, 100.0);
    }
}
