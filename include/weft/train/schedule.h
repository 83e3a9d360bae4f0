// Learning-rate schedules: the learning rate as a function of the optimizer step (the number
// of updates already made). A linear warm-up may precede any of them; the decay then starts
// counting at the end of the warm-up. Pure functions of the step, so a resumed run gets the
// same rates as an uninterrupted one from the step count alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"

WEFT_API_BEGIN
namespace weft::train {

// kConstant: lr. kStep: lr * gamma ^ floor(t / step_size). kExponential: lr * gamma ^
// (t / step_size) (continuous decay). kCosine: min_lr + (lr - min_lr) * (1 + cos(pi * min(t, T)
// / T)) / 2, T = total - warm-up.
#define WEFT_SCHEDULE_KINDS(X)   \
  X(kConstant, "constant")       \
  X(kStep, "step")               \
  X(kExponential, "exponential") \
  X(kCosine, "cosine")
enum class ScheduleKind { WEFT_SCHEDULE_KINDS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(ScheduleKind, WEFT_SCHEDULE_KINDS, schedule_kind_name, parse_schedule_kind,
                "schedule", "learning-rate schedule")

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kConstant;
  double learning_rate = 0.01;
  // Steps of linear warm-up: step s < warmup_steps gets lr * (s + 1) / warmup_steps.
  std::int64_t warmup_steps = 0;
  double gamma = 0.1;            // kStep, kExponential: the decay factor per step_size steps
  std::int64_t step_size = 1;    // kStep, kExponential
  std::int64_t total_steps = 0;  // kCosine: the step where the rate reaches min_lr
  double min_lr = 0.0;           // kCosine

  // Throws weft::Error naming the bad field.
  void validate() const;
  // The learning rate for the update numbered `step` (0 for the first update).
  double at(std::int64_t step) const;
  // "cosine lr=0.1 total=1000 min=0 warmup=100", for logs.
  std::string describe() const;
};

}  // namespace weft::train
WEFT_API_END
