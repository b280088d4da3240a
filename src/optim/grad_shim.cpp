// What tch has no binding for in autograd: making a parameter's `.grad` a given tensor (a view
// into a flat gradient buffer, so that backward accumulates into that buffer in place). Compiled
// by build.rs against the torch wheel's headers. No exception leaves this file.
#include <ATen/core/Tensor.h>

extern "C" int indolm_set_grad(at::Tensor* param, at::Tensor* grad) {
  try {
    param->mutable_grad() = *grad;
    return 1;
  } catch (...) {
    return 0;
  }
}
