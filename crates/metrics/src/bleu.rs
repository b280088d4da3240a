//! Corpus BLEU (and sentence BLEU) exactly as the `sacrebleu` package ([`SACREBLEU_VERSION`])
//! computes it: its `13a` tokenizer (mteval-v13a.pl's, [`tokenize_13a`]) or none, optional
//! lowercasing, n-grams up to order 4 clipped by the largest count in any reference, the closest
//! reference length (ties to the shorter), and its four smoothings ([`Smoothing`]). What Python
//! does underneath is done as Python does it: `str.split()` and `str.rstrip()` split at
//! [`is_python_space`] (which holds \x1c–\x1f, unlike [`char::is_whitespace`]), the tokenizer's
//! regular expressions substitute left to right without overlap, and only ASCII 0–9 are digits.
//!
//! [`corpus_bleu`] scores hypotheses against one or more reference streams into a [`BleuScore`],
//! printed as sacrebleu prints it, with sacrebleu's signature ([`BleuScore::signature`]).
use indolm_core::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The sacrebleu release whose scores, printouts and signatures this module and `chrf` reproduce.
pub const SACREBLEU_VERSION: &str = "2.6.0";

/// sacrebleu's largest n-gram order (`MAX_NGRAM_ORDER`).
pub const MAX_NGRAM_ORDER: usize = 4;

/// Whether Python's `str.isspace` holds for `c`: Unicode's white space and also the separators
/// \x1c–\x1f, which Python counts and [`char::is_whitespace`] does not.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The words of `text` as Python's `text.split()` makes them: runs of [`is_python_space`]
/// separate, none is empty.
pub fn python_split(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_python_space).filter(|word| !word.is_empty())
}

/// How the lines are split into words before n-grams are counted (sacrebleu's `tokenize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
pub enum Tokenize {
    /// mteval-v13a.pl's tokenization, sacrebleu's default ([`tokenize_13a`]).
    #[default]
    #[value(name = "13a")]
    #[serde(rename = "13a")]
    Mteval13a,
    /// None: the line's own whitespace-separated words.
    #[value(name = "none")]
    #[serde(rename = "none")]
    None,
}

impl Tokenize {
    /// Its name in sacrebleu's signature (`tok:`).
    pub fn name(self) -> &'static str {
        match self {
            Tokenize::Mteval13a => "13a",
            Tokenize::None => "none",
        }
    }

    /// `line` tokenized, its words separated by single spaces.
    pub fn apply(self, line: &str) -> String {
        match self {
            Tokenize::Mteval13a => tokenize_13a(line),
            Tokenize::None => line.to_string(),
        }
    }
}

/// How a precision with no match is smoothed (sacrebleu's `smooth_method`; Chen and Cherry,
/// WMT 2014).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Smoothing {
    /// Not at all: one order without a match makes BLEU 0.
    None,
    /// A zero count becomes the smoothing value (default 0.1).
    Floor,
    /// Orders 2 and up add the smoothing value (default 1) to their matches and totals.
    AddK,
    /// mteval-v13a.pl's (NIST's): the k-th order without a match counts 1/2^k of a match;
    /// sacrebleu's default.
    #[default]
    Exp,
}

impl Smoothing {
    /// Its name in sacrebleu's signature.
    pub fn name(self) -> &'static str {
        match self {
            Smoothing::None => "none",
            Smoothing::Floor => "floor",
            Smoothing::AddK => "add-k",
            Smoothing::Exp => "exp",
        }
    }

    /// sacrebleu's value for `floor` (0.1) and `add-k` (1); the others take none.
    pub fn default_value(self) -> Option<f64> {
        match self {
            Smoothing::Floor => Some(0.1),
            Smoothing::AddK => Some(1.0),
            Smoothing::None | Smoothing::Exp => None,
        }
    }
}

