//! NusaX Table 3's classical rows (naive Bayes, SVM, logistic regression) as the authors ran
//! them, in plain Rust: their notebook (IndoNLP/nusax,
//! `code/notebook/sentiment_analysis_nusax_classical.ipynb`; the paper's appendix names spaCy,
//! the code uses NLTK and scikit-learn 1.0.1) tokenizes with NLTK, builds word features
//! ([`text`]: `CountVectorizer()` or `TfidfVectorizer()` fit on the training split), and grid
//! searches `MultinomialNB()`, `SVC()` and `LogisticRegression()` with a `PredefinedSplit` (fit on
//! train, score on validation, refit on both; [`grid`]). Each estimator is reimplemented to solve
//! scikit-learn's problem: naive Bayes in closed form ([`naive_bayes`]), SVC as libsvm's SMO
//! operation for operation ([`svm`]), logistic regression to convergence ([`logistic`]), over
//! CSR features ([`sparse`]).
//!
//! Per language, each model is searched on both feature kinds and one is reported: the one with
//! the better validation score ([`FeatureBy::Dev`], the paper's stated protocol), or the one with
//! the better test macro-F1 ([`FeatureBy::Test`]), which is how every one of the paper's 36
//! figures comes out. The cross-lingual matrix tests each language's selected model on every
//! language's test split (through its own vocabulary).
pub mod grid;
pub(crate) mod logistic;
pub(crate) mod naive_bayes;
pub(crate) mod sparse;
pub mod svm;
pub(crate) mod text;

pub use grid::{authors_grid, grid_search, Fitted, Model, Params, Search, SelectBy, Split};
pub use text::{FeatureKind, Vectorizer};

use super::data::{load_split, Example};
use indolm_metrics::metrics::{accuracy, macro_f1};
use indolm_torch::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Table 3's languages in its column order: the NusaX folder and the ISO 639-3 code the paper
/// heads its column with.
pub const PAPER_LANGUAGES: [(&str, &str); 12] = [
    ("acehnese", "ace"),
    ("balinese", "ban"),
    ("toba_batak", "bbc"),
    ("banjarese", "bjn"),
    ("buginese", "bug"),
    ("english", "eng"),
    ("indonesian", "ind"),
    ("javanese", "jav"),
    ("madurese", "mad"),
    ("minangkabau", "min"),
    ("ngaju", "nij"),
    ("sundanese", "sun"),
];

/// Table 3's classical rows: test macro-F1 ×100 per language in [`PAPER_LANGUAGES`] order, and
/// the row's average.
pub(crate) const PAPER_TABLE3: [(Model, [f64; 12], f64); 3] = [
    (Model::Nb, [72.5, 72.6, 73.0, 71.9, 73.7, 76.5, 73.1, 69.4, 66.8, 73.2, 68.8, 71.9], 72.0),
    (Model::Svm, [75.7, 75.3, 76.7, 74.8, 77.2, 75.0, 78.7, 71.3, 73.8, 76.7, 75.1, 74.3], 75.4),
    (Model::Lr, [77.4, 76.3, 76.3, 75.0, 77.2, 75.9, 74.7, 73.7, 74.7, 74.8, 73.4, 75.8], 75.4),
];

/// The code Table 3 heads a language's column with (the folder name for a language it lacks).
pub(crate) fn language_code(language: &str) -> &str {
    PAPER_LANGUAGES.iter().find(|(l, _)| *l == language).map_or(language, |(_, code)| code)
}

/// Table 3's figure (macro-F1 ×100) for `model` on `language`.
pub(crate) fn paper_figure(model: Model, language: &str) -> Option<f64> {
    let column = PAPER_LANGUAGES.iter().position(|(l, _)| *l == language)?;
    PAPER_TABLE3.iter().find(|(m, _, _)| *m == model).map(|(_, row, _)| row[column])
}

