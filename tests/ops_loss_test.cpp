// softmax, log_softmax, softmax_cross_entropy and l2_loss: float64 references, gradients,
// batched-vs-row agreement, stability at large logits, and the errors users see.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// Row-wise log-softmax over every non-leading element: x - max - log Σ exp(x - max).
HostArray reference_log_softmax(const HostArray& x) {
  HostArray y = x;
  const std::size_t rows = std::size_t(x.shape[0]);
  const std::size_t n = rows == 0 ? 0 : x.size() / rows;
  for (std::size_t r = 0; r < rows; ++r) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) max = std::max(max, x[r * n + j]);
    double total = 0;
    for (std::size_t j = 0; j < n; ++j) total += std::exp(x[r * n + j] - max);
    for (std::size_t j = 0; j < n; ++j) y[r * n + j] = x[r * n + j] - max - std::log(total);
  }
  return y;
}

HostArray reference_softmax(const HostArray& x) {
  HostArray y = reference_log_softmax(x);
  for (double& v : y.values) v = std::exp(v);
  return y;
}

// losses[r] = -log_softmax(logits)[r, labels[r]]
HostArray reference_cross_entropy(const HostArray& logits,
                                  const std::vector<std::int32_t>& labels) {
  const HostArray log_probs = reference_log_softmax(logits);
  const std::size_t classes = std::size_t(logits.shape[1]);
  HostArray losses(Shape{logits.shape[0]}, std::vector<double>(labels.size()));
  for (std::size_t r = 0; r < labels.size(); ++r)
    losses[r] = -log_probs[r * classes + std::size_t(labels[r])];
  return losses;
}

OpUnderTest unary_op(Var (*op)(Var)) {
  return [op](const std::vector<Var>& v) { return op(v[0]); };
}

// Logits of magnitude 50 in every row, so that a naive exp(x) / Σ exp(x) in float32 loses
// the small probabilities and a naive log(softmax) hits log(0).
Tensor large_logits() {
  return Tensor::from_vector({3, 4}, std::vector<float>{50, -50, 49, 0,       //
                                                        -50, -49.5, -50, 50,  //
                                                        -50, -50, -50, -50});
}

bool all_finite(const Tensor& t) {
  auto values = t.to_float_vector();
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

WEFT_OP_TEST(softmax, ReferenceGradientBatch) {
  auto reference = [](const std::vector<HostArray>& h) { return reference_softmax(h[0]); };
  check_op(unary_op(softmax), reference, {random_tensor({4, 5}, 1, -3, 3)});
  // Rank 3: the softmax runs over all 2 * 4 features of each row.
  check_op(unary_op(softmax), reference, {random_tensor({3, 2, 4}, 2, -3, 3)});
  check_op(unary_op(softmax), reference, {random_tensor({2, 1}, 3)});
  // 37 features: vectorized kernels' tail loops.
  check_op(unary_op(softmax), reference, {random_tensor({3, 37}, 20, -3, 3)});
  check_batched_matches_rows(unary_op(softmax), {random_tensor({6, 7}, 4, -5, 5)}, {true});
}

WEFT_OP_TEST(softmax, LargeLogitsStayFinite) {
  check_op(unary_op(softmax),
           [](const std::vector<HostArray>& h) { return reference_softmax(h[0]); },
           {large_logits()});
  Tape tape;
  Var y = softmax(tape.constant(
      Tensor::from_vector({2, 3}, std::vector<float>{1e4f, -1e4f, 0, -1e4f, -1e4f, -1e4f})));
  ASSERT_TRUE(all_finite(y.value()));
  auto v = y.value().to_float_vector();
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[1], 0.0f);
  EXPECT_FLOAT_EQ(v[3], 1.0f / 3);
}

WEFT_OP_TEST(log_softmax, ReferenceGradientBatch) {
  auto reference = [](const std::vector<HostArray>& h) { return reference_log_softmax(h[0]); };
  check_op(unary_op(log_softmax), reference, {random_tensor({4, 5}, 5, -3, 3)});
  check_op(unary_op(log_softmax), reference, {random_tensor({3, 2, 4}, 6, -3, 3)});
  check_op(unary_op(log_softmax), reference, {random_tensor({3, 37}, 21, -3, 3)});
  check_batched_matches_rows(unary_op(log_softmax), {random_tensor({6, 7}, 7, -5, 5)}, {true});
}

