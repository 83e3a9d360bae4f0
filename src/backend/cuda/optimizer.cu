// CUDA optimizer kernels: the fused update of a parameter and its slots (SGD, Adagrad, Adam
// with either kind of weight decay) and the clamp of gradient clipping, one thread per element
// in grid-stride loops, the same float32 arithmetic as the CPU (up to FMA contraction).
#include <cstdint>

#include "../kernels.h"
#include "cuda_context.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

#define WEFT_GRID_STRIDE(i, n)                                                        \
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t(gridDim.x) * blockDim.x)

// The arguments travel by value (a small POD in the kernel's parameter space).
__global__ void optimizer_update_kernel(UpdateArgs a, float* value, const float* grad, float* slot0,
                                        float* slot1, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) {
    float w = value[i];
    const float g = a.l2 != 0.0f ? grad[i] + a.l2 * w : grad[i];
    w *= a.shrink;
    switch (a.rule) {
      case UpdateRule::kSgd:
        if (slot0 == nullptr) {
          w -= a.learning_rate * g;
        } else {
          const float v = a.momentum * slot0[i] + g;
          slot0[i] = v;
          w -= a.learning_rate * (a.nesterov ? g + a.momentum * v : v);
        }
        break;
      case UpdateRule::kAdagrad: {
        const float s = slot0[i] + g * g;
        slot0[i] = s;
        w -= a.learning_rate * g / (sqrtf(s) + a.epsilon);
        break;
      }
      case UpdateRule::kAdam: {
        const float m = a.beta1 * slot0[i] + a.one_minus_beta1 * g;
        const float v = a.beta2 * slot1[i] + a.one_minus_beta2 * g * g;
        slot0[i] = m;
        slot1[i] = v;
        w -= a.step_size * m / (sqrtf(v) * a.rsqrt_correction2 + a.epsilon);
        break;
      }
    }
    value[i] = w;
  }
}

__global__ void scale_clamp_kernel(float* x, float scale, float limit, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) x[i] = fminf(fmaxf(scale * x[i], -limit), limit);
}

}  // namespace

void optimizer_update(const UpdateArgs& args, Tensor& value, const Tensor& grad, Tensor* slot0,
                      Tensor* slot1) {
  WEFT_ASSERT(value.numel() == grad.numel());
  const std::int64_t n = value.numel();
  if (n == 0) return;
  optimizer_update_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      args, value.data<float>(), grad.data<float>(),
      slot0 != nullptr ? slot0->data<float>() : nullptr,
      slot1 != nullptr ? slot1->data<float>() : nullptr, n);
  check_launch("optimizer_update");
}

void scale_clamp(Tensor& x, float scale, float limit) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  scale_clamp_kernel<<<grid_for(n), kThreads, 0, stream()>>>(x.data<float>(), scale, limit, n);
  check_launch("scale_clamp");
}

}  // namespace weft::backend::cuda