/// How a model's feature kind (BoW or TF-IDF) is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FeatureBy {
    /// The better validation score of the two searches (BoW on a tie): the paper's protocol.
    Dev,
    /// The better test macro-F1 (BoW on a tie): what the paper's figures are.
    Test,
}

/// What to run: each model with its grid, the validation score and the feature choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The models, in order, each with its grid.
    pub grids: Vec<(Model, Vec<Params>)>,
    /// The validation score that picks a grid point.
    pub select_by: SelectBy,
    /// How the feature kind is chosen.
    pub feature_by: FeatureBy,
}

impl Settings {
    /// `models` with the authors' grids.
    pub fn authors(models: &[Model], select_by: SelectBy, feature_by: FeatureBy) -> Settings {
        Settings { grids: models.iter().map(|&m| (m, authors_grid(m))).collect(), select_by, feature_by }
    }
}

/// One language's three splits.
#[derive(Debug, Clone, PartialEq)]
pub struct LanguageData {
    /// The folder name.
    pub language: String,
    /// `train.csv`.
    pub train: Vec<Example>,
    /// `valid.csv`.
    pub valid: Vec<Example>,
    /// `test.csv`.
    pub test: Vec<Example>,
}

impl LanguageData {
    /// Reads `<root>/<language>/{train,valid,test}.csv`.
    pub fn load(root: &Path, language: &str) -> Result<LanguageData> {
        Ok(LanguageData {
            language: language.to_string(),
            train: load_split(root, language, "train")?,
            valid: load_split(root, language, "valid")?,
            test: load_split(root, language, "test")?,
        })
    }
}

/// One feature kind of one language: the vectorizer fit on the training split and the three
/// splits' features.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// Fit on the training texts.
    pub vectorizer: Vectorizer,
    /// The training split.
    pub train: Split,
    /// The validation split.
    pub valid: Split,
    /// The test split.
    pub test: Split,
}

/// The texts and labels of examples.
fn texts(examples: &[Example]) -> (Vec<&str>, Vec<usize>) {
    (examples.iter().map(|e| e.text.as_str()).collect(), examples.iter().map(|e| e.label).collect())
}

impl Features {
    /// Fits `kind` on `data`'s training texts and transforms the three splits. Every label must
    /// be in the training split (the estimators are three-class).
    pub fn build(data: &LanguageData, kind: FeatureKind) -> Result<Features> {
        let (train_texts, train_y) = texts(&data.train);
        for (k, label) in crate::sentiment::LABELS.iter().enumerate() {
            if !train_y.contains(&k) {
                return Err(Error::data(
                    format!("{} train.csv", data.language),
                    format!("no `{label}` text: the classical baselines need every label in the training split"),
                ));
            }
        }
        let vectorizer = Vectorizer::fit(&train_texts, kind)
            .map_err(|e| Error::data(format!("{} train.csv", data.language), e.to_string()))?;
        let split = |examples: &[Example]| {
            let (t, y) = texts(examples);
            Split { x: vectorizer.transform(&t), y }
        };
        let (train, valid, test) = (split(&data.train), split(&data.valid), split(&data.test));
        Ok(Features { vectorizer, train, valid, test })
    }
}

/// One model's search on one feature kind, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureOutcome {
    /// The feature kind.
    pub feature: FeatureKind,
    /// The selected grid point.
    pub params: Params,
    /// Its validation score (accuracy or macro-F1, as selected by).
    pub dev_score: f64,
    /// The refit model's test macro-F1 (0 to 1).
    pub test_macro_f1: f64,
    /// Its test accuracy.
    pub test_accuracy: f64,
}

/// A model's grid search on one feature kind: the outcome, the search and the test predictions.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureSearch {
    /// What is reported.
    pub outcome: FeatureOutcome,
    /// Every grid point's validation score and the refit model.
    pub search: Search,
    /// The refit model's test predictions.
    pub test_pred: Vec<usize>,
}

