//! C-support vector classification as scikit-learn's `SVC(C, kernel)` trains it on sparse
//! features: its copy of libsvm (`sklearn/svm/src/libsvm/svm.cpp`, sparse build), ported
//! operation for operation so that the same data give the same support vectors, the same
//! intercepts and the same predictions:
//!
//! - one-vs-one: the classes sorted (scikit-learn's change to `svm_group_classes`), the texts
//!   grouped by class in their order, a binary problem per pair of classes (the first class
//!   +1), and prediction by votes, the first class with the most votes winning;
//! - each binary problem solved by libsvm's SMO (`Solver`): working sets by second-order
//!   information, shrinking with libsvm's schedule, stopping tolerance 1e-3, kernel values kept
//!   as `float` as libsvm's cache keeps them, the intercept from the free variables;
//! - kernels `linear` (the dot product) and `rbf` (`exp(-gamma |x - y|²)`, with scikit-learn's
//!   default `gamma = "scale"`: 1 / (features × the variance of every entry of the training
//!   matrix, zeros included), its means summed as numpy sums them).
use super::naive_bayes::first_argmax;
use super::sparse::{dot, numpy_sum, squared_distance, Csr, Row};
use indolm_torch::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The kernels of the authors' grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// The dot product.
    Linear,
    /// The Gaussian kernel with scikit-learn's `gamma="scale"`.
    Rbf,
}

impl Kernel {
    /// Its scikit-learn name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Linear => "linear",
            Kernel::Rbf => "rbf",
        }
    }
}

/// libsvm's stopping tolerance (scikit-learn's `tol=1e-3`).
const EPS: f64 = 1e-3;
/// libsvm's floor for a non-positive curvature.
const TAU: f64 = 1e-12;
/// A bound on SMO iterations (libsvm has none: scikit-learn's `max_iter=-1`); far above what
/// NusaX's problems take (hundreds to a few thousand).
const MAX_ITER: usize = 50_000_000;

/// scikit-learn's `gamma="scale"` for training matrix `x`: 1 / (columns × var), var the mean of
/// the squared entries minus the squared mean over all rows × columns entries (scipy's sparse
/// `mean`: each stored value times 1/(rows × columns), summed by numpy); 1 when var is 0.
pub(crate) fn scale_gamma(x: &Csr) -> f64 {
    let r = 1.0 / (x.rows() * x.n_cols) as f64;
    let squares: Vec<f64> = x.values.iter().map(|v| v * v * r).collect();
    let values: Vec<f64> = x.values.iter().map(|v| v * r).collect();
    let mean = numpy_sum(&values);
    let var = numpy_sum(&squares) - mean * mean;
    if var != 0.0 {
        1.0 / (x.n_cols as f64 * var)
    } else {
        1.0
    }
}

/// One binary classifier of the one-vs-one scheme: classes `first` (+1) against `second`.
#[derive(Debug, Clone, PartialEq)]
struct PairModel {
    first: usize,
    second: usize,
    /// `alpha × y` of each support vector of class `first` (libsvm's `sv_coef[second - 1]`),
    /// zero for those that are support vectors of another pair only.
    coef_first: Vec<f64>,
    /// The same for the support vectors of class `second` (`sv_coef[first]`).
    coef_second: Vec<f64>,
    /// The intercept's negative.
    rho: f64,
    /// SMO iterations (scikit-learn's `n_iter_`).
    iterations: usize,
}

/// A trained C-SVC.
#[derive(Debug, Clone, PartialEq)]
pub struct Svc {
    kernel: Kernel,
    gamma: f64,
    /// The support vectors, grouped by class.
    support: Csr,
    /// Support vectors per class.
    n_support: Vec<usize>,
    /// The training rows of the support vectors (scikit-learn's `support_`).
    support_rows: Vec<usize>,
    /// The pairs (0, 1), (0, 2), …, (1, 2), …
    pairs: Vec<PairModel>,
}

