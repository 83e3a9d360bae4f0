// The fused LSTM cell: the cell state (1..3 children, in one tensor or apart, gates wider than
// the state's columns, recurrent dropout on the candidate), the cell state of a linear layer's
// gates (activated in place), and the output h = sigmoid(o) tanh(c), each against a float64
// reference with finite-difference gradients and against the unfused expression (values and
// gradients); batching; errors.
#include <cmath>

#include "nn_test_util.h"
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

// The children given apart (a Var each, read where they lie on the CPU): against the reference of
// their concatenation, gradients of the gates and of every child by finite differences; one
// child given twice gets both blocks' gradients.
std::vector<HostArray> children_of(const std::vector<HostArray>& h, std::size_t first,
                                   std::size_t count) {
  return {h.begin() + std::ptrdiff_t(first), h.begin() + std::ptrdiff_t(first + count)};
}

WEFT_OP_TEST(lstm_cell_state, ChildrenApart) {
  const std::int64_t n = 3, rows = 4;
  for (std::size_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("children " + std::to_string(k));
    std::vector<Tensor> inputs{random_tensor({rows, std::int64_t(k + 3) * n}, 400 + k, -2, 2)};
    for (std::size_t child = 0; child < k; ++child)
      inputs.push_back(random_tensor({rows, n}, 410 + 10 * k + child));
    check_op(
        [k](const std::vector<Var>& v) {
          return lstm_cell_state(v[0], {&v[1], k}, n);
        },
        [k](const std::vector<HostArray>& h) {
          return reference_cell_state(h[0], concat_cols(children_of(h, 1, k)), n);
        },
        inputs);
  }
  SCOPED_TRACE("one child given twice");
  check_op(
      [](const std::vector<Var>& v) {
        return lstm_cell_state(v[0], std::vector<Var>{v[1], v[1]}, n);
      },
      [](const std::vector<HostArray>& h) {
        return reference_cell_state(h[0], concat_cols({h[1], h[1]}), n);
      },
      {random_tensor({rows, 5 * n}, 440, -2, 2), random_tensor({rows, n}, 441)});
}

WEFT_OP_TEST(lstm_cell_state, ChildrenApartWithRecurrentDropout) {
  const std::int64_t n = 5, rows = 4;
  const float p = 0.4f;
  const HostArray mask = dropout_mask_of(rows, n, p, 23);
  check_op(
      [&](const std::vector<Var>& v) {
        Rng rng(23);  // the same mask on every evaluation
        return lstm_cell_state(v[0], std::vector<Var>{v[1], v[2]}, n, p, &rng);
      },
      [&](const std::vector<HostArray>& h) {
        return reference_cell_state(h[0], concat_cols({h[1], h[2]}), n, &mask);
      },
      {random_tensor({rows, 5 * n}, 450, -2, 2), random_tensor({rows, n}, 451),
       random_tensor({rows, n}, 452)});
}

// Reading the children apart runs the concatenated kernel's arithmetic row by row: the same bits,
// forward and backward (c, then the gradients of the gates and of each child).
TEST(Op_lstm_cell_state, ChildrenApartGiveTheConcatenatedBits) {
  const std::int64_t n = 6, rows = 7;
  const Tensor g = random_tensor({rows, 5 * n}, 460, -2, 2);
  const Tensor left = random_tensor({rows, n}, 461), right = random_tensor({rows, n}, 462);
  const Tensor dc = random_tensor({rows, n}, 463);
  auto run = [&](bool apart) {
    Tape tape;
    Var gates = tape.variable(g), l = tape.variable(left), r = tape.variable(right);
    Rng rng(29);
    Var c = apart ? lstm_cell_state(gates, std::vector<Var>{l, r}, n, 0.3f, &rng)
                  : lstm_cell_state(gates, concat({l, r}), n, 0.3f, &rng);
    tape.backward(c, dc);
    return std::vector<std::vector<float>>{c.value().to_float_vector(),
                                           gates.grad().to_float_vector(),
                                           l.grad().to_float_vector(), r.grad().to_float_vector()};
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(Op_lstm_cell_state, ChildrenApartBatchedRowsEqualSingleRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) {
        return lstm_cell_state(v[0], std::vector<Var>{v[1], v[2]}, 4);
      },
      {random_tensor({6, 20}, 470, -2, 2), random_tensor({6, 4}, 471), random_tensor({6, 4}, 472)},
      {true, true, true});
}

