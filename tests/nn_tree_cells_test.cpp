// The Tree-LSTM cells: N-ary (arity 1, 2, 3, with and without an input; recurrent dropout
// with its gradient) and Child-Sum (each piece, and the pieces composed over a node's
// children against Tai et al.'s equations), against float64 references with
// finite-difference gradients of inputs and parameters; batching; forget bias; errors.
#include "nn_test_util.h"
#include "weft/nn/cells.h"
#include "weft/nn/mode.h"

namespace weft::testing {
namespace {

constexpr std::int64_t kIn = 3, kHidden = 3, kRows = 3;
constexpr float kDrop = 0.3f;
constexpr std::uint64_t kMaskSeed = 91;

Tolerance cell_tolerance() {
  Tolerance tol;
  tol.forward_abs = 2e-5;
  return tol;
}

template <typename Cell>
void randomize_biases(const Cell& cell) {
  std::uint64_t seed = 700;
  for (Parameter p : cell.parameters())
    if (p.shape().rank() == 1) p.value() = random_tensor(p.shape(), seed++, -0.5, 0.5);
}

Var both(std::pair<Var, Var> hc) { return concat({hc.first, hc.second}); }

// Inputs [x?, h_1..h_K, c_1..c_K] -> [h | c] by Tai et al.'s N-ary equations, with the gate
// columns [f_1..f_K | i | u | o]; `mask` (if any) multiplies tanh(u).
HostArray nary_reference(const std::vector<HostArray>& in, const std::vector<HostArray>& p,
                         int arity, bool has_x, const HostArray* mask = nullptr) {
  const std::size_t first_h = has_x ? 1 : 0;
  const std::int64_t n = in[first_h].shape[1];
  std::vector<HostArray> gate_inputs(in.begin(), in.begin() + long(first_h + arity));
  HostArray gates = affine(concat_cols(gate_inputs), p[0], p[1]);
  HostArray u = tanh64(cols(gates, (arity + 1) * n, n));
  if (mask != nullptr) u = times(u, *mask);
  HostArray c = times(sigmoid64(cols(gates, arity * n, n)), u);
  for (int k = 0; k < arity; ++k)
    c = plus(c, times(sigmoid64(cols(gates, k * n, n)), in[first_h + arity + k]));
  HostArray h = times(sigmoid64(cols(gates, (arity + 2) * n, n)), tanh64(c));
  return concat_cols({h, c});
}

std::vector<Tensor> nary_inputs(int arity, bool has_x) {
  std::vector<Tensor> inputs;
  if (has_x) inputs.push_back(random_tensor({kRows, kIn}, 10));
  for (int k = 0; k < arity; ++k) inputs.push_back(random_tensor({kRows, kHidden}, 20 + k));
  for (int k = 0; k < arity; ++k) inputs.push_back(random_tensor({kRows, kHidden}, 30 + k, -2, 2));
  return inputs;
}

Var run_nary(const nn::NaryTreeLSTMCell& cell, const std::vector<Var>& v, bool has_x) {
  const std::size_t first_h = has_x ? 1 : 0, k = std::size_t(cell.arity());
  std::span<const Var> all(v);
  return both(cell(has_x ? v[0] : Var(), all.subspan(first_h, k), all.subspan(first_h + k, k)));
}

void check_nary(int arity, bool has_x, bool training) {
  SCOPED_TRACE("arity " + std::to_string(arity) + (has_x ? " with x" : " without x") +
               (training ? ", training" : ""));
  nn::ParameterStore store{std::uint64_t(arity)};
  nn::NaryTreeLSTMCell cell(store, "tree", has_x ? kIn : 0, kHidden, arity,
                            {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  const HostArray mask = dropout_mask(kRows, kHidden, kDrop, kMaskSeed);
  check_layer(
      cell.parameters(),
      [&](const std::vector<Var>& v) {
        Rng rng(kMaskSeed);
        nn::ForwardMode mode(training, &rng);
        return run_nary(cell, v, has_x);
      },
      [&](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
        return nary_reference(in, p, arity, has_x, training ? &mask : nullptr);
      },
      nary_inputs(arity, has_x), cell_tolerance());
}

TEST(NnNaryTreeLSTMCell, MatchesReferenceWithGradients) {
  for (int arity : {1, 2, 3})
    for (bool has_x : {true, false}) check_nary(arity, has_x, /*training=*/false);
}

TEST(NnNaryTreeLSTMCell, RecurrentDropoutDropsTheCandidateWhenTraining) {
  check_nary(2, true, /*training=*/true);
  check_nary(3, false, /*training=*/true);
}

TEST(NnNaryTreeLSTMCell, BatchedRowsEqualSingleRows) {
  nn::ParameterStore store(4);
  nn::NaryTreeLSTMCell cell(store, "tree", kIn, kHidden, 2);
  check_batched_matches_rows([&](const std::vector<Var>& v) { return run_nary(cell, v, true); },
                             nary_inputs(2, true), std::vector<bool>(5, true));
}

TEST(NnNaryTreeLSTMCell, ShapesAndForgetBias) {
  nn::ParameterStore store(5);
  nn::NaryTreeLSTMCell cell(store, "tree", 4, 2, 3, {.forget_bias = 2.0f});
  EXPECT_EQ(cell.weight().shape(), (Shape{4 + 3 * 2, 6 * 2}));
  std::vector<float> expected(12, 0.0f);
  std::fill(expected.begin(), expected.begin() + 6, 2.0f);
  EXPECT_EQ(cell.bias().value().to_float_vector(), expected);
}

TEST(NnNaryTreeLSTMCell, ErrorsNameTheCellAndTheArgument) {
  nn::ParameterStore store;
  nn::NaryTreeLSTMCell cell(store, "binary", 0, 4, 2);
  Tape tape;
  auto t = [&](std::int64_t rows, std::int64_t cols) {
    return tape.constant(random_tensor({rows, cols}, 1));
  };
  const Var h4 = t(2, 4), h3 = t(2, 3), h4_rows3 = t(3, 4);
  expect_error(
      [&] {
        cell(Var(), {h4}, {h4, h4});
      },
      {"[NaryTreeLSTMCell 'binary'] got 1 child h and 2 child c states for a cell of "
       "arity 2"});
  expect_error(
      [&] {
        cell(Var(), {h4, h3}, {h4, h4});
      },
      {"[NaryTreeLSTMCell 'binary'] child_h[1] has 3 features, expected 4"});
  expect_error(
      [&] {
        cell(Var(), {h4, h4}, {h4, h4_rows3});
      },
      {"[NaryTreeLSTMCell 'binary'] child_c[1] has 3 rows but child_h[0] has 2"});
  expect_error(
      [&] {
        cell(t(2, 5), {h4, h4}, {h4, h4});
      },
      {"input_size 0, so x must be an undefined Var, got float32 [2, 5]"});
  expect_error([&] { nn::NaryTreeLSTMCell(store, "none", 1, 4, 0); },
               {"[NaryTreeLSTMCell 'none'] arity must be > 0, got 0"});
}

// ---- Child-Sum ----

// (x, h_k, c_k; Wf, bf, Wiou, biou) -> sigmoid([x | h_k] Wf + bf) * c_k
HostArray forget_reference(const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
  return times(sigmoid64(affine(concat_cols({in[0], in[1]}), p[0], p[1])), in[2]);
}

// (x, h_sum, fc_sum; ...) -> [h | c]; mask (if any) multiplies tanh(u).
HostArray node_reference(const std::vector<HostArray>& in, const std::vector<HostArray>& p,
                         const HostArray* mask = nullptr) {
  const std::int64_t n = in[1].shape[1];
  HostArray iou = affine(concat_cols({in[0], in[1]}), p[2], p[3]);
  HostArray u = tanh64(cols(iou, n, n));
  if (mask != nullptr) u = times(u, *mask);
  HostArray c = plus(times(sigmoid64(cols(iou, 0, n)), u), in[2]);
  HostArray h = times(sigmoid64(cols(iou, 2 * n, n)), tanh64(c));
  return concat_cols({h, c});
}

std::vector<Tensor> child_sum_inputs() {
  return {random_tensor({kRows, kIn}, 50), random_tensor({kRows, kHidden}, 51),
          random_tensor({kRows, kHidden}, 52, -2, 2)};
}

TEST(NnChildSumTreeLSTMCell, ForgetTimesCellMatchesReferenceWithGradients) {
  nn::ParameterStore store(6);
  nn::ChildSumTreeLSTMCell cell(store, "cs", kIn, kHidden);
  randomize_biases(cell);
  check_layer(
      cell.parameters(),
      [&](const std::vector<Var>& v) { return cell.forget_times_cell(v[0], v[1], v[2]); },
      forget_reference, child_sum_inputs(), cell_tolerance());
}

TEST(NnChildSumTreeLSTMCell, NodeMatchesReferenceWithGradients) {
  nn::ParameterStore store(7);
  nn::ChildSumTreeLSTMCell cell(store, "cs", kIn, kHidden, {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  const HostArray mask = dropout_mask(kRows, kHidden, kDrop, kMaskSeed);
  for (bool training : {false, true}) {
    SCOPED_TRACE(training ? "training" : "inference");
    check_layer(
        cell.parameters(),
        [&](const std::vector<Var>& v) {
          Rng rng(kMaskSeed);
          nn::ForwardMode mode(training, &rng);
          return both(cell.node(v[0], v[1], v[2]));
        },
        [&](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
          return node_reference(in, p, training ? &mask : nullptr);
        },
        child_sum_inputs(), cell_tolerance());
  }
}

// A node with three children, each piece batched over the children's rows, then summed:
// equals Tai et al.'s Child-Sum equations written out for the node.
TEST(NnChildSumTreeLSTMCell, PiecesComposeToTheChildSumEquations) {
  nn::ParameterStore store(8);
  nn::ChildSumTreeLSTMCell cell(store, "cs", kIn, kHidden);
  randomize_biases(cell);
  std::vector<HostArray> params;
  for (const Parameter& p : cell.parameters()) params.emplace_back(p.value());
  Tensor x = random_tensor({1, kIn}, 60);
  Tensor child_h = random_tensor({3, kHidden}, 61), child_c = random_tensor({3, kHidden}, 62);
  Tape tape;
  Var x_per_child = gather_rows(tape.constant(x), int_tensor({3}, {0, 0, 0}));
  Var fc = cell.forget_times_cell(x_per_child, tape.constant(child_h), tape.constant(child_c));
  auto [h, c] = cell.node(tape.constant(x), sum_rows(tape.constant(child_h)), sum_rows(fc));

  HostArray hx(x), hh(child_h), hc(child_c);
  HostArray h_sum(Shape{1, kHidden}, std::vector<double>(kHidden, 0.0));
  HostArray fc_sum = h_sum;
  for (std::int64_t k = 0; k < 3; ++k) {
    HostArray h_k(Shape{1, kHidden}, {}), c_k(Shape{1, kHidden}, {});
    for (std::int64_t j = 0; j < kHidden; ++j) {
      h_k.values.push_back(hh[std::size_t(k * kHidden + j)]);
      c_k.values.push_back(hc[std::size_t(k * kHidden + j)]);
    }
    h_sum = plus(h_sum, h_k);
    fc_sum = plus(fc_sum, forget_reference({hx, h_k, c_k}, params));
  }
  HostArray expected = node_reference({hx, h_sum, fc_sum}, params);
  const auto actual = values_of(concat({h, c}));
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5);
}

TEST(NnChildSumTreeLSTMCell, NoInputBatchingAndForgetBias) {
  nn::ParameterStore store(9);
  nn::ChildSumTreeLSTMCell cell(store, "cs", 0, kHidden, {.forget_bias = 0.5f});
  EXPECT_EQ(store.get("cs/forget_bias").value().to_float_vector(),
            std::vector<float>(kHidden, 0.5f));
  EXPECT_EQ(store.get("cs/iou_weight").shape(), (Shape{kHidden, 3 * kHidden}));
  check_batched_matches_rows(
      [&](const std::vector<Var>& v) {
        return concat(
            {cell.forget_times_cell(Var(), v[0], v[1]), both(cell.node(Var(), v[0], v[1]))});
      },
      {random_tensor({4, kHidden}, 70), random_tensor({4, kHidden}, 71)}, {true, true});
  Tape tape;
  expect_error(
      [&] {
        cell.node(Var(), tape.constant(random_tensor({2, kHidden}, 1)),
                  tape.constant(random_tensor({2, kHidden + 2}, 1)));
      },
      {"[ChildSumTreeLSTMCell 'cs'] fc_sum has 5 features, expected 3"});
}

}  // namespace
}  // namespace weft::testing
