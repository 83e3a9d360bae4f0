// nn foundations: initializer statistics, ranges and determinism; ParameterStore creation
// order, scopes and errors; ForwardMode nesting and the dropout it enables.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "nn_test_util.h"
#include "weft/nn/initializers.h"
#include "weft/nn/mode.h"
#include "weft/nn/parameter_store.h"

namespace weft::testing {
namespace {

std::vector<float> init_values(const nn::Initializer& init, const Shape& shape,
                               std::uint64_t seed) {
  Tensor t = Tensor::zeros(shape);
  Rng rng(seed);
  init(t, rng);
  return t.to_float_vector();
}

double mean_of(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

double variance_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double total = 0;
  for (float x : v) total += (x - m) * (x - m);
  return total / double(v.size());
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

TEST(NnInitializers, ConstantsFillExactly) {
  for (float v : init_values(nn::zeros(), {3, 4}, 1)) EXPECT_EQ(v, 0.0f);
  for (float v : init_values(nn::constant(2.5f), {7}, 1)) EXPECT_EQ(v, 2.5f);
}

TEST(NnInitializers, UniformRangeAndMean) {
  const auto v = init_values(nn::uniform(2.0f, 4.0f), {200, 100}, 3);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 2.0f);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 4.0f);
  EXPECT_NEAR(mean_of(v), 3.0, 0.01);
  EXPECT_NEAR(variance_of(v), 4.0 / 12.0, 0.01);  // (b - a)^2 / 12
}

TEST(NnInitializers, UniformUnitScalingUsesFanIn) {
  // [in = 12, out = 500]: limit sqrt(3 / 12) * 1.43 = 0.715; variance limit^2 / 3.
  const auto v = init_values(nn::uniform_unit_scaling(1.43f), {12, 500}, 4);
  const double limit = std::sqrt(3.0 / 12.0) * 1.43;
  EXPECT_LE(max_abs(v), limit);
  EXPECT_GT(max_abs(v), 0.99 * limit);  // 6000 draws reach the edge
  EXPECT_NEAR(mean_of(v), 0.0, 0.02);
  EXPECT_NEAR(variance_of(v), limit * limit / 3.0, 0.01);
  // A 1-D tensor has fan_in 1 (TF's rule: the product of every extent but the last).
  EXPECT_GT(max_abs(init_values(nn::uniform_unit_scaling(), {1000}, 5)), 1.7f);
}

TEST(NnInitializers, GlorotUniformUsesBothFans) {
  const auto v = init_values(nn::glorot_uniform(), {100, 200}, 6);
  const double limit = std::sqrt(6.0 / 300.0);
  EXPECT_LE(max_abs(v), limit);
  EXPECT_GT(max_abs(v), 0.99 * limit);
  EXPECT_NEAR(variance_of(v), limit * limit / 3.0, 0.002);
  const nn::Fans fans = nn::compute_fans({3, 5, 7});
  EXPECT_EQ(fans.fan_in, 15);
  EXPECT_EQ(fans.fan_out, 21);
}

TEST(NnInitializers, NormalAndTruncatedNormal) {
  const auto n = init_values(nn::normal(0.5f), {100, 100}, 7);
  EXPECT_NEAR(mean_of(n), 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(variance_of(n)), 0.5, 0.01);
  EXPECT_GT(max_abs(n), 1.0f);  // 10^4 normal draws pass 2 stddev many times
  const auto t = init_values(nn::truncated_normal(0.5f), {100, 100}, 7);
  EXPECT_LE(max_abs(t), 1.0f);
  EXPECT_NEAR(mean_of(t), 0.0, 0.02);
  // The standard normal truncated to [-2, 2] has stddev 0.8796.
  EXPECT_NEAR(std::sqrt(variance_of(t)), 0.5 * 0.8796, 0.01);
}

TEST(NnInitializers, SameSeedSameValues) {
  for (const nn::Initializer& init : {nn::uniform(-1, 1), nn::normal(1), nn::truncated_normal(1),
                                      nn::glorot_uniform(), nn::uniform_unit_scaling()}) {
    const auto a = init_values(init, {8, 9}, 11);
    EXPECT_EQ(a, init_values(init, {8, 9}, 11));
    EXPECT_NE(a, init_values(init, {8, 9}, 12));
  }
}

TEST(NnInitializers, FromTensorCopiesAndChecksShape) {
  Tensor source = Tensor::from_vector({2, 2}, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(init_values(nn::from_tensor(source), {2, 2}, 0), (std::vector<float>{1, 2, 3, 4}));
  expect_error([&] { init_values(nn::from_tensor(source), {4}, 0); },
               {"[from_tensor] source float32 [2, 2] does not match the parameter's shape [4]"});
}

TEST(NnInitializers, BadArgumentsAreRejected) {
  expect_error([] { nn::uniform(1, 1); }, {"[uniform] needs low < high, got [1, 1)"});
  expect_error([] { nn::normal(0); }, {"[normal] stddev must be > 0, got 0"});
  expect_error([] { nn::uniform_unit_scaling(-1); }, {"[uniform_unit_scaling] factor"});
}

TEST(NnParameterStore, CreatesInOrderWithScopes) {
  nn::ParameterStore store(5);
  Parameter a = store.create("a", {2, 3}, nn::constant(1));
  {
    auto outer = store.scope("tree_lstm");
    EXPECT_EQ(store.scoped("x"), "tree_lstm/x");
    {
      auto inner = store.scope("fc");
      store.create("weight", {3}, nn::zeros());
    }
    store.create("bias", {3}, nn::zeros(), /*trainable=*/false);
  }
  store.create("b", {1}, nn::zeros());
  std::vector<std::string> names;
  for (const Parameter& p : store.parameters()) names.push_back(p.name());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "tree_lstm/fc/weight", "tree_lstm/bias", "b"}));
  EXPECT_EQ(store.trainable_parameters().size(), 3u);
  EXPECT_TRUE(store.contains("tree_lstm/fc/weight"));
  EXPECT_FALSE(store.contains("weight"));
  EXPECT_EQ(store.get("a").identity(), a.identity());
  EXPECT_EQ(store.num_elements(), 6 + 3 + 3 + 1);
  EXPECT_EQ(store.get("a").value().to_float_vector(), std::vector<float>(6, 1.0f));
}

