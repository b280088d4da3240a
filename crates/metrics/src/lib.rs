//! indolm's metrics, without libtorch: ROUGE-1/2/L as the official ROUGE-1.5.5 script computes
//! them with the papers' options, bootstrap intervals included, or as Google's `rouge-score`
//! (`rouge`), over summaries read as every summary metric reads them (`summaries`); corpus BLEU
//! (`bleu`) and chrF/chrF++ (`chrf`) exactly as sacrebleu 2.6.0 computes them, over translations
//! read as `eval bleu` reads them (`translations`); macro-F1,
//! accuracy and the confusion matrix (`metrics`); the statistics behind the intervals and tests
//! (`stats`), with pretraining seeds as replicates (`multibootstrap`); and confidence calibration
//! (`calibration`). Their tests run without libtorch.
#![warn(missing_docs)]

pub mod bleu;
pub mod calibration;
pub mod chrf;
pub mod metrics;
pub mod multibootstrap;
pub mod rouge;
pub mod stats;
pub mod summaries;
pub mod translations;
