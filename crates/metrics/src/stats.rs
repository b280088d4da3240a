//! The statistics behind bias results one can publish: Wilson score intervals for win rates
//! (plain proportions), seeded percentile bootstraps over pairs for everything that is not a
//! plain proportion (mean score gaps, differences between paired evaluations, averages over
//! languages), the exact McNemar test for paired outcomes and Holm's step-down correction.
//! The formulas are statsmodels' (`proportion_confint(method="wilson")`, `mcnemar(exact=True)`,
//! `multipletests(method="holm")`), which the tests compare against.
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The two-sided 95% critical value of the standard normal, `Φ⁻¹(0.975)`.
pub(crate) const Z95: f64 = 1.959_963_984_540_054;

/// A two-sided 95% interval `[low, high]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

impl Interval {
    /// The interval with both ends multiplied by `factor` (proportions to percent).
    pub fn scaled(self, factor: f64) -> Self {
        Interval { low: self.low * factor, high: self.high * factor }
    }

    /// Whether `x` lies inside (ends included).
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// Wilson's score interval at 95% for `successes` out of `n` (as proportions, within [0, 1]).
/// No trials: the whole range.
pub fn wilson(successes: usize, n: usize) -> Interval {
    if n == 0 {
        return Interval { low: 0.0, high: 1.0 };
    }
    let (n, p) = (n as f64, successes as f64 / n as f64);
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half_width = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Interval { low: (centre - half_width).max(0.0), high: (centre + half_width).min(1.0) }
}

/// `ln k!` for k = 0..=n.
fn log_factorials(n: usize) -> Vec<f64> {
    let mut table = vec![0.0; n + 1];
    for k in 1..=n {
        table[k] = table[k - 1] + (k as f64).ln();
    }
    table
}

/// `P(X ≤ k)` for X ~ Binomial(n, 1/2), summed in log space so that large n neither
/// underflows nor loses precision.
pub(crate) fn binomial_half_cdf(k: usize, n: usize) -> f64 {
    if k >= n {
        return 1.0;
    }
    let lf = log_factorials(n);
    let log_terms: Vec<f64> = (0..=k).map(|i| lf[n] - lf[i] - lf[n - i] - n as f64 * std::f64::consts::LN_2).collect();
    let top = log_terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (top + log_terms.iter().map(|t| (t - top).exp()).sum::<f64>().ln()).exp().min(1.0)
}

/// The exact (binomial) McNemar test on the discordant pairs of a paired 2×2 table: `b` pairs
/// changed one way, `c` the other. Two-sided p-value, `min(1, 2·P(X ≤ min(b, c)))` with
/// X ~ Binomial(b + c, 1/2); 1 when nothing changed.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    (2.0 * binomial_half_cdf(b.min(c), b + c)).min(1.0)
}

/// Holm's step-down adjustment of `p_values` (family-wise error), in the input's order.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p_values[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The `q` quantile (0..=1) of sorted `values`, interpolated linearly between order statistics
/// (numpy's default).
pub(crate) fn quantile_sorted(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let position = q * (values.len() - 1) as f64;
    let (below, fraction) = (position.floor() as usize, position.fract());
    let above = (below + 1).min(values.len() - 1);
    values[below] + fraction * (values[above] - values[below])
}