/// What [`corpus_bleu`] is asked: the default is `sacrebleu.corpus_bleu`'s (and `BLEU()`'s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BleuOptions {
    /// Lowercase every line first (Python's `str.lower`, as [`str::to_lowercase`]).
    pub lowercase: bool,
    /// The tokenizer.
    pub tokenize: Tokenize,
    /// The smoothing.
    pub smoothing: Smoothing,
    /// The value of `floor` and `add-k` smoothing; `None` takes [`Smoothing::default_value`].
    pub smooth_value: Option<f64>,
    /// The largest n-gram order.
    pub max_ngram_order: usize,
    /// Average only the orders up to the last one the hypotheses have n-grams of (sacrebleu's
    /// `effective_order`): off for corpus BLEU, on for [`sentence_bleu`] in sacrebleu.
    pub effective_order: bool,
}

impl Default for BleuOptions {
    fn default() -> Self {
        BleuOptions {
            lowercase: false,
            tokenize: Tokenize::Mteval13a,
            smoothing: Smoothing::Exp,
            smooth_value: None,
            max_ngram_order: MAX_NGRAM_ORDER,
            effective_order: false,
        }
    }
}

impl BleuOptions {
    /// `sacrebleu.sentence_bleu`'s defaults: the corpus defaults with the effective order.
    pub fn sentence() -> Self {
        BleuOptions { effective_order: true, ..BleuOptions::default() }
    }

    /// Refuses what sacrebleu cannot compute or would compute nonsense with: order 0, a smoothing
    /// value that is negative or not a number.
    pub fn check(&self) -> Result<()> {
        if self.max_ngram_order == 0 {
            return Err(Error::argument("max_ngram_order", "must be at least 1"));
        }
        if let Some(value) = self.smooth_value {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::argument("smooth_value", format!("{value} is not a number of 0 or more")));
            }
        }
        Ok(())
    }

    /// The smoothing value in use: the one given or the method's default.
    fn smoothing_value(&self) -> Option<f64> {
        self.smooth_value.or(self.smoothing.default_value())
    }

    /// `line` as sacrebleu's BLEU reads it: lowercased if asked, trailing Python whitespace
    /// removed, tokenized.
    fn preprocess(&self, line: &str) -> String {
        let line = if self.lowercase { line.to_lowercase() } else { line.to_string() };
        self.tokenize.apply(line.trim_end_matches(is_python_space))
    }
}

/// Corpus BLEU with its sufficient statistics, as sacrebleu's `BLEUScore`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BleuScore {
    /// BLEU, 0–100.
    pub score: f64,
    /// Matched n-grams of each order (clipped by the reference counts), from unigrams up; as
    /// counted, also with add-k smoothing (whose k sacrebleu adds to its `counts` from order 2).
    pub counts: Vec<u64>,
    /// The hypotheses' n-grams of each order (as counted, like `counts`).
    pub totals: Vec<u64>,
    /// The (smoothed) precision of each order in percent; 0 past the first order without n-grams.
    pub precisions: Vec<f64>,
    /// The brevity penalty.
    pub bp: f64,
    /// The hypotheses' words.
    pub sys_len: u64,
    /// The reference words: for each line, its reference closest in length to the hypothesis.
    pub ref_len: u64,
    /// The reference streams.
    pub nrefs: usize,
    /// How it was computed.
    pub options: BleuOptions,
}

impl BleuScore {
    /// Hypothesis words per reference word (0 without reference words).
    pub fn ratio(&self) -> f64 {
        if self.ref_len == 0 {
            0.0
        } else {
            self.sys_len as f64 / self.ref_len as f64
        }
    }

    /// sacrebleu's signature of the computation, as `BLEU(...).get_signature()` prints it, e.g.
    /// `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`.
    pub fn signature(&self) -> String {
        let o = &self.options;
        let mut smooth = o.smoothing.name().to_string();
        if let Some(value) = o.smoothing_value() {
            smooth.push_str(&format!("[{value:.2}]"));
        }
        format!(
            "nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{smooth}|version:{SACREBLEU_VERSION}",
            self.nrefs,
            if o.lowercase { "lc" } else { "mixed" },
            if o.effective_order { "yes" } else { "no" },
            o.tokenize.name()
        )
    }
}

/// As sacrebleu's `str(BLEUScore)`: `BLEU = 9.69 36.1/14.1/6.0/2.9 (BP = 1.000 ratio = 1.002
/// hyp_len = 10614 ref_len = 10596)`.
impl std::fmt::Display for BleuScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let precisions: Vec<String> = self.precisions.iter().map(|p| format!("{p:.1}")).collect();
        write!(
            f,
            "BLEU = {:.2} {} (BP = {:.3} ratio = {:.3} hyp_len = {} ref_len = {})",
            self.score,
            precisions.join("/"),
            self.bp,
            self.ratio(),
            self.sys_len,
            self.ref_len
        )
    }
}

