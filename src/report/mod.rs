//! Reports without TensorBoard: pictures of a run's evaluations.
pub mod bias_curve;
