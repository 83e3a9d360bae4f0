// Denormal (subnormal) floats, flushed to zero while Weft computes. A saturated sigmoid's
// gradient underflows into the denormal range, and on Intel cores every FMA that reads or
// writes a denormal takes a microcode assist: the ICLR Tree-LSTM benchmark trained 2.3-2.9x
// slower on a Xeon until they were flushed (BENCHMARKS.md, "Intel Xeon"). So, as TensorFlow does
// by default and PyTorch's torch.set_flush_denormal(True) does, Weft's CPU kernels run with the
// FPU's flush-to-zero and denormals-are-zero bits set (x86-64 MXCSR FTZ+DAZ, AArch64 FPCR FZ),
// and a thread Weft borrows (the caller's) gets its own mode back when the kernel returns.
// WEFT_DENORMALS=keep at start, or set_denormal_mode(kKeep), opts out: Weft then leaves every
// thread's mode as it finds it (a new thread keeps denormals). CUDA kernels flush or
// keep denormals as nvcc compiled them (without -ftz=true or --use_fast_math: kept).
#pragma once

#include <string_view>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"

WEFT_API_BEGIN
namespace weft {

#define WEFT_DENORMAL_MODES(X) \
  X(kFlush, "flush")           \
  X(kKeep, "keep")
enum class DenormalMode { WEFT_DENORMAL_MODES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(DenormalMode, WEFT_DENORMAL_MODES, denormal_mode_name, parse_denormal_mode,
                "denormals", "denormal mode")

// The process's setting: WEFT_DENORMALS when the first kernel runs (default flush), or the
// last set_denormal_mode. A bad WEFT_DENORMALS throws weft::Error at that first use.
DenormalMode denormal_mode();
void set_denormal_mode(DenormalMode mode);
// How the setting was chosen, for `weft info`: "default", "WEFT_DENORMALS" or
// "set_denormal_mode".
std::string_view denormal_mode_source();

// Whether this CPU architecture lets Weft set the mode (x86-64, AArch64); elsewhere the
// setting is recorded but changes nothing.
bool denormal_control_supported();
// Whether the calling thread's floating-point unit flushes denormals now (FTZ and DAZ both
// set on x86-64).
bool thread_flushes_denormals();

// In flush mode, makes the calling thread flush for the scope's life and restores its own
// mode at the end (in keep mode it does nothing): every CPU kernel runs inside one (and Weft's
// batch-level entry points, so nested kernels find the bits already set and write nothing). Costs a
// read of the control register, and two writes when the caller's mode differs. Throws weft::Error
// when WEFT_DENORMALS holds neither name.
class DenormalScope {
 public:
  DenormalScope();
  ~DenormalScope();
  DenormalScope(const DenormalScope&) = delete;
  DenormalScope& operator=(const DenormalScope&) = delete;

 private:
  unsigned long saved_ = 0;
  bool restore_ = false;
};

// In flush mode, makes the calling thread flush for good (no restore): for the threads Weft
// owns or configures, such as the OpenMP pool its GEMM providers run on.
void apply_denormal_mode_to_this_thread();

}  // namespace weft
WEFT_API_END
