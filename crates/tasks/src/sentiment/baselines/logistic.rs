//! Multinomial logistic regression as scikit-learn's `LogisticRegression(C)` defines it for three
//! or more classes: a weight vector and an intercept per class, the softmax's cross-entropy
//! summed over the texts plus `‖W‖² / (2C)` (the intercepts are not penalized), solved to
//! convergence. scikit-learn's default solver (lbfgs, `tol=1e-4`, `max_iter=100`) stops short
//! of the optimum; the optimum is what the problem defines, so indolm solves to a gradient
//! below [`TOLERANCE`] by Newton's method with conjugate-gradient steps (the Hessian only as
//! products) and a backtracking line search, and the tests compare with scikit-learn's
//! `newton-cg` solver run to `tol=1e-10`.
use super::naive_bayes::first_argmax;
use super::sparse::Csr;

/// The largest gradient entry at which the solution is taken as optimal (the objective is a sum
/// over the texts, so this is about 1e-11 of a mean gradient).
pub(crate) const TOLERANCE: f64 = 1e-8;
/// The most Newton steps.
const MAX_NEWTON: usize = 500;
/// The most conjugate-gradient steps per Newton step.
const MAX_CG: usize = 5000;

/// A fitted multinomial logistic regression.
#[derive(Debug, Clone, PartialEq)]
pub struct Logistic {
    n_classes: usize,
    n_features: usize,
    /// The weights, class by class (`n_classes × n_features`).
    weights: Vec<f64>,
    /// The intercept of each class.
    intercept: Vec<f64>,
    /// Newton steps taken.
    steps: usize,
}

/// A point of the parameter space with the values the solver needs there.
struct Evaluated {
    weights: Vec<f64>,
    intercept: Vec<f64>,
    objective: f64,
    /// The gradient: weights' part then intercepts'.
    gradient: Vec<f64>,
    /// The class probabilities of every text (`texts × n_classes`).
    probabilities: Vec<f64>,
}

/// The training problem: the data and the penalty.
struct Problem<'a> {
    x: &'a Csr,
    y: &'a [usize],
    k: usize,
    m: usize,
    /// 1 / C.
    lambda: f64,
}

impl Problem<'_> {
    /// The scores `W x + b` of row `i`.
    fn scores(&self, weights: &[f64], intercept: &[f64], i: usize) -> Vec<f64> {
        let mut z = intercept.to_vec();
        for (c, v) in self.x.row(i).entries() {
            for (k, zk) in z.iter_mut().enumerate() {
                *zk += v * weights[k * self.m + c];
            }
        }
        z
    }

    /// The objective, its gradient and the probabilities at (weights, intercept).
    fn evaluate(&self, weights: Vec<f64>, intercept: Vec<f64>) -> Evaluated {
        let (k, m) = (self.k, self.m);
        let mut objective = 0.0;
        let mut gradient = vec![0.0; k * m + k];
        let mut probabilities = vec![0.0; self.x.rows() * k];
        for i in 0..self.x.rows() {
            let z = self.scores(&weights, &intercept, i);
            let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = z.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = exps.iter().sum();
            objective += max + total.ln() - z[self.y[i]];
            let p = &mut probabilities[i * k..(i + 1) * k];
            for (class, pk) in p.iter_mut().enumerate() {
                *pk = exps[class] / total;
            }
            for class in 0..k {
                let r = p[class] - if class == self.y[i] { 1.0 } else { 0.0 };
                for (c, v) in self.x.row(i).entries() {
                    gradient[class * m + c] += r * v;
                }
                gradient[k * m + class] += r;
            }
        }
        let mut penalty = 0.0;
        for (g, w) in gradient[..k * m].iter_mut().zip(&weights) {
            *g += self.lambda * w;
            penalty += w * w;
        }
        objective += 0.5 * self.lambda * penalty;
        Evaluated { weights, intercept, objective, gradient, probabilities }
    }

    /// The Hessian at `at` times `direction` (weights' part then intercepts').
    fn hessian_times(&self, at: &Evaluated, direction: &[f64]) -> Vec<f64> {
        let (k, m) = (self.k, self.m);
        let (dw, db) = direction.split_at(k * m);
        let mut out = vec![0.0; k * m + k];
        for i in 0..self.x.rows() {
            let u = self.scores(dw, db, i);
            let p = &at.probabilities[i * k..(i + 1) * k];
            let pu: f64 = p.iter().zip(&u).map(|(a, b)| a * b).sum();
            for class in 0..k {
                let r = p[class] * (u[class] - pu);
                for (c, v) in self.x.row(i).entries() {
                    out[class * m + c] += r * v;
                }
                out[k * m + class] += r;
            }
        }
        for (o, d) in out[..k * m].iter_mut().zip(dw) {
            *o += self.lambda * d;
        }
        out
    }
}

