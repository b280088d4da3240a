//! The authors' grids and their selection: the values of their notebook's `param_grids` (the
//! paper's Table 9 gives only ranges), in scikit-learn's `ParameterGrid` order, and
//! `GridSearchCV` over a `PredefinedSplit` as they ran it: every grid point fit on the training
//! split and scored on the validation split (by the estimator's `score`, accuracy, unless
//! macro-F1 is asked for), the first best point kept (scikit-learn ranks ties alike and takes the
//! first), then refit on the training and validation splits together (`refit=True`).
use super::logistic::Logistic;
use super::naive_bayes::MultinomialNb;
use super::sparse::Csr;
use super::svm::{Kernel, Svc};
use indolm_metrics::metrics::{accuracy, macro_f1};
use indolm_torch::error::Result;
use serde::{Deserialize, Serialize};

/// The three classical models of Table 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// Multinomial naive Bayes (`MultinomialNB()`).
    Nb,
    /// Support vector classification (`SVC()`), linear or RBF kernel.
    Svm,
    /// Logistic regression (`LogisticRegression()`).
    Lr,
}

impl Model {
    /// Table 3's rows, in its order.
    pub const ALL: [Model; 3] = [Model::Nb, Model::Svm, Model::Lr];

    /// The short name (`nb`, `svm`, `lr`).
    pub fn name(self) -> &'static str {
        match self {
            Model::Nb => "nb",
            Model::Svm => "svm",
            Model::Lr => "lr",
        }
    }

    /// Table 3's row label.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Model::Nb => "Naive Bayes",
            Model::Svm => "SVM",
            Model::Lr => "LR",
        }
    }
}

/// One grid point: a model and its hyper-parameters (JSON: `{"alpha": …}`, `{"C": …, "kernel":
/// …}`, `{"C": …}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Params {
    /// Naive Bayes' additive smoothing.
    Nb {
        /// `alpha`.
        alpha: f64,
    },
    /// SVC's penalty and kernel.
    Svm {
        /// `C`.
        #[serde(rename = "C")]
        c: f64,
        /// `kernel`.
        kernel: Kernel,
    },
    /// Logistic regression's inverse penalty.
    Lr {
        /// `C`.
        #[serde(rename = "C")]
        c: f64,
    },
}

impl std::fmt::Display for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Params::Nb { alpha } => write!(f, "alpha={alpha}"),
            Params::Svm { c, kernel } => write!(f, "C={c} kernel={}", kernel.name()),
            Params::Lr { c } => write!(f, "C={c}"),
        }
    }
}

/// numpy's `linspace(start, stop, num)`: `start + i × step` with `step = (stop − start) / (num
/// − 1)`, the last value `stop` exactly.
pub(crate) fn linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    if num == 1 {
        return vec![start];
    }
    let step = (stop - start) / (num - 1) as f64;
    (0..num).map(|i| if i + 1 == num { stop } else { i as f64 * step + start }).collect()
}

/// The authors' grid for `model` (their notebook's `param_grids`): naive Bayes `alpha` in
/// `np.linspace(0.001, 1, 50)`; SVC `C` in `[0.01, 0.1, 1, 10, 100]` × `kernel` in `["rbf",
/// "linear"]` (`C` varying slowest, as `ParameterGrid` orders the sorted keys); logistic
/// regression `C` in `np.linspace(0.001, 10, 100)` (the paper's Table 9 says 0.001 to 100).
pub fn authors_grid(model: Model) -> Vec<Params> {
    match model {
        Model::Nb => linspace(0.001, 1.0, 50).into_iter().map(|alpha| Params::Nb { alpha }).collect(),
        Model::Svm => [0.01, 0.1, 1.0, 10.0, 100.0]
            .into_iter()
            .flat_map(|c| [Kernel::Rbf, Kernel::Linear].into_iter().map(move |kernel| Params::Svm { c, kernel }))
            .collect(),
        Model::Lr => linspace(0.001, 10.0, 100).into_iter().map(|c| Params::Lr { c }).collect(),
    }
}

/// The validation score that picks a grid point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SelectBy {
    /// Accuracy: `GridSearchCV`'s default, the estimator's `score` (the authors' code).
    Accuracy,
    /// Macro-F1, the score Table 3 reports.
    MacroF1,
}

impl SelectBy {
    /// The score of predictions `pred` of gold labels `gold` (three classes).
    pub fn score(self, gold: &[usize], pred: &[usize]) -> f64 {
        match self {
            SelectBy::Accuracy => accuracy(gold, pred),
            SelectBy::MacroF1 => macro_f1(gold, pred, crate::sentiment::LABELS.len()),
        }
    }
}

/// Texts' features and their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// One row per text.
    pub x: Csr,
    /// The label of each row (an index of [`crate::sentiment::LABELS`]).
    pub y: Vec<usize>,
}

/// A fitted model of any of the three kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Fitted {
    /// Naive Bayes.
    Nb(MultinomialNb),
    /// SVC.
    Svm(Svc),
    /// Logistic regression.
    Lr(Logistic),
}

impl Fitted {
    /// The class of each row of `x`.
    pub fn predict(&self, x: &Csr) -> Vec<usize> {
        match self {
            Fitted::Nb(m) => m.predict(x),
            Fitted::Svm(m) => m.predict(x),
            Fitted::Lr(m) => m.predict(x),
        }
    }
}

