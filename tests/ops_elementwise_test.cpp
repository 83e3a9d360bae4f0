// Unary functions and broadcasting arithmetic: reference, gradients, batching, errors.
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "op_test_util.h"

namespace weft::testing {
namespace {

using UnaryVarFn = Var (*)(Var);

Reference unary_reference(double (*f)(double)) {
  return [f](const std::vector<HostArray>& h) {
    HostArray y = h[0];
    for (double& v : y.values) v = f(v);
    return y;
  };
}

void check_unary(UnaryVarFn op, double (*f)(double), float low, float high) {
  Tensor x = random_tensor({4, 3, 2}, 21, low, high);
  check_op([op](const std::vector<Var>& v) { return op(v[0]); }, unary_reference(f), {x});
  check_batched_matches_rows([op](const std::vector<Var>& v) { return op(v[0]); },
                             {random_tensor({5, 7}, 22, low, high)}, {true});
}

WEFT_OP_TEST(neg, ReferenceGradientBatch) {
  check_unary(
      neg, [](double v) { return -v; }, -2, 2);
}
WEFT_OP_TEST(relu, ReferenceGradientBatch) {
  // Values kept away from the kink at 0, where the derivative is undefined.
  Tensor x = Tensor::from_vector({2, 3}, std::vector<float>{-1.5f, 0.7f, -0.2f, 2.0f, 0.3f, -0.9f});
  check_op([](const std::vector<Var>& v) { return relu(v[0]); },
           unary_reference([](double v) { return v > 0 ? v : 0.0; }), {x});
  check_batched_matches_rows([](const std::vector<Var>& v) { return relu(v[0]); },
                             {random_tensor({5, 7}, 23)}, {true});
}
WEFT_OP_TEST(sigmoid, ReferenceGradientBatch) {
  check_unary(
      sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -4, 4);
}
WEFT_OP_TEST(tanh, ReferenceGradientBatch) {
  check_unary(
      tanh, [](double v) { return std::tanh(v); }, -3, 3);
}
WEFT_OP_TEST(exp, ReferenceGradientBatch) {
  check_unary(
      exp, [](double v) { return std::exp(v); }, -2, 2);
}
WEFT_OP_TEST(log, ReferenceGradientBatch) {
  check_unary(
      log, [](double v) { return std::log(v); }, 0.2f, 3);
}
WEFT_OP_TEST(softplus, ReferenceGradientBatch) {
  check_unary(
      softplus, [](double v) { return std::log1p(std::exp(v)); }, -5, 5);
}

TEST(Op_softplus, LargeInputsStayFinite) {
  Tape tape;
  Var y = softplus(tape.constant(Tensor::from_vector({3}, std::vector<float>{-100, 0, 100})));
  auto v = y.value().to_float_vector();
  EXPECT_NEAR(v[0], 0.0f, 1e-6);
  EXPECT_NEAR(v[1], std::log(2.0f), 1e-6);
  EXPECT_NEAR(v[2], 100.0f, 1e-4);
}

// NumPy's broadcast of two shapes (right-aligned, a 1 stretches), or nullopt where they clash.
std::optional<Shape> numpy_broadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(std::size_t(rank), 1);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    dims[std::size_t(i)] = std::max(da, db);
  }
  return Shape(std::span<const std::int64_t>(dims));
}

// The flat index in `operand` of the output element at flat index `flat` of `out`, NumPy's way.
std::size_t broadcast_index(const Shape& out, const Shape& operand, std::size_t flat) {
  std::size_t index = 0, stride = 1;
  for (int i = out.rank() - 1, j = operand.rank() - 1; j >= 0; --i, --j) {
    const auto coordinate = std::size_t(flat % std::size_t(out[i]));
    flat /= std::size_t(out[i]);
    if (operand[j] != 1) index += coordinate * stride;
    stride *= std::size_t(operand[j]);
  }
  return index;
}

// op(a, b) under NumPy broadcasting: shape and values every binary op must match.
Reference binary_reference(double (*f)(double, double)) {
  return [f](const std::vector<HostArray>& h) {
    const Shape shape = numpy_broadcast(h[0].shape, h[1].shape).value();
    HostArray y(shape, std::vector<double>(std::size_t(shape.numel())));
    for (std::size_t i = 0; i < y.size(); ++i)
      y[i] = f(h[0][broadcast_index(shape, h[0].shape, i)],
               h[1][broadcast_index(shape, h[1].shape, i)]);
    return y;
  };
}

using BinaryVarFn = Var (*)(Var, Var);