/// The dot product of two dense vectors.
fn inner(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The largest absolute entry.
fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

impl Logistic {
    /// Fits on `x` with labels `y` (each below `n_classes`) and inverse penalty `c`, starting from
    /// `start` when given (the solution of a neighbouring `c` on the same features: the optimum
    /// does not depend on the start, only the number of steps does).
    pub(crate) fn fit(x: &Csr, y: &[usize], n_classes: usize, c: f64, start: Option<&Logistic>) -> Logistic {
        let (k, m) = (n_classes, x.n_cols);
        let problem = Problem { x, y, k, m, lambda: 1.0 / c };
        let (w0, b0) = match start {
            Some(s) if s.n_classes == k && s.n_features == m => (s.weights.clone(), s.intercept.clone()),
            _ => (vec![0.0; k * m], vec![0.0; k]),
        };
        let mut at = problem.evaluate(w0, b0);
        let mut steps = 0;
        while steps < MAX_NEWTON && max_abs(&at.gradient) > TOLERANCE {
            steps += 1;
            let direction = newton_direction(&problem, &at);
            match line_search(&problem, &at, &direction) {
                Some(next) => at = next,
                // No step lowers the objective any more: as optimal as floating point allows.
                None => break,
            }
        }
        Logistic { n_classes: k, n_features: m, weights: at.weights, intercept: at.intercept, steps }
    }

    /// The class of each row of `x`: the largest score (the first on a tie).
    pub fn predict(&self, x: &Csr) -> Vec<usize> {
        (0..x.rows())
            .map(|i| {
                let mut z = self.intercept.clone();
                for (c, v) in x.row(i).entries() {
                    if c < self.n_features {
                        for (k, zk) in z.iter_mut().enumerate() {
                            *zk += v * self.weights[k * self.n_features + c];
                        }
                    }
                }
                first_argmax(&z)
            })
            .collect()
    }

    /// The Newton steps the fit took.
    pub fn steps(&self) -> usize {
        self.steps
    }
}

/// An inexact Newton direction: conjugate gradients on `H d = −g`, stopped when the residual is
/// below `min(½, √‖g‖) ‖g‖` (superlinear convergence near the optimum).
fn newton_direction(problem: &Problem, at: &Evaluated) -> Vec<f64> {
    let g = &at.gradient;
    let g_norm = inner(g, g).sqrt();
    let forcing = 0.5f64.min(g_norm.sqrt()) * g_norm;
    let mut d = vec![0.0; g.len()];
    let mut r: Vec<f64> = g.iter().map(|v| -v).collect();
    let mut p = r.clone();
    let mut rs = inner(&r, &r);
    for _ in 0..MAX_CG {
        let hp = problem.hessian_times(at, &p);
        let curvature = inner(&p, &hp);
        if curvature <= 0.0 {
            break;
        }
        let a = rs / curvature;
        for ((di, ri), (pi, hi)) in d.iter_mut().zip(r.iter_mut()).zip(p.iter().zip(&hp)) {
            *di += a * pi;
            *ri -= a * hi;
        }
        let rs_next = inner(&r, &r);
        if rs_next.sqrt() <= forcing {
            break;
        }
        let beta = rs_next / rs;
        for (pi, ri) in p.iter_mut().zip(&r) {
            *pi = ri + beta * *pi;
        }
        rs = rs_next;
    }
    if d.iter().all(|v| *v == 0.0) {
        // Conjugate gradients made no progress: the steepest descent direction instead.
        d = g.iter().map(|v| -v).collect();
    }
    d
}

/// Backtracking from the full step until the objective falls enough (Armijo, 1e-4), or, once the
/// change is within rounding of the objective, until the gradient shrinks; `None` when no step
/// of at least 2⁻⁶⁰ does either.
fn line_search(problem: &Problem, at: &Evaluated, direction: &[f64]) -> Option<Evaluated> {
    let k_m = problem.k * problem.m;
    let slope = inner(&at.gradient, direction);
    let g_max = max_abs(&at.gradient);
    let mut t = 1.0;
    for _ in 0..60 {
        let weights: Vec<f64> = at.weights.iter().zip(&direction[..k_m]).map(|(w, d)| w + t * d).collect();
        let intercept: Vec<f64> = at.intercept.iter().zip(&direction[k_m..]).map(|(b, d)| b + t * d).collect();
        let next = problem.evaluate(weights, intercept);
        let armijo = next.objective <= at.objective + 1e-4 * t * slope;
        let flat = (next.objective - at.objective).abs() <= 1e-12 * at.objective.abs().max(1.0)
            && max_abs(&next.gradient) < g_max;
        if armijo || flat {
            return Some(next);
        }
        t *= 0.5;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six texts over three features, two of each class, the classes overlapping a little.
    fn data() -> (Csr, Vec<usize>) {
        let mut x = Csr::new(3);
        for row in [
            vec![(0, 2.0)],
            vec![(0, 1.0), (2, 1.0)],
            vec![(1, 2.0)],
            vec![(1, 1.0), (0, 0.5)],
            vec![(2, 2.0)],
            vec![(2, 1.0), (1, 0.5)],
        ] {
            let mut row = row;
            row.sort_by_key(|e| e.0);
            x.push_row(row);
        }
        (x, vec![0, 0, 1, 1, 2, 2])
    }

    #[test]
    fn converges_to_a_zero_gradient_and_fits_the_classes() {
        let (x, y) = data();
        let model = Logistic::fit(&x, &y, 3, 1.0, None);
        let problem = Problem { x: &x, y: &y, k: 3, m: 3, lambda: 1.0 };
        let at = problem.evaluate(model.weights.clone(), model.intercept.clone());
        assert!(max_abs(&at.gradient) <= TOLERANCE, "gradient {:?}", at.gradient);
        assert_eq!(model.predict(&x), y);
        // The optimum's weights sum to zero per feature (the softmax's penalized symmetry).
        for c in 0..3 {
            let s: f64 = (0..3).map(|k| model.weights[k * 3 + c]).sum();
            assert!(s.abs() < 1e-6, "feature {c}: {s}");
        }
    }

    #[test]
    fn the_start_changes_the_steps_not_the_solution() {
        let (x, y) = data();
        let cold = Logistic::fit(&x, &y, 3, 10.0, None);
        let near = Logistic::fit(&x, &y, 3, 9.0, None);
        let warm = Logistic::fit(&x, &y, 3, 10.0, Some(&near));
        for (a, b) in cold.weights.iter().zip(&warm.weights) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        assert!(cold.steps() > 0 && warm.steps() > 0);
    }

    #[test]
    fn the_hessian_product_matches_finite_differences_of_the_gradient() {
        let (x, y) = data();
        let problem = Problem { x: &x, y: &y, k: 3, m: 3, lambda: 0.5 };
        let w: Vec<f64> = (0..9).map(|i| (i as f64 * 0.37).sin()).collect();
        let b = vec![0.1, -0.2, 0.05];
        let at = problem.evaluate(w.clone(), b.clone());
        let d: Vec<f64> = (0..12).map(|i| (i as f64 * 0.71).cos()).collect();
        let hd = problem.hessian_times(&at, &d);
        let h = 1e-6;
        let moved = problem.evaluate(
            w.iter().zip(&d[..9]).map(|(a, e)| a + h * e).collect(),
            b.iter().zip(&d[9..]).map(|(a, e)| a + h * e).collect(),
        );
        for (i, v) in hd.iter().enumerate() {
            let fd = (moved.gradient[i] - at.gradient[i]) / h;
            assert!((fd - v).abs() < 1e-4, "entry {i}: {fd} vs {v}");
        }
    }
}
