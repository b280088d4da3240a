//! Pretraining: recipes, corpus preparation for a run, masking, AdamW and its schedule,
//! checkpoints, logging, and the training loop itself.
pub mod checkpoint;
pub mod corpus;
pub mod logger;
pub mod masking;
pub mod optim;
pub mod recipe;
pub mod trainer;