/// `line` as sacrebleu's `Tokenizer13a` (mteval-v13a.pl) tokenizes it: `<skipped>` and `-\n`
/// removed, line breaks made spaces, `&quot;` `&amp;` `&lt;` `&gt;` unescaped, then the four
/// substitutions of its `TokenizerRegexp` and one space between words. Only ASCII punctuation
/// is split off: “ ” … stay on their words.
pub fn tokenize_13a(line: &str) -> String {
    let mut line = line.replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }
    tokenize_regexp(&format!(" {line} "))
}

/// Whether `c` is in 13a's first class, `[\{-\~\[-\` -\&\(-\+\:-\@\/]`: ASCII punctuation
/// other than `'` `,` `-` `.` (and the space), each made a word of its own.
fn splits_alone(c: char) -> bool {
    matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/')
}

/// The substitution of a two-character pattern, as Python's `re.sub` makes it: from the left,
/// each match (`matches` of two neighbours) replaced by `replace` of them, the scan going on
/// after the match, so matches do not overlap.
fn substitute_pairs(
    chars: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char) -> [char; 4],
) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len() + chars.len() / 2);
    let mut i = 0;
    while i < chars.len() {
        if i + 1 < chars.len() && matches(chars[i], chars[i + 1]) {
            out.extend(replace(chars[i], chars[i + 1]));
            i += 2;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// sacrebleu's `TokenizerRegexp`: its four substitutions in order, then Python's
/// `' '.join(line.split())`.
fn tokenize_regexp(line: &str) -> String {
    let digit = |c: char| c.is_ascii_digit();
    let period_or_comma = |c: char| c == '.' || c == ',';
    // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
    let mut chars = Vec::with_capacity(line.len() * 2);
    for c in line.chars() {
        if splits_alone(c) {
            chars.extend([' ', c, ' ']);
        } else {
            chars.push(c);
        }
    }
    // ([^0-9])([\.,]) -> '\1 \2 ': period and comma unless preceded by a digit.
    let chars = substitute_pairs(&chars, |a, b| !digit(a) && period_or_comma(b), |a, b| [a, ' ', b, ' ']);
    // ([\.,])([^0-9]) -> ' \1 \2': period and comma unless followed by a digit.
    let chars = substitute_pairs(&chars, |a, b| period_or_comma(a) && !digit(b), |a, b| [' ', a, ' ', b]);
    // ([0-9])(-) -> '\1 \2 ': a dash after a digit.
    let chars = substitute_pairs(&chars, |a, b| digit(a) && b == '-', |a, b| [a, ' ', b, ' ']);
    let spaced: String = chars.into_iter().collect();
    python_split(&spaced).collect::<Vec<_>>().join(" ")
}

/// Each n-gram of `words` of orders 1 to `max_order` with its count.
fn ngram_counts<'a>(words: &'a [&'a str], max_order: usize) -> HashMap<&'a [&'a str], u64> {
    let mut counts = HashMap::new();
    for n in 1..=max_order.min(words.len()) {
        for gram in words.windows(n) {
            *counts.entry(gram).or_insert(0) += 1;
        }
    }
    counts
}

/// The reference length BLEU compares a hypothesis of `hyp_len` words with: the closest, the
/// shorter of two as close (sacrebleu's `_get_closest_ref_len`).
fn closest_ref_len(hyp_len: u64, ref_lens: &[u64]) -> u64 {
    let mut closest: Option<(u64, u64)> = None;
    for &len in ref_lens {
        let diff = hyp_len.abs_diff(len);
        closest = match closest {
            Some((best_diff, best_len)) if diff > best_diff || (diff == best_diff && len >= best_len) => {
                Some((best_diff, best_len))
            }
            _ => Some((diff, len)),
        };
    }
    closest.map_or(0, |(_, len)| len)
}

/// One line's statistics: hypothesis and reference length, then the matches and the totals of
/// each order.
fn segment_statistics(hypothesis: &str, references: &[String], options: &BleuOptions) -> Vec<u64> {
    let order = options.max_ngram_order;
    let reference_words: Vec<Vec<&str>> = references.iter().map(|r| python_split(r).collect()).collect();
    let mut reference_counts: HashMap<&[&str], u64> = HashMap::new();
    for words in &reference_words {
        for (gram, count) in ngram_counts(words, order) {
            let best = reference_counts.entry(gram).or_insert(0);
            *best = (*best).max(count);
        }
    }
    let ref_lens: Vec<u64> = reference_words.iter().map(|w| w.len() as u64).collect();
    let words: Vec<&str> = python_split(hypothesis).collect();
    let mut stats = vec![0; 2 + 2 * order];
    stats[0] = words.len() as u64;
    stats[1] = closest_ref_len(stats[0], &ref_lens);
    for (gram, count) in ngram_counts(&words, order) {
        let n = gram.len() - 1;
        stats[2 + order + n] += count;
        if let Some(&in_reference) = reference_counts.get(gram) {
            stats[2 + n] += count.min(in_reference);
        }
    }
    stats
}

/// sacrebleu's `my_log`: the logarithm, with -9999999999 for 0.
fn floored_log(x: f64) -> f64 {
    if x == 0.0 {
        -9_999_999_999.0
    } else {
        x.ln()
    }
}

/// BLEU from its summed statistics (sacrebleu's `compute_bleu`), in its order of operations.
fn score_statistics(stats: &[u64], nrefs: usize, options: &BleuOptions) -> BleuScore {
    let order = options.max_ngram_order;
    let (sys_len, ref_len) = (stats[0], stats[1]);
    let (counts, totals) = (stats[2..2 + order].to_vec(), stats[2 + order..].to_vec());
    let bp = match (sys_len < ref_len, sys_len > 0) {
        (false, _) => 1.0,
        (true, true) => (1.0 - ref_len as f64 / sys_len as f64).exp(),
        (true, false) => 0.0,
    };
    let mut precisions = vec![0.0; order];
    let mut score = 0.0;
    // No match at all: 0, whatever the smoothing (sacrebleu's early stop).
    if counts.iter().any(|&c| c > 0) {
        let value = options.smoothing_value().unwrap_or(0.0);
        let mut smooth_mteval = 1.0;
        let mut effective_order = order;
        for n in 1..=order {
            let (mut correct, mut total) = (counts[n - 1] as f64, totals[n - 1] as f64);
            if options.smoothing == Smoothing::AddK && n > 1 {
                correct += value;
                total += value;
            }
            if total == 0.0 {
                break;
            }
            if options.effective_order {
                effective_order = n;
            }
            precisions[n - 1] = if correct > 0.0 {
                100.0 * correct / total
            } else {
                match options.smoothing {
                    Smoothing::Exp => {
                        smooth_mteval *= 2.0;
                        100.0 / (smooth_mteval * total)
                    }
                    Smoothing::Floor => 100.0 * value / total,
                    Smoothing::None | Smoothing::AddK => 0.0,
                }
            };
        }
        let log_sum = precisions[..effective_order].iter().fold(0.0, |sum, &p| sum + floored_log(p));
        score = bp * (log_sum / effective_order as f64).exp();
    }
    BleuScore { score, counts, totals, precisions, bp, sys_len, ref_len, nrefs, options: *options }
}

/// Corpus BLEU of `hypotheses` against the reference streams `references` (each stream one
/// reference per hypothesis, aligned with them), as `sacrebleu.corpus_bleu(hypotheses,
/// references, ...)` with `options`. Refused: no hypotheses, no stream, a stream of another
/// length than the hypotheses (sacrebleu would silently score the shorter), bad options.
pub fn corpus_bleu<H, R, S>(hypotheses: &[H], references: &[R], options: &BleuOptions) -> Result<BleuScore>
where
    H: AsRef<str>,
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    options.check()?;
    check_streams("BLEU", hypotheses.len(), references.iter().map(|r| r.as_ref().len()))?;
    let mut sums = vec![0u64; 2 + 2 * options.max_ngram_order];
    for (i, hypothesis) in hypotheses.iter().enumerate() {
        let lines: Vec<String> =
            references.iter().map(|stream| options.preprocess(stream.as_ref()[i].as_ref())).collect();
        let stats = segment_statistics(&options.preprocess(hypothesis.as_ref()), &lines, options);
        for (sum, value) in sums.iter_mut().zip(stats) {
            *sum += value;
        }
    }
    Ok(score_statistics(&sums, references.len(), options))
}

/// BLEU of one hypothesis against its references, as `sacrebleu.sentence_bleu` with `options`
/// (whose defaults are [`BleuOptions::sentence`]: the effective order on).
pub fn sentence_bleu<S: AsRef<str>>(hypothesis: &str, references: &[S], options: &BleuOptions) -> Result<BleuScore> {
    let streams: Vec<[&str; 1]> = references.iter().map(|r| [r.as_ref()]).collect();
    corpus_bleu(&[hypothesis], &streams, options)
}

/// Refuses, for `metric`, an empty corpus, no reference stream, or a stream whose length (from
/// `streams`) is not the hypotheses' `count`.
pub(crate) fn check_streams(metric: &str, count: usize, streams: impl Iterator<Item = usize>) -> Result<()> {
    if count == 0 {
        return Err(Error::data(metric, "no hypotheses to score"));
    }
    let mut any = false;
    for (i, len) in streams.enumerate() {
        any = true;
        if len != count {
            return Err(Error::data(
                metric,
                format!("reference stream {} has {len} lines but there are {count} hypotheses", i + 1),
            ));
        }
    }
    if !any {
        return Err(Error::data(metric, "no reference stream"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bleu(hypotheses: &[&str], references: &[Vec<&str>]) -> BleuScore {
        corpus_bleu(hypotheses, references, &BleuOptions::default()).unwrap()
    }

    #[test]
    fn an_identical_corpus_scores_100() {
        let lines = ["Saya makan nasi goreng di warung.", "Dia pergi ke pasar pagi ini."];
        let score = bleu(&lines, &[lines.to_vec()]);
        // exp(ln 100), as sacrebleu computes it: 100 give or take a rounding.
        assert!((score.score - 100.0).abs() < 1e-12, "{score:?}");
        // Seven words each, the final period one of them.
        assert_eq!((score.counts.clone(), score.totals.clone()), (vec![14, 12, 10, 8], vec![14, 12, 10, 8]));
        assert_eq!(
            score.to_string(),
            "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 14 ref_len = 14)"
        );
        assert_eq!(score.signature(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    }

    #[test]
    fn empty_hypotheses_score_0_with_a_zero_brevity_penalty() {
        let score = bleu(&["", "  "], &[vec!["a b", "c"]]);
        assert_eq!((score.score, score.bp, score.sys_len, score.ref_len), (0.0, 0.0, 0, 3));
        assert_eq!(score.precisions, vec![0.0; 4]);
        assert_eq!(score.to_string(), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 3)");
        // Nothing in the references either: ratio 0 by sacrebleu's rule.
        assert_eq!(bleu(&[""], &[vec![""]]).ratio(), 0.0);
    }

    #[test]
    fn exp_smoothing_halves_each_order_without_a_match_and_a_longer_hypothesis_has_no_penalty() {
        // 5 hypothesis words, 4 reference words: unigrams 4/5, bigrams 2/4, no trigram or 4-gram.
        let score = bleu(&["a b x c d"], &[vec!["a b c d"]]);
        assert_eq!((score.counts.clone(), score.totals.clone()), (vec![4, 2, 0, 0], vec![5, 4, 3, 2]));
        assert_eq!(score.bp, 1.0);
        let expected = [80.0, 50.0, 100.0 / (2.0 * 3.0), 100.0 / (4.0 * 2.0)];
        assert_eq!(score.precisions, expected);
        let geometric = (expected.iter().map(|p: &f64| p.ln()).sum::<f64>() / 4.0).exp();
        assert!((score.score - geometric).abs() < 1e-12, "{score:?}");
        assert_eq!(
            score.to_string(),
            format!("BLEU = {geometric:.2} 80.0/50.0/16.7/12.5 (BP = 1.000 ratio = 1.250 hyp_len = 5 ref_len = 4)")
        );
        // A shorter hypothesis: BP = exp(1 - 4/3).
        let short = bleu(&["a b c"], &[vec!["a b c d"]]);
        assert_eq!(short.bp, (1.0 - 4.0 / 3.0f64).exp());
    }

    #[test]
    fn the_other_smoothings() {
        let run = |smoothing, smooth_value| {
            let options = BleuOptions { smoothing, smooth_value, ..BleuOptions::default() };
            corpus_bleu(&["a b x c d"], &[["a b c d"]], &options).unwrap()
        };
        let none = run(Smoothing::None, None);
        assert_eq!((none.score, none.precisions[2]), (0.0, 0.0));
        assert_eq!(none.signature(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:none|version:2.6.0");
        let floor = run(Smoothing::Floor, None);
        assert_eq!(floor.precisions, vec![80.0, 50.0, 100.0 * 0.1 / 3.0, 100.0 * 0.1 / 2.0]);
        assert_eq!(floor.signature(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:2.6.0");
        let add_k = run(Smoothing::AddK, Some(2.0));
        assert_eq!(add_k.precisions, vec![80.0, 400.0 / 6.0, 200.0 / 5.0, 200.0 / 4.0]);
        assert_eq!(add_k.counts, vec![4, 2, 0, 0], "the counts as counted, without k");
        assert!(add_k.signature().contains("|smooth:add-k[2.00]|"));
        // No match at all: 0 whatever the smoothing.
        let options = BleuOptions { smoothing: Smoothing::AddK, ..BleuOptions::default() };
        assert_eq!(corpus_bleu(&["x y"], &[["a b"]], &options).unwrap().score, 0.0);
    }

    #[test]
    fn several_references_clip_by_the_largest_count_and_take_the_closest_length_ties_shorter() {
        // "the" twice in the second reference: both hypothesis "the"s match.
        let score = bleu(&["the the cat"], &[vec!["the cat sat down"], vec!["the the"]]);
        assert_eq!(score.counts[0], 3);
        // Three words against 4 and 2: both 1 away, the shorter (2) is taken.
        assert_eq!(score.ref_len, 2);
        assert_eq!(closest_ref_len(3, &[5, 1, 2, 4]), 2);
        assert_eq!(closest_ref_len(3, &[4, 2]), 2);
        assert_eq!(closest_ref_len(3, &[7, 3]), 3);
        assert!(score.signature().starts_with("nrefs:2|"));
    }

    #[test]
    fn lowercase_and_no_tokenizer() {
        let options = BleuOptions { lowercase: true, ..BleuOptions::default() };
        let score = corpus_bleu(&["SAYA Makan Nasi Goreng."], &[["saya makan nasi goreng."]], &options).unwrap();
        assert_eq!((score.counts.clone(), score.totals.clone()), (vec![5, 4, 3, 2], vec![5, 4, 3, 2]));
        assert!(score.signature().contains("|case:lc|"));
        // Three words have no 4-gram: a corpus without any scores 0 (log 0 is floored).
        let short = corpus_bleu(&["saya makan."], &[["saya makan."]], &BleuOptions::default()).unwrap();
        assert_eq!((short.totals[3], short.score), (0, 0.0));
        let options = BleuOptions { tokenize: Tokenize::None, ..BleuOptions::default() };
        let score = corpus_bleu(&["saya makan."], &[["saya makan ."]], &options).unwrap();
        assert_eq!((score.counts[0], score.totals[0], score.ref_len), (1, 2, 3));
        assert!(score.signature().contains("|tok:none|"));
    }

    #[test]
    fn sentence_bleu_takes_the_effective_order() {
        // Two words: no trigram, so only unigrams and bigrams are averaged.
        let score = sentence_bleu("a b", &["a b"], &BleuOptions::sentence()).unwrap();
        assert!((score.score - 100.0).abs() < 1e-12, "{score:?}");
        assert_eq!(score.signature(), "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0");
        let corpus = corpus_bleu(&["a b"], &[["a b"]], &BleuOptions::default()).unwrap();
        assert!(corpus.score < 100.0, "{corpus:?}");
    }

    #[test]
    fn bad_input_is_refused() {
        let empty: [&str; 0] = [];
        let err = corpus_bleu(&empty, &[empty], &BleuOptions::default()).unwrap_err().to_string();
        assert!(err.contains("no hypotheses"), "{err}");
        let none: [[&str; 1]; 0] = [];
        assert!(corpus_bleu(&["a"], &none, &BleuOptions::default()).unwrap_err().to_string().contains("no reference"));
        let err = corpus_bleu(&["a", "b"], &[vec!["a", "b"], vec!["a"]], &BleuOptions::default()).unwrap_err();
        assert!(err.to_string().contains("reference stream 2 has 1 lines but there are 2 hypotheses"), "{err}");
        let options = BleuOptions { max_ngram_order: 0, ..BleuOptions::default() };
        assert!(corpus_bleu(&["a"], &[["a"]], &options).is_err());
        let options =
            BleuOptions { smoothing: Smoothing::Floor, smooth_value: Some(f64::NAN), ..BleuOptions::default() };
        assert!(corpus_bleu(&["a"], &[["a"]], &options).is_err());
    }

    #[test]
    fn thirteen_a_unescapes_and_removes_before_splitting() {
        assert_eq!(tokenize_13a("a<skipped>b"), "ab");
        assert_eq!(tokenize_13a("infor-\nmasi baru\nbaris"), "informasi baru baris");
        assert_eq!(tokenize_13a("&quot;AT&amp;T&quot; &lt;b&gt;"), "\" AT & T \" < b >");
        // One pass each, left to right: the unescaped & does not start another entity.
        assert_eq!(tokenize_13a("&amp;quot;"), "& quot ;");
    }

    #[test]
    fn thirteen_a_first_pass_splits_ascii_punctuation_but_not_apostrophes_or_unicode() {
        assert_eq!(
            tokenize_13a("(halo)! a/b {c} [d] e@f #1 x+y=z ~`^_|"),
            "( halo ) ! a / b { c } [ d ] e @ f # 1 x + y = z ~ ` ^ _ |"
        );
        assert_eq!(tokenize_13a("Jum'at"), "Jum'at");
        assert_eq!(tokenize_13a("“Halo” katanya… «ya» — ¿no?"), "“Halo” katanya… «ya» — ¿no ?");
    }

    #[test]
    fn thirteen_a_periods_and_commas_split_unless_between_digits() {
        // Pass 2 splits "x." and ",": a period after a letter; pass 3 one before a letter.
        assert_eq!(tokenize_13a("Rp1,000.5 naik."), "Rp1,000.5 naik .");
        assert_eq!(tokenize_13a("a,b"), "a , b");
        assert_eq!(tokenize_13a("3.a"), "3 . a");
        assert_eq!(tokenize_13a("a.5"), "a . 5");
        assert_eq!(tokenize_13a("1.5, 2."), "1.5 , 2 .");
        // Matches do not overlap: "a..." is "a." then "..", each split by pass 2.
        assert_eq!(tokenize_13a("a... b"), "a . . . b");
        assert_eq!(tokenize_13a("1..2"), "1 . . 2");
        // Only ASCII digits are digits: Arabic-Indic ٣ does not hold a period.
        assert_eq!(tokenize_13a("٣.٤"), "٣ . ٤");
    }

    #[test]
    fn thirteen_a_splits_a_dash_after_a_digit_only() {
        assert_eq!(tokenize_13a("3-4 kue-kue x-1"), "3 - 4 kue-kue x-1");
        assert_eq!(tokenize_13a("1-2-3"), "1 - 2 - 3");
    }

    #[test]
    fn python_whitespace_includes_the_information_separators() {
        assert!(is_python_space('\u{1c}') && is_python_space('\u{1f}') && is_python_space('\u{3000}'));
        assert!(!is_python_space('\u{200b}') && !is_python_space('\u{180e}'));
        assert_eq!(tokenize_13a("a\u{1c}b\tc\u{a0}d  "), "a b c d");
        assert_eq!(python_split(" a\u{1f}\u{85}b ").collect::<Vec<_>>(), ["a", "b"]);
        // Trailing \x1e is stripped before tokenizing, as Python's rstrip does.
        let options = BleuOptions { tokenize: Tokenize::None, ..BleuOptions::default() };
        assert_eq!(options.preprocess("a b\u{1e} "), "a b");
    }
}
