//! Reports without TensorBoard, from evaluations already on disk: pictures of a run's bias
//! curves (`bias_curve`), paired comparisons of two evaluations (`bias_diff`), several runs side
//! by side (`bias_compare`), data compositions with their seeds as replicates (`bias_groups`,
//! the Multi-Bootstrap), pair validity (`bias_validity`), models side by side in the paper's
//! table layout (`bias_table`), when pairs settle their preference (`bias_flips`), IndoMMLU
//! results side by side (`indommlu_table`), the chart drawing they share (`chart`), heatmaps of
//! language × language matrices (`heatmap`: NusaX's cross-lingual result), the Liputan6
//! paper's dataset statistics and extracted-sentence positions (`liputan6_stats`), and a run's
//! win rate beside the sentiment macro-F1 of its checkpoints (`bias_utility`).
pub mod bias_compare;
pub mod bias_curve;
pub mod bias_diff;
pub mod bias_flips;
pub mod bias_groups;
pub mod bias_table;
pub mod bias_utility;
pub mod bias_validity;
pub mod chart;
pub mod heatmap;
pub mod indommlu_table;
pub mod liputan6_stats;
