//! indolm's evaluations and generation. Scoring sentences: pseudo-log-likelihood by a masked LM (`pll`), log-likelihood by
//! a causal LM as lm-evaluation-harness scores it (`causal`), and scoring with nothing masked
//! (`aul`: AUL and AULA), all behind one interface (`scorer`: the scores of sentences and of
//! continuations after a context, whatever the model, and the one place a model folder is read as
//! masked, causal or encoder-decoder), and `eval pll`'s scoring of a file's lines (`sentences`).
//! Built on it: the bias evaluation on IndoBias-Pairs and CrowS-Pairs (`pairs`, `bias`, split by
//! job: records and report, decision rules, aggregation, scoring, files, TensorBoard, the hook,
//! model folders and runs) and IndoMMLU's multiple choice (`indommlu`: the CSV, the prompts,
//! masked, causal and encoder-decoder scoring, records, report, the hook), with the confidence
//! calibration (`calibration`); a run's checkpoints as an evaluation after the fact reads them
//! (`checkpoints`); the statistics behind the intervals and tests (`stats`), with pretraining seeds
//! as replicates (`multibootstrap`); and the metrics the fine-tuning tasks report: ROUGE-1/2/L as
//! the official ROUGE-1.5.5 script computes them with the papers' options, bootstrap intervals
//! included, or as Google's `rouge-score` (`rouge`), macro-F1, accuracy and the confusion matrix
//! (`metrics`). What the evaluations are asked (the bias metric, the IndoMMLU mode, the recipe's
//! `[eval.bias]` and `[eval.indommlu]` sections) is in `settings`. The IndoBias-QA generation track
//! (prompts answered by a chat backend, labels parsed, stereotype polarity) is `bias_qa`.
#![warn(missing_docs)]

pub mod aul;
pub mod bertscore;
pub mod bias;
pub mod bias_qa;
pub mod causal;
pub mod checkpoints;
pub mod generate;
pub mod indommlu;
pub mod pairs;
pub mod pll;
pub mod scorer;
pub mod sentences;
pub mod settings;

pub use settings::{BiasMetric, IndommluMode};