void check_binary(BinaryVarFn op, double (*f)(double, double)) {
  auto apply = [op](const std::vector<Var>& v) { return op(v[0], v[1]); };
  // Divisors stay in [0.5, 2) so that div is smooth.
  const Shape full{4, 3};
  // Rows of 10 (a vector's width or more) take the sums' and differences' row-wise gradient
  // path; rows of 3 and scalars the element loop.
  const Shape wide{3, 10};
  const std::vector<std::pair<Shape, Shape>> cases = {
      {full, full},     {full, Shape{3}}, {full, Shape{1, 3}}, {full, Shape{}},
      {Shape{3}, full}, {Shape{1}, full}, {wide, Shape{10}},   {Shape{10}, wide}};
  std::uint64_t seed = 30;
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE("lhs " + sa.to_string() + " rhs " + sb.to_string());
    check_op(apply, binary_reference(f),
             {random_tensor(sa, seed++, 0.5f, 2.0f), random_tensor(sb, seed++, 0.5f, 2.0f)});
  }
  check_batched_matches_rows(apply, {random_tensor({6, 5}, 40), random_tensor({5}, 41, 0.5f, 2)},
                             {true, false});
}

WEFT_OP_TEST(add, BroadcastCases) {
  check_binary(add, [](double a, double b) { return a + b; });
}
WEFT_OP_TEST(sub, BroadcastCases) {
  check_binary(sub, [](double a, double b) { return a - b; });
}
WEFT_OP_TEST(mul, BroadcastCases) {
  check_binary(mul, [](double a, double b) { return a * b; });
}
WEFT_OP_TEST(div, BroadcastCases) {
  check_binary(div, [](double a, double b) { return a / b; });
}
WEFT_OP_TEST(minimum, BroadcastCases) {
  check_binary(minimum, [](double a, double b) { return std::min(a, b); });
}
WEFT_OP_TEST(maximum, BroadcastCases) {
  check_binary(maximum, [](double a, double b) { return std::max(a, b); });
}
WEFT_OP_TEST(abs, ReferenceGradientBatch) {
  // Values kept away from the kink at 0.
  Tensor x = Tensor::from_vector({2, 3}, std::vector<float>{-1.5f, 0.7f, -0.2f, 2.0f, 0.3f, -0.9f});
  check_op([](const std::vector<Var>& v) { return abs(v[0]); },
           unary_reference([](double v) { return std::abs(v); }), {x});
  check_batched_matches_rows([](const std::vector<Var>& v) { return abs(v[0]); },
                             {random_tensor({5, 7}, 24)}, {true});
}

TEST(Op_minimum, TiesSendTheGradientToTheFirstOperand) {
  Tape tape;
  Var a = tape.variable(Tensor::from_vector({2}, std::vector<float>{1, 2}));
  Var b = tape.variable(Tensor::from_vector({2}, std::vector<float>{1, 1}));
  tape.backward(sum(minimum(a, b) + maximum(a, b) * 10.0f));
  EXPECT_EQ(a.grad().to_float_vector(), (std::vector<float>{11, 10}));
  EXPECT_EQ(b.grad().to_float_vector(), (std::vector<float>{0, 1}));
}

WEFT_OP_TEST(where, ReferenceGradientBatch) {
  // The condition is data (bool), not differentiated; a and b are, in every broadcast form.
  const std::vector<bool> pattern{true, false, false, true,  true, false,
                                  true, true,  false, false, true, false};
  const Tensor cond = Tensor::from_bools({4, 3}, pattern);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 3}, {4, 3}}, {{4, 3}, {3}}, {{1, 3}, {4, 3}}, {{}, {4, 3}}};
  std::uint64_t seed = 60;
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE("a " + sa.to_string() + " b " + sb.to_string());
    check_op(
        [&](const std::vector<Var>& v) { return where(v[0].tape().constant(cond), v[0], v[1]); },
        [&](const std::vector<HostArray>& h) {
          HostArray y(Shape{4, 3}, std::vector<double>(12));
          for (std::size_t i = 0; i < 12; ++i)
            y[i] = pattern[i] ? h[0][i % h[0].size()] : h[1][i % h[1].size()];
          return y;
        },
        {random_tensor(sa, seed++), random_tensor(sb, seed++)});
  }
  check_batched_matches_rows(
      [&](const std::vector<Var>& v) { return where(greater(v[0], v[1]), v[0] * 2.0f, v[1]); },
      {random_tensor({5, 2}, 70), random_tensor({2}, 71)}, {true, false});
}

TEST(Op_add, OperatorsWithNumbersMatchOps) {
  Tape tape;
  Var x = tape.constant(Tensor::from_vector({2}, std::vector<float>{1, 4}));
  auto values = [](Var v) { return v.value().to_float_vector(); };
  EXPECT_EQ(values(x + 1.0f), (std::vector<float>{2, 5}));
  EXPECT_EQ(values(x - 1.0f), (std::vector<float>{0, 3}));
  EXPECT_EQ(values(x * 2.0f), (std::vector<float>{2, 8}));
  EXPECT_EQ(values(x / 2.0f), (std::vector<float>{0.5f, 2}));
  EXPECT_EQ(values(1.0f - x), (std::vector<float>{0, -3}));
  EXPECT_EQ(values(3.0f * x), (std::vector<float>{3, 12}));
  EXPECT_EQ(values(-x), (std::vector<float>{-1, -4}));
}

