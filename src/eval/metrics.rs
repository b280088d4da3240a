//! Classification metrics: macro-F1 as scikit-learn's `f1_score(average="macro")` computes it
//! (classes present in the gold or predicted labels; an undefined F1 counts as 0), accuracy,
//! and the confusion matrix.

/// Rows: gold label, columns: predicted label.
pub fn confusion_matrix(gold: &[usize], pred: &[usize], classes: usize) -> Vec<Vec<usize>> {
    let mut m = vec![vec![0; classes]; classes];
    for (&g, &p) in gold.iter().zip(pred) {
        m[g][p] += 1;
    }
    m
}

/// Macro-averaged F1 over the classes that occur in `gold` or `pred`.
pub fn macro_f1(gold: &[usize], pred: &[usize], classes: usize) -> f64 {
    let m = confusion_matrix(gold, pred, classes);
    let mut sum = 0.0;
    let mut n = 0;
    for c in 0..classes {
        let tp = m[c][c] as f64;
        let gold_c: usize = m[c].iter().sum();
        let pred_c: usize = m.iter().map(|row| row[c]).sum();
        if gold_c == 0 && pred_c == 0 {
            continue;
        }
        n += 1;
        let denom = gold_c as f64 + pred_c as f64;
        sum += if denom > 0.0 { 2.0 * tp / denom } else { 0.0 };
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Fraction of `gold` labels that `pred` matches, in [0, 1] (0 for no labels).
pub fn accuracy(gold: &[usize], pred: &[usize]) -> f64 {
    gold.iter().zip(pred).filter(|(g, p)| g == p).count() as f64 / gold.len().max(1) as f64
}

/// The index of the largest score (the first on ties; 0 for none).
pub fn argmax(scores: &[f64]) -> usize {
    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}
