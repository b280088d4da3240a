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
pub fn rouge_n(pred: &[String], reference: &[String], n: usize) -> Prf {
    let (p, r) = (ngrams(pred, n), ngrams(reference, n));
    let overlap: usize = p.iter().map(|(g, &c)| c.min(r.get(g).copied().unwrap_or(0))).sum();
    prf(overlap, p.values().sum(), r.values().sum())
}

/// ROUGE-L between token lists.
pub fn rouge_l(pred: &[String], reference: &[String]) -> Prf {
    let mut prev = vec![0usize; reference.len() + 1];
    for a in pred {
        let mut cur = vec![0usize; reference.len() + 1];
        for (j, b) in reference.iter().enumerate() {
            cur[j + 1] = if a == b { prev[j] + 1 } else { cur[j].max(prev[j + 1]) };
        }
        prev = cur;
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
pub fn score(prediction: &str, reference: &str) -> RougeScores {
    let (p, r) = (tokenize(prediction), tokenize(reference));
    RougeScores { rouge1: rouge_n(&p, &r, 1), rouge2: rouge_n(&p, &r, 2), rouge_l: rouge_l(&p, &r) }
}

/// Mean F1 (×100) of each variant over pairs.
pub fn mean_f1(pairs: &[(String, String)]) -> (f64, f64, f64) {
    let n = pairs.len().max(1) as f64;
    let scores: Vec<RougeScores> = pairs.iter().map(|(p, r)| score(p, r)).collect();
    let mean = |f: &dyn Fn(&RougeScores) -> f64| 100.0 * scores.iter().map(f).sum::<f64>() / n;
    (mean(&|s| s.rouge1.f1), mean(&|s| s.rouge2.f1), mean(&|s| s.rouge_l.f1))
}
