//! Evaluations of masked LMs: pseudo-log-likelihood scoring and the bias evaluation on
//! IndoBias-Pairs and CrowS-Pairs.
pub mod bias;
pub mod indommlu;
pub mod metrics;
pub mod pairs;
pub mod pll;
pub mod rouge;