TEST(NnParameterStore, DuplicateAndMissingNamesThrow) {
  nn::ParameterStore store;
  store.create("w", {2}, nn::zeros());
  expect_error([&] { store.create("w", {3}, nn::zeros()); },
               {"[ParameterStore] parameter 'w' already exists (shape [2])"});
  expect_error([&] { store.get("v"); }, {"[ParameterStore] no parameter named 'v'"});
  auto scope = store.scope("s");
  store.create("u", {1}, nn::zeros());
  expect_error([&] { store.get("u"); }, {"no parameter named 'u'", "did you mean 's/u'?"});
  expect_error([&] { store.scope(""); }, {"[ParameterStore] a scope name must not be empty"});
}

TEST(NnParameterStore, MovedScopeClosesOnce) {
  nn::ParameterStore store;
  auto outer = store.scope("a");
  {
    auto inner = store.scope("b");
    auto moved = std::move(inner);
    EXPECT_EQ(store.scoped("w"), "a/b/w");
  }
  EXPECT_EQ(store.scoped("w"), "a/w");
}

TEST(NnParameterStore, SameSeedSameParameters) {
  auto build = [](std::uint64_t seed) {
    nn::ParameterStore store(seed);
    store.create("a", {4, 4}, nn::glorot_uniform());
    store.create("b", {4, 4}, nn::glorot_uniform());
    return store.get("b").value().to_float_vector();
  };
  EXPECT_EQ(build(9), build(9));
  EXPECT_NE(build(9), build(10));
}

TEST(NnParameterStore, ZeroGradClearsEveryGradient) {
  nn::ParameterStore store;
  Parameter w = store.create("w", {3}, nn::constant(2));
  Tape tape;
  tape.backward(sum(tape.parameter(w) * tape.parameter(w)));
  EXPECT_EQ(w.grad().to_float_vector(), std::vector<float>(3, 4.0f));
  store.zero_grad();
  EXPECT_EQ(w.grad().to_float_vector(), std::vector<float>(3, 0.0f));
}

TEST(NnForwardMode, NestsAndRestores) {
  EXPECT_FALSE(nn::is_training());
  Rng rng(1);
  {
    nn::ForwardMode train(true, &rng);
    EXPECT_TRUE(nn::is_training());
    EXPECT_EQ(&nn::dropout_rng(), &rng);
    {
      nn::ForwardMode eval(false);
      EXPECT_FALSE(nn::is_training());
      expect_error([] { nn::dropout_rng(); }, {"[dropout_rng] no ForwardMode with an Rng"});
    }
    EXPECT_TRUE(nn::is_training());
    EXPECT_EQ(&nn::dropout_rng(), &rng);
  }
  EXPECT_FALSE(nn::is_training());
  nn::ForwardMode no_rng(true);
  expect_error([] { nn::dropout_rng(); },
               {"[dropout_rng] a training ForwardMode was opened without an Rng"});
}

TEST(NnForwardMode, ModeDropoutOnlyWhenTraining) {
  Tape tape;
  Var x = tape.constant(Tensor::full({20, 10}, 1.0f));
  EXPECT_EQ(nn::mode_dropout(x, 0.5f).id(), x.id());  // no mode: identity, nothing recorded
  Rng rng(3);
  {
    nn::ForwardMode eval(false, &rng);
    EXPECT_EQ(nn::mode_dropout(x, 0.5f).id(), x.id());
  }
  std::vector<float> first, second;
  {
    Rng a(3);
    nn::ForwardMode train(true, &a);
    first = values_of(nn::mode_dropout(x, 0.5f));
  }
  {
    Rng b(3);
    nn::ForwardMode train(true, &b);
    second = values_of(nn::mode_dropout(x, 0.5f));
  }
  EXPECT_EQ(first, second);  // deterministic given the Rng
  const auto zeros = std::count(first.begin(), first.end(), 0.0f);
  const auto twos = std::count(first.begin(), first.end(), 2.0f);
  EXPECT_EQ(zeros + twos, 200);
  EXPECT_GT(zeros, 60);
  EXPECT_GT(twos, 60);
}

}  // namespace
}  // namespace weft::testing
