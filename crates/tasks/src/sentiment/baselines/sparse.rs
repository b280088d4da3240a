//! Sparse document-term matrices for the classical baselines: rows stored as scikit-learn's CSR
//! matrices store them (column indices sorted within a row, values in that order), and the two
//! row products libsvm computes on them, summed in libsvm's order so that a kernel value here is
//! the very double libsvm gets.

/// A row-major sparse matrix of `f64` (scipy's CSR layout): row `i` holds the entries
/// `indptr[i]..indptr[i + 1]` of `indices` and `values`, by increasing column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Csr {
    /// The number of columns (the vocabulary's size).
    pub n_cols: usize,
    /// Where each row starts in `indices` and `values`, and where the last ends.
    pub indptr: Vec<usize>,
    /// The column of each stored entry.
    pub indices: Vec<usize>,
    /// The value of each stored entry.
    pub values: Vec<f64>,
}

/// One row of a [`Csr`]: its columns (increasing) and values.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// The columns of the row's entries, increasing.
    pub indices: &'a [usize],
    /// The entries' values.
    pub values: &'a [f64],
}

impl<'a> Row<'a> {
    /// The (column, value) entries, by column.
    pub(crate) fn entries(self) -> impl Iterator<Item = (usize, f64)> + 'a {
        self.indices.iter().copied().zip(self.values.iter().copied())
    }
}

impl Csr {
    /// A matrix of `n_cols` columns and no rows.
    pub fn new(n_cols: usize) -> Self {
        Csr { n_cols, indptr: vec![0], indices: Vec::new(), values: Vec::new() }
    }

    /// Appends a row from its entries, which must be by increasing column.
    pub(crate) fn push_row(&mut self, entries: impl IntoIterator<Item = (usize, f64)>) {
        for (column, value) in entries {
            debug_assert!(column < self.n_cols, "column {column} of {}", self.n_cols);
            self.indices.push(column);
            self.values.push(value);
        }
        self.indptr.push(self.indices.len());
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.indptr.len() - 1
    }

    /// Row `i`.
    pub(crate) fn row(&self, i: usize) -> Row<'_> {
        let (start, end) = (self.indptr[i], self.indptr[i + 1]);
        Row { indices: &self.indices[start..end], values: &self.values[start..end] }
    }

    /// The rows of `self` followed by those of `other` (scipy's `vstack`), which must have as
    /// many columns.
    pub(crate) fn stack(&self, other: &Csr) -> Csr {
        debug_assert_eq!(self.n_cols, other.n_cols);
        let mut out = self.clone();
        let offset = out.indices.len();
        out.indices.extend_from_slice(&other.indices);
        out.values.extend_from_slice(&other.values);
        out.indptr.extend(other.indptr[1..].iter().map(|p| p + offset));
        out
    }

    /// The rows at `rows`, in that order.
    pub fn select(&self, rows: &[usize]) -> Csr {
        let mut out = Csr::new(self.n_cols);
        for &i in rows {
            out.push_row(self.row(i).entries());
        }
        out
    }
}

/// The dot product of two rows, as libsvm's sparse `Kernel::dot` sums it: the products of the
/// columns both rows hold, by increasing column.
pub(crate) fn dot(a: Row, b: Row) -> f64 {
    let (mut i, mut j, mut sum) = (0, 0, 0.0);
    while i < a.indices.len() && j < b.indices.len() {
        match a.indices[i].cmp(&b.indices[j]) {
            std::cmp::Ordering::Equal => {
                sum += a.values[i] * b.values[j];
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Less => i += 1,
        }
    }
    sum
}

/// The squared Euclidean distance of two rows, as libsvm's sparse `k_function` sums it for the
/// RBF kernel at prediction: by increasing column, a shared column adding its squared difference
/// and a column of one row only its square, then the rest of either row.
pub(crate) fn squared_distance(a: Row, b: Row) -> f64 {
    let (mut i, mut j, mut sum) = (0, 0, 0.0);
    while i < a.indices.len() && j < b.indices.len() {
        match a.indices[i].cmp(&b.indices[j]) {
            std::cmp::Ordering::Equal => {
                let d = a.values[i] - b.values[j];
                sum += d * d;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Greater => {
                sum += b.values[j] * b.values[j];
                j += 1;
            }
            std::cmp::Ordering::Less => {
                sum += a.values[i] * a.values[i];
                i += 1;
            }
        }
    }
    for &v in &a.values[i..] {
        sum += v * v;
    }
    for &v in &b.values[j..] {
        sum += v * v;
    }
    sum
}

/// numpy's pairwise summation of a contiguous `float64` array (`np.sum`, `np.add.reduce`): runs
/// under 8 summed in order, blocks up to 128 with eight accumulators, longer runs split in two
/// halves cut at a multiple of 8; then numpy's initial 0.0 added (which only turns −0 into 0).
pub(crate) fn numpy_sum(values: &[f64]) -> f64 {
    let sum = pairwise(values);
    if sum == 0.0 {
        0.0
    } else {
        sum
    }
}

/// numpy's `DOUBLE_pairwise_sum`.
fn pairwise(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = -0.0;
        for &v in a {
            res += v;
        }
        res
    } else if n <= 128 {
        let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
        let mut i = 8;
        while i < n - (n % 8) {
            for (k, acc) in r.iter_mut().enumerate() {
                *acc += a[i + k];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &a[i..] {
            res += v;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(&a[..n2]) + pairwise(&a[n2..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix() -> Csr {
        let mut m = Csr::new(5);
        m.push_row([(0, 1.0), (2, 2.0), (4, 3.0)]);
        m.push_row([(1, 4.0), (2, 5.0)]);
        m.push_row([]);
        m
    }

    #[test]
    fn rows_products_and_distances() {
        let m = matrix();
        assert_eq!(m.rows(), 3);
        assert_eq!(dot(m.row(0), m.row(1)), 10.0);
        assert_eq!(dot(m.row(0), m.row(0)), 14.0);
        assert_eq!(dot(m.row(0), m.row(2)), 0.0);
        // (1)² + (4)² + (2 - 5)² + (3)²
        assert_eq!(squared_distance(m.row(0), m.row(1)), 35.0);
        assert_eq!(squared_distance(m.row(1), m.row(0)), 35.0);
        assert_eq!(squared_distance(m.row(2), m.row(1)), 41.0);
    }

    #[test]
    fn stacking_and_selecting_keep_rows() {
        let m = matrix();
        let s = m.stack(&m);
        assert_eq!(s.rows(), 6);
        assert_eq!(s.row(4).indices, &[1, 2]);
        assert_eq!(s.row(3).values, &[1.0, 2.0, 3.0]);
        let picked = s.select(&[4, 0]);
        assert_eq!(picked.rows(), 2);
        assert_eq!(picked.row(0).values, &[4.0, 5.0]);
    }

    #[test]
    fn pairwise_sum_is_exact_on_integers_and_orders_as_numpy() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(numpy_sum(&v), 500_500.0);
        assert_eq!(numpy_sum(&[]), 0.0);
        // 1e16 + 1 + ... : in order the ones are lost; numpy's eight accumulators keep some.
        let mut w = vec![1e16];
        w.extend(std::iter::repeat_n(1.0, 15));
        let sequential = w.iter().fold(0.0, |a, b| a + b);
        assert_eq!(sequential, 1e16);
        // r0 = 1e16 + 1 (rounds to 1e16), r1..r7 = 2 each: 1e16 + 14.
        assert_eq!(numpy_sum(&w), 1e16 + 14.0);
    }
}
