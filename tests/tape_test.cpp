// The tape: leaves, parameters, shared sub-graphs, inference mode and misuse.
#include "weft/autodiff/tape.h"

#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(Tape, ValueUsedTwiceGetsTheSumOfBothGradients) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({1, 2}, std::vector<float>{0.5f, -1.0f}));
  Var shared = tanh(x);
  Var y = mul(shared, shared) + shared;  // d/dx = (2 tanh x + 1)(1 - tanh² x)
  tape.backward(sum(y));
  auto g = x.grad().to_float_vector();
  for (int i = 0; i < 2; ++i) {
    double t = std::tanh(x.value().to_float_vector()[i]);
    EXPECT_NEAR(g[i], (2 * t + 1) * (1 - t * t), 1e-6);
  }
}

TEST(Tape, ParameterIsOneLeafPerRecording) {
  Parameter p("p", Tensor::from_vector({2}, std::vector<float>{1, 2}));
  Tape tape;
  TapeScope scope(tape);
  Var a = p;
  Var b = p;
  EXPECT_EQ(a.id(), b.id());
  const std::size_t nodes = tape.size();
  tape.clear();
  Var c = p;  // a new recording makes a new leaf
  EXPECT_EQ(tape.size(), 1u);
  EXPECT_LT(c.id(), nodes);
}

TEST(Tape, FrozenParameterGetsNoGradient) {
  Parameter frozen("frozen", Tensor::from_vector({2}, std::vector<float>{1, 2}), false);
  Tape tape;
  TapeScope scope(tape);
  Var x = tape.variable(Tensor::from_vector({2}, std::vector<float>{3, 4}));
  tape.backward(sum(x * Var(frozen)));
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(frozen.grad().to_float_vector(), (std::vector<float>{0, 0}));
}

TEST(Tape, InferenceModeRecordsNoBackward) {
  Tape tape;
  tape.set_grad_enabled(false);
  Var x = tape.variable(Tensor::from_vector({2}, std::vector<float>{1, 2}));
  Var y = sum(tanh(x));
  EXPECT_FALSE(y.requires_grad());
  tape.backward(y);  // nothing to do, and no error
  EXPECT_FALSE(x.grad().defined());
}

TEST(Tape, ConstantsGetNoGradient) {
  Tape tape;
  Var c = tape.constant(Tensor::from_vector({2}, std::vector<float>{1, 2}));
  Var x = tape.variable(Tensor::from_vector({2}, std::vector<float>{3, 4}));
  tape.backward(sum(c * x));
  EXPECT_FALSE(c.grad().defined());
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{1, 2}));
}

TEST(Tape, MisuseIsReported) {
  Tape tape, other;
  Var x = tape.variable(Tensor::from_vector({2}, std::vector<float>{1, 2}));
  Var z = other.variable(Tensor::from_vector({2}, std::vector<float>{1, 2}));
  expect_error([&] { add(x, z); }, {"[autodiff] an op mixes Vars of different tapes"});
  expect_error([&] { tape.backward(x); }, {"[backward] output float32 [2] is not a single number"});
  expect_error([&] { tape.backward(x, Tensor::zeros({3})); },
               {"[backward] cotangent float32 [3] does not match output float32 [2]"});
  expect_error([&] { tape.variable(Tensor::zeros({1}, DType::kInt32)); },
               {"[variable] a differentiable leaf must be float32"});
  expect_error([] { Parameter("w", Tensor::zeros({1}, DType::kInt32)); },
               {"[parameter] parameter 'w' must be float32"});
}

TEST(Tape, DeepChainBackwardUsesNoRecursion) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({1}, std::vector<float>{0.0f}));
  Var h = x;
  for (int i = 0; i < 200000; ++i) h = h + 1.0f;
  tape.backward(sum(h));
  EXPECT_EQ(x.grad().to_float_vector()[0], 1.0f);
  EXPECT_EQ(h.value().to_float_vector()[0], 200000.0f);
}

}  // namespace
}  // namespace weft::testing
