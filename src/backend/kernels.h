// The backend front end: kernel declarations for each backend and the dispatch by device,
// all generated from kernels.def. Ops in src/autodiff call backend::name(...).
#pragma once

#include <cstdint>
#include <span>

#include "weft/tensor/tensor.h"

namespace weft::backend {

enum class UnaryOp : std::uint8_t { kNeg, kRelu, kSigmoid, kTanh, kExp, kLog, kSoftplus };
enum class BinaryOp : std::uint8_t { kAdd, kSub, kMul, kDiv };
enum class ReduceOp : std::uint8_t { kSum, kMax };
enum class ReduceAllOp : std::uint8_t { kSum, kSumSquares };

// The float32 constants of one optimizer_update; the host works them out in double, once per
// parameter and step, so the kernels do only float arithmetic per element.
enum class UpdateRule : std::uint8_t { kSgd, kAdagrad, kAdam };
struct UpdateArgs {
  UpdateRule rule = UpdateRule::kSgd;
  float learning_rate = 0.0f;      // SGD and Adagrad
  float l2 = 0.0f;                 // g = grad + l2 * value (L2-coupled weight decay)
  float shrink = 1.0f;             // value *= shrink before the update (decoupled decay)
  float momentum = 0.0f;           // SGD: v = momentum * v + g
  bool nesterov = false;           // SGD: value -= lr * (g + momentum * v), else lr * v
  float epsilon = 0.0f;            // Adagrad: value -= lr * g / (sqrt(s) + eps), s += g^2 first
  float beta1 = 0.0f;              // Adam: m = beta1 * m + one_minus_beta1 * g
  float beta2 = 0.0f;              // Adam: v = beta2 * v + one_minus_beta2 * g^2
  float one_minus_beta1 = 1.0f;    // 1 - beta1 and 1 - beta2 from the double betas: in float,
  float one_minus_beta2 = 1.0f;    // 1 - 0.999f would keep only 4 significant digits
  float step_size = 0.0f;          // Adam: lr / (1 - beta1^t)
  float rsqrt_correction2 = 1.0f;  // Adam: 1 / sqrt(1 - beta2^t); value -= step_size * m /
                                   // (sqrt(v) * rsqrt_correction2 + eps)
};

namespace cpu {
#define WEFT_KERNEL(name, params, args, device) void name params;
#include "kernels.def"
#undef WEFT_KERNEL
}  // namespace cpu

namespace cuda {
#define WEFT_KERNEL(name, params, args, device) void name params;
#include "kernels.def"
#undef WEFT_KERNEL
}  // namespace cuda

#define WEFT_KERNEL(name, params, args, device) \
  inline void name params {                     \
    if ((device) == Device::kCpu)               \
      cpu::name args;                           \
    else                                        \
      cuda::name args;                          \
  }
#include "kernels.def"
#undef WEFT_KERNEL

// Names of every kernel in kernels.def, in order (for tests and diagnostics).
inline constexpr const char* kKernelNames[] = {
#define WEFT_KERNEL(name, params, args, device) #name,
#include "kernels.def"
#undef WEFT_KERNEL
};

}  // namespace weft::backend
