//! The Multi-Bootstrap (Sellam et al. 2021, as `google-research/language`'s
//! `multiberts/multibootstrap.py` defines it): pretraining seeds as replicates. Scores form a
//! matrix seeds × examples per arm (here: a pair's stereotype win, 0 or 100, for every pair of
//! every pretraining seed of a data composition). Each of B replicates resamples the seeds with
//! replacement (paired: one sample for both arms, which share their seeds; unpaired: one per
//! arm) and the examples with replacement (one sample shared by both arms), averages within each
//! drawn seed, then across seeds. Intervals are percentiles (numpy's linear interpolation) of
//! the replicates; `p` is the share of replicates whose difference is ≤ 0. The estimates are the
//! full data's: the mean over seeds of each seed's mean over examples.
use super::stats::{quantile_sorted, Interval};
use indolm_core::error::{Error, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// An arm's estimate: the mean over its seeds of each seed's mean score, and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArmEstimate {
    /// The full data's value.
    pub estimate: f64,
    /// The percentile interval of the replicates.
    pub interval: Interval,
    /// Seeds in the arm.
    pub seeds: usize,
}

/// Two arms compared: each arm's estimate, the difference `expt − base` with its interval, and
/// `p`, the share of replicates in which the difference is ≤ 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The base arm (L).
    pub base: ArmEstimate,
    /// The other arm (L').
    pub expt: ArmEstimate,
    /// `expt.estimate − base.estimate`.
    pub difference: f64,
    /// The percentile interval of the replicates' differences.
    pub difference_interval: Interval,
    /// The share of replicates with `L' − L ≤ 0`.
    pub p: f64,
    /// Whether the seeds were paired.
    pub paired: bool,
    /// Replicates drawn.
    pub replicates: usize,
}

/// The mean over seeds of each seed's mean over `examples` (all when `None`), summed in order.
fn score(seeds: &[Vec<f64>], drawn_seeds: &[usize], examples: Option<&[usize]>) -> f64 {
    let mut total = 0.0;
    for &s in drawn_seeds {
        let row = &seeds[s];
        let mean = match examples {
            Some(jj) => jj.iter().map(|&j| row[j]).sum::<f64>() / jj.len() as f64,
            None => row.iter().sum::<f64>() / row.len() as f64,
        };
        total += mean;
    }
    total / drawn_seeds.len() as f64
}

/// The full data's estimate of an arm.
pub(crate) fn estimate(seeds: &[Vec<f64>]) -> f64 {
    score(seeds, &(0..seeds.len()).collect::<Vec<_>>(), None)
}

fn check(name: &str, seeds: &[Vec<f64>], examples: usize) -> Result<()> {
    if seeds.is_empty() || examples == 0 {
        return Err(Error::data("multi-bootstrap", format!("arm {name} has no seeds or no examples")));
    }
    if let Some(row) = seeds.iter().find(|r| r.len() != examples) {
        return Err(Error::data(
            "multi-bootstrap",
            format!(
                "arm {name}: a seed scored {} examples, another {examples}: every seed needs the same examples",
                row.len()
            ),
        ));
    }
    Ok(())
}

fn interval(mut values: Vec<f64>) -> Interval {
    values.sort_by(f64::total_cmp);
    Interval { low: quantile_sorted(&values, 0.025), high: quantile_sorted(&values, 0.975) }
}

/// One arm alone: its estimate and the interval from resampling its seeds and examples.
pub fn single(seeds: &[Vec<f64>], replicates: usize, rng: &mut impl Rng) -> Result<ArmEstimate> {
    let n = seeds.first().map_or(0, Vec::len);
    check("A", seeds, n)?;
    let mut samples = Vec::with_capacity(replicates);
    let (mut drawn, mut jj) = (vec![0; seeds.len()], vec![0; n]);
    for _ in 0..replicates {
        drawn.iter_mut().for_each(|s| *s = rng.random_range(0..seeds.len()));
        jj.iter_mut().for_each(|j| *j = rng.random_range(0..n));
        samples.push(score(seeds, &drawn, Some(&jj)));
    }
    Ok(ArmEstimate { estimate: estimate(seeds), interval: interval(samples), seeds: seeds.len() })
}

