//! ROUGE-1, ROUGE-2 and ROUGE-L F1 as Google's `rouge-score` package computes them without
//! stemming: text lowercased, every run of characters other than `a-z0-9` a separator,
//! n-gram overlaps with clipped counts, ROUGE-L from the longest common subsequence.

/// rouge-score's default tokenizer.
pub fn tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut tokens = Vec::new();
    let mut current = String::new();
    for ch in lower.chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            current.push(ch);
        } else if !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Precision, recall and F1 of one ROUGE variant.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Prf {
    /// Overlap / the prediction's n-grams (ROUGE-L: LCS length / prediction length); 0 when empty.
    pub precision: f64,
    /// Overlap / the reference's n-grams (ROUGE-L: LCS length / reference length); 0 when empty.
    pub recall: f64,
    /// Harmonic mean of precision and recall; 0 when both are 0.
    pub f1: f64,
}

fn prf(overlap: usize, pred: usize, reference: usize) -> Prf {
    let precision = overlap as f64 / pred.max(1) as f64;
    let recall = overlap as f64 / reference.max(1) as f64;
    let f1 = if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 };
    Prf { precision, recall, f1 }
}

fn ngrams(tokens: &[String], n: usize) -> std::collections::HashMap<&[String], usize> {
    let mut counts = std::collections::HashMap::new();
    if tokens.len() >= n {
        for w in tokens.windows(n) {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    counts
}

/// ROUGE-N between token lists.
pub(crate) fn rouge_n(pred: &[String], reference: &[String], n: usize) -> Prf {
    let (p, r) = (ngrams(pred, n), ngrams(reference, n));
    let overlap: usize = p.iter().map(|(g, &c)| c.min(r.get(g).copied().unwrap_or(0))).sum();
    prf(overlap, p.values().sum(), r.values().sum())
}

/// ROUGE-L between token lists: the LCS length two rows at a time (memory linear in the
/// reference, time the product of the lengths).
pub fn rouge_l(pred: &[String], reference: &[String]) -> Prf {
    let (mut prev, mut cur) = (vec![0usize; reference.len() + 1], vec![0usize; reference.len() + 1]);
    for a in pred {
        for (j, b) in reference.iter().enumerate() {
            cur[j + 1] = if a == b { prev[j] + 1 } else { cur[j].max(prev[j + 1]) };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prf(prev[reference.len()], pred.len(), reference.len())
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of one (prediction, reference) pair.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct RougeScores {
    /// ROUGE-1: unigram overlap.
    pub rouge1: Prf,
    /// ROUGE-2: bigram overlap.
    pub rouge2: Prf,
    /// ROUGE-L: longest common subsequence (summary-level ROUGE-Lsum is not computed).
    pub rouge_l: Prf,
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of `prediction` against `reference`, both tokenized by `tokenize`.
/// ROUGE-L's time is the product of their token counts (see [`super::MAX_LCS_CELLS`]).
pub fn score(prediction: &str, reference: &str) -> RougeScores {
    score_tokens(&tokenize(prediction), &tokenize(reference))
}

/// [`score`] of texts already tokenized.
pub(crate) fn score_tokens(p: &[String], r: &[String]) -> RougeScores {
    RougeScores { rouge1: rouge_n(p, r, 1), rouge2: rouge_n(p, r, 2), rouge_l: rouge_l(p, r) }
}

/// Mean F1 (×100) of each variant over pairs.
pub fn mean_f1(pairs: &[(String, String)]) -> (f64, f64, f64) {
    let n = pairs.len().max(1) as f64;
    let scores: Vec<RougeScores> = pairs.iter().map(|(p, r)| score(p, r)).collect();
    let mean = |f: &dyn Fn(&RougeScores) -> f64| 100.0 * scores.iter().map(f).sum::<f64>() / n;
    (mean(&|s| s.rouge1.f1), mean(&|s| s.rouge2.f1), mean(&|s| s.rouge_l.f1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn assert_prf(found: Prf, precision: f64, recall: f64, f1: f64) {
        assert!(
            close(found.precision, precision) && close(found.recall, recall) && close(found.f1, f1),
            "found {found:?}, expected P {precision} R {recall} F {f1}"
        );
    }

    #[test]
    fn tokenizer_lowercases_and_splits_at_everything_but_ascii_letters_and_digits() {
        assert_eq!(tokenize("The Cat, sat!"), toks("the cat sat"));
        // Digits are kept, also inside words; punctuation inside a word splits it.
        assert_eq!(tokenize("COVID-19 di 2020, x2y"), toks("covid 19 di 2020 x2y"));
        assert_eq!(tokenize("rp.10.000"), toks("rp 10 000"));
        // Letters outside a-z are separators too, as rouge-score's `[^a-z0-9]+` makes them.
        assert_eq!(tokenize("Café über ÉTÉ"), toks("caf ber t"));
        assert_eq!(tokenize("\t a \n\n b  "), toks("a b"));
        assert!(tokenize("").is_empty());
        assert!(tokenize(" ,.;— ").is_empty());
    }

    #[test]
    fn hand_computed_scores_of_a_one_word_difference() {
        let s = score("the cat sat", "the cat ran");
        // Unigrams: {the, cat} shared of 3 each.
        assert_prf(s.rouge1, 2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0);
        // Bigrams: "the cat" shared; "cat sat" vs "cat ran".
        assert_prf(s.rouge2, 0.5, 0.5, 0.5);
        // LCS "the cat".
        assert_prf(s.rouge_l, 2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0);
    }

    #[test]
    fn counts_are_clipped_and_lengths_differ() {
        // "the" 4 times in the prediction, twice in the reference: 2 count. P 2/4, R 2/3,
        // F = 2 · (1/2)(2/3) / (1/2 + 2/3) = (2/3) / (7/6) = 4/7.
        let (p, r) = (toks("the the the the"), toks("the cat the"));
        assert_prf(rouge_n(&p, &r, 1), 0.5, 2.0 / 3.0, 4.0 / 7.0);
        // No bigram of "the the" is in the reference.
        assert_prf(rouge_n(&p, &r, 2), 0.0, 0.0, 0.0);
        // LCS "the the": the same 4/7.
        assert_prf(rouge_l(&p, &r), 0.5, 2.0 / 3.0, 4.0 / 7.0);
        // Unequal lengths: P 2/4, R 2/2, F 2/3.
        let (p, r) = (toks("a b c d"), toks("a c"));
        assert_prf(rouge_n(&p, &r, 1), 0.5, 1.0, 2.0 / 3.0);
        assert_prf(rouge_n(&p, &r, 2), 0.0, 0.0, 0.0);
        assert_prf(rouge_l(&p, &r), 0.5, 1.0, 2.0 / 3.0);
    }

    #[test]
    fn lcs_follows_order_not_membership() {
        // Same words in reverse: every unigram matches, the LCS is one word.
        let (p, r) = (toks("a b c"), toks("c b a"));
        assert_prf(rouge_n(&p, &r, 1), 1.0, 1.0, 1.0);
        assert_prf(rouge_l(&p, &r), 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0);
        // The textbook pair ABCBDAB / BDCABA has an LCS of 4 (e.g. BCBA): P 4/7, R 4/6.
        let (p, r) = (toks("a b c b d a b"), toks("b d c a b a"));
        let f = 2.0 * (4.0 / 7.0) * (4.0 / 6.0) / (4.0 / 7.0 + 4.0 / 6.0);
        assert_prf(rouge_l(&p, &r), 4.0 / 7.0, 4.0 / 6.0, f);
        // A gap does not break a subsequence: "a x b y c" contains "a b c".
        assert_prf(rouge_l(&toks("a x b y c"), &toks("a b c")), 3.0 / 5.0, 1.0, 0.75);
    }

    #[test]
    fn identical_disjoint_and_empty_texts() {
        let same = score("Kucing itu tidur di atas meja.", "kucing itu tidur di atas meja");
        for prf in [same.rouge1, same.rouge2, same.rouge_l] {
            assert_prf(prf, 1.0, 1.0, 1.0);
        }
        let disjoint = score("satu dua tiga", "empat lima enam");
        let empty_pred = score("", "satu dua");
        let empty_both = score("", "...");
        for s in [disjoint, empty_pred, empty_both] {
            for prf in [s.rouge1, s.rouge2, s.rouge_l] {
                assert_prf(prf, 0.0, 0.0, 0.0);
            }
        }
        // One word each: no bigram at all, so ROUGE-2 is 0 even for equal texts.
        let one = score("ya", "ya");
        assert_prf(one.rouge1, 1.0, 1.0, 1.0);
        assert_prf(one.rouge2, 0.0, 0.0, 0.0);
    }

    #[test]
    fn mean_f1_is_a_percentage_over_pairs() {
        let pairs = vec![
            ("a b c".to_string(), "a b c".to_string()),
            ("x y".to_string(), "a b".to_string()),
            ("the cat sat".to_string(), "the cat ran".to_string()),
        ];
        let (r1, r2, rl) = mean_f1(&pairs);
        assert!(close(r1, 100.0 * (1.0 + 0.0 + 2.0 / 3.0) / 3.0), "{r1}");
        assert!(close(r2, 100.0 * (1.0 + 0.0 + 0.5) / 3.0), "{r2}");
        assert!(close(rl, r1), "{rl}");
        assert_eq!(mean_f1(&[]), (0.0, 0.0, 0.0));
    }
}
