// indolm's C ABI over what libtorch offers from C++ and tch does not bind, for the device layer:
// - counting the ATen operations run between two points (a RecordFunction global callback, the
//   hook torch.profiler uses), sorting out those that make the host wait for the device;
// - the scaled-dot-product-attention backend libtorch picks for given shapes;
// - deterministic algorithms.
// Compiled by build.rs against the torch wheel's headers. No exception leaves this file.
#include "../shim.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/record_function.h>

#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

// What one counted operation is, as far as the host is concerned.
enum class Wait {
  // Queued on the device; the host goes on.
  None,
  // The host waits for the device (a read, a data-dependent output size, a pageable copy).
  Sync,
  // A read by the CPU kernel of `aten::_fused_adamw_` of its step count (CPU memory); its CUDA
  // kernel reads the count on the device, so on a GPU it is no wait.
  CpuKernelRead,
};

// How often one operation ran and the host time spent in it, not in the operations it called.
struct Tally {
  int64_t count = 0;
  int64_t self_ns = 0;
};

struct Counts {
  std::mutex mutex;
  // (name, wait kind) -> tally: one name can be both (a `to` with and without a device).
  std::map<std::pair<std::string, int>, Tally> ops;
  int64_t top_level = 0;
};

// An operation open on this thread.
struct Open {
  std::string name;
  // Counted as a wait (a wait inside a wait, such as `item` calling `_local_scalar_dense`, is
  // counted once).
  bool waits;
  int wait_kind;
  // Counted at all (the autograd engine's own ranges are not).
  bool counted;
  std::chrono::steady_clock::time_point started;
  // Time spent in the operations it called.
  int64_t children_ns;
};

Counts* g_counts = nullptr;
at::CallbackHandle g_handle = 0;

// The operations open on this thread, outermost first.
thread_local std::vector<Open> t_open;
thread_local int t_waits_open = 0;

// Operations that read from the device or whose output size depends on device data.
bool always_waits(const std::string& name) {
  static const char* names[] = {
      "aten::_local_scalar_dense", "aten::item",           "aten::nonzero",  "aten::nonzero_numpy",
      "aten::argwhere",            "aten::is_nonzero",     "aten::equal",    "aten::masked_select",
      "aten::unique",              "aten::_unique",        "aten::_unique2", "aten::unique_dim",
      "aten::unique_consecutive",  "aten::unique_dim_consecutive",           "aten::bincount",
      "aten::allclose",            "aten::histc",          "aten::_assert_async_msg_host",
  };
  for (const char* n : names) {
    if (name == n) {
      return true;
    }
  }
  return false;
}

// A copy between host and device that the host waits for: `aten::to` / `aten::_to_copy` moving
// a tensor to a device without `non_blocking` (from pageable memory to a GPU, or a read back), and
// `aten::copy_` between two devices without it. On the CPU such a call is a no-op or a plain
// copy, so it is told by its arguments, which are the same on every device, and the code that
// would wait on a GPU is found on the CPU:
// - `to.device` (tch's `to_device_`) always names the device to move to;
// - `to.dtype_layout` and `_to_copy` move when they name a device other than the tensor's, or a
//   device and no dtype (tch's `to_device`, `Vec::try_from` reading a tensor); a dtype with the
//   tensor's own device is a cast (tch's `to_kind`);
// - `to.other` moves when the other tensor is on another device.
bool waits_by_arguments(const at::RecordFunction& fn, const std::string& name) {
  bool to = name == "aten::to" || name == "aten::_to_copy";
  bool copy = name == "aten::copy_";
  if (!to && !copy) {
    return false;
  }
  auto schema = fn.operator_schema();
  if (!schema.has_value()) {
    return false;
  }
  const auto& args = schema->arguments();
  auto inputs = fn.inputs();
  std::optional<c10::Device> self_device, target, other_device, src_device;
  bool names_dtype = false, non_blocking = false;
  for (size_t i = 0; i < args.size() && i < inputs.size(); ++i) {
    const auto& arg = args[i].name();
    const auto& value = inputs[i];
    bool tensor = value.isTensor() && value.toTensor().defined();
    if (arg == "self" && tensor) {
      self_device = value.toTensor().device();
    } else if (arg == "src" && tensor) {
      src_device = value.toTensor().device();
    } else if (arg == "other" && tensor) {
      other_device = value.toTensor().device();
    } else if (arg == "device" && value.isDevice()) {
      target = value.toDevice();
    } else if (arg == "dtype" && !value.isNone()) {
      names_dtype = true;
    } else if (arg == "non_blocking" && value.isBool()) {
      non_blocking = value.toBool();
    }
  }
  if (non_blocking) {
    return false;
  }
  if (copy) {
    return self_device.has_value() && src_device.has_value() && *self_device != *src_device;
  }
  if (other_device.has_value()) {
    return self_device.has_value() && *other_device != *self_device;
  }
  if (!target.has_value()) {
    return false;
  }
  if (name == "aten::to" && fn.overload_name() == std::string("device")) {
    return true;
  }
  return !names_dtype || (self_device.has_value() && *target != *self_device);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  std::string name(fn.name());
  bool top = t_open.empty();
  Wait wait = Wait::None;
  if (t_waits_open == 0 && (always_waits(name) || waits_by_arguments(fn, name))) {
    bool in_fused_adamw = false;
    for (const auto& open : t_open) {
      in_fused_adamw = in_fused_adamw || open.name == "aten::_fused_adamw_";
    }
    bool read = name == "aten::item" || name == "aten::_local_scalar_dense";
    wait = in_fused_adamw && read ? Wait::CpuKernelRead : Wait::Sync;
  }
  if (wait != Wait::None) {
    ++t_waits_open;
  }
  // The autograd engine's own ranges (`autograd::engine::evaluate_function: ...`) are no
  // operators; the operators their nodes call are counted.
  bool counted = name.rfind("autograd::", 0) != 0;
  if (g_counts != nullptr && counted) {
    std::lock_guard<std::mutex> lock(g_counts->mutex);
    g_counts->ops[{name, static_cast<int>(wait)}].count += 1;
    g_counts->top_level += top ? 1 : 0;
  }
  t_open.push_back(Open{name, wait != Wait::None, static_cast<int>(wait), counted, std::chrono::steady_clock::now(), 0});
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_open.empty()) {
    return;  // started before the counter was installed
  }
  Open done = std::move(t_open.back());
  t_open.pop_back();
  t_waits_open -= done.waits ? 1 : 0;
  int64_t inclusive =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - done.started).count();
  if (!t_open.empty()) {
    t_open.back().children_ns += inclusive;
  }
  if (g_counts != nullptr && done.counted) {
    std::lock_guard<std::mutex> lock(g_counts->mutex);
    g_counts->ops[{done.name, done.wait_kind}].self_ns += inclusive - done.children_ns;
  }
}

}  // namespace

