// matmul and batch_matmul (every transpose combination) and linear: reference, gradients,
// batching, errors.
#include <cmath>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// C = op(A) · op(B) in float64, A and B stored row-major with their own shapes.
HostArray reference_matmul(const HostArray& a, const HostArray& b, bool ta, bool tb) {
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t n = tb ? b.shape[0] : b.shape[1];
  HostArray c(Shape{m, n}, std::vector<double>(std::size_t(m * n), 0.0));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p) {
        double av = ta ? a[std::size_t(p * a.shape[1] + i)] : a[std::size_t(i * a.shape[1] + p)];
        double bv = tb ? b[std::size_t(j * b.shape[1] + p)] : b[std::size_t(p * b.shape[1] + j)];
        c[std::size_t(i * n + j)] += av * bv;
      }
  return c;
}

struct TransposeCase {
  bool ta, tb;
};

class MatmulTransposes : public ::testing::TestWithParam<TransposeCase> {};

WEFT_OP_TEST(matmul, PlainProductAgainstReference) {
  check_op(
      [](const std::vector<Var>& v) { return matmul(v[0], v[1]); },
      [](const std::vector<HostArray>& h) { return reference_matmul(h[0], h[1], false, false); },
      {random_tensor({3, 4}, 1), random_tensor({4, 5}, 2)});
}

TEST_P(MatmulTransposes, ForwardAndGradients) {
  const auto [ta, tb] = GetParam();
  const Shape a_shape = ta ? Shape{4, 3} : Shape{3, 4};
  const Shape b_shape = tb ? Shape{5, 4} : Shape{4, 5};
  check_op(
      [ta, tb](const std::vector<Var>& v) { return matmul(v[0], v[1], ta, tb); },
      [ta, tb](const std::vector<HostArray>& h) { return reference_matmul(h[0], h[1], ta, tb); },
      {random_tensor(a_shape, 3), random_tensor(b_shape, 4)});
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, MatmulTransposes,
                         ::testing::Values(TransposeCase{false, false}, TransposeCase{true, false},
                                           TransposeCase{false, true}, TransposeCase{true, true}));

TEST(Op_matmul, BatchedRowsEqualSingleRows) {
  Tensor w = random_tensor({6, 3}, 5);
  check_batched_matches_rows([](const std::vector<Var>& v) { return matmul(v[0], v[1]); },
                             {random_tensor({7, 6}, 6), w}, {true, false});
}

TEST(Op_matmul, ErrorsNameTheOperands) {
  Tape tape;
  Var a = tape.constant(random_tensor({3, 4}, 1));
  Var b = tape.constant(random_tensor({5, 2}, 2));
  expect_error([&] { matmul(a, b); },
               {"[matmul] inner dimensions differ: lhs [3, 4] vs rhs [5, 2]"});
  Var v = tape.constant(random_tensor({3}, 3));
  expect_error([&] { matmul(v, b); }, {"[matmul]", "lhs must have rank 2", "float32 [3]"});
  Var ints = tape.constant(int_tensor({1, 1}, {1}));
  expect_error([&] { matmul(ints, b); }, {"[matmul]", "must be float32", "int32 [1, 1]"});
}

TEST(Op_matmul, EmptyInnerDimensionGivesZeros) {
  Tape tape;
  Var y = matmul(tape.constant(Tensor::zeros({2, 0})), tape.constant(Tensor::zeros({0, 3})));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  for (float v : y.value().to_float_vector()) EXPECT_EQ(v, 0.0f);
}

