// The backend front end: kernel declarations for each backend and the dispatch by device,
// all generated from kernels.def. Ops in src/autodiff call backend::name(...).
#pragma once

#include <cstdint>
#include <span>

#include "weft/backend/counters.h"
#include "weft/backend/row_blocks.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/denormals.h"
#include "weft/tensor/tensor.h"

namespace weft::backend {

enum class UnaryOp : std::uint8_t { kNeg, kRelu, kSigmoid, kTanh, kExp, kLog, kSoftplus, kAbs };
enum class BinaryOp : std::uint8_t { kAdd, kSub, kMul, kDiv, kMinimum, kMaximum };
enum class CompareOp : std::uint8_t {
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual
};
enum class ReduceOp : std::uint8_t { kSum, kMax };
enum class ReduceAllOp : std::uint8_t { kSum, kSumSquares };

namespace cpu {
#define WEFT_KERNEL(name, kind, params, args, device) void name params;
#include "kernels.def"
#undef WEFT_KERNEL
}  // namespace cpu

namespace cuda {
#define WEFT_KERNEL(name, kind, params, args, device) void name params;
#include "kernels.def"
#undef WEFT_KERNEL
}  // namespace cuda

// A CPU kernel runs with denormals flushed unless the process keeps them (denormals.h).
#define WEFT_KERNEL(name, kind, params, args, device) \
  inline void name params {                           \
    ++detail::thread_counters().kernel_calls;         \
    const detail::WorkTimer timer(WorkKind::kind);    \
    if ((device) == Device::kCpu) {                   \
      const DenormalScope denormals;                  \
      cpu::name args;                                 \
    } else {                                          \
      cuda::name args;                                \
    }                                                 \
  }
#include "kernels.def"
#undef WEFT_KERNEL

// Names of every kernel in kernels.def, in order (for tests and diagnostics).
inline constexpr const char* kKernelNames[] = {
#define WEFT_KERNEL(name, kind, params, args, device) #name,
#include "kernels.def"
#undef WEFT_KERNEL
};

// Each kernel's kind, in the same order.
inline constexpr WorkKind kKernelKinds[] = {
#define WEFT_KERNEL(name, kind, params, args, device) WorkKind::kind,
#include "kernels.def"
#undef WEFT_KERNEL
};

}  // namespace weft::backend