extern "C" {

void indolm_torch_free_message(char* message) {
  std::free(message);
}

// Starts counting every ATen operation (RecordScope::FUNCTION: the operators, forward and
// backward, not the autograd nodes that call them), on every thread but those that opted out.
int indolm_ops_start(char** error) {
  return indolm_shim::guarded(error, [&] {
    TORCH_CHECK(g_counts == nullptr, "operations are being counted already");
    g_counts = new Counts();
    auto callback = at::RecordFunctionCallback(&on_start, &on_end)
                        .needsInputs(true)
                        .scopes({at::RecordScope::FUNCTION});
    g_handle = at::addGlobalCallback(callback);
  });
}

// Stops counting and writes the counts to *out: one line a name,
// `name<TAB>count<TAB>kind<TAB>self nanoseconds` (kind 0: queued, 1: the host waits, 2: a
// CPU-kernel read; the host's time in the operation, not in those it called), then
// `top-level<TAB>N`.
int indolm_ops_stop(char** out, char** error) {
  return indolm_shim::guarded(error, [&] {
    TORCH_CHECK(g_counts != nullptr, "operations are not being counted");
    at::removeCallback(g_handle);
    Counts* counts = g_counts;
    g_counts = nullptr;
    std::ostringstream text;
    {
      std::lock_guard<std::mutex> lock(counts->mutex);
      for (const auto& [key, tally] : counts->ops) {
        text << key.first << '\t' << tally.count << '\t' << key.second << '\t' << tally.self_ns << '\n';
      }
      text << "top-level\t" << counts->top_level << '\n';
    }
    delete counts;
    *out = indolm_shim::copy_message(text.str());
  });
}

// This thread's operations are never counted (the batch thread: host work beside the update).
void indolm_ops_exclude_this_thread() {
  at::enableRecordFunction(false);
}

// The backend scaled_dot_product_attention would pick for these tensors, with this mask (none
// when null), dropout, causal flag and grouped key/value heads (`enable_gqa`): libtorch's own
// `_fused_sdp_choice`, the function scaled_dot_product_attention itself asks, so the answer is
// the kernel that would run (torch's SDPBackend: -1 error, 0 math, 1 flash, 2 efficient,
// 3 cuDNN, 4 overrideable); -2 with *error on failure.
int64_t indolm_sdp_choice(
    at::Tensor* q,
    at::Tensor* k,
    at::Tensor* v,
    at::Tensor* mask,
    double dropout,
    int is_causal,
    int enable_gqa,
    char** error) {
  int64_t choice = -2;
  indolm_shim::guarded(error, [&] {
    std::optional<at::Tensor> m;
    if (mask != nullptr) {
      m = *mask;
    }
    choice = at::_fused_sdp_choice(*q, *k, *v, m, dropout, is_causal != 0, std::nullopt, enable_gqa != 0);
  });
  return choice;
}

// Asks libtorch for deterministic algorithms (an error where an operation has none), or not.
int indolm_set_deterministic(int on, char** error) {
  return indolm_shim::guarded(error, [&] { at::globalContext().setDeterministicAlgorithms(on != 0, false); });
}

}  // extern "C"
