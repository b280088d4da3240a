//! Several processes training as one (data parallel), on libtorch's c10d: how a job was
//! launched (torchrun or Slurm), whether and how a process joins its group (`join`), and the
//! process group that carries its collectives. The
//! collectives themselves are libtorch's (`ProcessGroupGloo` on CPU), reached through a small
//! C++ shim (`c10d_shim.cpp`, compiled by `crates/torch/build.rs`), and so are the hooks that all-reduce the
//! gradients bucket by bucket during backward (`reducer_shim.cpp`, [`GradientReducer`]).
pub mod join;
pub(crate) mod launch;
pub mod process_group;
pub(crate) mod reducer;

pub use join::{join, join_if_launched, Backend, JoinSettings};
pub use launch::Launch;
pub use process_group::{ProcessGroup, ReduceOp};
pub use reducer::GradientReducer;
