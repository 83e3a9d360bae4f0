// Peak RSS from /proc/self/status, and its reset through /proc/self/clear_refs.
#include "weft/core/memory_usage.h"

#include <malloc.h>

#include <fstream>
#include <limits>
#include <string>

namespace weft {

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key)
    if (key == "VmHWM:") {
      double kb = 0;
      status >> kb;
      return kb / 1024.0;
    }
  return std::numeric_limits<double>::quiet_NaN();
}

void reset_peak_rss() {
  ::malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // "5" resets the peak RSS (Linux >= 4.0)
}

}  // namespace weft
