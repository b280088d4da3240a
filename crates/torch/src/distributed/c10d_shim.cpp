// indolm's C ABI over libtorch's c10d (the engine of PyTorch's DistributedDataParallel): a
// TCPStore rendezvous under a PrefixStore (whose counters also carry indolm's heartbeats and its
// waits for rank 0), and a ProcessGroupGloo (CPU tensors, or CUDA tensors staged through the
// host) or, where build.rs found CUDA's headers (USE_C10D_NCCL), a ProcessGroupNCCL (one GPU per
// process), with in-place all-reduce, broadcast and barrier. tch has no binding for c10d; this
// file is compiled by build.rs
// against the torch wheel's headers. Every C++ exception is caught here and returned as a
// message (a c10::Error crossing `extern "C"` would abort the process).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <c10/util/Logging.h>

#include "../shim.h"
#include "c10d_shim.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using indolm_c10d::ProcessGroupHandle;
using indolm_shim::copy_message;
using indolm_shim::guarded;

c10d::ReduceOp reduce_op(int op) {
  switch (op) {
    case 1:
      return c10d::ReduceOp::MAX;
    case 2:
      return c10d::ReduceOp::MIN;
    default:
      return c10d::ReduceOp::SUM;
  }
}

// The rendezvous: connects to (or, when `server`, serves) the TCPStore at `host:port`, under
// the prefix `prefix`.
c10::intrusive_ptr<c10d::Store> make_store(
    const char* host, int port, int server, int world_size, std::chrono::milliseconds timeout, const char* prefix) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = server != 0;
  options.numWorkers = world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), options);
  return c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
}

}  // namespace

extern "C" {

// c10d logs every retry of a rendezvous, with a C++ backtrace, on stderr; indolm reports the
// failure itself as one line. So c10's log shows only fatal messages, unless the user asks for
// more with TORCH_CPP_LOG_LEVEL (read by c10::initLogging, as PyTorch does).
void indolm_c10d_configure_logging() {
  if (std::getenv("TORCH_CPP_LOG_LEVEL") != nullptr) {
    c10::initLogging();
  } else {
    FLAGS_caffe2_log_level = 3;
  }
}

// Joins the group: connects to (or, when `store_server`, serves) the TCPStore at
// `store_host:store_port`, every key under `prefix` (one per launch attempt: torchrun's agent
// keeps its store across restarts), then builds a Gloo process group of `world_size` ranks whose
// transport binds to the network interface `interface` when given (GLOO_SOCKET_IFNAME), else
// to the address `local_host` resolves to when given, else to what this host's name resolves
// to. `timeout_ms` bounds the rendezvous and every collective. Its collectives take CPU tensors,
// or CUDA tensors (Gloo stages them through the host): two ranks can share one GPU.
void* indolm_c10d_gloo_new(
    const char* store_host,
    int store_port,
    int store_server,
    const char* prefix,
    const char* interface,
    const char* local_host,
    int rank,
    int world_size,
    int64_t timeout_ms,
    char** error) {
  ProcessGroupHandle* handle = nullptr;
  guarded(error, [&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    auto store = make_store(store_host, store_port, store_server, world_size, timeout, prefix);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create();
    gloo_options->timeout = timeout;
    if (std::strlen(interface) > 0) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(std::string(interface)));
    } else if (std::strlen(local_host) > 0) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(std::string(local_host)));
    } else {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, gloo_options);
    handle = new ProcessGroupHandle{store, backend, -1};
  });
  return handle;
}

// Whether this build has NCCL (1) or not (0).
int indolm_c10d_has_nccl() {
#ifdef USE_C10D_NCCL
  return 1;
#else
  return 0;
#endif
}