TEST(Op_lstm_cell_state, ChildrenApartThatDoNotFitAreRejected) {
  Tape tape;
  Var gates = tape.constant(random_tensor({2, 20}, 1));
  Var child = tape.constant(random_tensor({2, 4}, 2));
  expect_error([&] { lstm_cell_state(gates, std::span<const Var>(), 4); },
               {"[lstm_cell_state] no children"});
  expect_error(
      [&] {
        lstm_cell_state(gates, std::vector<Var>{child, tape.constant(random_tensor({3, 4}, 3))}, 4);
      },
      {"[lstm_cell_state] child 1 is float32 [3, 4]", "expected [2, 4]"});
  expect_error(
      [&] {
        lstm_cell_state(gates, std::vector<Var>{child, child, child, child}, 4);
      },
      {"[lstm_cell_state] gates float32 [2, 20] do not fit 4 children of hidden size 4"});
}

// lstm_cell_state of gates = x · W + b (h: x, W, b, children), in float64.
HostArray reference_linear_cell_state(const std::vector<HostArray>& h,
                                      const HostArray* mask = nullptr) {
  const HostArray gates = affine(h[0], h[1], h[2]);
  return reference_cell_state(gates, h[3], (gates.shape[1] - h[3].shape[1]) / 2, mask);
}

WEFT_OP_TEST(linear_lstm_cell_state, OneTwoAndThreeChildren) {
  for (std::int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("children " + std::to_string(k));
    const std::int64_t n = 3, rows = 4, in = 5;
    check_op(
        [](const std::vector<Var>& v) { return linear_lstm_cell_state(v[0], v[1], v[2], v[3]); },
        [](const std::vector<HostArray>& h) { return reference_linear_cell_state(h); },
        {random_tensor({rows, in}, 150 + k), random_tensor({in, (k + 2) * n}, 160 + k),
         random_tensor({(k + 2) * n}, 170 + k), random_tensor({rows, k * n}, 180 + k)});
  }
}

WEFT_OP_TEST(linear_lstm_cell_state, RecurrentDropoutOnTheCandidate) {
  const std::int64_t n = 5, rows = 4, k = 2, in = 3;
  const float p = 0.4f;
  const HostArray mask = dropout_mask_of(rows, n, p, 19);
  check_op(
      [&](const std::vector<Var>& v) {
        Rng rng(19);  // the same mask on every evaluation
        return linear_lstm_cell_state(v[0], v[1], v[2], v[3], p, &rng);
      },
      [&](const std::vector<HostArray>& h) { return reference_linear_cell_state(h, &mask); },
      {random_tensor({rows, in}, 190), random_tensor({in, (k + 2) * n}, 191),
       random_tensor({1, (k + 2) * n}, 192), random_tensor({rows, k * n}, 193)});
}

// The fused op against the composition it replaces, lstm_cell_state(linear(x, W, b), children):
// the same c and the same gradients for every input, also when only some inputs need one (the
// bias's gradient is then summed from a gradient of the gates that nothing else asked for).
TEST(Op_linear_lstm_cell_state, EqualsTheCellOfTheLinearLayer) {
  const std::int64_t n = 6, rows = 5, k = 2, in = 7;
  const Tensor values[] = {random_tensor({rows, in}, 200), random_tensor({in, (k + 2) * n}, 201),
                           random_tensor({(k + 2) * n}, 202), random_tensor({rows, k * n}, 203)};
  const Tensor cotangent = random_tensor({rows, n}, 204);
  for (int trainable = 1; trainable < 16; ++trainable) {
    SCOPED_TRACE("trainable inputs (bit mask of x, W, b, children): " + std::to_string(trainable));
    auto run = [&](bool fused) {
      Tape tape;
      std::vector<Var> v;
      for (int i = 0; i < 4; ++i)
        v.push_back(trainable & (1 << i) ? tape.variable(values[i]) : tape.constant(values[i]));
      Rng rng(34);
      Var c = fused ? linear_lstm_cell_state(v[0], v[1], v[2], v[3], 0.3f, &rng)
                    : lstm_cell_state(linear(v[0], v[1], v[2]), v[3], n, 0.3f, &rng);
      tape.backward(c, cotangent);
      std::vector<std::vector<float>> out{c.value().to_float_vector()};
      for (int i = 0; i < 4; ++i)
        if (trainable & (1 << i)) out.push_back(v[std::size_t(i)].grad().to_float_vector());
      return out;
    };
    const auto fused = run(true), composed = run(false);
    ASSERT_EQ(fused.size(), composed.size());
    for (std::size_t part = 0; part < fused.size(); ++part) {
      SCOPED_TRACE("part " + std::to_string(part) + " (0: c, then the gradients in input order)");
      ASSERT_EQ(fused[part].size(), composed[part].size());
      for (std::size_t j = 0; j < fused[part].size(); ++j)
        EXPECT_NEAR(fused[part][j], composed[part][j], 1e-5) << "element " << j;
    }
  }
}

