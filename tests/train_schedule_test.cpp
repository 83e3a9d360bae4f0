// Learning-rate schedules: values at given steps, hand-computed, with and without warm-up;
// and their validation errors.
#include "weft/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

using train::LrSchedule;
using train::ScheduleKind;

TEST(TrainSchedule, ConstantAndWarmup) {
  LrSchedule s;
  s.learning_rate = 0.5;
  EXPECT_DOUBLE_EQ(s.at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.5);
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(s.at(0), 0.125);
  EXPECT_DOUBLE_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 0.5);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
}

TEST(TrainSchedule, StepDecay) {
  LrSchedule s;
  s.kind = ScheduleKind::kStep;
  s.learning_rate = 1.0;
  s.gamma = 0.5;
  s.step_size = 3;
  EXPECT_DOUBLE_EQ(s.at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.at(2), 1.0);
  EXPECT_DOUBLE_EQ(s.at(3), 0.5);
  EXPECT_DOUBLE_EQ(s.at(8), 0.25);
  EXPECT_DOUBLE_EQ(s.at(9), 0.125);
  s.warmup_steps = 2;  // decay counts from the end of the warm-up
  EXPECT_DOUBLE_EQ(s.at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.at(2), 1.0);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
}

TEST(TrainSchedule, ExponentialDecay) {
  LrSchedule s;
  s.kind = ScheduleKind::kExponential;
  s.learning_rate = 2.0;
  s.gamma = 0.1;
  s.step_size = 10;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_NEAR(s.at(5), 2.0 * std::sqrt(0.1), 1e-15);
  EXPECT_NEAR(s.at(20), 0.02, 1e-15);
}

TEST(TrainSchedule, CosineWithWarmup) {
  LrSchedule s;
  s.kind = ScheduleKind::kCosine;
  s.learning_rate = 1.0;
  s.min_lr = 0.2;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.validate();
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.6, 1e-12);                                   // half way: the mean
  EXPECT_NEAR(s.at(35), 0.2 + 0.8 * (1 + std::sqrt(0.5)) / 2, 1e-12);  // a quarter
  EXPECT_DOUBLE_EQ(s.at(110), 0.2);
  EXPECT_DOUBLE_EQ(s.at(500), 0.2);  // stays at min_lr after total_steps
  EXPECT_EQ(s.describe(), "cosine lr=1 total=110 min=0.2 warmup=10");
}

TEST(TrainSchedule, Errors) {
  LrSchedule s;
  s.kind = ScheduleKind::kCosine;
  expect_error([&] { s.validate(); },
               {"[schedule] cosine decay needs total_steps > warmup_steps, got total_steps 0"});
  s = {};
  s.learning_rate = -1;
  expect_error([&] { s.validate(); }, {"learning_rate must be positive and finite, got -1"});
  s = {};
  s.kind = ScheduleKind::kStep;
  s.step_size = 0;
  expect_error([&] { s.validate(); }, {"step decay needs step_size >= 1 and gamma > 0"});
  expect_error([] { train::parse_schedule_kind("linear"); },
               {"unknown learning-rate schedule 'linear'; expected constant, step, exponential "
                "or cosine"});
  EXPECT_EQ(train::parse_schedule_kind("cosine"), ScheduleKind::kCosine);
}

}  // namespace
}  // namespace weft::testing