/// Grid searches `grid` on `features` and tests the refit model.
pub fn search_feature(features: &Features, grid: &[Params], select_by: SelectBy) -> Result<FeatureSearch> {
    let search = grid_search(grid, &features.train, &features.valid, select_by)?;
    let test_pred = search.refit.predict(&features.test.x);
    let gold = &features.test.y;
    let outcome = FeatureOutcome {
        feature: features.vectorizer.kind(),
        params: grid[search.best],
        dev_score: search.scores[search.best],
        test_macro_f1: macro_f1(gold, &test_pred, crate::sentiment::LABELS.len()),
        test_accuracy: accuracy(gold, &test_pred),
    };
    Ok(FeatureSearch { outcome, search, test_pred })
}

/// One model on one language: the chosen feature kind's outcome and both searches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelOutcome {
    /// The model.
    pub model: Model,
    /// The chosen feature kind.
    pub feature: FeatureKind,
    /// Its selected grid point.
    pub params: Params,
    /// Its validation score.
    pub dev_score: f64,
    /// Its test macro-F1 (0 to 1).
    pub test_macro_f1: f64,
    /// Its test accuracy.
    pub test_accuracy: f64,
    /// Table 3's figure (macro-F1 ×100), for its languages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_macro_f1: Option<f64>,
    /// Both feature kinds' searches.
    pub features: Vec<FeatureOutcome>,
}

/// Every model on one language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanguageOutcome {
    /// The folder name.
    pub language: String,
    /// Table 3's code for it.
    pub code: String,
    /// One entry per model, in the order asked.
    pub models: Vec<ModelOutcome>,
}

/// A language's selected model of one kind, kept to test it on the other languages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chosen {
    /// The model kind.
    pub model: Model,
    /// The vectorizer of its feature kind.
    pub vectorizer: Vectorizer,
    /// The refit model.
    pub fitted: Fitted,
}

/// Runs every model of `settings` on one language: both feature kinds searched, one chosen.
pub(crate) fn run_language(data: &LanguageData, settings: &Settings) -> Result<(LanguageOutcome, Vec<Chosen>)> {
    let features: Vec<Features> =
        FeatureKind::ALL.iter().map(|&kind| Features::build(data, kind)).collect::<Result<_>>()?;
    let mut models = Vec::new();
    let mut chosen = Vec::new();
    for (model, grid) in &settings.grids {
        let searches: Vec<FeatureSearch> =
            features.iter().map(|f| search_feature(f, grid, settings.select_by)).collect::<Result<_>>()?;
        let key = |s: &FeatureSearch| match settings.feature_by {
            FeatureBy::Dev => s.outcome.dev_score,
            FeatureBy::Test => s.outcome.test_macro_f1,
        };
        let mut best = 0;
        for (i, s) in searches.iter().enumerate() {
            if key(s) > key(&searches[best]) {
                best = i;
            }
        }
        let o = &searches[best].outcome;
        models.push(ModelOutcome {
            model: *model,
            feature: o.feature,
            params: o.params,
            dev_score: o.dev_score,
            test_macro_f1: o.test_macro_f1,
            test_accuracy: o.test_accuracy,
            paper_macro_f1: paper_figure(*model, &data.language),
            features: searches.iter().map(|s| s.outcome.clone()).collect(),
        });
        let fitted = searches.into_iter().nth(best).map(|s| s.search.refit).expect("two feature kinds were searched");
        chosen.push(Chosen { model: *model, vectorizer: features[best].vectorizer.clone(), fitted });
    }
    let outcome =
        LanguageOutcome { language: data.language.clone(), code: language_code(&data.language).to_string(), models };
    Ok((outcome, chosen))
}

/// One model's cross-lingual matrix: trained (and selected) on each row's language, tested on
/// each column's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossLingual {
    /// The model.
    pub model: Model,
    /// The languages trained on (rows).
    pub train: Vec<String>,
    /// The languages tested on (columns).
    pub test: Vec<String>,
    /// Test macro-F1 (0 to 1), `[row][column]`.
    pub macro_f1: Vec<Vec<f64>>,
}

