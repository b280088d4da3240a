//! ROUGE-1.5.5.pl as the Liputan6 paper ran it (PreSumm's pyrouge: `-c 95 -m -r 1000 -n 2 -a`),
//! ported from the script and checked against it figure for figure.
//!
//! - **Reading** ([`ScriptReader`]): a summary is a PreSumm line, sentences separated by `<q>`.
//!   As PreSumm and pyrouge prepare it: the line is stripped (Python's `str.strip`), split at
//!   `<q>`, lowercased (Python's `str.lower`, the whole file) and the PTB brackets `-lrb-` …
//!   `-rsb-` are replaced by brackets; the script's SEE reader then keeps each sentence up to its
//!   first `<` (pyrouge escapes nothing). Its tokenizer makes every byte other than ASCII letters
//!   and digits a separator (a `-` becomes a token of its own, which the n-gram and LCS readers
//!   then drop), so a token is a run of `a-z0-9`; with `-m` a token of more than three characters
//!   is stemmed ([`script_stem`]). No stopwords are removed (no `-s`).
//! - **Per document** ([`score_summaries`]): ROUGE-N counts n-grams over the whole summary
//!   (sentences joined), the hits clipped by the reference's counts; ROUGE-L is the
//!   summary-level LCS: for each reference sentence, the union of its LCS positions with every
//!   predicted sentence (the script's traceback, its tie order), each hit counted only while the
//!   word's unigram count in both summaries lasts; R = hits / reference tokens, P = hits /
//!   predicted tokens. R and P are rounded to five decimals (`sprintf("%7.5f")`) and
//!   F = PR / (0.5·P + 0.5·R) is computed from the rounded values and rounded again.
//! - **Over documents** ([`script_order`], [`bootstrap`], [`summarize`]): `-a` averages the
//!   per-document figures. What the script prints as `Average_X` is not their mean but the mean
//!   of its 1,000 bootstrap means: resample i calls `srand(i)` and draws `n` documents with
//!   `int(rand(n))` (perl's drand48), in the script's order of the evaluations (their keys
//!   sorted as strings); the interval's ends are the sorted resample means at the script's
//!   indices (25 and 974 of 0..999 for `-c 95 -r 1000`), all rounded to five decimals.
use super::perl_rand::PerlRand;
use super::porter::script_stem;
use super::{Prf, RougeScores};
use std::collections::HashMap;

/// What separates the sentences of a summary line (PreSumm's candidate and gold files).
pub const SENTENCE_SEPARATOR: &str = "<q>";

/// The script's relative weight of recall in F (`-p`, default 0.5): F = PR / ((1 − α)P + αR).
const ALPHA: f64 = 0.5;

/// The PTB bracket tokens pyrouge's `clean` replaces by brackets (which the script drops).
const PTB_BRACKETS: [&str; 6] = ["-lrb-", "-rrb-", "-lcb-", "-rcb-", "-lsb-", "-rsb-"];

/// Whether Python's `str.strip()` strips `c`: Unicode white space and U+001C–U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Whether PreSumm leaves the pair of this reference line out: nothing is left once stripped.
pub(crate) fn is_blank(line: &str) -> bool {
    line.trim_matches(python_space).is_empty()
}

/// A summary line's sentences as the script reads them (before tokenizing): stripped, split at
/// `<q>`, lowercased, PTB brackets replaced, each cut at its first `<`.
pub(crate) fn script_sentences(line: &str) -> Vec<String> {
    line.trim_matches(python_space)
        .split(SENTENCE_SEPARATOR)
        .map(|piece| {
            let lower = piece.to_lowercase();
            let mut cleaned = String::with_capacity(lower.len());
            let mut rest = lower.as_str();
            while let Some(c) = rest.chars().next() {
                match PTB_BRACKETS.iter().find(|b| rest.starts_with(**b)) {
                    Some(bracket) => {
                        cleaned.push(' ');
                        rest = &rest[bracket.len()..];
                    }
                    None => {
                        cleaned.push(c);
                        rest = &rest[c.len_utf8()..];
                    }
                }
            }
            match cleaned.find('<') {
                Some(cut) => cleaned[..cut].to_string(),
                None => cleaned,
            }
        })
        .collect()
}

/// Reads summary lines into the script's tokens, with each stem computed once.
#[derive(Debug, Default)]
pub(crate) struct ScriptReader {
    /// `-m`: stem tokens of more than three characters.
    stem: bool,
    /// Stems already computed.
    stems: HashMap<String, String>,
}

