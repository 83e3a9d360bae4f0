// The tape: leaves, parameters, shared sub-graphs, inference mode and misuse.
#include "weft/autodiff/tape.h"

#include <cmath>
#include <functional>

#include "op_test_util.h"
#include "weft/backend/tensor_ops.h"

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

// The first gradient to reach a node is written into a fresh buffer (Tape::grad_target, beta 0:
// products, concat, the LSTM kernels), later ones are added. x feeds seven consumers of both
// kinds, two of them reading x twice (matmul(x, xᵀ), lstm_hidden(x, 0, x)), one reading it as
// gates wider than the cell uses (lstm_cell_state); each consumer is recorded
// last once, so each is the first to reach x once, and every gradient is checked against
// finite differences. (Debug builds fill fresh buffers with NaN, so a kernel that leaves part
// of one unwritten fails here.)
TEST(Tape, FirstGradientIsWrittenLaterOnesAdded) {
  constexpr int kConsumers = 7;
  auto sigmoid_of = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int last = 0; last < kConsumers; ++last) {
    SCOPED_TRACE("consumer recorded last: " + std::to_string(last));
    auto op = [last](const std::vector<Var>& v) {
      const Var x = v[0], w = v[1], b = v[2];
      const std::function<Var()> consumers[kConsumers] = {
          [&] { return tanh(x); },
          [&] { return matmul(x, w); },
          [&] { return linear(x, w, b); },
          [&] {
            return concat({x, x});
          },
          [&] { return lstm_hidden(x, 0, x); },
          [&] { return matmul(x, x, false, true); },
          [&] { return lstm_cell_state(x, slice(x, 1, 0, 1), 1); }};
      std::vector<Var> parts(kConsumers);
      for (int k = 1; k <= kConsumers; ++k) {
        const int which = (last + k) % kConsumers;  // `last` is recorded last
        parts[std::size_t(which)] = consumers[which]();
      }
      return concat(parts);
    };
    auto reference = [&sigmoid_of](const std::vector<HostArray>& in) {
      const HostArray &x = in[0], &w = in[1], &b = in[2];
      constexpr int kRows = 3, kCols = 4, kOut = 4 + 4 + 4 + 8 + 4 + 3 + 1;
      HostArray y(Shape{kRows, kOut}, std::vector<double>(kRows * kOut, 0.0));
      for (int r = 0; r < kRows; ++r) {
        double* out = &y.values[std::size_t(r * kOut)];
        const double* xr = &x.values[std::size_t(r * kCols)];
        for (int c = 0; c < kCols; ++c) {
          out[c] = std::tanh(xr[c]);
          double product = 0;
          for (int k = 0; k < kCols; ++k) product += xr[k] * w[std::size_t(k * kCols + c)];
          out[4 + c] = product;
          out[8 + c] = product + b[std::size_t(c)];
          out[12 + c] = out[16 + c] = xr[c];
          out[20 + c] = sigmoid_of(xr[c]) * std::tanh(xr[c]);
        }
        for (int q = 0; q < kRows; ++q) {
          double dot = 0;
          for (int k = 0; k < kCols; ++k) dot += xr[k] * x[std::size_t(q * kCols + k)];
          out[24 + q] = dot;
        }
        out[27] = sigmoid_of(xr[0]) * xr[0] + sigmoid_of(xr[1]) * std::tanh(xr[2]);
      }
      return y;
    };
    check_op(op, reference,
             {random_tensor({3, 4}, 11), random_tensor({4, 4}, 12), random_tensor({4}, 13)});
  }
}

// A gradient assembled from scattered rows (Tape::grad_rows_target, the loom's gathers): the
// first row to reach a row of a fresh gradient is written, later ones are added, rows never
// reached are zero by the time anything reads the gradient, and a consumer taking the
// gradient whole (grad_of) before or after the scatter adds onto the same figures.
TEST(Tape, ScatteredRowsAreWrittenOnceThenAddedAndUnreachedRowsZeroed) {
  const std::vector<float> src{1, 2, 3, 4, 5, 6};  // three rows of two
  // The scatter's consumer: rows 2, 0 and 2 again of its input x [4, 2].
  const BackwardFn scatter_backward = [](Tape& tape, std::uint32_t id) {
    const Tape::RowsTarget target = tape.grad_rows_target(tape.input(id, 0));
    Tensor* grads[] = {target.grad};
    std::uint8_t* written[] = {target.written};
    const Tensor refs = Tensor::from_vector({3, 2}, std::vector<std::int32_t>{0, 2, 0, 0, 0, 2});
    backend::scatter_add_argument_rows(tape.node(id).grad, 0, refs, grads, written);
  };
  for (const int scaled_consumer : {0, 1, 2}) {  // 0: none; 1: recorded before; 2: after
    SCOPED_TRACE("scaled consumer " + std::to_string(scaled_consumer));
    Tensor::full({4, 2}, 7.0f);  // a stale block for the fresh gradient to be allocated over
    Tape tape;
    Var x = tape.variable(Tensor::zeros({4, 2}));
    std::vector<Var> parts;
    if (scaled_consumer == 1) parts.push_back(reshape(x * 3.0f, {1, 8}));
    parts.push_back(reshape(tape.record(Tensor::zeros({3, 2}), {x}, scatter_backward), {1, 6}));
    if (scaled_consumer == 2) parts.push_back(reshape(x * 3.0f, {1, 8}));
    Var all = concat(parts);
    std::vector<float> cotangent(std::size_t(all.value().numel()), 0.0f);
    const std::size_t at = scaled_consumer == 1 ? 8 : 0;
    std::copy(src.begin(), src.end(), cotangent.begin() + std::ptrdiff_t(at));
    if (scaled_consumer != 0)
      for (std::size_t i = 0; i < 8; ++i) cotangent[(scaled_consumer == 1 ? 0 : 6) + i] = 1.0f;
    tape.backward(all, Tensor::from_vector(all.shape(), cotangent));
    const float s = scaled_consumer != 0 ? 3.0f : 0.0f;
    EXPECT_EQ(x.grad().to_float_vector(),
              (std::vector<float>{3 + s, 4 + s, s, s, 1 + 5 + s, 2 + 6 + s, s, s}));
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