/// What `indolm baseline nusax` measured; written as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineResults {
    /// The data folder.
    pub data: String,
    /// The validation score that picked grid points.
    pub select_by: SelectBy,
    /// How feature kinds were chosen.
    pub feature_by: FeatureBy,
    /// The languages, in table order.
    pub languages: Vec<String>,
    /// One entry per language.
    pub results: Vec<LanguageOutcome>,
    /// Per model, the cross-lingual matrix (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_lingual: Option<Vec<CrossLingual>>,
}

/// Runs `settings` on each of `languages` under `root` (each language's files are checked before
/// anything is trained), calling `progress` after each language; with `cross_lingual`, also
/// tests each language's selected models on every language.
pub fn run(
    root: &Path,
    languages: &[String],
    settings: &Settings,
    cross_lingual: bool,
    progress: &mut dyn FnMut(&LanguageOutcome),
) -> Result<BaselineResults> {
    let data: Vec<LanguageData> = languages.iter().map(|l| LanguageData::load(root, l)).collect::<Result<_>>()?;
    let mut results = Vec::new();
    let mut chosen = Vec::new();
    for d in &data {
        let (outcome, models) = run_language(d, settings)?;
        progress(&outcome);
        results.push(outcome);
        chosen.push(models);
    }
    let cross_lingual = cross_lingual.then(|| {
        settings
            .grids
            .iter()
            .enumerate()
            .map(|(m, (model, _))| {
                let matrix = chosen
                    .iter()
                    .map(|models| {
                        let c = &models[m];
                        data.iter()
                            .map(|d| {
                                let (t, gold) = texts(&d.test);
                                let pred = c.fitted.predict(&c.vectorizer.transform(&t));
                                macro_f1(&gold, &pred, crate::sentiment::LABELS.len())
                            })
                            .collect()
                    })
                    .collect();
                CrossLingual { model: *model, train: languages.to_vec(), test: languages.to_vec(), macro_f1: matrix }
            })
            .collect()
    });
    Ok(BaselineResults {
        data: root.display().to_string(),
        select_by: settings.select_by,
        feature_by: settings.feature_by,
        languages: languages.to_vec(),
        results,
        cross_lingual,
    })
}

/// `language`'s outcome of `model`.
fn model_outcome(language: &LanguageOutcome, model: Model) -> Option<&ModelOutcome> {
    language.models.iter().find(|m| m.model == model)
}

/// `value` ×100 with one decimal, as Table 3 prints.
fn percent(value: f64) -> String {
    format!("{:.1}", 100.0 * value)
}

/// The mean of `values`, or `None` for none.
fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

