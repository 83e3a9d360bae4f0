// The rules that keep a loaded machine from spoiling the GEMM calibration for good
// (gemm_selection.cpp): a class measured while the core was shared, or whose rounds disagree,
// is used but not cached and is measured again later; a cached class whose products run far
// from its recorded rate is measured again. Pure functions of the timings, so tests can feed
// them a busy core's figures.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace weft::backend::cpu {

// What a calibration of one class saw beyond the rates.
struct CalibrationTimes {
  double thread_seconds = 0;  // the calling thread's CPU time over the whole measurement
  double wall_seconds = 0;    // the wall time over the same span
  int threads = 1;            // GEMM threads (the CPU-time test needs one)
};

// At most this much of the wall time may pass with the measuring thread off the CPU.
inline constexpr double kMinOnCpuShare = 0.85;
// A provider's rounds may spread at most this much (median run over best run).
inline constexpr double kMaxRoundSpread = 1.3;
// A product in use may run this many times slower or faster than its class's recorded rate
// before the class is measured again (shapes within a class differ up to twofold per extent).
inline constexpr double kInUseRateFactor = 3.0;

// Why a measurement should not be cached ("" when it can be): the thread was off the CPU for
// much of it (another process or a hyperthread sibling shares the core), or a provider's
// rounds (seconds per call, per round) spread too far.
std::string calibration_noise(const CalibrationTimes& times,
                              std::span<const std::vector<double>> rounds_per_provider);

// Whether a product's measured rate contradicts the rate recorded for its class enough to
// measure the class again. `share` is the product's flops over the class representative's
// (at most 1; gemm_class_representative), for a product smaller than the representative is not
// expected to reach its rate, only to take no longer: slower means taking kInUseRateFactor times
// the representative's time (SST's [150, 5] products, n = 5 in a class of n up to 8, run at a
// quarter of the class's rate in about its time, and were measured again in every process).
inline bool in_use_rate_contradicts(double in_use_gflops, double recorded_gflops,
                                    double share = 1.0) {
  return in_use_gflops * kInUseRateFactor < recorded_gflops * share ||
         in_use_gflops > kInUseRateFactor * recorded_gflops;
}

}  // namespace weft::backend::cpu

namespace weft::backend::cpu {

// For tests: when set, calibrations take this verdict instead of calibration_noise's ("" clean,
// else the reason), so what follows a noisy or a clean measurement can be tested on any
// machine, loaded or not. Unset: the measured verdict.
void set_calibration_noise_override(const std::string* verdict);

}  // namespace weft::backend::cpu
