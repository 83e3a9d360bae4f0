// Per-thread counts of what the backends were asked to do, and the optional work profile
// (weft/backend/counters.h).
#include "weft/backend/counters.h"

#include <chrono>

namespace weft {

namespace backend::detail {
BackendCounters& thread_counters() {
  thread_local BackendCounters counters;
  return counters;
}

ProfileState& thread_profile_state() {
  thread_local ProfileState state;
  return state;
}

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void WorkTimer::start(WorkKind kind) {
  ProfileState& state = thread_profile_state();
  state.timing = true;
  state.current = kind;
  start_ns_ = now_ns();
}

void WorkTimer::stop() {
  const std::int64_t elapsed = now_ns() - start_ns_;
  ProfileState& state = thread_profile_state();
  WorkTime& time = thread_counters().profile.of(state.backward, state.current);
  time.seconds += double(elapsed) * 1e-9;
  ++time.calls;
  state.timing = false;
}

void record_moved_bytes(std::int64_t bytes) {
  const ProfileState& state = thread_profile_state();
  if (state.on) thread_counters().profile.of(state.backward, state.current).bytes += bytes;
}
}  // namespace backend::detail

BackendCounters backend_counters() { return backend::detail::thread_counters(); }

bool set_work_profiling(bool on) {
  bool& flag = backend::detail::thread_profile_state().on;
  const bool was = flag;
  flag = on;
  return was;
}

bool work_profiling() { return backend::detail::thread_profile_state().on; }

BackwardPass::BackwardPass() : was_(backend::detail::thread_profile_state().backward) {
  backend::detail::thread_profile_state().backward = true;
}
BackwardPass::~BackwardPass() { backend::detail::thread_profile_state().backward = was_; }

double WorkProfile::seconds() const {
  double total = 0;
  for (const auto* pass : {&forward, &backward})
    for (const WorkTime& t : *pass) total += t.seconds;
  return total;
}

WorkProfile WorkProfile::operator-(const WorkProfile& earlier) const {
  WorkProfile out = *this;
  for (std::size_t k = 0; k < kWorkKinds; ++k)
    for (auto [now, before] : {std::pair{&out.forward[k], &earlier.forward[k]},
                               std::pair{&out.backward[k], &earlier.backward[k]}}) {
      now->seconds -= before->seconds;
      now->calls -= before->calls;
      now->bytes -= before->bytes;
    }
  return out;
}

WorkProfile& WorkProfile::operator+=(const WorkProfile& more) {
  for (std::size_t k = 0; k < kWorkKinds; ++k)
    for (auto [into, add] :
         {std::pair{&forward[k], &more.forward[k]}, std::pair{&backward[k], &more.backward[k]}}) {
      into->seconds += add->seconds;
      into->calls += add->calls;
      into->bytes += add->bytes;
    }
  return *this;
}

}  // namespace weft