TEST(Op_add, ShapesThatDoNotBroadcastAreRejected) {
  Tape tape;
  Var a = tape.constant(random_tensor({4, 3}, 1));
  Var b = tape.constant(random_tensor({4}, 2));
  expect_error(
      [&] { add(a, b); },
      {"[add] shapes do not broadcast: lhs float32 [4, 3] vs rhs float32 [4]", "[3] or [1, 3]"});
  Var ints = tape.constant(int_tensor({4, 3}, std::vector<std::int32_t>(12, 1)));
  expect_error([&] { mul(a, ints); },
               {"[mul] operands have different dtypes: lhs float32 [4, 3] vs rhs int32 [4, 3]"});
  expect_error([&] { tanh(ints); }, {"[tanh] input must be float32 or float64, got int32 [4, 3]"});
}

TEST(Op_add, SharedOperandReceivesSummedGradient) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({2}, std::vector<float>{3, -2}));
  tape.backward(sum(x * x + x));  // d/dx = 2x + 1
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{7, -3}));
}

// Every binary op, both operand orders, every pair of small shapes: where Weft accepts the pair
// (one element, equal shapes, one row of the other with or without its leading 1) the result
// has NumPy's shape and values and finite-difference gradients; elsewhere a clear error. Ties
// in element count ([] vs [1], [3] vs [1, 3]) once took the left operand's shape.
bool weft_accepts(const Shape& a, const Shape& b) {
  const auto is_row_of = [](const Shape& row, const Shape& full) {
    return full.rank() > 0 && (row == full.without_rows() || row == full.without_rows().prepend(1));
  };
  return a == b || a.numel() == 1 || b.numel() == 1 || is_row_of(a, b) || is_row_of(b, a);
}

TEST(Op_add, EveryBinaryOpBroadcastsLikeNumPyInBothOrders) {
  const std::vector<Shape> shapes = {Shape{},     Shape{1},       Shape{1, 1},
                                     Shape{3},    Shape{1, 3},    Shape{3, 1},
                                     Shape{2, 3}, Shape{2, 1, 3}, Shape{1, 2, 3}};
  const std::vector<std::pair<BinaryVarFn, double (*)(double, double)>> ops = {
      {add, [](double a, double b) { return a + b; }},
      {sub, [](double a, double b) { return a - b; }},
      {mul, [](double a, double b) { return a * b; }},
      {div, [](double a, double b) { return a / b; }},
      {minimum, [](double a, double b) { return std::min(a, b); }},
      {maximum, [](double a, double b) { return std::max(a, b); }}};
  std::uint64_t seed = 500;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const BinaryVarFn op = ops[k].first;
    auto apply = [op](const std::vector<Var>& v) { return op(v[0], v[1]); };
    for (const Shape& sa : shapes) {
      for (const Shape& sb : shapes) {
        SCOPED_TRACE("op " + std::to_string(k) + " lhs " + sa.to_string() + " rhs " +
                     sb.to_string());
        const Tensor a = random_tensor(sa, seed++, 0.5f, 2.0f);
        const Tensor b = random_tensor(sb, seed++, 0.5f, 2.0f);
        if (!weft_accepts(sa, sb)) {
          Tape tape;
          expect_error([&] { op(tape.constant(a), tape.constant(b)); },
                       {"shapes do not broadcast"});
          continue;
        }
        ASSERT_TRUE(numpy_broadcast(sa, sb).has_value());
        check_op(apply, binary_reference(ops[k].second), {a, b});
      }
    }
  }
}

TEST(Op_less, ComparisonsBroadcastLikeArithmetic) {
  using CompareFn = Var (*)(Var, Var);
  const std::vector<Shape> shapes = {Shape{}, Shape{1}, Shape{1, 1}, Shape{3}, Shape{1, 3}};
  for (CompareFn op :
       std::vector<CompareFn>{equal, not_equal, less, less_equal, greater, greater_equal}) {
    for (const Shape& sa : shapes) {
      for (const Shape& sb : shapes) {
        if (!weft_accepts(sa, sb)) continue;
        Tape tape;
        const Var y = op(tape.constant(random_tensor(sa, 7)), tape.constant(random_tensor(sb, 8)));
        EXPECT_EQ(y.shape(), numpy_broadcast(sa, sb).value())
            << "lhs " << sa.to_string() << " rhs " << sb.to_string();
      }
    }
  }
}

TEST(Op_mul, NumberOnTheLeftKeepsTheOneElementShape) {
  Tape tape;
  const Var x = tape.constant(Tensor::from_vector({1}, std::vector<float>{3}));
  for (const Var& y : {2.0f * x, 2.0f + x, 2.0f - x, x * 2.0f, x - 2.0f}) {
    EXPECT_EQ(y.shape(), (Shape{1}));
  }
  EXPECT_EQ((2.0f * x).value().to_float_vector(), (std::vector<float>{6}));
  EXPECT_EQ((2.0f - x).value().to_float_vector(), (std::vector<float>{-1}));
}

}  // namespace
}  // namespace weft::testing
