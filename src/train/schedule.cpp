// Learning-rate schedules (see weft/train/schedule.h), computed in double from the step.
#include "weft/train/schedule.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "weft/core/error.h"

namespace weft::train {

void LrSchedule::validate() const {
  if (!(learning_rate > 0) || !std::isfinite(learning_rate))
    fail("schedule", "learning_rate must be positive and finite, got ", learning_rate);
  if (warmup_steps < 0) fail("schedule", "warmup_steps must be >= 0, got ", warmup_steps);
  if ((kind == ScheduleKind::kStep || kind == ScheduleKind::kExponential) &&
      (step_size < 1 || !(gamma > 0) || !std::isfinite(gamma)))
    fail("schedule", schedule_kind_name(kind),
         " decay needs step_size >= 1 and gamma > 0, got step_size ", step_size, " and gamma ",
         gamma);
  if (kind == ScheduleKind::kCosine && total_steps <= warmup_steps)
    fail("schedule", "cosine decay needs total_steps > warmup_steps, got total_steps ", total_steps,
         " and warmup_steps ", warmup_steps, "; set total_steps to epochs * batches per epoch");
  if (kind == ScheduleKind::kCosine && !(min_lr >= 0 && min_lr <= learning_rate))
    fail("schedule", "cosine decay needs 0 <= min_lr <= learning_rate, got min_lr ", min_lr);
}

double LrSchedule::at(std::int64_t step) const {
  if (step < 0) fail("schedule", "the step must be >= 0, got ", step);
  if (step < warmup_steps) return learning_rate * double(step + 1) / double(warmup_steps);
  const std::int64_t t = step - warmup_steps;
  switch (kind) {
    case ScheduleKind::kConstant:
      return learning_rate;
    case ScheduleKind::kStep:
      return learning_rate * std::pow(gamma, double(t / step_size));
    case ScheduleKind::kExponential:
      return learning_rate * std::pow(gamma, double(t) / double(step_size));
    case ScheduleKind::kCosine: {
      const double span = double(total_steps - warmup_steps);
      const double progress = std::min(double(t), span) / span;
      return min_lr +
             (learning_rate - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return learning_rate;
}

std::string LrSchedule::describe() const {
  std::string text = fmt::format("{} lr={}", schedule_kind_name(kind), learning_rate);
  if (kind == ScheduleKind::kStep || kind == ScheduleKind::kExponential)
    text += fmt::format(" gamma={} step_size={}", gamma, step_size);
  if (kind == ScheduleKind::kCosine) {
    text += total_steps > 0 ? fmt::format(" total={}", total_steps) : std::string(" total=run");
    text += fmt::format(" min={}", min_lr);
  }
  if (warmup_steps > 0) text += fmt::format(" warmup={}", warmup_steps);
  return text;
}

}  // namespace weft::train
