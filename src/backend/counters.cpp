// Per-thread counts of what the backends were asked to do (weft/backend/counters.h).
#include "weft/backend/counters.h"

namespace weft {

namespace backend::detail {
BackendCounters& thread_counters() {
  thread_local BackendCounters counters;
  return counters;
}
}  // namespace backend::detail

BackendCounters backend_counters() { return backend::detail::thread_counters(); }

}  // namespace weft
