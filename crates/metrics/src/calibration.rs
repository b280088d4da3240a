//! Confidence and calibration of multiple-choice answers, as the IndoMMLU paper measures them:
//! a question's confidence is the softmax over its options' scores taken at the chosen option,
//! and the expected calibration error (ECE) compares confidence with accuracy in equal-width
//! bins: Σ_b (n_b / N) · |accuracy_b − mean confidence_b|, a confidence c in bin b when
//! b/B < c ≤ (b+1)/B (0 goes to the first bin).

/// Bins of the expected calibration error (the usual 10 of width 0.1).
pub const ECE_BINS: usize = 10;

/// The softmax of `scores` (empty for none), computed stably in double precision.
pub(crate) fn softmax(scores: &[f64]) -> Vec<f64> {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exp: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = exp.iter().sum();
    exp.into_iter().map(|e| e / total).collect()
}

/// The softmax probability of option `chosen` among `scores`.
pub fn confidence(scores: &[f64], chosen: usize) -> f64 {
    softmax(scores)[chosen]
}

/// The expected calibration error (a fraction in [0, 1]) of answers given as (confidence,
/// correct), over `bins` equal-width bins; 0 for no answers.
pub fn expected_calibration_error(answers: &[(f64, bool)], bins: usize) -> f64 {
    let mut count = vec![0usize; bins];
    let (mut conf, mut hits) = (vec![0f64; bins], vec![0f64; bins]);
    for &(c, correct) in answers {
        let b = ((c * bins as f64).ceil() as usize).clamp(1, bins) - 1;
        count[b] += 1;
        conf[b] += c;
        hits[b] += f64::from(u8::from(correct));
    }
    let n = answers.len().max(1) as f64;
    (0..bins).filter(|&b| count[b] > 0).map(|b| (hits[b] - conf[b]).abs() / n).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_is_stable_and_sums_to_one() {
        let p = softmax(&[1000.0, 1000.0 + 2f64.ln()]);
        assert!((p[0] - 1.0 / 3.0).abs() < 1e-12 && (p[1] - 2.0 / 3.0).abs() < 1e-12, "{p:?}");
        assert!((confidence(&[-1.0, -1.0, -1.0, -1.0], 2) - 0.25).abs() < 1e-15);
        assert!(softmax(&[]).is_empty());
    }

    #[test]
    fn ece_by_hand() {
        // Bin (0.2, 0.3]: 0.25 right, 0.25 wrong → accuracy 0.5, confidence 0.25, gap 0.25 × 2/5.
        // Bin (0.8, 0.9]: 0.9 right → gap 0.1 × 1/5. Bin (0.9, 1.0]: 1.0 wrong, 0.95 right →
        // accuracy 0.5, confidence 0.975, gap 0.475 × 2/5. Total 0.1 + 0.02 + 0.19 = 0.31.
        let answers = [(0.25, true), (0.25, false), (0.9, true), (1.0, false), (0.95, true)];
        assert!((expected_calibration_error(&answers, ECE_BINS) - 0.31).abs() < 1e-12);
        // 0.2 lies in (0.1, 0.2], 0 in the first bin; a perfectly calibrated set scores 0.
        assert!((expected_calibration_error(&[(0.0, false), (0.2, false)], 10) - 0.1).abs() < 1e-12);
        assert_eq!(expected_calibration_error(&[(1.0, true), (1.0, true)], 10), 0.0);
        assert_eq!(expected_calibration_error(&[], 10), 0.0);
    }
}