WEFT_OP_TEST(log_softmax, LargeLogitsStayFinite) {
  check_op(unary_op(log_softmax),
           [](const std::vector<HostArray>& h) { return reference_log_softmax(h[0]); },
           {large_logits()});
  Tape tape;
  Var y =
      log_softmax(tape.constant(Tensor::from_vector({1, 3}, std::vector<float>{1e4f, -1e4f, 0})));
  ASSERT_TRUE(all_finite(y.value()));
  auto v = y.value().to_float_vector();
  EXPECT_FLOAT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], -2e4f);  // log(0) in a naive log(softmax)
  EXPECT_FLOAT_EQ(v[2], -1e4f);
}

TEST(Op_softmax, GradientsOfTwoConsumersAccumulate) {
  // Both backward kernels add into the same input gradient.
  check_op([](const std::vector<Var>& v) { return softmax(v[0]) + log_softmax(v[0]); },
           [](const std::vector<HostArray>& h) {
             HostArray y = reference_softmax(h[0]);
             HostArray z = reference_log_softmax(h[0]);
             for (std::size_t i = 0; i < y.size(); ++i) y[i] += z[i];
             return y;
           },
           {random_tensor({3, 4}, 8, -2, 2)});
}

TEST(Op_softmax, EmptyBatchesAndRows) {
  Tape tape;
  EXPECT_EQ(softmax(tape.constant(Tensor::zeros({0, 5}))).shape(), (Shape{0, 5}));
  EXPECT_EQ(log_softmax(tape.constant(Tensor::zeros({3, 0}))).shape(), (Shape{3, 0}));
}

TEST(Op_softmax, ErrorsNameTheInput) {
  Tape tape;
  Var vector = tape.constant(random_tensor({5}, 1));
  expect_error([&] { softmax(vector); },
               {"[softmax] input must have a batch axis and features (rank >= 2), got float32 [5]",
                "[1, C]"});
  expect_error([&] { log_softmax(tape.constant(Tensor::scalar(1))); },
               {"[log_softmax] input must have", "got float32 []"});
  Var ints = tape.constant(int_tensor({2, 2}, {0, 1, 2, 3}));
  expect_error([&] { softmax(ints); }, {"[softmax] input must be float32, got int32 [2, 2]"});
}

const std::vector<std::int32_t> kLabels = {2, 0, 4, 1};

WEFT_OP_TEST(softmax_cross_entropy, ReferenceGradientBatch) {
  const Tensor labels = int_tensor({4}, kLabels);
  check_op([&](const std::vector<Var>& v) { return softmax_cross_entropy(v[0], labels); },
           [](const std::vector<HostArray>& h) { return reference_cross_entropy(h[0], kLabels); },
           {random_tensor({4, 5}, 9, -3, 3)});
  const std::vector<std::int32_t> wide_labels = {0, 36, 17};
  check_op(
      [&](const std::vector<Var>& v) {
        return softmax_cross_entropy(v[0], int_tensor({3}, wide_labels));
      },
      [&](const std::vector<HostArray>& h) { return reference_cross_entropy(h[0], wide_labels); },
      {random_tensor({3, 37}, 22, -3, 3)});
  // The labels are a second, batched input, so each row is scored with its own label.
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return softmax_cross_entropy(v[0], v[1].value()); },
      {random_tensor({4, 5}, 10, -4, 4), labels}, {true, true});
}

WEFT_OP_TEST(softmax_cross_entropy, LargeLogitsStayFinite) {
  // Row 0's label has logit -50 against a max of 50: loss ≈ 100, not inf.
  const std::vector<std::int32_t> label_values = {1, 3, 0};
  const Tensor labels = int_tensor({3}, label_values);
  check_op(
      [&](const std::vector<Var>& v) { return softmax_cross_entropy(v[0], labels); },
      [&](const std::vector<HostArray>& h) { return reference_cross_entropy(h[0], label_values); },
      {large_logits()});
  Tape tape;
  Var logits =
      tape.variable(Tensor::from_vector({2, 2}, std::vector<float>{1e4f, -1e4f, -1e4f, 1e4f}));
  Var losses = softmax_cross_entropy(logits, int_tensor({2}, {1, 1}));
  ASSERT_TRUE(all_finite(losses.value()));
  EXPECT_FLOAT_EQ(losses.value().to_float_vector()[0], 2e4f);
  EXPECT_FLOAT_EQ(losses.value().to_float_vector()[1], 0.0f);
  tape.backward(losses, Tensor::full({2}, 1.0f));
  EXPECT_EQ(logits.grad().to_float_vector(), (std::vector<float>{1, -1, 0, 0}));
}

