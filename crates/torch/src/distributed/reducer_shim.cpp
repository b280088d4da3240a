// The gradient all-reduce overlapped with backward, as PyTorch's DistributedDataParallel does it
// (its Reducer): a hook after each parameter's gradient accumulation (libtorch's
// PostAccumulateGradHook, what `Tensor.register_post_accumulate_grad_hook` installs) counts the
// parameter done in its bucket; a bucket whose parameters are all done is all-reduced at once,
// asynchronously, while backward goes on with the earlier layers. Buckets are launched in one
// fixed order (a bucket only after every earlier one), so that every rank issues the same
// collectives in the same order whatever the timing. Each bucket is a contiguous slice of an
// optimizer's flat gradient buffer (the parameters were laid out there in the order their
// gradients became ready, recorded at the first update), so it is reduced in place, without a
// copy; or, reducing in bf16, through a bf16 copy that is summed and copied back (DDP's
// bf16_compress_hook, without its division: indolm's ranks weight their losses so that the sum
// is the global mean).
//
// The hooks run on autograd's thread for the device (the caller's on the CPU); on CUDA the
// collective is queued on NCCL's stream after the kernels that accumulated the gradients, and
// `finish` makes the caller's stream wait for it (no host wait); on Gloo (CPU) `finish` waits on
// the host. An exception in a hook is kept and returned by `finish`: nothing is thrown through
// autograd. Compiled by build.rs with the c10d shim.
#include "../shim.h"
#include "c10d_shim.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

using indolm_c10d::ProcessGroupHandle;
using indolm_shim::guarded;

struct Bucket {
  // A contiguous slice of a flat gradient buffer.
  at::Tensor gradients;
  // Its bf16 copy while it is reduced in bf16.
  at::Tensor staged;
  // Parameters in it, and those still to be accumulated in this backward.
  int64_t members = 0;
  int64_t pending = 0;
  c10::intrusive_ptr<c10d::Work> work;
};

struct Reducer {
  explicit Reducer(ProcessGroupHandle* group, size_t parameters) : group(group), seen(parameters, false) {}

  // Not owned: the Rust side drops the reducer before its group.
  ProcessGroupHandle* group;
  std::mutex mutex;
  // Recording: the parameters' indices in the order their gradients were accumulated.
  bool recording = false;
  std::vector<int64_t> order;
  std::vector<bool> seen;
  std::vector<Bucket> buckets;
  // Per parameter: its bucket, or -1 (reduced after backward, or not at all).
  std::vector<int64_t> bucket_of;
  bool bf16 = false;
  // Whether this backward's hooks launch buckets (the update's last micro-batch).
  bool armed = false;
  // The next bucket to launch.
  size_t next = 0;
  // Buckets launched by the hooks in this backward.
  int64_t launched_in_backward = 0;
  // The first failure in a hook, returned by finish.
  std::string error;

  void launch(Bucket& bucket) {
    auto backend = group->backend;
    if (!backend) {
      throw std::runtime_error("the process group was released");
    }
    std::vector<at::Tensor> tensors;
    if (bf16) {
      bucket.staged = bucket.gradients.to(at::kBFloat16);
      tensors.push_back(bucket.staged);
    } else {
      tensors.push_back(bucket.gradients);
    }
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    bucket.work = backend->allreduce(tensors, options);
  }