impl BaselineResults {
    /// Table 3's classical rows with the paper's beside them, the figures of each feature kind,
    /// the selected hyper-parameters, and the cross-lingual matrices.
    pub fn markdown(&self) -> String {
        let codes: Vec<&str> = self.languages.iter().map(|l| language_code(l)).collect();
        // A header over the language columns and the average, after `first` and `extra` more
        // left-aligned columns.
        let header = |first: &str, extra: usize| {
            let mut h = format!("| {first} |");
            for c in &codes {
                h.push_str(&format!(" {c} |"));
            }
            h.push_str(" avg |\n|---|");
            h.push_str(&"---|".repeat(extra));
            h.push_str(&"---:|".repeat(codes.len() + 1));
            h.push('\n');
            h
        };
        let all_paper_languages =
            self.languages.len() == 12 && PAPER_LANGUAGES.iter().all(|(l, _)| self.languages.iter().any(|x| x == l));
        let models: Vec<Model> =
            self.results.first().map(|r| r.models.iter().map(|m| m.model).collect()).unwrap_or_default();
        let mut out = format!(
            "NusaX Table 3, classical rows: test macro-F1 (×100), indolm and the paper. Grid points selected by \
             validation {}, the feature kind by {}.\n\n",
            match self.select_by {
                SelectBy::Accuracy => "accuracy",
                SelectBy::MacroF1 => "macro-F1",
            },
            match self.feature_by {
                FeatureBy::Dev => "the validation score",
                FeatureBy::Test => "test macro-F1",
            }
        );
        out.push_str(&header("model", 0));
        for &model in &models {
            let ours: Vec<f64> =
                self.results.iter().filter_map(|r| model_outcome(r, model)).map(|m| m.test_macro_f1).collect();
            out.push_str(&format!("| {} |", model.title()));
            for v in &ours {
                out.push_str(&format!(" {} |", percent(*v)));
            }
            out.push_str(&format!(" {} |\n", mean(&ours).map_or("–".into(), percent)));
            let paper: Vec<Option<f64>> = self.languages.iter().map(|l| paper_figure(model, l)).collect();
            out.push_str(&format!("| {} (paper) |", model.title()));
            for v in &paper {
                out.push_str(&format!(" {} |", v.map_or("–".into(), |v| format!("{v:.1}"))));
            }
            let known: Vec<f64> = paper.iter().flatten().copied().collect();
            let avg = match PAPER_TABLE3.iter().find(|(m, _, _)| *m == model) {
                Some((_, _, avg)) if all_paper_languages => Some(*avg),
                _ => mean(&known),
            };
            out.push_str(&format!(" {} |\n", avg.map_or("–".into(), |v| format!("{v:.1}"))));
        }
        out.push_str("\nEach feature kind's search (test macro-F1 ×100):\n\n");
        out.push_str(&header("model | feature", 1));
        for &model in &models {
            for kind in FeatureKind::ALL {
                let values: Vec<f64> = self
                    .results
                    .iter()
                    .filter_map(|r| model_outcome(r, model))
                    .filter_map(|m| m.features.iter().find(|f| f.feature == kind))
                    .map(|f| f.test_macro_f1)
                    .collect();
                out.push_str(&format!("| {} | {} |", model.title(), kind.name()));
                for v in &values {
                    out.push_str(&format!(" {} |", percent(*v)));
                }
                out.push_str(&format!(" {} |\n", mean(&values).map_or("–".into(), percent)));
            }
        }
        out.push_str("\nSelected feature kind and grid point (validation score):\n\n| language |");
        for model in &models {
            out.push_str(&format!(" {} |", model.title()));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(models.len()));
        out.push('\n');
        for r in &self.results {
            out.push_str(&format!("| {} |", r.code));
            for m in &r.models {
                out.push_str(&format!(" {} {} ({:.2}) |", m.feature.name(), m.params, m.dev_score));
            }
            out.push('\n');
        }
        for matrix in self.cross_lingual.iter().flatten() {
            out.push_str(&format!(
                "\nCross-lingual test macro-F1 (×100), {}: rows trained on, columns tested on\n\n",
                matrix.model.title()
            ));
            out.push_str(&header("train \\ test", 0));
            for (language, row) in matrix.train.iter().zip(&matrix.macro_f1) {
                out.push_str(&format!("| {} |", language_code(language)));
                for v in row {
                    out.push_str(&format!(" {} |", percent(*v)));
                }
                out.push_str(&format!(" {} |\n", mean(row).map_or("–".into(), percent)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_figures_and_codes() {
        assert_eq!(paper_figure(Model::Svm, "indonesian"), Some(78.7));
        assert_eq!(paper_figure(Model::Lr, "toba_batak"), Some(76.3));
        assert_eq!(paper_figure(Model::Nb, "klingon"), None);
        assert_eq!(language_code("ngaju"), "nij");
        assert_eq!(language_code("klingon"), "klingon");
        // Each row's average is the mean of its figures, to the paper's rounding.
        for (_, row, avg) in PAPER_TABLE3 {
            assert!((row.iter().sum::<f64>() / 12.0 - avg).abs() <= 0.051, "{avg}");
        }
    }
}
