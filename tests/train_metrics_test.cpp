// Running means, hit counters, MetricSet merging and JSON, and argmax_hits.
#include "weft/train/metrics.h"

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(TrainMetrics, RunningMeanAndHits) {
  train::RunningMean mean;
  EXPECT_EQ(mean.mean(), 0.0);
  mean.add(2.0, 3.0);  // a batch of 3 with mean loss 2
  mean.add(4.0);
  EXPECT_DOUBLE_EQ(mean.mean(), 10.0 / 4.0);
  train::RunningMean other;
  other.add(1.0, 4.0);
  mean.merge(other);
  EXPECT_DOUBLE_EQ(mean.mean(), 14.0 / 8.0);
  EXPECT_DOUBLE_EQ(mean.weight(), 8.0);
  train::HitCounter hits;
  hits.add(3, 4);
  hits.add(0, 4);
  EXPECT_DOUBLE_EQ(hits.rate(), 3.0 / 8.0);
  expect_error([&] { hits.add(5, 4); }, {"[metrics] hits must lie in [0, total], got 5 of 4"});
}

TEST(TrainMetrics, MetricSetMergesAndWritesJson) {
  train::MetricSet a;
  a.add_hits("accuracy", 3, 4);
  a.add_mean("margin", 0.5, 2);
  train::MetricSet b;
  b.add_hits("accuracy", 1, 4);
  b.add_mean("margin", 2.0, 1);
  b.add_mean("z\"q", 1.0);
  a.merge(b);
  EXPECT_DOUBLE_EQ(a.value("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(a.value("margin"), 1.0);
  EXPECT_EQ(a.names(), (std::vector<std::string>{"accuracy", "margin", "z\"q"}));
  EXPECT_EQ(a.to_json(), R"({"accuracy":0.5,"margin":1.0,"z\"q":1.0})");
  expect_error([&] { a.add_mean("accuracy", 1.0); },
               {"metric 'accuracy' is a hit rate and cannot be added to as a mean"});
  expect_error([&] { a.value("f1"); }, {"no metric 'f1'; the set has accuracy, margin, z\"q"});
  EXPECT_EQ(train::MetricSet().to_json(), "{}");
}

TEST(TrainMetrics, ArgmaxHits) {
  const Tensor logits =
      Tensor::from_vector({3, 3}, std::vector<float>{0, 2, 1, 5, 5, 0, -1, -2, -0.5f});
  // Row argmaxes: 1, 0 (first of a tie), 2.
  EXPECT_EQ(train::argmax_hits(logits, int_tensor({3}, {1, 0, 2})), 3);
  EXPECT_EQ(train::argmax_hits(logits, int_tensor({3}, {1, 1, 0})), 1);
  expect_error(
      [&] {
        train::argmax_hits(logits, int_tensor({2}, {0, 0}));
      },
      {"[argmax_hits] labels must be int32 [3] for logits float32 [3, 3], got int32 [2]"});
}

}  // namespace
}  // namespace weft::testing
