// The noise verdict of a GEMM calibration (calibration_checks.h).
#include "calibration_checks.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace weft::backend::cpu {
namespace {

std::atomic<const std::string*> g_override{nullptr};

double median_over_best(std::vector<double> runs) {
  std::sort(runs.begin(), runs.end());
  const std::size_t n = runs.size();
  const double median = n % 2 == 1 ? runs[n / 2] : 0.5 * (runs[n / 2 - 1] + runs[n / 2]);
  return median / std::max(runs.front(), 1e-12);
}

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100.0 * share);
  return text;
}

}  // namespace

std::string calibration_noise(const CalibrationTimes& times,
                              std::span<const std::vector<double>> rounds_per_provider) {
  if (const std::string* verdict = g_override.load()) return *verdict;
  if (times.threads == 1 && times.wall_seconds > 0) {
    const double on_cpu = times.thread_seconds / times.wall_seconds;
    if (on_cpu < kMinOnCpuShare)
      return "the measuring thread ran " + percent(on_cpu) +
             " of the wall time (another process shares the core)";
  }
  for (const std::vector<double>& rounds : rounds_per_provider) {
    if (rounds.size() < 2) continue;
    const double spread = median_over_best(rounds);
    if (spread > kMaxRoundSpread)
      return "a provider's rounds spread " + percent(spread - 1.0) + " (median over best run)";
  }
  return "";
}

void set_calibration_noise_override(const std::string* verdict) { g_override.store(verdict); }

}  // namespace weft::backend::cpu
