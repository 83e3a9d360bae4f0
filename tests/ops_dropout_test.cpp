// dropout: the mask recomputed here from mix64 (so the kernel is held to its stated formula),
// gradients, reproducibility by seed, the kept fraction, the identity outside training, and
// the drop_prob errors.
#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// The op draws one seed from the Rng; element i is kept when the top 24 bits of
// mix64(seed, i), read as a uniform in [0, 1), fall below keep_prob.
double reference_mask(std::uint64_t seed, std::uint64_t i, float keep_prob) {
  const float u = float(mix64(seed, i) >> 40) * 0x1.0p-24f;
  return u < keep_prob ? 1.0 / keep_prob : 0.0;
}

std::vector<float> values_of(Var v) { return v.value().to_float_vector(); }

WEFT_OP_TEST(dropout, ReferenceMaskAndGradient) {
  constexpr std::uint64_t kRngSeed = 1234;
  constexpr float kDrop = 0.4f;
  const std::uint64_t mask_seed = Rng(kRngSeed).next_u64();
  auto op = [](const std::vector<Var>& v) {
    Rng rng(kRngSeed);  // a fresh Rng per call: every run draws the same mask
    return dropout(v[0], kDrop, rng);
  };
  auto reference = [mask_seed](const std::vector<HostArray>& h) {
    HostArray y = h[0];
    for (std::size_t i = 0; i < y.size(); ++i) y[i] *= reference_mask(mask_seed, i, 1.0f - kDrop);
    return y;
  };
  check_op(op, reference, {random_tensor({6, 5}, 1, -2, 2)});
  check_op(op, reference, {random_tensor({2, 3, 4}, 2, -2, 2)});
}

TEST(Op_dropout, DroppedElementsGetNoGradient) {
  Tape tape;
  Rng rng(7);
  Var x = tape.variable(Tensor::full({40, 10}, 1.0f));
  Var y = dropout(x, 0.5f, rng);
  tape.backward(y, Tensor::full({40, 10}, 3.0f));
  const auto kept = values_of(y);
  const auto grad = x.grad().to_float_vector();
  for (std::size_t i = 0; i < kept.size(); ++i) {
    ASSERT_TRUE(kept[i] == 0.0f || kept[i] == 2.0f) << "element " << i << " is " << kept[i];
    EXPECT_FLOAT_EQ(grad[i], 3.0f * kept[i]) << "element " << i;
  }
}

TEST(Op_dropout, SameSeedSameMaskOtherSeedOtherMask) {
  Tape tape;
  Var x = tape.constant(random_tensor({50, 20}, 3, 0.5f, 1.5f));
  Rng a(42), b(42), c(43);
  const auto first = values_of(dropout(x, 0.5f, a));
  EXPECT_EQ(values_of(dropout(x, 0.5f, b)), first);
  const auto other = values_of(dropout(x, 0.5f, c));
  const auto next = values_of(dropout(x, 0.5f, a));  // the Rng advanced: a new mask
  std::size_t differ_other = 0, differ_next = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    differ_other += first[i] != other[i];
    differ_next += first[i] != next[i];
  }
  // Independent masks at keep 0.5 disagree on about half the elements.
  EXPECT_GT(differ_other, first.size() / 3);
  EXPECT_GT(differ_next, first.size() / 3);
}

TEST(Op_dropout, MaskDependsOnlyOnSeedAndPosition) {
  // Same seed, different shapes and lengths: element i gets the same decision.
  Tape tape;
  Rng a(9), b(9);
  const auto long_row = values_of(dropout(tape.constant(Tensor::full({1000}, 1.0f)), 0.3f, a));
  const auto short_grid = values_of(dropout(tape.constant(Tensor::full({20, 10}, 1.0f)), 0.3f, b));
  for (std::size_t i = 0; i < short_grid.size(); ++i)
    ASSERT_EQ(short_grid[i], long_row[i]) << "element " << i;
}

TEST(Op_dropout, KeptFractionMatchesKeepProb) {
  Tape tape;
  Var x = tape.constant(Tensor::full({1000, 100}, 1.0f));  // 100k elements
  Rng rng(2024);
  for (float drop : {0.1f, 0.3f, 0.5f}) {
    SCOPED_TRACE("drop_prob " + std::to_string(drop));
    const auto y = values_of(dropout(x, drop, rng));
    const double keep = 1.0 - drop;
    double kept = 0, total = 0;
    for (float v : y) {
      kept += v != 0.0f;
      total += v;
    }
    EXPECT_NEAR(kept / double(y.size()), keep, 0.01 * keep);
    // Inverted dropout keeps the expectation: the mean stays 1.
    EXPECT_NEAR(total / double(y.size()), 1.0, 0.01);
  }
}

TEST(Op_dropout, IdentityOutsideTrainingOrWithoutDropping) {
  Tape tape;
  Var x = tape.variable(random_tensor({4, 3}, 4));
  const std::size_t nodes = tape.size();
  Rng rng(5);
  EXPECT_EQ(dropout(x, 0.5f, rng, /*training=*/false).id(), x.id());
  EXPECT_EQ(dropout(x, 0.0f, rng).id(), x.id());
  EXPECT_EQ(tape.size(), nodes) << "an identity dropout must record no node";
  EXPECT_EQ(rng.next_u64(), Rng(5).next_u64()) << "an identity dropout must not draw";
}

TEST(Op_dropout, NoGradientStateWhenNothingNeedsIt) {
  Tape tape;
  Rng rng(6);
  Var y = dropout(tape.constant(random_tensor({3, 3}, 5)), 0.5f, rng);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(tape.node(y.id()).saved[0].defined());
}

TEST(Op_dropout, DropProbOutsideRangeIsRejected) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 3}, 6));
  Rng rng(1);
  expect_error([&] { dropout(x, 1.0f, rng); },
               {"[dropout] drop_prob 1 is outside [0, 1) for input float32 [2, 3]",
                "probability of zeroing"});
  expect_error([&] { dropout(x, -0.25f, rng); }, {"[dropout] drop_prob -0.25 is outside [0, 1)"});
  expect_error([&] { dropout(x, 1.5f, rng, /*training=*/false); },
               {"[dropout] drop_prob 1.5 is outside [0, 1)"});
  expect_error([&] { dropout(x, std::nanf(""), rng); }, {"[dropout] drop_prob", "outside [0, 1)"});
  expect_error(
      [&] {
        dropout(tape.constant(int_tensor({2}, {1, 2})), 0.5f, rng);
      },
      {"[dropout] input must be float32, got int32 [2]"});
}

}  // namespace
}  // namespace weft::testing