impl ScriptReader {
    /// A reader stemming (`-m`) or not.
    pub fn new(stem: bool) -> Self {
        ScriptReader { stem, stems: HashMap::new() }
    }

    /// The tokens of each sentence of a summary line, as the script counts them.
    pub(crate) fn summary(&mut self, line: &str) -> Vec<Vec<String>> {
        script_sentences(line).iter().map(|s| self.tokens(s)).collect()
    }

    /// The runs of `a-z0-9` of one sentence (lowercased already), stemmed under `-m`.
    fn tokens(&mut self, sentence: &str) -> Vec<String> {
        sentence
            .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
            .filter(|t| !t.is_empty())
            .map(|t| {
                if !self.stem || t.len() <= 3 {
                    return t.to_string();
                }
                if let Some(s) = self.stems.get(t) {
                    return s.clone();
                }
                let s = script_stem(t);
                self.stems.insert(t.to_string(), s.clone());
                s
            })
            .collect()
    }
}

/// `sprintf("%7.5f", x)` read back as a number, for x ≥ 0: the exact binary value rounded to
/// five decimals as C's printf rounds it (ties to even), then the double nearest that decimal.
pub(crate) fn round5(x: f64) -> f64 {
    scaled5(x) as f64 / 100_000.0
}

/// `x · 10⁵` rounded to an integer as printf rounds `x` to five decimals (0 for x ≤ 0 or NaN).
fn scaled5(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    if x >= 1e9 {
        return (x * 1e5) as u64; // not a score (those are at most 1): no exact rounding needed
    }
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, power) = if exponent == 0 { (fraction, -1074) } else { (fraction | (1u64 << 52), exponent - 1075) };
    // x = mantissa · 2^power with power < 0 here (x < 1e9 < 2^52); x · 10⁵ = scaled / 2^shift.
    let scaled = u128::from(mantissa) * 100_000;
    let shift = (-power) as u32;
    if shift > 71 {
        return 0; // scaled < 2^70: below half a unit
    }
    let (whole, rest, half) = (scaled >> shift, scaled & ((1u128 << shift) - 1), 1u128 << (shift - 1));
    let up = rest > half || (rest == half && whole & 1 == 1);
    (whole + u128::from(up)) as u64
}

/// `x` as the script prints it (`%7.5f`, x ≥ 0).
pub fn format5(x: f64) -> String {
    let q = scaled5(x);
    format!("{}.{:05}", q / 100_000, q % 100_000)
}

/// R, P and F of `hits` against `model` reference and `peer` predicted units, rounded as the
/// script rounds them (R and P first, F from the rounded two); 0 where a count is 0.
fn figures(hits: usize, model: usize, peer: usize) -> Prf {
    let recall = if model != 0 { round5(hits as f64 / model as f64) } else { 0.0 };
    let precision = if peer != 0 { round5(hits as f64 / peer as f64) } else { 0.0 };
    let denominator = (1.0 - ALPHA) * precision + ALPHA * recall;
    let f1 = if denominator > 0.0 { round5((precision * recall) / denominator) } else { 0.0 };
    Prf { precision, recall, f1 }
}

/// The n-gram counts of `tokens` and their number.
fn ngram_counts<'a>(tokens: &[&'a str], n: usize) -> (HashMap<Vec<&'a str>, usize>, usize) {
    let mut counts: HashMap<Vec<&'a str>, usize> = HashMap::new();
    let windows = if tokens.len() >= n { tokens.len() - n + 1 } else { 0 };
    for i in 0..windows {
        *counts.entry(tokens[i..i + n].to_vec()).or_insert(0) += 1;
    }
    (counts, windows)
}

/// ROUGE-N over whole summaries (`computeNGramScore`, one model).
fn rouge_n(peer: &[Vec<String>], model: &[Vec<String>], n: usize) -> Prf {
    let peer_tokens: Vec<&str> = peer.iter().flatten().map(String::as_str).collect();
    let model_tokens: Vec<&str> = model.iter().flatten().map(String::as_str).collect();
    let (peer_grams, peer_count) = ngram_counts(&peer_tokens, n);
    let (model_grams, model_count) = ngram_counts(&model_tokens, n);
    let hits: usize = model_grams.iter().map(|(g, &c)| c.min(peer_grams.get(g).copied().unwrap_or(0))).sum();
    figures(hits, model_count, peer_count)
}

