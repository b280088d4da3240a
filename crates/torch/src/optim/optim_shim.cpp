// What tch has no binding for in the optimizer: making a parameter's `.grad` a given tensor (a
// view into a flat gradient buffer, so that backward accumulates into that buffer in place), and
// libtorch's fused AdamW kernel (`at::_fused_adamw_`, the one `torch.optim.AdamW(fused=True)`
// runs; CPU and CUDA). Compiled by build.rs against the torch wheel's headers. No exception
// leaves this file.
#include "../shim.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_adamw.h>

#include <vector>

extern "C" {

int indolm_set_grad(at::Tensor* param, at::Tensor* grad) {
  try {
    param->mutable_grad() = *grad;
    return 1;
  } catch (...) {
    return 0;
  }
}

void indolm_optim_free_message(char* message) {
  std::free(message);
}

// One AdamW update of `n` parameters with their gradients and moments, all of one device and
// dtype, by libtorch's fused kernel. `step` (a float32 scalar on the device, already counting
// this update) is every parameter's step count; where `found_inf` (a float32 scalar on the device,
// or null) is 1 the kernel leaves everything as it is (torch's GradScaler skip).
int indolm_fused_adamw(
    at::Tensor** params,
    at::Tensor** grads,
    at::Tensor** exp_avgs,
    at::Tensor** exp_avg_sqs,
    size_t n,
    at::Tensor* step,
    double lr,
    double beta1,
    double beta2,
    double weight_decay,
    double eps,
    at::Tensor* found_inf,
    char** error) {
  return indolm_shim::guarded(error, [&] {
    std::vector<at::Tensor> p, g, m, v, steps;
    for (size_t i = 0; i < n; ++i) {
      p.push_back(*params[i]);
      g.push_back(*grads[i]);
      m.push_back(*exp_avgs[i]);
      v.push_back(*exp_avg_sqs[i]);
      steps.push_back(*step);
    }
    std::optional<at::Tensor> skip;
    if (found_inf != nullptr) {
      skip = *found_inf;
    }
    at::_fused_adamw_(p, g, m, v, {}, steps, lr, beta1, beta2, weight_decay, eps, false, false, std::nullopt, skip);
  });
}

}  // extern "C"