/// Percentile bootstrap intervals (95%) of group means, all groups from the same resamples.
///
/// Item `i` has the value `values[i]` and belongs to the groups `groups[i]` (indices below
/// `group_count`; an item may be in several, e.g. its domain, its subdomain and `overall`).
/// Each resample draws `values.len()` items with replacement, uniformly, from `rng`; a group's
/// statistic is the mean value of its drawn items, and resamples that drew none of a group's
/// items are left out of that group's interval. A group without items gets `None`.
pub fn bootstrap_group_means(
    values: &[f64],
    groups: &[Vec<usize>],
    group_count: usize,
    resamples: usize,
    rng: &mut impl Rng,
) -> Vec<Option<Interval>> {
    let n = values.len();
    let mut statistics: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); group_count];
    let (mut sums, mut counts) = (vec![0.0; group_count], vec![0usize; group_count]);
    for _ in 0..resamples {
        sums.iter_mut().for_each(|s| *s = 0.0);
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            let i = rng.random_range(0..n);
            for &g in &groups[i] {
                sums[g] += values[i];
                counts[g] += 1;
            }
        }
        for g in 0..group_count {
            if counts[g] > 0 {
                statistics[g].push(sums[g] / counts[g] as f64);
            }
        }
    }
    statistics
        .into_iter()
        .map(|mut s| {
            if s.is_empty() {
                return None;
            }
            s.sort_by(f64::total_cmp);
            Some(Interval { low: quantile_sorted(&s, 0.025), high: quantile_sorted(&s, 0.975) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn wilson_matches_the_closed_form_at_hand_checked_points() {
        // 0 of 10: [0, z²/(n+z²)]; 10 of 10 mirrors it.
        let z2 = Z95 * Z95;
        let w = wilson(0, 10);
        assert_eq!(w.low, 0.0);
        assert!((w.high - z2 / (10.0 + z2)).abs() < 1e-12);
        let w = wilson(10, 10);
        assert!((w.low - 10.0 / (10.0 + z2)).abs() < 1e-12 && (w.high - 1.0).abs() < 1e-12, "{w:?}");
        // Symmetric around 1/2 for half successes.
        let w = wilson(272, 544);
        assert!((w.low + w.high - 1.0).abs() < 1e-12);
        assert_eq!(wilson(0, 0), Interval { low: 0.0, high: 1.0 });
    }

    /// Over 2,000 simulated samples of n = 544 pairs at p = 0.55 (the IndoBias size and a
    /// typical win rate), the 95% Wilson interval covers p in 94–96% of them.
    #[test]
    fn wilson_intervals_cover_the_true_rate_95_percent_of_the_time() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3407);
        let (n, p, samples) = (544, 0.55, 2000);
        let covered = (0..samples)
            .filter(|_| {
                let wins = (0..n).filter(|_| rng.random::<f64>() < p).count();
                wilson(wins, n).contains(p)
            })
            .count();
        let coverage = covered as f64 / samples as f64;
        println!("Wilson coverage at n = {n}, p = {p}: {:.2}% of {samples} samples", 100.0 * coverage);
        assert!((0.94..=0.96).contains(&coverage), "coverage {coverage}");
        // Its width at the IndoBias size: about ±4 points, as the issue says.
        let w = wilson(299, 544);
        assert!((0.04..0.045).contains(&((w.high - w.low) / 2.0)), "{w:?}");
    }

    #[test]
    fn mcnemar_and_binomial_small_cases_by_hand() {
        // b = 0, c = 3: 2·(1/2)³ = 0.25.
        assert!((mcnemar_exact(0, 3) - 0.25).abs() < 1e-15);
        // b = 1, c = 4: 2·(1 + 5)/32 = 0.375.
        assert!((mcnemar_exact(1, 4) - 0.375).abs() < 1e-15);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(5, 5), 1.0);
        // No underflow at large n: P(X ≤ 500) for n = 2000 is tiny but positive.
        let p = binomial_half_cdf(500, 2000);
        assert!(p > 0.0 && p < 1e-100, "{p}");
    }

    #[test]
    fn holm_steps_down_and_keeps_order() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.5]);
        // Sorted: 0.01·4, 0.03·3, 0.04·2 → max-accumulated 0.04, 0.09, 0.09; 0.5·1 → 0.5.
        let expected = [0.04, 0.09, 0.09, 0.5];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-15, "{adjusted:?}");
        }
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert!((quantile_sorted(&v, 0.025) - 1.075).abs() < 1e-12);
        assert!((quantile_sorted(&v, 0.5) - 2.5).abs() < 1e-12);
    }

    #[test]
    fn the_bootstrap_is_seeded_and_its_groups_share_resamples() {
        let values: Vec<f64> = (0..200).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
        let groups: Vec<Vec<usize>> = (0..200).map(|i| vec![0, 1 + i % 2]).collect();
        let run = |seed| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            bootstrap_group_means(&values, &groups, 4, 500, &mut rng)
        };
        let a = run(7);
        assert_eq!(a, run(7), "same seed, same intervals");
        assert_ne!(a, run(8));
        assert!(a[3].is_none(), "a group without items has no interval");
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let overall = a[0].unwrap();
        assert!(overall.contains(mean), "{overall:?} misses the sample mean {mean}");
        // The standard error of a mean of 200 values with sd ≈ 3.2 is ≈ 0.22: width ≈ 0.9.
        assert!((0.6..1.3).contains(&(overall.high - overall.low)), "{overall:?}");
    }
}