/// Marks in `mask` the positions of `model` on one LCS with `peer`, the one the script's
/// traceback finds (`lcs_inner` and `markLCS`: a match goes diagonally, else up when the cell
/// above is at least the cell to the left, else left). The lengths are kept a row at a time and
/// the moves a bit a cell: whether a cell without a match goes left (a match, which goes
/// diagonally, is seen again from the tokens). The caller bounds m · n
/// ([`super::MAX_LCS_CELLS`]: 12.5 MB of bits).
fn mark_lcs(model: &[String], peer: &[String], mask: &mut [bool]) {
    let (m, n) = (model.len(), peer.len());
    if m == 0 || n == 0 {
        return;
    }
    let (mut above, mut here) = (vec![0usize; n + 1], vec![0usize; n + 1]);
    // Cell (i, j), 1-based, is bit (i - 1) · n + j - 1.
    let mut left = vec![0u64; (m * n).div_ceil(64)];
    for i in 1..=m {
        for j in 1..=n {
            here[j] = if model[i - 1] == peer[j - 1] {
                above[j - 1] + 1
            } else if above[j] >= here[j - 1] {
                above[j]
            } else {
                let cell = (i - 1) * n + j - 1;
                left[cell / 64] |= 1 << (cell % 64);
                here[j - 1]
            };
        }
        std::mem::swap(&mut above, &mut here);
    }
    let (mut i, mut j) = (m, n);
    while i != 0 && j != 0 {
        let cell = (i - 1) * n + j - 1;
        if model[i - 1] == peer[j - 1] {
            i -= 1;
            j -= 1;
            mask[i] = true;
        } else if left[cell / 64] & (1 << (cell % 64)) != 0 {
            j -= 1;
        } else {
            i -= 1;
        }
    }
}

/// How often each token occurs in a summary.
fn unigram_counts(summary: &[Vec<String>]) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for token in summary.iter().flatten() {
        *counts.entry(token.as_str()).or_insert(0) += 1;
    }
    counts
}

/// Summary-level ROUGE-L (`computeLCSScore` with `lcs`, one model).
fn rouge_l(peer: &[Vec<String>], model: &[Vec<String>]) -> Prf {
    let (mut model_left, mut peer_left) = (unigram_counts(model), unigram_counts(peer));
    let (mut hits, mut base) = (0, 0);
    for sentence in model {
        let mut mask = vec![false; sentence.len()];
        base += sentence.len();
        for other in peer {
            mark_lcs(sentence, other, &mut mask);
        }
        for (token, _) in sentence.iter().zip(&mask).filter(|&(_, &hit)| hit) {
            let token = token.as_str();
            let (in_model, in_peer) = (model_left.get(token).copied(), peer_left.get(token).copied());
            if let (Some(a @ 1..), Some(b @ 1..)) = (in_model, in_peer) {
                hits += 1;
                model_left.insert(token, a - 1);
                peer_left.insert(token, b - 1);
            }
        }
    }
    figures(hits, base, peer.iter().map(Vec::len).sum())
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of a predicted summary (`peer`) against its reference
/// (`model`), both as [`ScriptReader::summary`] reads them, each figure as the script prints it.
pub(crate) fn score_summaries(peer: &[Vec<String>], model: &[Vec<String>]) -> RougeScores {
    RougeScores { rouge1: rouge_n(peer, model, 1), rouge2: rouge_n(peer, model, 2), rouge_l: rouge_l(peer, model) }
}

/// The order in which the script takes the scored pairs (given by their indices in the input,
/// ascending), as PreSumm's pyrouge hands them over: files `cand.<index>.txt` listed in sorted
/// name order get evaluation IDs 1, 2, …, and the script sorts its `<ID>.<system>` keys as
/// strings. (Both sorts compare the numbers' decimal strings.)
pub(crate) fn script_order(kept: &[usize]) -> Vec<usize> {
    let mut by_file = kept.to_vec();
    by_file.sort_by_key(|i| i.to_string());
    let mut ids: Vec<usize> = (1..=kept.len()).collect();
    ids.sort_by_key(|id| id.to_string());
    ids.into_iter().map(|id| by_file[id - 1]).collect()
}

/// The script's bootstrap (`bootstrapResampling`): for each resample i, perl's `rand` seeded
/// with `seed · resamples + i` (the script's `srand(i)` for seed 0) draws `n` positions with
/// replacement; each series' mean over the drawn positions, summed in the order drawn. Every
/// series has the same length `n` (all 0 when `n` is 0). One list of resample means a series.
pub(crate) fn bootstrap(series: &[Vec<f64>], resamples: usize, seed: u64) -> Vec<Vec<f64>> {
    let n = series.first().map_or(0, Vec::len);
    let mut means = vec![Vec::with_capacity(resamples); series.len()];
    let mut sums = vec![0.0; series.len()];
    for i in 0..resamples {
        sums.iter_mut().for_each(|s| *s = 0.0);
        if n > 0 {
            let mut rng = PerlRand::seeded(seed.wrapping_mul(resamples as u64).wrapping_add(i as u64));
            for _ in 0..n {
                let drawn = rng.index(n);
                for (sum, values) in sums.iter_mut().zip(series) {
                    *sum += values[drawn];
                }
            }
        }
        for (list, sum) in means.iter_mut().zip(&sums) {
            list.push(if n > 0 { sum / n as f64 } else { 0.0 });
        }
    }
    means
}

/// One measure over the documents: the mean of the resample means (the script's `Average`),
/// the mean of the per-document values, and the interval's ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The mean of the resample means.
    pub resample_mean: f64,
    /// The mean of the values, summed in their order.
    pub mean: f64,
    /// The lower end of the interval.
    pub low: f64,
    /// The upper end.
    pub high: f64,
}

