// The fused LSTM cell: the cell state (1..3 children, gates wider than the state's columns,
// recurrent dropout on the candidate) and the output h = sigmoid(o) tanh(c), each against a
// float64 reference with finite-difference gradients and against the unfused expression
// (values and gradients); batching; errors.
#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// c[r, j] = sum_k sigmoid(f_k[r, j]) x_k[r, j] + sigmoid(i[r, j]) tanh(g[r, j]) m[r, j], the
// gates read from the first (K+2)N columns of rows of any width, m = mask or 1.
HostArray reference_cell_state(const HostArray& gates, const HostArray& children, std::int64_t n,
                               const HostArray* mask = nullptr) {
  const std::int64_t rows = gates.shape[0], width = gates.shape[1];
  const std::int64_t k = children.shape[1] / n;
  HostArray c(Shape{rows, n}, std::vector<double>(std::size_t(rows * n), 0.0));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      auto gate = [&](std::int64_t block) { return gates[std::size_t(r * width + block * n + j)]; };
      const double m = mask ? (*mask)[std::size_t(r * n + j)] : 1.0;
      double value = sigmoid_ref(gate(k)) * std::tanh(gate(k + 1)) * m;
      for (std::int64_t child = 0; child < k; ++child)
        value += sigmoid_ref(gate(child)) * children[std::size_t(r * k * n + child * n + j)];
      c[std::size_t(r * n + j)] = value;
    }
  return c;
}

HostArray reference_cell_state_inferred(const std::vector<HostArray>& h) {
  return reference_cell_state(h[0], h[1], (h[0].shape[1] - h[1].shape[1]) / 2);
}

// h[r, j] = sigmoid(gates[r, offset + j]) tanh(c[r, j])
HostArray reference_hidden(const HostArray& gates, std::int64_t offset, const HostArray& c) {
  const std::int64_t rows = c.shape[0], n = c.shape[1], width = gates.shape[1];
  HostArray h(c.shape, std::vector<double>(c.size(), 0.0));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j)
      h[std::size_t(r * n + j)] = sigmoid_ref(gates[std::size_t(r * width + offset + j)]) *
                                  std::tanh(c[std::size_t(r * n + j)]);
  return h;
}

// The mask dropout(x, p, Rng(seed)) applies to a [rows, n] input: 0 or 1 / (1 - p).
HostArray dropout_mask_of(std::int64_t rows, std::int64_t n, float p, std::uint64_t seed) {
  Tape tape;
  Rng rng(seed);
  return HostArray(
      dropout(tape.constant(Tensor::full(Shape{rows, n}, 1.0f)), p, rng, true).value());
}

