// The process's memory as the operating system sees it, for benchmarks that report peak RSS
// next to the sizes of the tensors themselves (Linux /proc; NaN where unavailable).
#pragma once

namespace weft {

// The peak resident set size (VmHWM) of this process in MB (the kernel's kB / 1024).
double peak_rss_mb();
// Returns cached tensor blocks and free heap to the system, then resets the kernel's peak
// RSS mark, so the next phase's peak is its own.
void reset_peak_rss();

}  // namespace weft
