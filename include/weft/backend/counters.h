// What a thread has asked of the backends: kernels dispatched on any device, and on CUDA the
// kernel launches (a cuBLAS call counts as one), host-to-device copies and host waits for the
// device. The loom's RunStats and the benchmarks report them per batch, and tests hold a run to
// its bounds (no wait for the device inside a batch, one copy per gather). Counts are per
// thread (the one that queued the work) and only grow: take the difference of two readings.
#pragma once

#include <cstdint>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

struct BackendCounters {
  std::int64_t kernel_calls = 0;      // backend kernels (the entries of kernels.def), any device
  std::int64_t launches = 0;          // CUDA kernel launches and cuBLAS calls
  std::int64_t host_to_device = 0;    // host-to-device copies queued
  std::int64_t synchronizations = 0;  // the host waited for the device (syncs, read-backs, frees)

  BackendCounters operator-(const BackendCounters& earlier) const {
    return {kernel_calls - earlier.kernel_calls, launches - earlier.launches,
            host_to_device - earlier.host_to_device, synchronizations - earlier.synchronizations};
  }
  BackendCounters& operator+=(const BackendCounters& more) {
    kernel_calls += more.kernel_calls;
    launches += more.launches;
    host_to_device += more.host_to_device;
    synchronizations += more.synchronizations;
    return *this;
  }
};

// This thread's counts so far.
BackendCounters backend_counters();

namespace backend::detail {
// The calling thread's counters, for the backends to add to.
BackendCounters& thread_counters();
}  // namespace backend::detail

}  // namespace weft
WEFT_API_END
