// The process's memory as the operating system sees it, for benchmarks that report peak RSS
// next to the sizes of the tensors themselves (Linux /proc; NaN where unavailable).
#pragma once

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// The peak resident set size (VmHWM) of this process in MB (the kernel's kB / 1024).
double peak_rss_mb();
// Returns free heap to the system, then resets the kernel's peak RSS mark, so the next phase's
// peak is its own. Call release_cached_memory() (weft/tensor/allocator.h) first to return the
// allocator's cached tensor blocks as well.
void reset_peak_rss();

}  // namespace weft
WEFT_API_END