// Joins an NCCL process group of `world_size` ranks on CUDA device `device_index` (which becomes
// this process's current device), through the TCPStore at `store_host:store_port` under
// `prefix`. NCCL's communicator is made at the first collective; `timeout_ms` bounds the
// rendezvous and every collective (NCCL's watchdog aborts a collective that overruns it).
void* indolm_c10d_nccl_new(
    const char* store_host,
    int store_port,
    int store_server,
    const char* prefix,
    int rank,
    int world_size,
    int device_index,
    int64_t timeout_ms,
    char** error) {
  ProcessGroupHandle* handle = nullptr;
#ifdef USE_C10D_NCCL
  guarded(error, [&] {
    // How NCCL's watchdog meets a failure (read by ProcessGroupNCCL's constructor): record the
    // error and abort the communicators, but leave the process up (2, CleanUpOnly), so that
    // indolm's watcher thread ends it with one line naming the lost rank. Always set, a value
    // in the environment replaced: torchrun's agent puts 1 (TearDown: the watchdog kills the
    // process with its own messages) into every worker's environment, and the default, 3, also
    // terminates the process. Also (a value the user set kept): tell the other ranks through
    // the store (their watchers then see it at once), and no flight-recorder dump on a timeout
    // (its monitor would terminate every rank some minutes later).
    setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", 1);
    setenv("TORCH_NCCL_PROPAGATE_ERROR", "1", 0);
    setenv("TORCH_NCCL_DUMP_ON_TIMEOUT", "0", 0);
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
    auto store = make_store(store_host, store_port, store_server, world_size, timeout, prefix);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
    backend->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)));
    handle = new ProcessGroupHandle{store, backend, device_index};
  });
#else
  (void)store_host, (void)store_port, (void)store_server, (void)prefix, (void)rank, (void)world_size,
      (void)device_index, (void)timeout_ms;
  *error = copy_message("this indolm was built without NCCL (CUDA's headers were not found at build time)");
#endif
  return handle;
}

// Lets go of the group's backend (Gloo's connections, NCCL's communicators), keeping its store:
// a peer still blocked in a collective with this rank then fails at once, while the store still
// answers the ranks that are leaving. Nothing but indolm_c10d_free may follow.
void indolm_c10d_release_backend(void* group) {
  static_cast<ProcessGroupHandle*>(group)->backend.reset();
}

void indolm_c10d_free(void* group) {
  delete static_cast<ProcessGroupHandle*>(group);
}

void indolm_c10d_free_message(char* message) {
  std::free(message);
}

// In-place all-reduce of one tensor (an at::Tensor*, what tch's Tensor::as_ptr gives):
// op 0 sum, 1 max, 2 min.
int indolm_c10d_all_reduce(void* group, void* tensor, int op, char** error) {
  return guarded(error, [&] {
    std::vector<at::Tensor> tensors{*static_cast<at::Tensor*>(tensor)};
    c10d::AllreduceOptions options;
    options.reduceOp = reduce_op(op);
    static_cast<ProcessGroupHandle*>(group)->backend->allreduce(tensors, options)->wait();
  });
}

// In-place broadcast of one tensor from `root`.
int indolm_c10d_broadcast(void* group, void* tensor, int root, char** error) {
  return guarded(error, [&] {
    std::vector<at::Tensor> tensors{*static_cast<at::Tensor*>(tensor)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    static_cast<ProcessGroupHandle*>(group)->backend->broadcast(tensors, options)->wait();
  });
}

// Adds `delta` to the counter `key` of the group's store (under its prefix; a key never set
// counts 0) and puts the sum into *value: with `delta` 0, reads the counter without waiting for
// it to exist. One round trip to the store, atomic there.
int indolm_c10d_store_add(void* group, const char* key, int64_t delta, int64_t* value, char** error) {
  return guarded(error, [&] {
    *value = static_cast<ProcessGroupHandle*>(group)->store->add(std::string(key), delta);
  });
}

// Removes `key` from the group's store (nothing when it is not there).
int indolm_c10d_store_delete(void* group, const char* key, char** error) {
  return guarded(error, [&] { static_cast<ProcessGroupHandle*>(group)->store->deleteKey(std::string(key)); });
}

// The error the group's NCCL watchdog recorded (c10d::ErrorType: 0 none, 1 a timeout, 2 an NCCL
// error, 3 another rank's, propagated) into *kind; Gloo groups record none (their collectives
// fail in the call).
int indolm_c10d_error(void* group, int* kind, char** error) {
  return guarded(error, [&] {
    auto handle = static_cast<ProcessGroupHandle*>(group);
    *kind = 0;
#ifdef USE_C10D_NCCL
    if (handle->device_index >= 0) {
      *kind = static_cast<int>(handle->backend->getError());
    }
#endif
  });
}

int indolm_c10d_barrier(void* group, char** error) {
  return guarded(error, [&] {
    auto handle = static_cast<ProcessGroupHandle*>(group);
    c10d::BarrierOptions options;
    if (handle->device_index >= 0) {
      options.device_ids = {handle->device_index};
    }
    handle->backend->barrier(options)->wait();
  });
}

}  // extern "C"