// reference_matmul on each [m, k] / [k, n] item of a batch.
HostArray reference_batch_matmul(const HostArray& a, const HostArray& b, bool ta, bool tb) {
  const std::int64_t batch = a.shape[0];
  const std::int64_t a_size = a.shape[1] * a.shape[2], b_size = b.shape[1] * b.shape[2];
  HostArray y;
  for (std::int64_t i = 0; i < batch; ++i) {
    const auto item = [i](const HostArray& x, std::int64_t size) {
      return HostArray(
          Shape{x.shape[1], x.shape[2]},
          std::vector<double>(x.values.begin() + i * size, x.values.begin() + (i + 1) * size));
    };
    HostArray c = reference_matmul(item(a, a_size), item(b, b_size), ta, tb);
    y.shape = Shape{batch, c.shape[0], c.shape[1]};
    y.values.insert(y.values.end(), c.values.begin(), c.values.end());
  }
  return y;
}

WEFT_OP_TEST(batch_matmul, EveryTransposeAgainstReferenceAndGradients) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(std::string("transposes ") + (ta ? "T" : "N") + (tb ? "T" : "N"));
    const Shape a_shape = ta ? Shape{3, 4, 2} : Shape{3, 2, 4};
    const Shape b_shape = tb ? Shape{3, 5, 4} : Shape{3, 4, 5};
    check_op([ta, tb](const std::vector<Var>& v) { return batch_matmul(v[0], v[1], ta, tb); },
             [ta, tb](const std::vector<HostArray>& h) {
               return reference_batch_matmul(h[0], h[1], ta, tb);
             },
             {random_tensor(a_shape, 11 + t), random_tensor(b_shape, 21 + t)});
  }
}

TEST(Op_batch_matmul, EachBatchItemEqualsItsOwnProduct) {
  check_batched_matches_rows([](const std::vector<Var>& v) { return batch_matmul(v[0], v[1]); },
                             {random_tensor({6, 2, 3}, 7), random_tensor({6, 3, 4}, 8)},
                             {true, true});
}

TEST(Op_batch_matmul, ErrorsNameTheOperands) {
  Tape tape;
  Var a = tape.constant(random_tensor({2, 3, 4}, 1));
  Var b = tape.constant(random_tensor({2, 5, 2}, 2));
  expect_error([&] { batch_matmul(a, b); },
               {"[batch_matmul] inner dimensions differ: lhs [2, 3, 4] vs rhs [2, 5, 2]"});
  Var other_batch = tape.constant(random_tensor({3, 4, 2}, 3));
  expect_error([&] { batch_matmul(a, other_batch); },
               {"[batch_matmul] batch sizes differ", "(2 vs 3 matrices)"});
  Var matrix = tape.constant(random_tensor({4, 2}, 4));
  expect_error([&] { batch_matmul(a, matrix); },
               {"[batch_matmul]", "rhs must have rank 3", "float32 [4, 2]"});
  Var ints = tape.constant(int_tensor({1, 1, 1}, {1}));
  expect_error([&] { batch_matmul(ints, a); }, {"[batch_matmul]", "must be float32"});
}

TEST(Op_batch_matmul, EmptyInnerDimensionAndEmptyBatch) {
  Tape tape;
  Var y = batch_matmul(tape.constant(Tensor::zeros({2, 3, 0})),
                       tape.constant(Tensor::zeros({2, 0, 4})));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  for (float v : y.value().to_float_vector()) EXPECT_EQ(v, 0.0f);
  Var none = batch_matmul(tape.constant(Tensor::zeros({0, 3, 2})),
                          tape.constant(Tensor::zeros({0, 2, 4})));
  EXPECT_EQ(none.shape(), (Shape{0, 3, 4}));
}

HostArray reference_linear(const std::vector<HostArray>& h) {
  HostArray y = reference_matmul(h[0], h[1], false, false);
  const std::size_t out = std::size_t(y.shape[1]);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += h[2][i % out];
  return y;
}

WEFT_OP_TEST(linear, AgainstReferenceWithVectorBias) {
  check_op([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); }, reference_linear,
           {random_tensor({5, 4}, 7), random_tensor({4, 3}, 8), random_tensor({3}, 9)});
}

WEFT_OP_TEST(linear, AgainstReferenceWithRowBias) {
  check_op([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); }, reference_linear,
           {random_tensor({2, 6}, 10), random_tensor({6, 4}, 11), random_tensor({1, 4}, 12)});
}

