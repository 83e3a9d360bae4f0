// classification_loss (value, figures, gradient of the mean) and l2_penalty (value, gradient,
// frozen and repeated parameters), against hand-computed numbers.
#include "weft/train/losses.h"

#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(TrainLosses, ClassificationLossGivesMeanAndFigures) {
  Tape tape;
  TapeScope scope(tape);
  Var logits = tape.variable(Tensor::from_vector({2, 2}, std::vector<float>{1, 2, 3, 0}));
  const train::ClassificationLoss out =
      train::classification_loss(logits, int_tensor({2}, {1, 1}), "acc");
  const double row0 = std::log(1 + std::exp(-1.0));  // -log softmax([1, 2])[1]
  const double row1 = std::log(1 + std::exp(3.0));   // -log softmax([3, 0])[1]
  EXPECT_NEAR(out.loss.value().item(), (row0 + row1) / 2, 1e-6);
  EXPECT_NEAR(out.figures.loss_sum, row0 + row1, 1e-5);
  EXPECT_EQ(out.figures.examples, 2);
  EXPECT_DOUBLE_EQ(out.figures.metrics.value("acc"), 0.5);  // row 0 right, row 1 wrong
  tape.backward(out.loss);
  const double p0 = 1 / (1 + std::exp(1.0));  // softmax([1, 2])[0]
  const std::vector<float> g = logits.grad().to_float_vector();
  EXPECT_NEAR(g[0], p0 / 2, 1e-6);  // (softmax - onehot) / batch
  EXPECT_NEAR(g[1], -p0 / 2, 1e-6);
}

TEST(TrainLosses, L2PenaltySkipsFrozenAndRepeatedParameters) {
  Parameter p("p", Tensor::from_vector({2}, std::vector<float>{1, -2}));
  Parameter frozen("frozen", Tensor::from_vector({1}, std::vector<float>{3}), false);
  Tape tape;
  TapeScope scope(tape);
  Var penalty = train::l2_penalty(std::vector<Parameter>{p, frozen, p}, 0.5f);
  EXPECT_FLOAT_EQ(penalty.value().item(), 1.25f);  // 0.5 * (1 + 4) / 2
  tape.backward(penalty);
  EXPECT_EQ(p.grad().to_float_vector(), (std::vector<float>{0.5f, -1.0f}));
  expect_error([&] { train::l2_penalty(std::vector<Parameter>{frozen}, 1.0f); },
               {"[l2_penalty] no trainable parameters were given"});
}

}  // namespace
}  // namespace weft::testing
