//! Extractive baselines: Lead-N and the Oracle labels. The default oracle is the Liputan6
//! paper's (`2_create_extractive_label.py`): ROUGE-1 F with clipped unigram counts over the
//! first 100 sentences; every sentence is tried as a seed, then the sentence that raises the
//! score most is added while the new score is at least the current one; the best selection
//! over all seeds wins, ties to the earliest. PreSumm's greedy oracle (ROUGE-1 F + ROUGE-2 F
//! on n-gram sets, at most 3 sentences, stop when nothing strictly improves) is also given.
use std::collections::{HashMap, HashSet};

const MAX_SENTENCES: usize = 100;

fn counts(tokens: &[&str]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for t in tokens {
        *m.entry(t.to_string()).or_insert(0) += 1;
    }
    m
}

/// ROUGE-1 F1 with clipped unigram counts.
fn rouge1_f(candidate: &HashMap<String, usize>, reference: &HashMap<String, usize>) -> f64 {
    let overlap: usize = candidate.iter().map(|(w, &c)| c.min(reference.get(w).copied().unwrap_or(0))).sum();
    let (nc, nr): (usize, usize) = (candidate.values().sum(), reference.values().sum());
    if overlap == 0 || nc == 0 || nr == 0 {
        return 0.0;
    }
    let (p, r) = (overlap as f64 / nc as f64, overlap as f64 / nr as f64);
    2.0 * p * r / (p + r)
}

fn selection_counts(article: &[Vec<String>], selected: &[usize]) -> HashMap<String, usize> {
    let tokens: Vec<&str> = selected.iter().flat_map(|&i| article[i].iter().map(String::as_str)).collect();
    counts(&tokens)
}

/// The Liputan6 oracle: sorted sentence indices.
pub fn oracle_liputan6(article: &[Vec<String>], summary: &[Vec<String>]) -> Vec<usize> {
    let n = article.len().min(MAX_SENTENCES);
    if n <= 1 {
        return vec![0];
    }
    let reference_tokens: Vec<&str> = summary.iter().flatten().map(String::as_str).collect();
    let reference = counts(&reference_tokens);
    let mut best: (f64, Vec<usize>) = (-1.0, Vec::new());
    for seed in 0..n {
        let mut selected = vec![seed];
        let mut current = rouge1_f(&selection_counts(article, &selected), &reference);
        loop {
            let mut step: Option<(f64, usize)> = None;
            for j in (0..n).filter(|j| !selected.contains(j)) {
                let mut trial = selected.clone();
                trial.push(j);
                let score = rouge1_f(&selection_counts(article, &trial), &reference);
                if step.is_none_or(|(s, _)| score > s) {
                    step = Some((score, j));
                }
            }
            match step {
                Some((score, j)) if score >= current => {
                    selected.push(j);
                    current = score;
                    if selected.len() == n {
                        break;
                    }
                }
                _ => break,
            }
        }
        if current > best.0 {
            best = (current, selected);
        }
    }
    let mut out = best.1;
    out.sort_unstable();
    out
}

fn ngram_set(tokens: &[&str], n: usize) -> HashSet<Vec<String>> {
    tokens.windows(n).map(|w| w.iter().map(|t| t.to_string()).collect()).collect()
}

fn set_f(candidate: &HashSet<Vec<String>>, reference: &HashSet<Vec<String>>) -> f64 {
    let overlap = candidate.intersection(reference).count() as f64;
    if overlap == 0.0 {
        return 0.0;
    }
    let (p, r) = (overlap / candidate.len() as f64, overlap / reference.len() as f64);
    2.0 * p * r / (p + r)
}

/// PreSumm's greedy oracle (at most `max` sentences): sorted indices.
pub fn oracle_presumm(article: &[Vec<String>], summary: &[Vec<String>], max: usize) -> Vec<usize> {
    let clean = |s: &str| s.chars().filter(|c| c.is_alphanumeric()).collect::<String>();
    let art: Vec<Vec<String>> =
        article.iter().map(|s| s.iter().map(|t| clean(t)).filter(|t| !t.is_empty()).collect()).collect();
    let reference: Vec<String> = summary.iter().flatten().map(|t| clean(t)).filter(|t| !t.is_empty()).collect();
    let ref_tokens: Vec<&str> = reference.iter().map(String::as_str).collect();
    let (r1, r2) = (ngram_set(&ref_tokens, 1), ngram_set(&ref_tokens, 2));
    let mut selected: Vec<usize> = Vec::new();
    let mut current = 0.0;
    for _ in 0..max {
        let mut best: Option<(f64, usize)> = None;
        for j in (0..art.len()).filter(|j| !selected.contains(j)) {
            let mut trial = selected.clone();
            trial.push(j);
            trial.sort_unstable();
            let tokens: Vec<&str> = trial.iter().flat_map(|&i| art[i].iter().map(String::as_str)).collect();
            let score = set_f(&ngram_set(&tokens, 1), &r1) + set_f(&ngram_set(&tokens, 2), &r2);
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, j));
            }
        }
        match best {
            Some((score, j)) if score > current => {
                selected.push(j);
                current = score;
            }
            _ => break,
        }
    }
    selected.sort_unstable();
    selected
}

/// The first `n` sentences.
pub fn lead(article: &[Vec<String>], n: usize) -> Vec<usize> {
    (0..n.min(article.len())).collect()
}