impl Svc {
    /// Trains on `x` with labels `y` (each below `n_classes`; every class present), penalty `c`
    /// and `kernel`.
    pub(crate) fn fit(x: &Csr, y: &[usize], n_classes: usize, c: f64, kernel: Kernel) -> Result<Svc> {
        let gamma = match kernel {
            Kernel::Rbf => scale_gamma(x),
            Kernel::Linear => 0.0,
        };
        // svm_group_classes: by class (sorted), each class's rows in their order.
        let mut count = vec![0usize; n_classes];
        for &label in y {
            count[label] += 1;
        }
        if let Some(missing) = count.iter().position(|&n| n == 0) {
            return Err(Error::data("SVC", format!("class {missing} has no training text")));
        }
        let mut start = vec![0usize; n_classes];
        for k in 1..n_classes {
            start[k] = start[k - 1] + count[k - 1];
        }
        let perm: Vec<usize> = (0..n_classes).flat_map(|k| (0..y.len()).filter(move |&i| y[i] == k)).collect();
        let rows: Vec<Row> = perm.iter().map(|&i| x.row(i)).collect();
        let l = rows.len();
        // The kernel matrix over the grouped rows, as libsvm's `kernel_function` computes it.
        let squares: Vec<f64> = rows.iter().map(|r| dot(*r, *r)).collect();
        let mut gram = vec![0.0; l * l];
        for a in 0..l {
            for b in a..l {
                let d = dot(rows[a], rows[b]);
                let k = match kernel {
                    Kernel::Linear => d,
                    Kernel::Rbf => (-gamma * (squares[a] + squares[b] - 2.0 * d)).exp(),
                };
                gram[a * l + b] = k;
                gram[b * l + a] = k;
            }
        }
        let mut nonzero = vec![false; l];
        let mut solved = Vec::new();
        for i in 0..n_classes {
            for j in i + 1..n_classes {
                let members: Vec<usize> =
                    (start[i]..start[i] + count[i]).chain(start[j]..start[j] + count[j]).collect();
                let signs: Vec<i8> = (0..members.len()).map(|k| if k < count[i] { 1 } else { -1 }).collect();
                let m = members.len();
                let mut q = vec![0f32; m * m];
                for (a, &ga) in members.iter().enumerate() {
                    for (b, &gb) in members.iter().enumerate() {
                        q[a * m + b] = (f64::from(signs[a] * signs[b]) * gram[ga * l + gb]) as f32;
                    }
                }
                let qd: Vec<f64> = members.iter().map(|&g| gram[g * l + g]).collect();
                let (coef, rho, iterations) = Solver::solve(&q, qd, &signs, c)?;
                for (k, &g) in members.iter().enumerate() {
                    if coef[k].abs() > 0.0 {
                        nonzero[g] = true;
                    }
                }
                solved.push((i, j, members, coef, rho, iterations));
            }
        }
        // The model: the support vectors (any pair's) by class, and each pair's coefficients.
        let mut support = Csr::new(x.n_cols);
        let mut support_rows = Vec::new();
        let mut n_support = vec![0usize; n_classes];
        for (g, &is_sv) in nonzero.iter().enumerate() {
            if is_sv {
                support.push_row(rows[g].entries());
                support_rows.push(perm[g]);
                n_support[y[perm[g]]] += 1;
            }
        }
        let pairs = solved
            .into_iter()
            .map(|(i, j, members, coef, rho, iterations)| {
                let ci = count[i];
                let coef_first: Vec<f64> = (0..ci).filter(|&k| nonzero[members[k]]).map(|k| coef[k]).collect();
                let coef_second: Vec<f64> =
                    (ci..members.len()).filter(|&k| nonzero[members[k]]).map(|k| coef[k]).collect();
                PairModel { first: i, second: j, coef_first, coef_second, rho, iterations }
            })
            .collect();
        Ok(Svc { kernel, gamma, support, n_support, support_rows, pairs })
    }

