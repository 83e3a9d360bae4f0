// Exact sums, running means, hit counters, MetricSet merging and JSON, and argmax_hits.
#include "weft/train/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "op_test_util.h"

namespace weft::testing {
namespace {

double exact_sum(std::span<const double> terms) {
  train::ExactSum sum;
  for (double t : terms) sum.add(t);
  return sum.value();
}

TEST(TrainMetrics, ExactSumIsExactInAnyOrder) {
  // A float sum loses the 1 in some orders, and overflows in others.
  std::vector<double> cancel = {1e16, 1.0, -1e16};
  std::vector<double> huge = {1e308, 1e308, -1e308};
  std::sort(cancel.begin(), cancel.end());
  std::sort(huge.begin(), huge.end());
  do EXPECT_EQ(exact_sum(cancel), 1.0);
  while (std::next_permutation(cancel.begin(), cancel.end()));
  do EXPECT_EQ(exact_sum(huge), 1e308);
  while (std::next_permutation(huge.begin(), huge.end()));
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(exact_sum(std::vector{tiny, tiny, -tiny * 3}), -tiny);
  EXPECT_EQ(exact_sum(std::vector<double>{}), 0.0);
  EXPECT_EQ(exact_sum(std::vector{2.5, -2.5}), 0.0);
}

TEST(TrainMetrics, ExactSumRoundsOnceToNearest) {
  // 1 + 2^-53 + 2^-80 lies above the halfway point between 1 and 1 + 2^-52; added one at a time
  // in doubles it ties to even first and gives 1.
  EXPECT_EQ(exact_sum(std::vector{1.0, std::ldexp(1.0, -53), std::ldexp(1.0, -80)}),
            1.0 + std::ldexp(1.0, -52));
  EXPECT_EQ(exact_sum(std::vector{1.0, std::ldexp(1.0, -53)}), 1.0);  // a tie: to even
  EXPECT_EQ(exact_sum(std::vector{-1.0, -std::ldexp(1.0, -53), -std::ldexp(1.0, -80)}),
            -1.0 - std::ldexp(1.0, -52));
}

TEST(TrainMetrics, ExactSumOfShuffledGroupedFloatsIsTheSameBits) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-60, 60);
  std::vector<float> terms;
  for (int i = 0; i < 2000; ++i) terms.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  // Each term and its negation, and one 0.1f: the exact sum is 0.1f.
  std::vector<float> with_negations = terms;
  for (float t : terms) with_negations.push_back(-t);
  with_negations.push_back(0.1f);
  train::ExactSum whole;
  whole.add(with_negations);
  EXPECT_EQ(whole.value(), double(0.1f));
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(with_negations.begin(), with_negations.end(), rng);
    train::ExactSum grouped;
    for (std::size_t i = 0; i < with_negations.size();) {
      const std::size_t size = std::min<std::size_t>(1 + rng() % 64, with_negations.size() - i);
      train::ExactSum group;
      group.add(std::span(with_negations).subspan(i, size));
      grouped.merge(group);
      i += size;
    }
    EXPECT_EQ(grouped.value(), double(0.1f));
  }
}

TEST(TrainMetrics, ExactSumKeepsNonFiniteTerms) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(exact_sum(std::vector{1.0, inf}), inf);
  EXPECT_TRUE(std::isnan(exact_sum(std::vector{inf, 1.0, -inf})));
  train::ExactSum a, b;
  a.add(1.0);
  b.add(std::nan(""));
  a.merge(b);
  EXPECT_TRUE(std::isnan(a.value()));
}

TEST(TrainMetrics, MeanOfTermsDoesNotDependOnTheBatching) {
  const std::vector<float> terms = {0.1f, 3e7f, -3e7f, 0.7f, 1e-8f, 2.5f, 0.3f};
  train::MetricSet whole, batched;
  whole.add_mean_of("node_loss", terms);
  for (std::size_t i = 0; i < terms.size(); i += 3) {
    train::MetricSet batch;
    batch.add_mean_of("node_loss",
                      std::span(terms).subspan(i, std::min<std::size_t>(3, terms.size() - i)));
    batched.merge(batch);
  }
  EXPECT_EQ(batched.value("node_loss"), whole.value("node_loss"));
  EXPECT_EQ(whole.value("node_loss"),
            exact_sum(std::vector<double>{0.1f, 0.7f, 1e-8f, 2.5f, 0.3f}) / 7);
}

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
