//! Evaluations: pseudo-log-likelihood scoring of sentences by a masked LM (`pll`),
//! log-likelihood by a causal LM as lm-evaluation-harness scores it (`causal`), and
//! scoring with nothing masked (`aul`: AUL and AULA); the bias
//! evaluation on IndoBias-Pairs and CrowS-Pairs (`pairs`, `bias`) and IndoMMLU's multiple
//! choice (`indommlu` with masked LMs, `indommlu_causal` with causal LMs zero- and few-shot,
//! `indommlu_records`, and the confidence calibration in `calibration`), both built on it (the
//! bias evaluation split by job: records and report, decision rules, aggregation, scoring,
//! files, TensorBoard, the hook); the statistics
//! behind its intervals and tests (`stats`), with pretraining seeds as replicates
//! (`multibootstrap`); and the metrics the fine-tuning tasks report:
//! ROUGE-1/2/L as Google's `rouge-score` computes them (`rouge`), macro-F1, accuracy and the
//! confusion matrix (`metrics`). What the evaluations are asked (the bias metric, the IndoMMLU
//! mode, the recipe's `[eval.bias]` and `[eval.indommlu]` sections) is in `settings`.
pub mod aul;
pub mod bias;
pub mod calibration;
pub mod causal;
pub mod indommlu;
pub mod indommlu_causal;
pub mod indommlu_records;
pub mod metrics;
pub mod multibootstrap;
pub mod pairs;
pub mod pll;
pub mod rouge;
pub mod settings;
pub mod stats;

pub use settings::{BiasMetric, IndommluMode};