TEST(Op_softmax_cross_entropy, GradientsOfTwoConsumersAccumulate) {
  const Tensor a = int_tensor({3}, {0, 1, 2}), b = int_tensor({3}, {2, 2, 0});
  check_op(
      [&](const std::vector<Var>& v) {
        return softmax_cross_entropy(v[0], a) + softmax_cross_entropy(v[0], b);
      },
      [](const std::vector<HostArray>& h) {
        HostArray y = reference_cross_entropy(h[0], {0, 1, 2});
        HostArray z = reference_cross_entropy(h[0], {2, 2, 0});
        for (std::size_t i = 0; i < y.size(); ++i) y[i] += z[i];
        return y;
      },
      {random_tensor({3, 3}, 11, -2, 2)});
}

TEST(Op_softmax_cross_entropy, EmptyBatch) {
  Tape tape;
  Var losses = softmax_cross_entropy(tape.constant(Tensor::zeros({0, 3})), int_tensor({0}, {}));
  EXPECT_EQ(losses.shape(), (Shape{0}));
}

TEST(Op_softmax_cross_entropy, ErrorsNameLogitsAndLabels) {
  Tape tape;
  Var logits = tape.constant(random_tensor({4, 5}, 12));
  const char* op = "[softmax_cross_entropy] ";
  expect_error([&] { softmax_cross_entropy(logits, random_tensor({4}, 13)); },
               {op, "labels must be int32 class ids, got float32 [4]"});
  expect_error(
      [&] {
        softmax_cross_entropy(logits, int_tensor({3}, {0, 1, 2}));
      },
      {op, "labels int32 [3] do not match logits float32 [4, 5]: one label per row"});
  expect_error(
      [&] {
        softmax_cross_entropy(logits, int_tensor({4, 1}, {0, 1, 2, 3}));
      },
      {op, "labels int32 [4, 1] do not match logits float32 [4, 5]"});
  expect_error(
      [&] {
        softmax_cross_entropy(logits, int_tensor({4}, {0, 1, 5, 3}));
      },
      {op, "labels value 5 at position 2 is out of range [0, 5)"});
  expect_error(
      [&] {
        softmax_cross_entropy(logits, int_tensor({4}, {0, -1, 2, 3}));
      },
      {op, "labels value -1 at position 1 is out of range [0, 5)"});
  expect_error(
      [&] { softmax_cross_entropy(tape.constant(random_tensor({5}, 14)), int_tensor({1}, {0})); },
      {op, "logits must have rank 2 ([batch, classes]), got float32 [5]"});
  expect_error(
      [&] {
        softmax_cross_entropy(tape.constant(random_tensor({2, 3, 4}, 15)), int_tensor({2}, {0, 1}));
      },
      {op, "logits must have rank 2", "got float32 [2, 3, 4]"});
  expect_error(
      [&] {
        softmax_cross_entropy(tape.constant(int_tensor({2, 2}, {0, 1, 2, 3})),
                              int_tensor({2}, {0, 1}));
      },
      {op, "logits must be float32, got int32 [2, 2]"});
}

HostArray reference_l2_loss(const HostArray& x) {
  double total = 0;
  for (double v : x.values) total += v * v;
  return HostArray(Shape{}, {0.5 * total});
}

WEFT_OP_TEST(l2_loss, ReferenceGradient) {
  auto reference = [](const std::vector<HostArray>& h) { return reference_l2_loss(h[0]); };
  check_op(unary_op(l2_loss), reference, {random_tensor({4, 5}, 16, -2, 2)});
  check_op(unary_op(l2_loss), reference, {random_tensor({2, 3, 2}, 17, -2, 2)});
  check_op(unary_op(l2_loss), reference, {random_tensor({}, 18, -2, 2)});
  // A length that is no multiple of any vector width, so a kernel's tail loop is exercised.
  check_op(unary_op(l2_loss), reference, {random_tensor({37}, 19, -2, 2)});
}

TEST(Op_l2_loss, ScalarOutputAndErrors) {
  Tape tape;
  Var y = l2_loss(tape.constant(Tensor::from_vector({2, 2}, std::vector<float>{1, -2, 3, 0})));
  EXPECT_EQ(y.shape(), Shape{});
  EXPECT_FLOAT_EQ(y.value().item(), 7.0f);
  expect_error(
      [&] {
        l2_loss(tape.constant(int_tensor({2}, {1, 2})));
      },
      {"[l2_loss] input must be float32, got int32 [2]"});
}

}  // namespace
}  // namespace weft::testing
