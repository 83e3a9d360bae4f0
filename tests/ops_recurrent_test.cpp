// The fused LSTM cell state: reference, gradients for 1..3 children, batching, errors.
#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// c[r, j] = sum_k sigmoid(f_k[r, j]) x_k[r, j] + sigmoid(i[r, j]) tanh(g[r, j])
HostArray reference_cell_state(const std::vector<HostArray>& h) {
  const HostArray& gates = h[0];
  const HostArray& children = h[1];
  const std::int64_t rows = gates.shape[0];
  const std::int64_t n = (gates.shape[1] - children.shape[1]) / 2;
  const std::int64_t k = children.shape[1] / n;
  HostArray c(Shape{rows, n}, std::vector<double>(std::size_t(rows * n), 0.0));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      auto gate = [&](std::int64_t block) {
        return gates[std::size_t(r * (k + 2) * n + block * n + j)];
      };
      double value = sigmoid_ref(gate(k)) * std::tanh(gate(k + 1));
      for (std::int64_t child = 0; child < k; ++child)
        value += sigmoid_ref(gate(child)) * children[std::size_t(r * k * n + child * n + j)];
      c[std::size_t(r * n + j)] = value;
    }
  return c;
}

WEFT_OP_TEST(lstm_cell_state, OneTwoAndThreeChildren) {
  for (std::int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("children " + std::to_string(k));
    const std::int64_t n = 3, rows = 4;
    check_op(
        [](const std::vector<Var>& v) { return lstm_cell_state(v[0], v[1]); }, reference_cell_state,
        {random_tensor({rows, (k + 2) * n}, 50 + k, -2, 2), random_tensor({rows, k * n}, 60 + k)});
  }
}

TEST(Op_lstm_cell_state, EqualsTheUnfusedExpression) {
  Tape tape;
  Var gates = tape.constant(random_tensor({5, 16}, 70, -2, 2));
  Var children = tape.constant(random_tensor({5, 8}, 71));
  auto [fl, fr, i, g] = split<4>(gates);
  Var unfused = sigmoid(fl) * slice(children, 1, 0, 4) + sigmoid(fr) * slice(children, 1, 4, 4) +
                sigmoid(i) * tanh(g);
  auto fused = lstm_cell_state(gates, children).value().to_float_vector();
  auto expected = unfused.value().to_float_vector();
  for (std::size_t j = 0; j < expected.size(); ++j) EXPECT_NEAR(fused[j], expected[j], 1e-6);
}

TEST(Op_lstm_cell_state, BatchedRowsEqualSingleRows) {
  check_batched_matches_rows([](const std::vector<Var>& v) { return lstm_cell_state(v[0], v[1]); },
                             {random_tensor({6, 20}, 72, -2, 2), random_tensor({6, 10}, 73)},
                             {true, true});
}

TEST(Op_lstm_cell_state, ShapesThatDoNotFitAreRejected) {
  Tape tape;
  Var gates = tape.constant(random_tensor({2, 10}, 1));
  expect_error(
      [&] {
        lstm_cell_state(gates, tape.constant(random_tensor({2, 3}, 2)));
      },
      {"[lstm_cell_state] gates float32 [2, 10] do not fit children float32 [2, 3]",
       "[B, (K+2)N]"});
  expect_error(
      [&] {
        lstm_cell_state(gates, tape.constant(random_tensor({3, 4}, 3)));
      },
      {"[lstm_cell_state] gates float32 [2, 10] do not fit children float32 [3, 4]"});
}

}  // namespace
}  // namespace weft::testing