/// `computeAverages` on `values` and their resample `means` (sorted here) at `confidence`
/// percent: the ends are the sorted means at the script's indices, interpolated with its one
/// ratio (`delta = r·(100 − c)/2/100`, lower `int(delta)`, upper `int(r − delta − 1)`, an index
/// past the end reading 0, as an undefined perl value does); everything rounded to five
/// decimals when `rounded` (the script's figures).
pub fn summarize(values: &[f64], means: &mut [f64], confidence: f64, rounded: bool) -> Summary {
    let round = |x: f64| if rounded { round5(x) } else { x };
    let mean = if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 };
    means.sort_by(f64::total_cmp);
    let r = means.len();
    let resample_mean = if r == 0 { 0.0 } else { means.iter().sum::<f64>() / r as f64 };
    let delta = r as f64 * ((100.0 - confidence) / 2.0) / 100.0;
    let upper = (r as f64 - delta - 1.0) as usize;
    let lower = delta as usize;
    let ratio = r as f64 - delta - 1.0 - upper as f64;
    let at = |k: usize| means.get(k).copied().unwrap_or(0.0);
    let low = at(lower) + (at(lower + 1) - at(lower)) * ratio;
    let high = at(upper) + (at(upper + 1) - at(upper)) * ratio;
    Summary { resample_mean: round(resample_mean), mean: round(mean), low: round(low), high: round(high) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Vec<Vec<String>> {
        ScriptReader::new(true).summary(line)
    }

    #[test]
    fn rounding_is_printfs() {
        // Ties go to even (1/64 = 0.015625 exactly), everything else to the nearest.
        assert_eq!(format5(1.0 / 64.0), "0.01562");
        assert_eq!(format5(3.0 / 64.0), "0.04688");
        assert_eq!(format5(2.0 / 3.0), "0.66667");
        assert_eq!(format5(1.0), "1.00000");
        assert_eq!(format5(0.0), "0.00000");
        assert_eq!(round5(4.0 / 7.0), 0.57143);
        assert_eq!(round5(1e-9), 0.0);
    }

    #[test]
    fn reading_follows_pyrouge_and_the_see_reader() {
        let s = script_sentences("  Hari INI -LRB- 12 -rrb- <q> x-lrb-y covid-19 a<b c<Q>d ");
        assert_eq!(s, vec!["hari ini   12   ".to_string(), " x y covid-19 a".to_string()]);
        assert_eq!(
            read("Kasus COVID-19 di Jakarta<q>data baru"),
            [vec!["kasu", "covid", "19", "di", "jakarta"], vec!["datum", "baru"]]
        );
        // Non-ASCII bytes separate tokens; İ lowercases to i + U+0307, the Kelvin sign to k.
        assert_eq!(read("Café İstanbul \u{212a}-9"), [vec!["caf", "i", "stanbul", "k", "9"]]);
        assert!(is_blank(" \t\u{1c}") && !is_blank(" . "));
    }

    #[test]
    fn hand_checked_document_scores() {
        // The script's own figures (-c 95 -m -r 1000 -n 2 -a -d) for this pair: R1 4/7, 4/11;
        // R2 none; ROUGE-L: "the" and "datum" on the LCS of the one reference sentence.
        let s = score_summaries(
            &read("the cat sat on the mat<q>police killed the gunmen data"),
            &read("the gunman was killed by police datum"),
        );
        assert_eq!(s.rouge1, Prf { recall: 0.57143, precision: 0.36364, f1: 0.44445 });
        assert_eq!(s.rouge2, Prf { recall: 0.0, precision: 0.0, f1: 0.0 });
        assert_eq!(s.rouge_l, Prf { recall: 0.28571, precision: 0.18182, f1: 0.22222 });
        // Summary-level LCS: the reference's sentences in the other order still match fully.
        let s = score_summaries(&read("d e f<q>a b c"), &read("a b c<q>d e f"));
        assert_eq!(s.rouge_l, Prf { recall: 1.0, precision: 1.0, f1: 1.0 });
        assert_eq!(s.rouge2, Prf { recall: 0.8, precision: 0.8, f1: 0.8 });
        let empty = score_summaries(&read(""), &read("satu dua"));
        assert_eq!(empty.rouge1, Prf::default());
    }

    /// The script's traceback with a move a cell (the port before the bit table), for comparison.
    fn mark_lcs_with_moves(model: &[String], peer: &[String]) -> Vec<bool> {
        let (m, n) = (model.len(), peer.len());
        let mut mask = vec![false; m];
        let mut table = vec![vec![0usize; n + 1]; m + 1];
        let mut moves = vec![vec![b'u'; n + 1]; m + 1];
        for i in 1..=m {
            for j in 1..=n {
                (table[i][j], moves[i][j]) = if model[i - 1] == peer[j - 1] {
                    (table[i - 1][j - 1] + 1, b'd')
                } else if table[i - 1][j] >= table[i][j - 1] {
                    (table[i - 1][j], b'u')
                } else {
                    (table[i][j - 1], b'l')
                };
            }
        }
        let (mut i, mut j) = (m, n);
        while i != 0 && j != 0 {
            match moves[i][j] {
                b'd' => {
                    i -= 1;
                    j -= 1;
                    mask[i] = true;
                }
                b'u' => i -= 1,
                _ => j -= 1,
            }
        }
        mask
    }

    #[test]
    fn the_bit_table_marks_the_tokens_the_scripts_traceback_marks() {
        // Seeded sequences over small vocabularies (many ties between LCSs), of lengths that do
        // and do not fill a 64-bit word: the same positions as a move a cell.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |k: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % k
        };
        for case in 0..400 {
            let vocabulary = 2 + case % 5;
            let (m, n) = (1 + next(70) as usize, 1 + next(70) as usize);
            let model: Vec<String> = (0..m).map(|_| next(vocabulary).to_string()).collect();
            let peer: Vec<String> = (0..n).map(|_| next(vocabulary).to_string()).collect();
            let mut mask = vec![false; m];
            mark_lcs(&model, &peer, &mut mask);
            assert_eq!(mask, mark_lcs_with_moves(&model, &peer), "{model:?} / {peer:?}");
        }
    }

    #[test]
    fn pyrouge_order_sorts_decimal_strings_twice() {
        // Files cand.0 … cand.11 sort as 0 1 10 11 2 … 9 and get IDs 1 … 12; the keys sort as
        // 1 10 11 12 2 3 … 9: files 0, 7, 8, 9, 1, 10, 11, 2, …, 6.
        assert_eq!(script_order(&(0..12).collect::<Vec<_>>()), [0, 7, 8, 9, 1, 10, 11, 2, 3, 4, 5, 6]);
        assert_eq!(script_order(&[3, 5]), [3, 5]);
    }

    #[test]
    fn one_document_gives_its_own_figures_and_a_zero_width_interval() {
        let values = vec![0.44444];
        let mut means = bootstrap(std::slice::from_ref(&values), 1000, 0).remove(0);
        let s = summarize(&values, &mut means, 95.0, true);
        assert_eq!((s.resample_mean, s.mean, s.low, s.high), (0.44444, 0.44444, 0.44444, 0.44444));
        let mut none = bootstrap(&[vec![]], 10, 0).remove(0);
        assert_eq!(summarize(&[], &mut none, 95.0, true).resample_mean, 0.0);
    }
}
