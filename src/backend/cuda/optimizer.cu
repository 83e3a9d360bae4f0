// CUDA optimizer kernels: the fused update of a parameter and its slots (SGD, Adagrad, Adam
// with either kind of weight decay), of the whole tensor or of the rows of a row-sparse
// gradient, and the clamp of gradient clipping, one thread per element in grid-stride loops,
// the same float32 arithmetic as the CPU (up to FMA contraction).
#include <cstdint>

#include "../kernels.h"
#include "cuda_context.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

// Element i of value (and of the slots) from gradient element gi. The arguments travel by value
// (a small POD in the kernel's parameter space).
__device__ void update_element(const UpdateArgs& a, float* value, float g, float* slot0,
                               float* slot1, std::int64_t i) {
  float w = value[i];
  if (a.l2 != 0.0f) g += a.l2 * w;
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

__global__ void optimizer_update_kernel(UpdateArgs a, float* value, const float* grad, float* slot0,
                                        float* slot1, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) update_element(a, value, grad[i], slot0, slot1, i);
}

// Row idx[r] of value from row r of grad_rows; the indices are distinct, so no two threads
// touch one element.
__global__ void optimizer_update_rows_kernel(UpdateArgs a, float* value, const std::int32_t* idx,
                                             const float* grad_rows, float* slot0, float* slot1,
                                             std::int64_t row, std::int64_t n) {
  WEFT_GRID_STRIDE(e, n * row) {
    const std::int64_t r = e / row, j = e % row;
    update_element(a, value, grad_rows[e], slot0, slot1, std::int64_t(idx[r]) * row + j);
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

void optimizer_update_rows(const UpdateArgs& args, Tensor& value, const Tensor& indices,
                           const Tensor& grad_rows, Tensor* slot0, Tensor* slot1) {
  const std::int64_t k = indices.numel();
  const std::int64_t row = value.row_size();
  WEFT_ASSERT(grad_rows.numel() == k * row);
  if (k == 0 || row == 0) return;
  optimizer_update_rows_kernel<<<grid_for(k * row), kThreads, 0, stream()>>>(
      args, value.data<float>(), indices.data<std::int32_t>(), grad_rows.data<float>(),
      slot0 != nullptr ? slot0->data<float>() : nullptr,
      slot1 != nullptr ? slot1->data<float>() : nullptr, row, k);
  check_launch("optimizer_update_rows");
}

void scale_clamp(Tensor& x, float scale, float limit) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  scale_clamp_kernel<<<grid_for(n), kThreads, 0, stream()>>>(x.data<float>(), scale, limit, n);
  check_launch("scale_clamp");
}

}  // namespace weft::backend::cuda
