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

/// The index of the largest score: the last of equal maxima, as `Iterator::max_by` gives it
/// (numpy and torch give the first); 0 for none.
pub fn argmax(scores: &[f64]) -> usize {
    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Gold and predicted labels of six examples over three classes.
    const GOLD: [usize; 6] = [0, 0, 1, 2, 2, 2];
    const PRED: [usize; 6] = [0, 1, 1, 2, 0, 2];

    #[test]
    fn confusion_matrix_rows_are_gold_columns_predicted() {
        assert_eq!(confusion_matrix(&GOLD, &PRED, 3), vec![vec![1, 1, 0], vec![0, 1, 0], vec![1, 0, 2]]);
        assert_eq!(confusion_matrix(&[], &[], 2), vec![vec![0, 0], vec![0, 0]]);
    }

    #[test]
    fn macro_f1_matches_scikit_learn_by_hand() {
        // Per class F1 = 2·TP / (gold + predicted): class 0 2·1/(2+2) = 1/2, class 1 2·1/(1+2) =
        // 2/3, class 2 2·2/(3+2) = 4/5; the mean 0.6556 is sklearn's f1_score(average="macro").
        let expected = (0.5 + 2.0 / 3.0 + 0.8) / 3.0;
        assert!((macro_f1(&GOLD, &PRED, 3) - expected).abs() < 1e-12);
        // A class in neither list is left out of the mean, as sklearn does.
        assert!((macro_f1(&GOLD, &PRED, 5) - expected).abs() < 1e-12);
        // A class only predicted counts, with F1 0: class 0 2/3, class 1 0.
        assert!((macro_f1(&[0, 0], &[0, 1], 2) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(macro_f1(&[1, 0, 2], &[1, 0, 2], 3), 1.0);
        assert_eq!(macro_f1(&[], &[], 3), 0.0);
    }

    #[test]
    fn accuracy_and_argmax() {
        // Positions 0, 2, 3 and 5 agree.
        assert!((accuracy(&GOLD, &PRED) - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(accuracy(&[], &[]), 0.0);
        assert_eq!(argmax(&[0.1, 0.7, 0.2]), 1);
        assert_eq!(argmax(&[-3.0, -1.0, -2.0]), 1);
        assert_eq!(argmax(&[f64::NEG_INFINITY, -1e300]), 1);
        assert_eq!(argmax(&[]), 0);
        // Ties go to the last maximum (what the predictions have always used).
        assert_eq!(argmax(&[0.5, 0.2, 0.5]), 2);
    }
}