// linear_relu / _tanh / _sigmoid against f(reference linear), vector and row biases; relu with
// inputs far from its kink, so the finite differences see one side of it.
template <typename F>
Reference activated_linear(F f) {
  return [f](const std::vector<HostArray>& h) {
    HostArray y = reference_linear(h);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = f(y[i]);
    return y;
  };
}

WEFT_OP_TEST(linear_relu, AgainstReference) {
  check_op(
      [](const std::vector<Var>& v) { return linear_relu(v[0], v[1], v[2]); },
      activated_linear([](double x) { return x > 0 ? x : 0.0; }),
      {random_tensor({5, 4}, 13), random_tensor({4, 3}, 14), random_tensor({3}, 15, 0.5f, 1.0f)});
}

WEFT_OP_TEST(linear_tanh, AgainstReferenceWithRowBias) {
  check_op([](const std::vector<Var>& v) { return linear_tanh(v[0], v[1], v[2]); },
           activated_linear([](double x) { return std::tanh(x); }),
           {random_tensor({3, 6}, 16), random_tensor({6, 4}, 17), random_tensor({1, 4}, 18)});
}

WEFT_OP_TEST(linear_sigmoid, AgainstReference) {
  check_op([](const std::vector<Var>& v) { return linear_sigmoid(v[0], v[1], v[2]); },
           activated_linear([](double x) { return 1.0 / (1.0 + std::exp(-x)); }),
           {random_tensor({4, 5}, 19), random_tensor({5, 2}, 20), random_tensor({2}, 21)});
}

// A leaf weight read transposed by several backward products in one recording (loom levels:
// linear at two row counts, matmul), each through the weight or its transposed copy as the
// GEMM calibration says (gemm_selection_test forces both ways): the gradients against finite
// differences. The copy itself: made once, the transpose.
TEST(Op_linear, LeafWeightsTransposedOncePerRecording) {
  check_op(
      [](const std::vector<Var>& v) {
        return concat({linear(v[0], v[2], v[3]), linear(v[1], v[2], v[3]), matmul(v[0], v[2])}, 0);
      },
      [](const std::vector<HostArray>& h) {
        const HostArray a = reference_linear({h[0], h[2], h[3]});
        const HostArray b = reference_linear({h[1], h[2], h[3]});
        const HostArray c = reference_matmul(h[0], h[2], false, false);
        HostArray y(Shape{a.shape[0] + b.shape[0] + c.shape[0], a.shape[1]}, a.values);
        y.values.insert(y.values.end(), b.values.begin(), b.values.end());
        y.values.insert(y.values.end(), c.values.begin(), c.values.end());
        return y;
      },
      {random_tensor({6, 5}, 21), random_tensor({4, 5}, 22), random_tensor({5, 3}, 23),
       random_tensor({3}, 24)});
  Tape tape;
  const Tensor w = random_tensor({5, 3}, 25);
  const std::uint32_t leaf = tape.variable(w).id();
  const Tensor& copy = tape.transposed_value(leaf);
  EXPECT_EQ(&copy, &tape.transposed_value(leaf));  // made once
  ASSERT_EQ(copy.shape(), (Shape{3, 5}));
  const std::vector<float> values = w.to_float_vector(), transposed = copy.to_float_vector();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(transposed[std::size_t(j * 5 + i)], values[std::size_t(i * 3 + j)]);
}

TEST(Op_linear, BatchedRowsEqualSingleRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); },
      {random_tensor({9, 8}, 13), random_tensor({8, 5}, 14), random_tensor({5}, 15)},
      {true, false, false});
}

