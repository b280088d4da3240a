//! Multinomial naive Bayes as scikit-learn's `MultinomialNB(alpha)` fits and predicts it: per
//! class, the features' summed values plus `alpha`, their logs minus the log of their total,
//! and the log of the class's share of the training texts; a text gets the class with the
//! largest sum of its feature values times those log-probabilities plus the prior (the first
//! class on a tie, as numpy's `argmax`).
use super::sparse::{numpy_sum, Csr};

/// A fitted multinomial naive Bayes classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct MultinomialNb {
    /// Per class, the log-probability of each feature (`feature_log_prob_`).
    feature_log_prob: Vec<Vec<f64>>,
    /// Per class, the log of its share of the training texts (`class_log_prior_`).
    class_log_prior: Vec<f64>,
}

impl MultinomialNb {
    /// Fits on `x` with labels `y` (each below `n_classes`) and additive smoothing `alpha`.
    pub(crate) fn fit(x: &Csr, y: &[usize], n_classes: usize, alpha: f64) -> MultinomialNb {
        let mut feature_count = vec![vec![0.0; x.n_cols]; n_classes];
        let mut class_count = vec![0.0; n_classes];
        // scikit-learn sums Y.T @ X: per class, the texts' values in text order.
        for (i, &label) in y.iter().enumerate() {
            class_count[label] += 1.0;
            for (c, v) in x.row(i).entries() {
                feature_count[label][c] += v;
            }
        }
        let feature_log_prob = feature_count
            .iter()
            .map(|counts| {
                let smoothed: Vec<f64> = counts.iter().map(|c| c + alpha).collect();
                let total = numpy_sum(&smoothed).ln();
                smoothed.iter().map(|s| s.ln() - total).collect()
            })
            .collect();
        let total = numpy_sum(&class_count).ln();
        let class_log_prior = class_count.iter().map(|c| c.ln() - total).collect();
        MultinomialNb { feature_log_prob, class_log_prior }
    }

    /// The class of each row of `x`.
    pub fn predict(&self, x: &Csr) -> Vec<usize> {
        (0..x.rows())
            .map(|i| {
                let row = x.row(i);
                let scores: Vec<f64> = self
                    .feature_log_prob
                    .iter()
                    .zip(&self.class_log_prior)
                    .map(|(log_prob, prior)| {
                        let mut s = 0.0;
                        for (c, v) in row.entries() {
                            s += v * log_prob[c];
                        }
                        s + prior
                    })
                    .collect();
                first_argmax(&scores)
            })
            .collect()
    }
}

/// The index of the largest score, the first of equal maxima (numpy's `argmax`); 0 for none.
pub(crate) fn first_argmax(scores: &[f64]) -> usize {
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_the_closed_form_and_predicts_by_log_probability() {
        // Two classes, three features: class 0 texts use feature 0, class 1 feature 2.
        let mut x = Csr::new(3);
        x.push_row([(0, 2.0)]);
        x.push_row([(0, 1.0), (1, 1.0)]);
        x.push_row([(2, 3.0)]);
        let nb = MultinomialNb::fit(&x, &[0, 0, 1], 2, 1.0);
        // Class 0: counts (3, 1, 0) + 1 over 7; class 1: (0, 0, 3) + 1 over 6.
        let expected0 = [(4.0f64).ln() - 7.0f64.ln(), 2.0f64.ln() - 7.0f64.ln(), 1.0f64.ln() - 7.0f64.ln()];
        assert_eq!(nb.feature_log_prob[0], expected0);
        assert_eq!(nb.class_log_prior, [2.0f64.ln() - 3.0f64.ln(), 1.0f64.ln() - 3.0f64.ln()]);
        let mut t = Csr::new(3);
        t.push_row([(0, 1.0)]);
        t.push_row([(2, 1.0)]);
        t.push_row([]);
        assert_eq!(nb.predict(&t), [0, 1, 0]);
    }

    #[test]
    fn ties_go_to_the_first_class() {
        assert_eq!(first_argmax(&[0.5, 0.7, 0.7]), 1);
        assert_eq!(first_argmax(&[f64::NEG_INFINITY, -1.0]), 1);
        assert_eq!(first_argmax(&[]), 0);
    }
}