/// Fits the grid point `params` on `data` (three classes); a logistic regression starts from
/// `warm` when it is one (the optimum is the same from any start).
pub fn fit(params: Params, data: &Split, warm: Option<&Fitted>) -> Result<Fitted> {
    let classes = crate::sentiment::LABELS.len();
    Ok(match params {
        Params::Nb { alpha } => Fitted::Nb(MultinomialNb::fit(&data.x, &data.y, classes, alpha)),
        Params::Svm { c, kernel } => Fitted::Svm(Svc::fit(&data.x, &data.y, classes, c, kernel)?),
        Params::Lr { c } => {
            let start = match warm {
                Some(Fitted::Lr(m)) => Some(m),
                _ => None,
            };
            Fitted::Lr(Logistic::fit(&data.x, &data.y, classes, c, start))
        }
    })
}

/// What a grid search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The index of the selected grid point.
    pub best: usize,
    /// The validation score of every grid point, in grid order.
    pub scores: Vec<f64>,
    /// The selected point refit on the training and validation splits together.
    pub refit: Fitted,
}

/// `GridSearchCV(estimator, grid, cv=PredefinedSplit(train → fit, valid → score)).fit(vstack
/// (train, valid))`: each point of `grid` fit on `train` and scored on `valid` by `select_by`,
/// the first best kept and refit on `train` then `valid` (rows in that order).
pub fn grid_search(grid: &[Params], train: &Split, valid: &Split, select_by: SelectBy) -> Result<Search> {
    let mut scores = Vec::with_capacity(grid.len());
    let mut previous: Option<Fitted> = None;
    for &params in grid {
        let fitted = fit(params, train, previous.as_ref())?;
        scores.push(select_by.score(&valid.y, &fitted.predict(&valid.x)));
        previous = Some(fitted);
    }
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    let Some(&params) = grid.get(best) else {
        return Err(indolm_torch::error::Error::argument("grid", "an empty grid selects nothing"));
    };
    let both = Split { x: train.x.stack(&valid.x), y: train.y.iter().chain(&valid.y).copied().collect() };
    let refit = fit(params, &both, None)?;
    Ok(Search { best, scores, refit })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_the_notebook_s() {
        let nb = authors_grid(Model::Nb);
        assert_eq!(nb.len(), 50);
        // np.linspace(0.001, 1, 50)[:4] and its last value, as numpy prints them.
        let alphas: Vec<f64> =
            nb.iter().map(|p| if let Params::Nb { alpha } = p { *alpha } else { f64::NAN }).collect();
        assert_eq!(alphas[..4], [0.001, 0.021387755102040818, 0.041775510204081635, 0.062163265306122456]);
        assert_eq!(alphas[49], 1.0);
        let lr = authors_grid(Model::Lr);
        assert_eq!(lr.len(), 100);
        assert_eq!(lr[97..], [Params::Lr { c: 9.798 }, Params::Lr { c: 9.899000000000001 }, Params::Lr { c: 10.0 }]);
        let svm = authors_grid(Model::Svm);
        assert_eq!(svm.len(), 10);
        assert_eq!(svm[0], Params::Svm { c: 0.01, kernel: Kernel::Rbf });
        assert_eq!(svm[1], Params::Svm { c: 0.01, kernel: Kernel::Linear });
        assert_eq!(svm[9], Params::Svm { c: 100.0, kernel: Kernel::Linear });
    }

    #[test]
    fn params_read_and_write_as_scikit_learn_names_them() {
        let svm = Params::Svm { c: 10.0, kernel: Kernel::Rbf };
        assert_eq!(serde_json::to_string(&svm).unwrap(), r#"{"C":10.0,"kernel":"rbf"}"#);
        assert_eq!(serde_json::to_string(&Params::Lr { c: 0.5 }).unwrap(), r#"{"C":0.5}"#);
        assert_eq!(serde_json::from_str::<Params>(r#"{"C":0.5}"#).unwrap(), Params::Lr { c: 0.5 });
        assert_eq!(serde_json::from_str::<Params>(r#"{"alpha":0.5}"#).unwrap(), Params::Nb { alpha: 0.5 });
        assert_eq!(serde_json::from_str::<Params>(r#"{"C":10.0,"kernel":"rbf"}"#).unwrap(), svm);
        assert_eq!(svm.to_string(), "C=10 kernel=rbf");
    }

    #[test]
    fn the_first_best_point_is_kept_and_refit_on_both_splits() {
        // Class k's texts hold feature k; validation ties every alpha.
        let split = |rows: &[usize]| {
            let mut x = Csr::new(3);
            for &k in rows {
                x.push_row([(k, 1.0)]);
            }
            Split { x, y: rows.to_vec() }
        };
        let (train, valid) = (split(&[0, 1, 2, 0]), split(&[2, 1, 0]));
        let grid = [Params::Nb { alpha: 1.0 }, Params::Nb { alpha: 0.5 }];
        let search = grid_search(&grid, &train, &valid, SelectBy::Accuracy).unwrap();
        assert_eq!(search.scores, [1.0, 1.0]);
        assert_eq!(search.best, 0);
        assert_eq!(search.refit.predict(&valid.x), valid.y);
        assert!(grid_search(&[], &train, &valid, SelectBy::MacroF1).is_err());
    }
}