/// Compares `expt` with `base` (the same examples, in the same order). `paired`: the two arms
/// come from the same seeds, row for row (two checkpoints of the same runs).
pub fn compare(
    base: &[Vec<f64>],
    expt: &[Vec<f64>],
    paired: bool,
    replicates: usize,
    rng: &mut impl Rng,
) -> Result<Comparison> {
    let n = base.first().map_or(0, Vec::len);
    check("A", base, n)?;
    check("B", expt, n)?;
    if paired && base.len() != expt.len() {
        return Err(Error::data(
            "multi-bootstrap",
            format!("paired arms need the same seeds: {} against {}", base.len(), expt.len()),
        ));
    }
    let (mut base_samples, mut expt_samples, mut deltas) =
        (Vec::with_capacity(replicates), Vec::with_capacity(replicates), Vec::with_capacity(replicates));
    let (mut drawn_base, mut drawn_expt, mut jj) = (vec![0; base.len()], vec![0; expt.len()], vec![0; n]);
    for _ in 0..replicates {
        drawn_base.iter_mut().for_each(|s| *s = rng.random_range(0..base.len()));
        if paired {
            drawn_expt.copy_from_slice(&drawn_base);
        } else {
            drawn_expt.iter_mut().for_each(|s| *s = rng.random_range(0..expt.len()));
        }
        jj.iter_mut().for_each(|j| *j = rng.random_range(0..n));
        let (l, l2) = (score(base, &drawn_base, Some(&jj)), score(expt, &drawn_expt, Some(&jj)));
        base_samples.push(l);
        expt_samples.push(l2);
        deltas.push(l2 - l);
    }
    let p = deltas.iter().filter(|d| **d <= 0.0).count() as f64 / replicates.max(1) as f64;
    let (b, e) = (estimate(base), estimate(expt));
    Ok(Comparison {
        base: ArmEstimate { estimate: b, interval: interval(base_samples), seeds: base.len() },
        expt: ArmEstimate { estimate: e, interval: interval(expt_samples), seeds: expt.len() },
        difference: e - b,
        difference_interval: interval(deltas),
        p,
        paired,
        replicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn estimates_average_within_then_across_seeds() {
        let seeds = vec![vec![100.0, 0.0, 100.0, 100.0], vec![0.0, 0.0, 100.0, 0.0]];
        assert_eq!(estimate(&seeds), (75.0 + 25.0) / 2.0);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let c = compare(&seeds, &seeds, true, 200, &mut rng).unwrap();
        assert_eq!((c.difference, c.difference_interval), (0.0, Interval { low: 0.0, high: 0.0 }));
        assert_eq!(c.p, 1.0, "paired identical arms: every difference is 0");
        let shifted: Vec<Vec<f64>> = seeds.iter().map(|r| r.iter().map(|v| v + 10.0).collect()).collect();
        let c = compare(&seeds, &shifted, true, 200, &mut rng).unwrap();
        assert_eq!(c.difference, 10.0);
        assert_eq!((c.p, c.difference_interval), (0.0, Interval { low: 10.0, high: 10.0 }), "{c:?}");
        // Unpaired, the two seeds' gap (75 against 25) is noise the +10 does not clear.
        let c = compare(&seeds, &shifted, false, 200, &mut rng).unwrap();
        assert_eq!(c.difference, 10.0);
        assert!(c.difference_interval.low < 0.0 && c.p > 0.05, "{c:?}");
        assert!(compare(&seeds, &seeds[..1], true, 10, &mut rng).is_err());
        assert!(compare(&seeds, &[vec![1.0]], false, 10, &mut rng).is_err());
    }
}
