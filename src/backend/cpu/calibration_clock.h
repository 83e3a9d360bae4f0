// The clock the GEMM calibration times its runs with. With one GEMM thread it is the calling
// thread's CPU time, so a run during which the thread was descheduled (another process sharing
// the core, as while a build runs beside it) is not measured as slow: with the wall clock a
// provider whose runs were hit lost its classes for as long as the cache is kept
// (bench/log/2026-11-26-gemm-calibration-clock.md). With several GEMM threads the calling
// thread may sleep while the others finish, so its CPU time would flatter the provider: there
// the wall clock stays.
#pragma once

#include <time.h>

#include <chrono>

namespace weft::backend::cpu {

// Seconds of CPU time the calling thread has used.
inline double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The calibration's clock for GEMMs run on `threads` threads, and its name.
inline double calibration_seconds(int threads) {
  return threads == 1 ? thread_cpu_seconds() : wall_seconds();
}
inline const char* calibration_clock_name(int threads) {
  return threads == 1 ? "the thread's CPU clock (time spent descheduled does not count)"
                      : "the wall clock (several GEMM threads)";
}

}  // namespace weft::backend::cpu