    /// The class of each row of `x`: libsvm's votes over the pairs (a pair votes for its first
    /// class when its decision value is positive), the first class with the most votes.
    pub fn predict(&self, x: &Csr) -> Vec<usize> {
        let n_classes = self.n_support.len();
        let mut start = vec![0usize; n_classes];
        for k in 1..n_classes {
            start[k] = start[k - 1] + self.n_support[k - 1];
        }
        (0..x.rows())
            .map(|r| {
                let row = x.row(r);
                let kvalue: Vec<f64> = (0..self.support.rows())
                    .map(|s| match self.kernel {
                        Kernel::Linear => dot(row, self.support.row(s)),
                        Kernel::Rbf => (-self.gamma * squared_distance(row, self.support.row(s))).exp(),
                    })
                    .collect();
                let mut votes = vec![0usize; n_classes];
                for p in &self.pairs {
                    let mut sum = 0.0;
                    for (k, c) in p.coef_first.iter().enumerate() {
                        sum += c * kvalue[start[p.first] + k];
                    }
                    for (k, c) in p.coef_second.iter().enumerate() {
                        sum += c * kvalue[start[p.second] + k];
                    }
                    sum -= p.rho;
                    if sum > 0.0 {
                        votes[p.first] += 1;
                    } else {
                        votes[p.second] += 1;
                    }
                }
                let votes: Vec<f64> = votes.iter().map(|&v| v as f64).collect();
                first_argmax(&votes)
            })
            .collect()
    }

    /// The `gamma` used (0 for the linear kernel).
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Each pair's intercept negated (libsvm's `rho`), in pair order: scikit-learn's
    /// `-intercept_` for three or more classes.
    pub fn rho(&self) -> Vec<f64> {
        self.pairs.iter().map(|p| p.rho).collect()
    }

    /// Each pair's SMO iterations (scikit-learn's `n_iter_`).
    pub fn iterations(&self) -> Vec<usize> {
        self.pairs.iter().map(|p| p.iterations).collect()
    }

    /// The training rows of the support vectors, grouped by class (scikit-learn's `support_`).
    pub fn support_rows(&self) -> &[usize] {
        &self.support_rows
    }
}

/// Where a variable is relative to its box [0, C].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Lower,
    Upper,
    Free,
}

/// libsvm's `Solver` for C-SVC's dual, `min ½ αᵀQα − eᵀα` with `yᵀα = 0`, `0 ≤ α ≤ C`: the
/// variables are kept in libsvm's shrinking order, `order[t]` being the problem's index of the
/// variable at position `t` (libsvm swaps its arrays and its kernel cache's rows; looking the
/// original kernel value up through `order` reads the same `float`).
struct Solver<'a> {
    /// Q (row-major, the problem's order), as libsvm's cache holds it.
    q: &'a [f32],
    l: usize,
    order: Vec<usize>,
    y: Vec<i8>,
    qd: Vec<f64>,
    alpha: Vec<f64>,
    status: Vec<Bound>,
    g: Vec<f64>,
    g_bar: Vec<f64>,
    p: Vec<f64>,
    c: f64,
    active_size: usize,
    unshrink: bool,
}

