// What a thread has asked of the backends: kernels dispatched on any device, and on CUDA the
// kernel launches (a cuBLAS call counts as one), host-to-device copies and host waits for the
// device. The loom's RunStats and the benchmarks report them per batch, and tests hold a run to
// its bounds (no wait for the device inside a batch, one copy per gather). Counts are per
// thread (the one that queued the work) and only grow: take the difference of two readings.
//
// With work profiling on (set_work_profiling, per thread; off by default, so a kernel costs one
// flag test more), each kernel's host time is also summed by its kind (kernels.def names each
// kernel's kind), apart for the forward and the backward pass (Tape::backward marks the
// latter), with the bytes the data-moving kernels wrote, and the tensor pool's allocations are
// timed too: where a batch's time goes, and how much of it is moving data. On CUDA the times
// are the host's time to queue the work, not the device's.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"

WEFT_API_BEGIN
namespace weft {

// What a kernel does with its time. kGather: copies rows into place by index (the loom's
// argument gathers, row gathers); kScatter: adds gradients back where gathered rows came
// from; kCopy: other moves (concat, slice and their gradients, bias rows, transposes);
// kAllocation is the tensor pool's, not a kernel's.
#define WEFT_WORK_KINDS(X)       \
  X(kProduct, "products")        \
  X(kGather, "gathers")          \
  X(kScatter, "scatters")        \
  X(kCopy, "copies")             \
  X(kElementwise, "elementwise") \
  X(kReduction, "reductions")    \
  X(kOptimizer, "optimizer")     \
  X(kAllocation, "allocation")
enum class WorkKind { WEFT_WORK_KINDS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(WorkKind, WEFT_WORK_KINDS, work_kind_name, parse_work_kind, "profile", "work kind")
inline constexpr std::size_t kWorkKinds = weft_enum_names(WorkKind{}).size();

struct WorkTime {
  double seconds = 0;
  std::int64_t calls = 0;
  std::int64_t bytes = 0;  // written by the data-moving kernels (gathers, scatters, copies; CPU)
};

// Per pass and kind: backward is Tape::backward's sweep, forward everything else (the forward
// pass, the loss, the optimizer's update).
struct WorkProfile {
  std::array<WorkTime, kWorkKinds> forward{}, backward{};

  const WorkTime& of(bool in_backward, WorkKind kind) const {
    return (in_backward ? backward : forward)[std::size_t(kind)];
  }
  WorkTime& of(bool in_backward, WorkKind kind) {
    return (in_backward ? backward : forward)[std::size_t(kind)];
  }
  double seconds() const;  // everything profiled
  WorkProfile operator-(const WorkProfile& earlier) const;
  WorkProfile& operator+=(const WorkProfile& more);
};

struct BackendCounters {
  std::int64_t kernel_calls = 0;      // backend kernels (the entries of kernels.def), any device
  std::int64_t launches = 0;          // CUDA kernel launches and cuBLAS calls
  std::int64_t host_to_device = 0;    // host-to-device copies queued
  std::int64_t synchronizations = 0;  // the host waited for the device (syncs, read-backs, frees)
  WorkProfile profile;                // with work profiling on

  BackendCounters operator-(const BackendCounters& earlier) const {
    return {kernel_calls - earlier.kernel_calls, launches - earlier.launches,
            host_to_device - earlier.host_to_device, synchronizations - earlier.synchronizations,
            profile - earlier.profile};
  }
  BackendCounters& operator+=(const BackendCounters& more) {
    kernel_calls += more.kernel_calls;
    launches += more.launches;
    host_to_device += more.host_to_device;
    synchronizations += more.synchronizations;
    profile += more.profile;
    return *this;
  }
};

// This thread's counts so far.
BackendCounters backend_counters();

// Work profiling on this thread (off by default); returns the previous setting.
bool set_work_profiling(bool on);
bool work_profiling();

// Marks the calling thread's kernels as the backward pass's while it lives (Tape::backward).
class BackwardPass {
 public:
  BackwardPass();
  ~BackwardPass();
  BackwardPass(const BackwardPass&) = delete;
  BackwardPass& operator=(const BackwardPass&) = delete;

 private:
  bool was_;
};

namespace backend::detail {
// The calling thread's counters, for the backends to add to.
BackendCounters& thread_counters();

struct ProfileState {
  bool on = false;
  bool backward = false;
  bool timing = false;                        // a WorkTimer runs (only the outermost counts)
  WorkKind current = WorkKind::kElementwise;  // its kind
};
ProfileState& thread_profile_state();

// Times one kernel (or allocation) of `kind` when profiling is on and no other timer runs
// (an allocation inside a kernel is the kernel's time); nothing otherwise.
class WorkTimer {
 public:
  explicit WorkTimer(WorkKind kind) {
    if (ProfileState& state = thread_profile_state(); state.on && !state.timing) start(kind);
  }
  ~WorkTimer() {
    if (start_ns_ >= 0) stop();
  }
  WorkTimer(const WorkTimer&) = delete;
  WorkTimer& operator=(const WorkTimer&) = delete;

 private:
  void start(WorkKind kind);
  void stop();
  std::int64_t start_ns_ = -1;  // -1: not timing
};

// A data-moving kernel reports the bytes it wrote (added to the running kernel's kind).
void record_moved_bytes(std::int64_t bytes);
}  // namespace backend::detail

}  // namespace weft
WEFT_API_END