WEFT_OP_TEST(lstm_cell_state, OneTwoAndThreeChildren) {
  for (std::int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("children " + std::to_string(k));
    const std::int64_t n = 3, rows = 4;
    check_op(
        [](const std::vector<Var>& v) { return lstm_cell_state(v[0], v[1]); },
        reference_cell_state_inferred,
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

WEFT_OP_TEST(lstm_cell_state, GatesWiderThanTheStateWithTheHiddenSizeGiven) {
  // An LSTM's gates [f | i | g | o] and a tree cell's [f_1 f_2 | i | g | o]: o is not read.
  for (std::int64_t k = 1; k <= 2; ++k) {
    SCOPED_TRACE("children " + std::to_string(k));
    const std::int64_t n = 4, rows = 3;
    check_op([n](const std::vector<Var>& v) { return lstm_cell_state(v[0], v[1], n); },
             [n](const std::vector<HostArray>& h) { return reference_cell_state(h[0], h[1], n); },
             {random_tensor({rows, (k + 3) * n}, 80 + k, -2, 2), random_tensor({rows, k * n}, 90)});
  }
}

WEFT_OP_TEST(lstm_cell_state, RecurrentDropoutOnTheCandidate) {
  const std::int64_t n = 5, rows = 4, k = 2;
  const float p = 0.4f;
  const HostArray mask = dropout_mask_of(rows, n, p, 17);
  int dropped = 0;
  for (double m : mask.values) dropped += m == 0.0;
  ASSERT_GT(dropped, 0);  // the test needs both kinds of element
  ASSERT_LT(dropped, int(mask.size()));
  check_op(
      [&](const std::vector<Var>& v) {
        Rng rng(17);  // the same mask on every evaluation
        return lstm_cell_state(v[0], v[1], n, p, &rng);
      },
      [&](const std::vector<HostArray>& h) { return reference_cell_state(h[0], h[1], n, &mask); },
      {random_tensor({rows, (k + 3) * n}, 95, -2, 2), random_tensor({rows, k * n}, 96)});
}

WEFT_OP_TEST(lstm_hidden, OutputGateReadInPlace) {
  const std::int64_t n = 3, rows = 4;
  for (std::int64_t offset : {0, 2, 6}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    check_op(
        [offset](const std::vector<Var>& v) { return lstm_hidden(v[0], offset, v[1]); },
        [offset](const std::vector<HostArray>& h) { return reference_hidden(h[0], offset, h[1]); },
        {random_tensor({rows, 9}, 100 + offset, -2, 2), random_tensor({rows, n}, 110, -2, 2)});
  }
}

// The tree cell as its layers wrote it before the fused ops: slices, sigmoid, tanh, dropout,
// products and sums. The fused pair gives the same values and the same gradients.
TEST(Op_lstm_cell_state, FusedCellEqualsTheUnfusedExpressionWithDropout) {
  const std::int64_t n = 6, rows = 5, k = 2;
  const Tensor gates_value = random_tensor({rows, (k + 3) * n}, 120, -2, 2);
  const Tensor children_value = random_tensor({rows, k * n}, 121);
  const Tensor cotangent = random_tensor({rows, 2 * n}, 122);
  auto run = [&](bool fused) {
    Tape tape;
    Var gates = tape.variable(gates_value), children = tape.variable(children_value);
    Rng rng(33);
    Var h, c;
    if (fused) {
      c = lstm_cell_state(gates, children, n, 0.3f, &rng);
      h = lstm_hidden(gates, (k + 2) * n, c);
    } else {
      c = sigmoid(slice(gates, 1, k * n, n)) *
          dropout(tanh(slice(gates, 1, (k + 1) * n, n)), 0.3f, rng);
      for (std::int64_t child = 0; child < k; ++child)
        c = c + sigmoid(slice(gates, 1, child * n, n)) * slice(children, 1, child * n, n);
      h = sigmoid(slice(gates, 1, (k + 2) * n, n)) * tanh(c);
    }
    Var hc = concat({h, c}, 1);
    tape.backward(hc, cotangent);
    return std::vector<std::vector<float>>{hc.value().to_float_vector(),
                                           gates.grad().to_float_vector(),
                                           children.grad().to_float_vector()};
  };
  const auto fused = run(true), unfused = run(false);
  const char* what[] = {"[h | c]", "d gates", "d children"};
  for (std::size_t part = 0; part < fused.size(); ++part) {
    SCOPED_TRACE(what[part]);
    ASSERT_EQ(fused[part].size(), unfused[part].size());
    for (std::size_t j = 0; j < fused[part].size(); ++j)
      EXPECT_NEAR(fused[part][j], unfused[part][j], 1e-5) << "element " << j;
  }
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

TEST(Op_lstm_hidden, BatchedRowsEqualSingleRows) {
  check_batched_matches_rows([](const std::vector<Var>& v) { return lstm_hidden(v[0], 4, v[1]); },
                             {random_tensor({6, 12}, 74, -2, 2), random_tensor({6, 4}, 75)},
                             {true, true});
}

TEST(Op_lstm_cell_state, HiddenSizesAndDropoutThatDoNotFitAreRejected) {
  Tape tape;
  Var gates = tape.constant(random_tensor({2, 10}, 1));
  Var children = tape.constant(random_tensor({2, 4}, 2));
  expect_error([&] { lstm_cell_state(gates, children, 3); },
               {"[lstm_cell_state] gates float32 [2, 10] do not fit children float32 [2, 4]",
                "hidden size 3"});
  expect_error([&] { lstm_cell_state(gates, children, 4); },  // K = 1 needs 12 columns
               {"with hidden size 4", "W >= (K+2)N"});
  expect_error([&] { lstm_cell_state(gates, children, 2, 0.5f); },
               {"candidate_drop_prob 0.5 needs an Rng"});
  Rng rng(1);
  expect_error([&] { lstm_cell_state(gates, children, 2, 1.0f, &rng); },
               {"candidate_drop_prob 1 is outside [0, 1)"});
}

TEST(Op_lstm_hidden, OutputGatesOutsideTheGatesAreRejected) {
  Tape tape;
  Var gates = tape.constant(random_tensor({2, 10}, 1));
  expect_error(
      [&] {
        lstm_hidden(gates, 8, tape.constant(random_tensor({2, 3}, 2)));
      },
      {"[lstm_hidden] gates float32 [2, 10] have no output gate at columns [8, 11)",
       "c float32 [2, 3]"});
  expect_error(
      [&] {
        lstm_hidden(gates, 0, tape.constant(random_tensor({3, 3}, 2)));
      },
      {"[lstm_hidden]", "c float32 [3, 3]"});
}

}  // namespace
}  // namespace weft::testing