TEST(Op_linear, ParameterGradientsAccumulateAcrossBackwardCalls) {
  Parameter w("w", random_tensor({3, 2}, 16));
  Parameter b("b", Tensor::zeros({2}));
  Tensor x = random_tensor({4, 3}, 17);
  for (int step = 0; step < 2; ++step) {
    Tape tape;
    TapeScope scope(tape);
    tape.backward(sum(linear(tape.constant(x), w, b)));
  }
  // d/db of sum over 4 rows, twice: 8 per output.
  for (float g : b.grad().to_float_vector()) EXPECT_FLOAT_EQ(g, 8.0f);
}

// A weight applied to a few rows at a time, as a loom step applies it once per depth, through
// linear and matmul alike: its gradient is xᵀ · dy summed over every call, for a parameter
// and for a plain variable.
TEST(Op_linear, WeightGradientOfManySmallCallsEqualsTheSumOfTheirProducts) {
  const std::int64_t in = 16, out = 24;
  const std::vector<std::int64_t> call_rows = {1, 2, 3, 1, 12, 2, 2, 2, 2, 2, 4};
  std::vector<Tensor> xs, cotangents;
  for (std::size_t k = 0; k < call_rows.size(); ++k) {
    xs.push_back(random_tensor({call_rows[k], in}, 100 + int(k)));
    cotangents.push_back(random_tensor({call_rows[k], out}, 200 + int(k)));
  }
  // Reference in float64: sum over calls of xᵀ · c.
  std::vector<double> expected(std::size_t(in * out), 0.0);
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const std::vector<float> x = xs[k].to_float_vector(), c = cotangents[k].to_float_vector();
    for (std::int64_t r = 0; r < call_rows[k]; ++r)
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t j = 0; j < out; ++j)
          expected[std::size_t(i * out + j)] +=
              double(x[std::size_t(r * in + i)]) * double(c[std::size_t(r * out + j)]);
  }
  const Tensor w_value = random_tensor({in, out}, 300);
  for (bool as_parameter : {true, false}) {
    SCOPED_TRACE(as_parameter ? "parameter" : "variable");
    Parameter w_param("w", w_value.clone());
    Parameter b("b", Tensor::zeros({out}));
    Tape tape;
    TapeScope scope(tape);
    Var w = as_parameter ? tape.parameter(w_param) : tape.variable(w_value.clone());
    Var x0 = tape.variable(xs[0]);
    Var loss;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      Var x = k == 0 ? x0 : tape.constant(xs[k]);
      Var y = k % 3 == 2 ? matmul(x, w) : linear(x, w, b);
      Var term = sum(y * tape.constant(cotangents[k]));
      loss = k == 0 ? term : loss + term;
    }
    tape.backward(loss);
    const std::vector<float> got =
        as_parameter ? w_param.grad().to_float_vector() : w.grad().to_float_vector();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-4 * (1.0 + std::abs(expected[i]))) << "element " << i;
    // The first call's input gradient: c₀ · Wᵀ.
    const std::vector<float> dx = x0.grad().to_float_vector(), c = cotangents[0].to_float_vector(),
                             wv = w_value.to_float_vector();
    for (std::int64_t i = 0; i < in; ++i) {
      double want = 0;
      for (std::int64_t j = 0; j < out; ++j)
        want += double(c[std::size_t(j)]) * wv[std::size_t(i * out + j)];
      EXPECT_NEAR(dx[std::size_t(i)], want, 1e-4 * (1.0 + std::abs(want)));
    }
  }
}

TEST(Op_linear, ErrorsNameTheOperands) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 3}, 1));
  Var w = tape.constant(random_tensor({4, 5}, 2));
  Var b = tape.constant(random_tensor({5}, 3));
  expect_error([&] { linear(x, w, b); },
               {"[linear] input features differ from weight rows: input [2, 3] vs weight [4, 5]"});
  Var w_ok = tape.constant(random_tensor({3, 5}, 4));
  Var b_bad = tape.constant(random_tensor({4}, 5));
  expect_error([&] { linear(x, w_ok, b_bad); },
               {"[linear] bias [4] does not match weight [3, 5]", "expected [5] or [1, 5]"});
}

}  // namespace
}  // namespace weft::testing
