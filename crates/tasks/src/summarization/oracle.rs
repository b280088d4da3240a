//! Extractive baselines: Lead-N and the Oracle labels. The default oracle computes what the
//! Liputan6 release's `2_create_extractive_label.py` computes (see [`oracle_liputan6`]);
//! PreSumm's greedy oracle (ROUGE-1 F + ROUGE-2 F on n-gram sets, at most 3 sentences, stop
//! when nothing strictly improves) is also given.
use std::collections::{HashMap, HashSet};

const MAX_SENTENCES: usize = 100;

/// Unigram counts of sentences as the script makes them: tokens joined by spaces, lowercased,
/// split on whitespace.
fn unigrams<'a>(sentences: impl IntoIterator<Item = &'a Vec<String>>) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for sentence in sentences {
        for word in sentence.join(" ").to_lowercase().split_whitespace() {
            *m.entry(word.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// ROUGE-1 F1 of two unigram counts (clipped overlap).
#[cfg(test)]
fn rouge1_f(candidate: &HashMap<String, usize>, reference: &HashMap<String, usize>) -> f64 {
    let overlap: usize = candidate.iter().map(|(w, &c)| c.min(reference.get(w).copied().unwrap_or(0))).sum();
    f1(overlap, candidate.values().sum(), reference.values().sum())
}

/// The Liputan6 release's Oracle label (`2_create_extractive_label.py`), in the script's
/// selection order (the seed first, then each added sentence); callers that show the Oracle
/// summary put it in document order. Over the first 100 sentences, with ROUGE-1 F (clipped
/// unigram counts, lowercased):
/// - every sentence is a seed; its first step takes the best pair {seed, j} unconditionally
///   (a seed is never scored alone), and each later step adds the best sentence while the new
///   score is at least the current one; the selection is recorded when a step would lower it;
/// - a selection that grows to the whole document is recorded only if no seed has recorded
///   one before;
/// - candidates are tried in the order of the script's `list(set(np.arange(n)) - set(ids))`
///   (see [`python_set_difference`]); the first of equal best scores wins, as does the first
///   recorded of equal selections;
/// - a one-sentence document gets `[0]`.
pub fn oracle_liputan6(article: &[Vec<String>], summary: &[Vec<String>]) -> Vec<usize> {
    let n = article.len().min(MAX_SENTENCES);
    let counts = SelectionCounts::new(&article[..n], summary);
    let mut recorded: Vec<(Vec<usize>, f64)> = Vec::new();
    for seed in 0..n {
        let mut taken: Option<(Vec<usize>, f64)> = None;
        let mut ids = vec![seed];
        loop {
            let candidates = python_set_difference(n, &ids);
            if candidates.is_empty() {
                if let Some(whole) = taken.take().filter(|_| recorded.is_empty()) {
                    recorded.push(whole);
                }
                break;
            }
            let base = counts.of(&ids);
            let mut best: Option<(usize, f64)> = None;
            for j in candidates {
                let s = counts.f1_adding(&base, j);
                if best.is_none_or(|(_, b)| s > b) {
                    best = Some((j, s));
                }
            }
            let (j, s) = best.expect("candidates are not empty");
            if let Some(current) = taken.take() {
                if current.1 > s {
                    recorded.push(current);
                    break;
                }
            }
            ids.push(j);
            taken = Some((ids.clone(), s));
        }
    }
    let mut chosen: Option<(Vec<usize>, f64)> = None;
    for (selection, s) in recorded {
        if chosen.as_ref().is_none_or(|(_, b)| s > *b) {
            chosen = Some((selection, s));
        }
    }
    chosen.map_or_else(|| vec![0], |(selection, _)| selection)
}

/// The unigram counts of an article's sentences and of its summary over one word numbering,
/// so that a selection's ROUGE-1 F is integer arithmetic and the same float as the script's.
struct SelectionCounts {
    /// Each sentence's words (by number) with their counts.
    sentences: Vec<Vec<(usize, usize)>>,
    /// Each sentence's token count.
    lengths: Vec<usize>,
    /// The summary's count of each word (0 for words only the article has).
    reference: Vec<usize>,
    reference_total: usize,
}

/// A selection's word counts, tokens and clipped overlap with the summary.
struct Selection {
    counts: Vec<usize>,
    tokens: usize,
    overlap: usize,
}

impl SelectionCounts {
    fn new(article: &[Vec<String>], summary: &[Vec<String>]) -> Self {
        let mut numbers: HashMap<String, usize> = HashMap::new();
        let number = |w: String, numbers: &mut HashMap<String, usize>| {
            let next = numbers.len();
            *numbers.entry(w).or_insert(next)
        };
        let summary_counts = unigrams(summary);
        let mut sentences = Vec::new();
        let mut lengths = Vec::new();
        for sentence in article {
            let words = unigrams(std::iter::once(sentence));
            lengths.push(words.values().sum());
            sentences.push(words.into_iter().map(|(w, c)| (number(w, &mut numbers), c)).collect());
        }
        let mut reference = vec![0; numbers.len()];
        for (w, c) in &summary_counts {
            if let Some(&i) = numbers.get(w) {
                reference[i] = *c;
            }
        }
        SelectionCounts { sentences, lengths, reference, reference_total: summary_counts.values().sum() }
    }

    /// The counts of the sentences `ids`.
    fn of(&self, ids: &[usize]) -> Selection {
        let mut counts = vec![0; self.reference.len()];
        for &i in ids {
            for &(w, c) in &self.sentences[i] {
                counts[w] += c;
            }
        }
        let overlap = counts.iter().zip(&self.reference).map(|(c, r)| *c.min(r)).sum();
        Selection { counts, tokens: ids.iter().map(|&i| self.lengths[i]).sum(), overlap }
    }

    /// ROUGE-1 F of `base` with sentence `j` added.
    fn f1_adding(&self, base: &Selection, j: usize) -> f64 {
        let mut overlap = base.overlap;
        for &(w, c) in &self.sentences[j] {
            let (had, limit) = (base.counts[w], self.reference[w]);
            overlap += (had + c).min(limit) - had.min(limit);
        }
        f1(overlap, base.tokens + self.lengths[j], self.reference_total)
    }
}

/// ROUGE-1 F1 from a clipped overlap and the two token counts, in the script's order of
/// operations (`2 * p * r / (p + r)`); 0 without overlap.
fn f1(overlap: usize, candidate_tokens: usize, reference_tokens: usize) -> f64 {
    if overlap == 0 || candidate_tokens == 0 || reference_tokens == 0 {
        return 0.0;
    }
    let (p, r) = (overlap as f64 / candidate_tokens as f64, overlap as f64 / reference_tokens as f64);
    2.0 * p * r / (p + r)
}

/// The order in which CPython iterates `set(np.arange(n)) - set(ids)`, the script's candidate
/// list, for `n` up to 100. Small non-negative integers hash to themselves, so the order is
/// that of their slots in the result's hash table: ascending when CPython copies the left set
/// (`len(left) >> 2 > len(right)`, a table larger than `n`), else the slots of a new set grown
/// from 8 entries by the inserts of the ascending survivors, which can wrap large indices
/// around a small table (`{3, 9}` iterates as `[9, 3]`).
pub fn python_set_difference(n: usize, ids: &[usize]) -> Vec<usize> {
    let removed: HashSet<usize> = ids.iter().copied().collect();
    let survivors: Vec<usize> = (0..n).filter(|i| !removed.contains(i)).collect();
    if (n >> 2) > removed.len() {
        return survivors;
    }
    let mut table = PySet::new();
    for value in survivors {
        table.add(value);
    }
    table.slots.into_iter().flatten().collect()
}

/// Just enough of CPython's `set` (Objects/setobject.c) to know where integer keys land:
/// open addressing with up to 9 linear probes, then perturbed probing; a table of 8 slots
/// that is rebuilt, 4 × the entries rounded up to a power of two, once 3/5 of it is filled.
struct PySet {
    slots: Vec<Option<usize>>,
    used: usize,
}

impl PySet {
    const LINEAR_PROBES: usize = 9;
    const PERTURB_SHIFT: u32 = 5;

    fn new() -> Self {
        PySet { slots: vec![None; 8], used: 0 }
    }

    /// Inserts a key known to be absent (its hash is itself).
    fn add(&mut self, key: usize) {
        Self::insert(&mut self.slots, key);
        self.used += 1;
        let mask = self.slots.len() - 1;
        if self.used * 5 >= mask * 3 {
            let mut size = 8;
            while size <= self.used * 4 {
                size <<= 1;
            }
            let old = std::mem::replace(&mut self.slots, vec![None; size]);
            for k in old.into_iter().flatten() {
                Self::insert(&mut self.slots, k);
            }
        }
    }

    /// The first free slot of `key`'s probe sequence.
    fn insert(slots: &mut [Option<usize>], key: usize) {
        let mask = slots.len() - 1;
        let mut perturb = key;
        let mut i = key & mask;
        loop {
            if slots[i].is_none() {
                slots[i] = Some(key);
                return;
            }
            if i + Self::LINEAR_PROBES <= mask {
                if let Some(free) = slots[i + 1..=i + Self::LINEAR_PROBES].iter_mut().find(|slot| slot.is_none()) {
                    *free = Some(key);
                    return;
                }
            }
            perturb >>= Self::PERTURB_SHIFT;
            i = (i * 5 + 1 + perturb) & mask;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sents(sentences: &[&str]) -> Vec<Vec<String>> {
        sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
    }

    #[test]
    fn lead_takes_the_first_n_and_never_more_than_there_are() {
        let article = sents(&["a", "b", "c"]);
        assert_eq!(lead(&article, 0), Vec::<usize>::new());
        assert_eq!(lead(&article, 1), vec![0]);
        assert_eq!(lead(&article, 3), vec![0, 1, 2]);
        assert_eq!(lead(&[], 3), Vec::<usize>::new());
    }

    #[test]
    fn clipped_rouge1_f_by_hand() {
        let c = |t: &str| unigrams(&sents(&[t]));
        // "a a b" against "a b c": overlap min(2,1) + 1 = 2; P 2/3, R 2/3.
        assert!((rouge1_f(&c("a a b"), &c("a b c")) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(rouge1_f(&c("x"), &c("a b")), 0.0);
        assert_eq!(rouge1_f(&c(""), &c("a b")), 0.0);
        assert_eq!(rouge1_f(&c("a"), &c("")), 0.0);
        // The script lowercases the joined text.
        assert_eq!(rouge1_f(&c("Hujan TURUN"), &c("hujan turun")), 1.0);
    }

    #[test]
    fn liputan6_oracle_never_scores_a_seed_alone() {
        // Summary "a b c d e"; sentence 3 is the summary itself, but a seed's first step always
        // takes a pair. Seed 2 {c}: + 3 gives F 10/11 (P 5/6), the best pair of all; adding 0
        // or 1 lowers it (5/7, 10/13), so [2, 3] is recorded, in selection order. Seed 3 finds
        // the same pair as [3, 2] later; the first recorded of equal scores wins.
        let article = sents(&["x y z", "a b", "c", "a b c d e"]);
        assert_eq!(oracle_liputan6(&article, &sents(&["a b c", "d e"])), vec![2, 3]);
    }

    #[test]
    fn liputan6_oracle_continues_on_ties_and_records_a_whole_document_once() {
        // Seed 2 {c}: + 0 gives 4/5, + 1 (empty) keeps 4/5 and continues (ties go on), then no
        // sentence is left: the whole document is not recorded, as seed 0 already recorded
        // [0, 1] with F 1.
        let article = sents(&["a b", "", "c"]);
        assert_eq!(oracle_liputan6(&article, &sents(&["a b"])), vec![0, 1]);
        // Seed 0 grows to the whole document (4/5, then 1) and is recorded, nothing being
        // recorded before it; seed 1's equal whole document is not.
        assert_eq!(oracle_liputan6(&sents(&["a", "b", "c"]), &sents(&["a b c"])), vec![0, 1, 2]);
        assert_eq!(oracle_liputan6(&sents(&["a b"]), &sents(&["x"])), vec![0]);
    }

    #[test]
    fn liputan6_oracle_sees_only_the_first_100_sentences() {
        // Sentences 0..99 alternate "a x" and "x"; sentence 100 is "a", the summary. Seen, it
        // would pair with an "x" for F 2/3 and win; unseen, the best pairs are {"a x", "x"}
        // (F 1/2; two "a x" give 2/5): the first seed's first, [0, 1], and adding more lowers it.
        let mut article: Vec<Vec<String>> =
            (0..100).map(|i| if i % 2 == 0 { vec!["a".into(), "x".into()] } else { vec!["x".into()] }).collect();
        article.push(vec!["a".to_string()]);
        assert_eq!(oracle_liputan6(&article, &sents(&["a"])), vec![0, 1]);
    }

    #[test]
    fn candidates_come_in_cpython_set_order() {
        // Many removed: a new set grown from 8 slots; 9 lands in slot 1, before 3.
        assert_eq!(python_set_difference(10, &[0, 1, 2, 4, 5, 6, 7, 8]), vec![9, 3]);
        // Few removed (len >> 2 > removed): a copy of the ascending left set.
        assert_eq!(python_set_difference(100, &[5]), (0..100).filter(|&i| i != 5).collect::<Vec<_>>());
        assert_eq!(python_set_difference(3, &[0, 1, 2]), Vec::<usize>::new());
    }

    #[test]
    fn presumm_oracle_picks_by_rouge1_plus_rouge2_and_stops_when_nothing_improves() {
        // Summary "a b c d e": unigrams {a..e}, bigrams {ab, bc, cd, de}.
        // Step 1: "a b c" scores R1 F 3/4 + R2 F 2/3 = 1.42, "d e" 4/7 + 2/5 = 0.97, "x y" 0.
        // Step 2 with 0 ("d e a b c"): R1 1 + R2 3/4 (de, ab, bc of 4 bigrams) = 1.75; with 1
        // ("x y a b c"): 1.1. Step 3 adding 1 falls to 0.83 + 0.6: stop at two of three.
        let article = sents(&["d e", "x y", "a b c"]);
        let summary = sents(&["a b c", "d e"]);
        assert_eq!(oracle_presumm(&article, &summary, 3), vec![0, 2]);
        assert_eq!(oracle_presumm(&article, &summary, 1), vec![2]);
        assert_eq!(oracle_presumm(&article, &summary, 0), Vec::<usize>::new());
        // Nothing scores above 0: nothing is selected.
        assert_eq!(oracle_presumm(&article, &sents(&["p q"]), 3), Vec::<usize>::new());
    }

    #[test]
    fn presumm_oracle_compares_alphanumerics_only() {
        // The summary's "a-b" is the token "ab": it matches sentence 1, not "a b".
        let article = sents(&["a b", "ab"]);
        assert_eq!(oracle_presumm(&article, &sents(&["a-b"]), 3), vec![1]);
        // Punctuation tokens vanish: "a , b" is "a b" (R1 1 + R2 1), above "a b c" (4/5 + 2/3);
        // with the comma kept it would score 4/5 + 0 and lose.
        let article = sents(&["a , b", "a b c"]);
        assert_eq!(oracle_presumm(&article, &sents(&["a b"]), 1), vec![0]);
    }
}
