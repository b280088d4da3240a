//! NusaX sentiment fine-tuning on the training engine: the data ([`data`]: the NusaX layout,
//! read and checked, and the scores of a classifier), the recipe ([`recipe`]), the task the
//! engine trains ([`task`]: texts tokenized once, a seeded order per epoch, validation macro-F1
//! after each), the NusaX paper's settings as resumable units of one run ([`run`]), and the same
//! fine-tuned from every kept checkpoint of a pretraining run, its utility beside its bias
//! ([`sweep`]).
pub mod baselines;
pub mod data;
pub mod recipe;
pub mod run;
pub mod sweep;
pub mod task;

pub use data::{load_split, score, Example, Scores, LABELS, NUSAX_LANGUAGES};
pub use recipe::{Grid, SentimentData, SentimentEval, SentimentRecipe, Setting};
pub use run::{run, RunResult, SentimentResults};
