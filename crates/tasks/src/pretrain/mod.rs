//! Masked-LM pretraining, a task of the engine like the fine-tuning tasks: its recipe schema
//! ([`recipe`]: model, tokenizer, data mixture, masking, the evaluations at checkpoints), the
//! corpus a run reads ([`corpus`]: prepared shards, pinned by content), BERT's masking
//! ([`masking`]), the held-out loss ([`heldout`]) and the run itself ([`train`]: the task the
//! engine drives, checkpoint hooks from `eval` handed in by the command line).
pub mod corpus;
pub mod heldout;
pub mod masking;
pub mod recipe;
pub mod train;

pub use recipe::PretrainRecipe;