  // Called by parameter `index`'s hook once its gradient is accumulated.
  void ready(int64_t index) {
    std::lock_guard<std::mutex> lock(mutex);
    if (recording) {
      if (!seen[index]) {
        seen[index] = true;
        order.push_back(index);
      }
      return;
    }
    if (!armed || !error.empty()) {
      return;
    }
    int64_t b = bucket_of[index];
    if (b < 0 || --buckets[b].pending != 0) {
      return;
    }
    try {
      while (next < buckets.size() && buckets[next].pending == 0) {
        launch(buckets[next]);
        ++next;
        ++launched_in_backward;
      }
    } catch (const c10::Error& e) {
      error = e.msg();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

struct ReadyHook : torch::autograd::PostAccumulateGradHook {
  ReadyHook(std::shared_ptr<Reducer> reducer, int64_t index) : reducer(std::move(reducer)), index(index) {}
  void operator()(const torch::autograd::Variable& /*tensor*/) override {
    reducer->ready(index);
  }
  std::shared_ptr<Reducer> reducer;
  int64_t index;
};

struct ReducerHandle {
  std::shared_ptr<Reducer> reducer;
  std::vector<at::Tensor> parameters;
  // The hooks installed (owned by the parameters' autograd metadata), to remove exactly them.
  std::vector<torch::autograd::PostAccumulateGradHook*> hooks;
};

}  // namespace

extern "C" {

// A reducer over the `n` parameters (at::Tensor*, requiring gradients) on `group`: installs a
// hook after each one's gradient accumulation. It neither records nor reduces until asked.
void* indolm_reducer_new(void* group, at::Tensor** parameters, size_t n, char** error) {
  ReducerHandle* handle = nullptr;
  guarded(error, [&] {
    auto reducer = std::make_shared<Reducer>(static_cast<ProcessGroupHandle*>(group), n);
    auto made = std::make_unique<ReducerHandle>();
    made->reducer = reducer;
    for (size_t i = 0; i < n; ++i) {
      const at::Tensor& p = *parameters[i];
      made->parameters.push_back(p);
      if (!p.requires_grad()) {
        made->hooks.push_back(nullptr);  // frozen: never ready, never in a bucket
        continue;
      }
      if (torch::autograd::impl::post_acc_grad_hooks(p) != nullptr) {
        throw std::runtime_error("a parameter already has a post-accumulate-grad hook");
      }
      auto hook = std::make_unique<ReadyHook>(reducer, static_cast<int64_t>(i));
      made->hooks.push_back(hook.get());
      torch::autograd::impl::set_post_acc_grad_hooks(p, std::move(hook));
    }
    handle = made.release();
  });
  return handle;
}

// Removes the reducer's hooks (those still its own) and frees it.
void indolm_reducer_free(void* reducer) {
  auto handle = static_cast<ReducerHandle*>(reducer);
  for (size_t i = 0; i < handle->parameters.size(); ++i) {
    if (handle->hooks[i] == nullptr) {
      continue;
    }
    auto& slot = torch::autograd::impl::post_acc_grad_hooks(handle->parameters[i]);
    if (slot.get() == handle->hooks[i]) {
      slot.reset();
    }
  }
  delete handle;
}

// From the next backward on, record the order in which the parameters' gradients are accumulated
// (each parameter once), until indolm_reducer_order.
void indolm_reducer_record(void* reducer) {
  auto& r = *static_cast<ReducerHandle*>(reducer)->reducer;
  std::lock_guard<std::mutex> lock(r.mutex);
  r.recording = true;
  r.order.clear();
  r.seen.assign(r.seen.size(), false);
}

// Stops recording and writes the recorded order (parameter indices) into `out` (room for the
// number of parameters); returns how many were recorded.
size_t indolm_reducer_order(void* reducer, int64_t* out) {
  auto& r = *static_cast<ReducerHandle*>(reducer)->reducer;
  std::lock_guard<std::mutex> lock(r.mutex);
  r.recording = false;
  std::copy(r.order.begin(), r.order.end(), out);
  return r.order.size();
}

// The buckets (`count` contiguous gradient slices, in launch order) and each parameter's bucket
// (`bucket_of`, one per parameter, -1 for none); `bf16` reduces them through bf16 copies.
int indolm_reducer_set_buckets(
    void* reducer, at::Tensor** buckets, size_t count, const int64_t* bucket_of, int bf16, char** error) {
  return guarded(error, [&] {
    auto& r = *static_cast<ReducerHandle*>(reducer)->reducer;
    std::lock_guard<std::mutex> lock(r.mutex);
    r.buckets.clear();
    for (size_t b = 0; b < count; ++b) {
      Bucket bucket;
      bucket.gradients = *buckets[b];
      TORCH_CHECK(bucket.gradients.is_contiguous(), "bucket ", b, " is not contiguous");
      r.buckets.push_back(std::move(bucket));
    }
    r.bucket_of.assign(bucket_of, bucket_of + r.seen.size());
    for (int64_t b : r.bucket_of) {
      TORCH_CHECK(b < static_cast<int64_t>(count), "bucket index ", b, " out of ", count);
      if (b >= 0) {
        r.buckets[b].members += 1;
      }
    }
    for (size_t b = 0; b < count; ++b) {
      TORCH_CHECK(r.buckets[b].members > 0, "bucket ", b, " has no parameter");
    }
    r.bf16 = bf16 != 0;
  });
}

// The next backward's hooks launch the buckets as they fill (called before the backward of an
// update's last micro-batch).
void indolm_reducer_arm(void* reducer) {
  auto& r = *static_cast<ReducerHandle*>(reducer)->reducer;
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& b : r.buckets) {
    b.pending = b.members;
  }
  r.next = 0;
  r.launched_in_backward = 0;
  r.error.clear();
  r.armed = true;
}

// After that backward: launches the buckets the hooks did not (a parameter without a gradient in
// this backward holds its bucket back), then waits for every bucket (on CUDA the caller's stream
// waits; on Gloo the host) and copies the bf16 sums back. Puts the buckets the hooks launched
// into *launched_in_backward.
int indolm_reducer_finish(void* reducer, int64_t* launched_in_backward, char** error) {
  return guarded(error, [&] {
    auto& r = *static_cast<ReducerHandle*>(reducer)->reducer;
    std::lock_guard<std::mutex> lock(r.mutex);
    r.armed = false;
    *launched_in_backward = r.launched_in_backward;
    if (!r.error.empty()) {
      // Buckets already launched are still waited for, so that none outlives this call.
      for (auto& b : r.buckets) {
        if (b.work) {
          try {
            b.work->wait();
          } catch (...) {
          }
          b.work.reset();
        }
      }
      throw std::runtime_error(r.error);
    }
    for (; r.next < r.buckets.size(); ++r.next) {
      r.launch(r.buckets[r.next]);
    }
    for (auto& b : r.buckets) {
      b.work->wait();
      b.work.reset();
      if (r.bf16) {
        b.gradients.copy_(b.staged);
        b.staged.reset();
      }
    }
  });
}

}  // extern "C"
