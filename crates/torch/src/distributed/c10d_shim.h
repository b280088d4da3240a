// What indolm's two c10d shims share: the process group behind the `void*` handed to Rust
// (c10d_shim.cpp makes it; reducer_shim.cpp launches the gradient buckets' all-reduces on it).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace indolm_c10d {

struct ProcessGroupHandle {
  c10::intrusive_ptr<c10d::Store> store;
  // Reset by indolm_c10d_release_backend (a lost peer then fails at once); null afterwards.
  c10::intrusive_ptr<c10d::Backend> backend;
  // The CUDA device of an NCCL group (its barrier runs there); -1 for Gloo.
  int device_index;
};

}  // namespace indolm_c10d