// One value as both the layer's input and the children (a cell fed its own state): its two
// gradients add up, the cell's written first, linear's added.
TEST(Op_linear_lstm_cell_state, TheInputAsTheChildrenGetsBothGradients) {
  const std::int64_t n = 4, rows = 3, k = 2;
  const Tensor x_value = random_tensor({rows, k * n}, 220),
               w_value = random_tensor({k * n, 16}, 221);
  const Tensor b_value = random_tensor({16}, 222), cotangent = random_tensor({rows, n}, 223);
  auto run = [&](bool fused) {
    Tape tape;
    Var x = tape.variable(x_value), w = tape.variable(w_value), b = tape.variable(b_value);
    Var c = fused ? linear_lstm_cell_state(x, w, b, x) : lstm_cell_state(linear(x, w, b), x);
    tape.backward(c, cotangent);
    return x.grad().to_float_vector();
  };
  const auto fused = run(true), composed = run(false);
  ASSERT_EQ(fused.size(), composed.size());
  for (std::size_t j = 0; j < fused.size(); ++j)
    EXPECT_NEAR(fused[j], composed[j], 1e-5) << "element " << j;
}

// The op works through its rows in blocks (set_linear_cell_block_rows): every block size,
// including ones that leave a short last block, gives the values and every gradient of the
// whole call at once, with dropout, and with one value as both the input and the children.
TEST(Op_linear_lstm_cell_state, BlocksOfRowsGiveTheWholeCallsValuesAndGradients) {
  const std::int64_t n = 3, rows = 7, k = 2;
  const Tensor x_value = random_tensor({rows, k * n}, 230),
               w_value = random_tensor({k * n, 12}, 231);
  const Tensor b_value = random_tensor({12}, 232),
               children_value = random_tensor({rows, k * n}, 233);
  const Tensor cotangent = random_tensor({rows, n}, 234);
  auto run = [&](std::int64_t block_rows, bool x_as_children) {
    set_linear_cell_block_rows(block_rows);
    Tape tape;
    Var x = tape.variable(x_value), w = tape.variable(w_value), b = tape.variable(b_value);
    Var children = x_as_children ? x : tape.variable(children_value);
    Rng rng(35);
    Var c = linear_lstm_cell_state(x, w, b, children, 0.3f, &rng);
    tape.backward(c, cotangent);
    set_linear_cell_block_rows(0);
    std::vector<std::vector<float>> out{c.value().to_float_vector(), x.grad().to_float_vector(),
                                        w.grad().to_float_vector(), b.grad().to_float_vector()};
    if (!x_as_children) out.push_back(children.grad().to_float_vector());
    return out;
  };
  for (bool x_as_children : {false, true}) {
    const auto whole = run(rows, x_as_children);
    for (std::int64_t block_rows : {1, 2, 3, 6}) {
      SCOPED_TRACE("block of " + std::to_string(block_rows) + " rows" +
                   (x_as_children ? ", the input as the children" : ""));
      const auto blocked = run(block_rows, x_as_children);
      ASSERT_EQ(blocked.size(), whole.size());
      for (std::size_t part = 0; part < whole.size(); ++part)
        for (std::size_t j = 0; j < whole[part].size(); ++j)
          EXPECT_NEAR(blocked[part][j], whole[part][j], 1e-5)
              << "part " << part << " (c, dx, dW, db, dchildren) element " << j;
    }
  }
}

TEST(Op_linear_lstm_cell_state, BatchedRowsEqualSingleRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return linear_lstm_cell_state(v[0], v[1], v[2], v[3]); },
      {random_tensor({6, 4}, 210), random_tensor({4, 12}, 211), random_tensor({12}, 212),
       random_tensor({6, 6}, 213)},
      {true, false, false, true});
}

TEST(Op_linear_lstm_cell_state, ShapesThatDoNotFitAreRejected) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 4}, 1));
  Var w = tape.constant(random_tensor({4, 12}, 2));
  Var b = tape.constant(random_tensor({12}, 3));
  Var children = tape.constant(random_tensor({2, 6}, 4));
  expect_error(
      [&] {
        linear_lstm_cell_state(x, w, b, tape.constant(random_tensor({2, 5}, 5)));
      },
      {"[linear_lstm_cell_state] weight [4, 12] does not give the gates of children float32 [2, 5]",
       "[in, (K+2)N]"});
  expect_error(
      [&] {
        linear_lstm_cell_state(tape.constant(random_tensor({2, 3}, 6)), w, b, children);
      },
      {"input features differ from weight rows: input [2, 3] vs weight [4, 12]"});
  expect_error(
      [&] { linear_lstm_cell_state(x, w, tape.constant(random_tensor({6}, 7)), children); },
      {"bias [6] does not match weight [4, 12]"});
  expect_error(
      [&] {
        linear_lstm_cell_state(x, w, b, tape.constant(random_tensor({3, 6}, 8)));
      },
      {"does not give the gates of children float32 [3, 6] for input float32 [2, 4]"});
  expect_error([&] { linear_lstm_cell_state(x, w, b, children, 0.5f); },
               {"[linear_lstm_cell_state] candidate_drop_prob 0.5 needs an Rng"});
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