impl Solver<'_> {
    /// Solves the problem (`q`: Q row-major; `qd`: its diagonal in double; `y`: ±1) for penalty
    /// `c` from α = 0 with shrinking: returns α × y in the problem's order, rho and the iterations.
    fn solve(q: &[f32], qd: Vec<f64>, y: &[i8], c: f64) -> Result<(Vec<f64>, f64, usize)> {
        let l = y.len();
        let mut s = Solver {
            q,
            l,
            order: (0..l).collect(),
            y: y.to_vec(),
            qd,
            alpha: vec![0.0; l],
            status: vec![Bound::Lower; l],
            // G = Qα + p with α = 0 and p = −1 (libsvm's `minus_ones`).
            g: vec![-1.0; l],
            g_bar: vec![0.0; l],
            p: vec![-1.0; l],
            c,
            active_size: l,
            unshrink: false,
        };
        for i in 0..l {
            s.update_status(i);
        }
        let mut iter = 0;
        let mut counter = l.min(1000) + 1;
        loop {
            if iter >= MAX_ITER {
                return Err(Error::training(
                    "SVC",
                    format!("libsvm's solver did not converge in {MAX_ITER} iterations"),
                ));
            }
            counter -= 1;
            if counter == 0 {
                counter = l.min(1000);
                s.do_shrinking();
            }
            let (i, j) = match s.select_working_set() {
                Some(ws) => ws,
                None => {
                    // Reconstruct the whole gradient and check again on every variable.
                    s.reconstruct_gradient();
                    s.active_size = l;
                    match s.select_working_set() {
                        Some(ws) => {
                            counter = 1; // shrink at the next iteration
                            ws
                        }
                        None => break,
                    }
                }
            };
            iter += 1;
            s.step(i, j);
        }
        let rho = s.calculate_rho();
        let mut out = vec![0.0; l];
        for (&original, &alpha) in s.order.iter().zip(&s.alpha) {
            out[original] = alpha;
        }
        for (a, &sign) in out.iter_mut().zip(y) {
            *a *= f64::from(sign);
        }
        Ok((out, rho, iter))
    }

    /// Q at positions (i, j), as a double.
    #[inline]
    fn q(&self, i: usize, j: usize) -> f64 {
        f64::from(self.q[self.order[i] * self.l + self.order[j]])
    }

    fn update_status(&mut self, i: usize) {
        self.status[i] = if self.alpha[i] >= self.c {
            Bound::Upper
        } else if self.alpha[i] <= 0.0 {
            Bound::Lower
        } else {
            Bound::Free
        };
    }

    fn is_upper(&self, i: usize) -> bool {
        self.status[i] == Bound::Upper
    }

    fn is_lower(&self, i: usize) -> bool {
        self.status[i] == Bound::Lower
    }

    fn is_free(&self, i: usize) -> bool {
        self.status[i] == Bound::Free
    }

    /// libsvm's `swap_index`: positions `i` and `j` trade every per-variable value.
    fn swap(&mut self, i: usize, j: usize) {
        self.order.swap(i, j);
        self.y.swap(i, j);
        self.qd.swap(i, j);
        self.g.swap(i, j);
        self.status.swap(i, j);
        self.alpha.swap(i, j);
        self.p.swap(i, j);
        self.g_bar.swap(i, j);
    }

    /// One SMO step on the working set (i, j): the two variables moved within their box, then
    /// the gradient and G_bar updated.
    fn step(&mut self, i: usize, j: usize) {
        let (c_i, c_j) = (self.c, self.c);
        let (old_i, old_j) = (self.alpha[i], self.alpha[j]);
        let q_ij = self.q(i, j);
        if self.y[i] != self.y[j] {
            let mut quad_coef = self.qd[i] + self.qd[j] + 2.0 * q_ij;
            if quad_coef <= 0.0 {
                quad_coef = TAU;
            }
            let delta = (-self.g[i] - self.g[j]) / quad_coef;
            let diff = self.alpha[i] - self.alpha[j];
            self.alpha[i] += delta;
            self.alpha[j] += delta;
            if diff > 0.0 {
                if self.alpha[j] < 0.0 {
                    self.alpha[j] = 0.0;
                    self.alpha[i] = diff;
                }
            } else if self.alpha[i] < 0.0 {
                self.alpha[i] = 0.0;
                self.alpha[j] = -diff;
            }
            if diff > c_i - c_j {
                if self.alpha[i] > c_i {
                    self.alpha[i] = c_i;
                    self.alpha[j] = c_i - diff;
                }
            } else if self.alpha[j] > c_j {
                self.alpha[j] = c_j;
                self.alpha[i] = c_j + diff;
            }
        } else {
            let mut quad_coef = self.qd[i] + self.qd[j] - 2.0 * q_ij;
            if quad_coef <= 0.0 {
                quad_coef = TAU;
            }
            let delta = (self.g[i] - self.g[j]) / quad_coef;
            let sum = self.alpha[i] + self.alpha[j];
            self.alpha[i] -= delta;
            self.alpha[j] += delta;
            if sum > c_i {
                if self.alpha[i] > c_i {
                    self.alpha[i] = c_i;
                    self.alpha[j] = sum - c_i;
                }
            } else if self.alpha[j] < 0.0 {
                self.alpha[j] = 0.0;
                self.alpha[i] = sum;
            }
            if sum > c_j {
                if self.alpha[j] > c_j {
                    self.alpha[j] = c_j;
                    self.alpha[i] = sum - c_j;
                }
            } else if self.alpha[i] < 0.0 {
                self.alpha[i] = 0.0;
                self.alpha[j] = sum;
            }
        }
        let delta_i = self.alpha[i] - old_i;
        let delta_j = self.alpha[j] - old_j;
        for k in 0..self.active_size {
            let change = self.q(i, k) * delta_i + self.q(j, k) * delta_j;
            self.g[k] += change;
        }
        let (was_upper_i, was_upper_j) = (self.is_upper(i), self.is_upper(j));
        self.update_status(i);
        self.update_status(j);
        if was_upper_i != self.is_upper(i) {
            for k in 0..self.l {
                let change = c_i * self.q(i, k);
                if was_upper_i {
                    self.g_bar[k] -= change;
                } else {
                    self.g_bar[k] += change;
                }
            }
        }
        if was_upper_j != self.is_upper(j) {
            for k in 0..self.l {
                let change = c_j * self.q(j, k);
                if was_upper_j {
                    self.g_bar[k] -= change;
                } else {
                    self.g_bar[k] += change;
                }
            }
        }
    }

    /// libsvm's `select_working_set` (WSS 3): `None` when optimal within the tolerance.
    fn select_working_set(&self) -> Option<(usize, usize)> {
        let mut g_max = f64::NEG_INFINITY;
        let mut g_max2 = f64::NEG_INFINITY;
        let mut g_max_idx: Option<usize> = None;
        let mut g_min_idx: Option<usize> = None;
        let mut obj_diff_min = f64::INFINITY;
        for t in 0..self.active_size {
            if self.y[t] == 1 {
                if !self.is_upper(t) && -self.g[t] >= g_max {
                    g_max = -self.g[t];
                    g_max_idx = Some(t);
                }
            } else if !self.is_lower(t) && self.g[t] >= g_max {
                g_max = self.g[t];
                g_max_idx = Some(t);
            }
        }
        // With no i, g_max is −∞ and no j qualifies: libsvm never reads Q_i then.
        let i = g_max_idx.unwrap_or(0);
        let y_i = f64::from(self.y[i]);
        for j in 0..self.active_size {
            if self.y[j] == 1 {
                if !self.is_lower(j) {
                    let grad_diff = g_max + self.g[j];
                    if self.g[j] >= g_max2 {
                        g_max2 = self.g[j];
                    }
                    if grad_diff > 0.0 {
                        let quad_coef = self.qd[i] + self.qd[j] - 2.0 * y_i * self.q(i, j);
                        let obj_diff = if quad_coef > 0.0 {
                            -(grad_diff * grad_diff) / quad_coef
                        } else {
                            -(grad_diff * grad_diff) / TAU
                        };
                        if obj_diff <= obj_diff_min {
                            g_min_idx = Some(j);
                            obj_diff_min = obj_diff;
                        }
                    }
                }
            } else if !self.is_upper(j) {
                let grad_diff = g_max - self.g[j];
                if -self.g[j] >= g_max2 {
                    g_max2 = -self.g[j];
                }
                if grad_diff > 0.0 {
                    let quad_coef = self.qd[i] + self.qd[j] + 2.0 * y_i * self.q(i, j);
                    let obj_diff = if quad_coef > 0.0 {
                        -(grad_diff * grad_diff) / quad_coef
                    } else {
                        -(grad_diff * grad_diff) / TAU
                    };
                    if obj_diff <= obj_diff_min {
                        g_min_idx = Some(j);
                        obj_diff_min = obj_diff;
                    }
                }
            }
        }
        match (g_max_idx, g_min_idx) {
            (Some(i), Some(j)) if g_max + g_max2 >= EPS => Some((i, j)),
            _ => None,
        }
    }

    /// libsvm's `reconstruct_gradient`: the gradient of the shrunk variables from G_bar and the
    /// free variables.
    fn reconstruct_gradient(&mut self) {
        let (l, active) = (self.l, self.active_size);
        if active == l {
            return;
        }
        for ((g, g_bar), p) in self.g[active..].iter_mut().zip(&self.g_bar[active..]).zip(&self.p[active..]) {
            *g = g_bar + p;
        }
        let nr_free = (0..active).filter(|&j| self.is_free(j)).count();
        if nr_free * l > 2 * active * (l - active) {
            for i in active..l {
                for j in 0..active {
                    if self.is_free(j) {
                        let change = self.alpha[j] * self.q(i, j);
                        self.g[i] += change;
                    }
                }
            }
        } else {
            for i in 0..active {
                if self.is_free(i) {
                    let alpha_i = self.alpha[i];
                    for j in active..l {
                        let change = alpha_i * self.q(i, j);
                        self.g[j] += change;
                    }
                }
            }
        }
    }

    /// libsvm's `be_shrunk`.
    fn be_shrunk(&self, i: usize, g_max1: f64, g_max2: f64) -> bool {
        if self.is_upper(i) {
            if self.y[i] == 1 {
                -self.g[i] > g_max1
            } else {
                -self.g[i] > g_max2
            }
        } else if self.is_lower(i) {
            if self.y[i] == 1 {
                self.g[i] > g_max2
            } else {
                self.g[i] > g_max1
            }
        } else {
            false
        }
    }

    /// libsvm's `do_shrinking`.
    fn do_shrinking(&mut self) {
        let mut g_max1 = f64::NEG_INFINITY;
        let mut g_max2 = f64::NEG_INFINITY;
        for i in 0..self.active_size {
            if self.y[i] == 1 {
                if !self.is_upper(i) && -self.g[i] >= g_max1 {
                    g_max1 = -self.g[i];
                }
                if !self.is_lower(i) && self.g[i] >= g_max2 {
                    g_max2 = self.g[i];
                }
            } else {
                if !self.is_upper(i) && -self.g[i] >= g_max2 {
                    g_max2 = -self.g[i];
                }
                if !self.is_lower(i) && self.g[i] >= g_max1 {
                    g_max1 = self.g[i];
                }
            }
        }
        if !self.unshrink && g_max1 + g_max2 <= EPS * 10.0 {
            self.unshrink = true;
            self.reconstruct_gradient();
            self.active_size = self.l;
        }
        let mut i = 0;
        while i < self.active_size {
            if self.be_shrunk(i, g_max1, g_max2) {
                self.active_size -= 1;
                while self.active_size > i {
                    if !self.be_shrunk(self.active_size, g_max1, g_max2) {
                        self.swap(i, self.active_size);
                        break;
                    }
                    self.active_size -= 1;
                }
            }
            i += 1;
        }
    }

    /// libsvm's `calculate_rho`: the mean of yG over the free variables, else the middle of
    /// the bounds.
    fn calculate_rho(&self) -> f64 {
        let (mut nr_free, mut ub, mut lb, mut sum_free) = (0usize, f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for i in 0..self.active_size {
            let y_g = f64::from(self.y[i]) * self.g[i];
            if self.is_upper(i) {
                if self.y[i] == -1 {
                    ub = ub.min(y_g);
                } else {
                    lb = lb.max(y_g);
                }
            } else if self.is_lower(i) {
                if self.y[i] == 1 {
                    ub = ub.min(y_g);
                } else {
                    lb = lb.max(y_g);
                }
            } else {
                nr_free += 1;
                sum_free += y_g;
            }
        }
        if nr_free > 0 {
            sum_free / nr_free as f64
        } else {
            (ub + lb) / 2.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six texts, two features, three classes in three corners.
    fn corners() -> (Csr, Vec<usize>) {
        let mut x = Csr::new(2);
        for (a, b) in [(1.0, 0.0), (0.9, 0.1), (0.0, 1.0), (0.1, 0.9), (0.0, 0.0), (0.1, 0.0)] {
            let entries: Vec<(usize, f64)> = [(0, a), (1, b)].into_iter().filter(|e| e.1 != 0.0).collect();
            x.push_row(entries);
        }
        (x, vec![0, 0, 1, 1, 2, 2])
    }

    #[test]
    fn separable_corners_are_learned_by_both_kernels() {
        let (x, y) = corners();
        for kernel in [Kernel::Linear, Kernel::Rbf] {
            let svc = Svc::fit(&x, &y, 3, 100.0, kernel).unwrap();
            assert_eq!(svc.predict(&x), y, "{kernel:?}");
            assert_eq!(svc.rho().len(), 3);
            assert!(svc.iterations().iter().all(|&n| n > 0));
        }
    }

    #[test]
    fn gamma_scale_is_one_over_features_times_variance() {
        let (x, _) = corners();
        // Entries (12 in all): 1, .9, .1, 1, .1, .9, .1 and five zeros.
        let entries = [1.0, 0.9, 0.1, 1.0, 0.1, 0.9, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0];
        let mean = entries.iter().sum::<f64>() / 12.0;
        let var = entries.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 12.0;
        assert!((scale_gamma(&x) - 1.0 / (2.0 * var)).abs() < 1e-12);
    }

    #[test]
    fn a_missing_class_is_an_error() {
        let (x, _) = corners();
        assert!(Svc::fit(&x, &[0, 0, 1, 1, 1, 1], 3, 1.0, Kernel::Linear).is_err());
    }
}
