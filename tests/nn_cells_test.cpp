// LSTMCell and GRUCell: float64 references with finite-difference gradients of the inputs
// and every parameter, recurrent dropout (only in training, on the candidate only, with its
// gradient), batched-vs-row agreement, the initial forget bias and the error messages.
#include <cmath>

#include "nn_test_util.h"
#include "weft/nn/cells.h"
#include "weft/nn/mode.h"

namespace weft::testing {
namespace {

constexpr std::int64_t kIn = 3, kHidden = 4, kRows = 3;
constexpr float kDrop = 0.4f;
constexpr std::uint64_t kMaskSeed = 77;

Tolerance cell_tolerance() {
  Tolerance tol;
  tol.forward_abs = 2e-5;
  return tol;
}

// A cell with non-zero biases, so their gradients and columns are exercised.
template <typename Cell>
void randomize_biases(const Cell& cell) {
  std::uint64_t seed = 900;
  for (Parameter p : cell.parameters())
    if (p.shape().rank() == 1) p.value() = random_tensor(p.shape(), seed++, -0.5, 0.5);
}

// (x, h, c; W, b) -> [h' | c'], optionally with tanh(g) multiplied by a dropout mask.
HostArray lstm_reference(const std::vector<HostArray>& in, const std::vector<HostArray>& p,
                         const HostArray* mask = nullptr) {
  const std::int64_t n = in[1].shape[1];
  HostArray gates = affine(concat_cols({in[0], in[1]}), p[0], p[1]);
  HostArray candidate = tanh64(cols(gates, 2 * n, n));
  if (mask != nullptr) candidate = times(candidate, *mask);
  HostArray c = plus(times(sigmoid64(cols(gates, 0, n)), in[2]),
                     times(sigmoid64(cols(gates, n, n)), candidate));
  HostArray h = times(sigmoid64(cols(gates, 3 * n, n)), tanh64(c));
  return concat_cols({h, c});
}

Var both(std::pair<Var, Var> hc) { return concat({hc.first, hc.second}); }

std::vector<Tensor> lstm_inputs() {
  return {random_tensor({kRows, kIn}, 1), random_tensor({kRows, kHidden}, 2),
          random_tensor({kRows, kHidden}, 3, -2, 2)};
}

TEST(NnLSTMCell, MatchesReferenceWithGradients) {
  nn::ParameterStore store(1);
  // Recurrent dropout is set but inactive: there is no training ForwardMode.
  nn::LSTMCell cell(store, "lstm", kIn, kHidden, {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  check_layer(
      cell.parameters(), [&](const std::vector<Var>& v) { return both(cell(v[0], v[1], v[2])); },
      [](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
        return lstm_reference(in, p);
      },
      lstm_inputs(), cell_tolerance());
}

TEST(NnLSTMCell, RecurrentDropoutDropsTheCandidateWhenTraining) {
  nn::ParameterStore store(2);
  nn::LSTMCell cell(store, "lstm", kIn, kHidden, {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  const HostArray mask = dropout_mask(kRows, kHidden, kDrop, kMaskSeed);
  check_layer(
      cell.parameters(),
      [&](const std::vector<Var>& v) {
        Rng rng(kMaskSeed);
        nn::ForwardMode train(true, &rng);
        return both(cell(v[0], v[1], v[2]));
      },
      [&](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
        return lstm_reference(in, p, &mask);
      },
      lstm_inputs(), cell_tolerance());
}

TEST(NnLSTMCell, BatchedRowsEqualSingleRows) {
  nn::ParameterStore store(3);
  nn::LSTMCell cell(store, "lstm", kIn, kHidden);
  check_batched_matches_rows(
      [&](const std::vector<Var>& v) { return both(cell(v[0], v[1], v[2])); }, lstm_inputs(),
      {true, true, true});
}

TEST(NnLSTMCell, ForgetBiasStartsInTheForgetColumns) {
  nn::ParameterStore store(4);
  nn::LSTMCell cell(store, "lstm", 2, 3, {.forget_bias = 1.5f});
  EXPECT_EQ(cell.bias().value().to_float_vector(),
            (std::vector<float>{1.5f, 1.5f, 1.5f, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(cell.bias().trainable());
  EXPECT_EQ(store.get("lstm/weight").shape(), (Shape{5, 12}));
  // glorot_uniform over [5, 12] by default.
  for (float w : cell.weight().value().to_float_vector())
    EXPECT_LE(std::abs(w), std::sqrt(6.0f / 17.0f));
}

TEST(NnLSTMCell, ErrorsNameTheCellAndTheArgument) {
  nn::ParameterStore store;
  nn::LSTMCell cell(store, "lstm", 5, 4);
  Tape tape;
  auto t = [&](std::int64_t rows, std::int64_t cols) {
    return tape.constant(random_tensor({rows, cols}, 1));
  };
  expect_error([&] { cell(t(3, 7), t(3, 4), t(3, 4)); },
               {"[LSTMCell 'lstm'] input has 7 features, expected 5"});
  expect_error([&] { cell(t(3, 5), t(3, 3), t(3, 4)); },
               {"[LSTMCell 'lstm'] h has 3 features, expected 4"});
  expect_error([&] { cell(t(3, 5), t(3, 4), t(2, 4)); },
               {"[LSTMCell 'lstm'] c has 2 rows but input has 3"});
  expect_error([&] { cell(Var(), t(3, 4), t(3, 4)); },
               {"[LSTMCell 'lstm'] input is an undefined Var, expected [B, 5]"});
  expect_error([&] { nn::LSTMCell(store, "bad", 5, 4, {.recurrent_dropout = -0.1f}); },
               {"[LSTMCell 'bad'] recurrent_dropout -0.1 is outside [0, 1)"});
}

// (x, h; Wg, bg, Wc, bc) -> h', optionally with the candidate multiplied by a mask.
HostArray gru_reference(const std::vector<HostArray>& in, const std::vector<HostArray>& p,
                        const HostArray* mask = nullptr) {
  const std::int64_t n = in[1].shape[1];
  HostArray rz = sigmoid64(affine(concat_cols({in[0], in[1]}), p[0], p[1]));
  HostArray r = cols(rz, 0, n), z = cols(rz, n, n);
  HostArray candidate = tanh64(affine(concat_cols({in[0], times(r, in[1])}), p[2], p[3]));
  if (mask != nullptr) candidate = times(candidate, *mask);
  HostArray keep = times(z, in[1]);
  HostArray one_minus_z = map(z, [](double v) { return 1 - v; });
  return plus(keep, times(one_minus_z, candidate));
}

std::vector<Tensor> gru_inputs() {
  return {random_tensor({kRows, kIn}, 4), random_tensor({kRows, kHidden}, 5)};
}

TEST(NnGRUCell, MatchesReferenceWithGradients) {
  nn::ParameterStore store(5);
  nn::GRUCell cell(store, "gru", kIn, kHidden, {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  check_layer(
      cell.parameters(), [&](const std::vector<Var>& v) { return cell(v[0], v[1]); },
      [](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
        return gru_reference(in, p);
      },
      gru_inputs(), cell_tolerance());
}

TEST(NnGRUCell, RecurrentDropoutDropsTheCandidateWhenTraining) {
  nn::ParameterStore store(6);
  nn::GRUCell cell(store, "gru", kIn, kHidden, {.recurrent_dropout = kDrop});
  randomize_biases(cell);
  const HostArray mask = dropout_mask(kRows, kHidden, kDrop, kMaskSeed);
  check_layer(
      cell.parameters(),
      [&](const std::vector<Var>& v) {
        Rng rng(kMaskSeed);
        nn::ForwardMode train(true, &rng);
        return cell(v[0], v[1]);
      },
      [&](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
        return gru_reference(in, p, &mask);
      },
      gru_inputs(), cell_tolerance());
}

TEST(NnGRUCell, BatchedRowsEqualSingleRowsAndForgetBiasOnZ) {
  nn::ParameterStore store(7);
  nn::GRUCell cell(store, "gru", kIn, kHidden);
  check_batched_matches_rows([&](const std::vector<Var>& v) { return cell(v[0], v[1]); },
                             gru_inputs(), {true, true});
  EXPECT_EQ(store.get("gru/gates_bias").value().to_float_vector(),
            (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(store.get("gru/candidate_weight").shape(), (Shape{kIn + kHidden, kHidden}));
  Tape tape;
  expect_error(
      [&] {
        cell(tape.constant(random_tensor({2, kIn}, 1)),
             tape.constant(random_tensor({2, kHidden + 1}, 1)));
      },
      {"[GRUCell 'gru'] h has 5 features, expected 4"});
}

TEST(NnGRUCell, SequenceOfStepsMatchesReference) {
  // Three steps: the state feeds back, so a mistake in how h is reused compounds.
  nn::ParameterStore store(8);
  nn::GRUCell cell(store, "gru", kIn, kHidden);
  Tape tape;
  Var h = tape.constant(Tensor::zeros({2, kHidden}));
  HostArray h_ref(h.value());
  std::vector<HostArray> params;
  for (const Parameter& p : cell.parameters()) params.emplace_back(p.value());
  for (int step = 0; step < 3; ++step) {
    Tensor x = random_tensor({2, kIn}, 40 + step);
    h = cell(tape.constant(x), h);
    h_ref = gru_reference({HostArray(x), h_ref}, params);
  }
  const auto actual = values_of(h);
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], h_ref[i], 1e-5);
}

}  // namespace
}  // namespace weft::testing
