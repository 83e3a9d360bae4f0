// The dtypes beyond float32: float64, int32, int64 and bool through tensors, the elementwise
// ops (integer arithmetic with wrapping and floor division, comparisons giving bool, where,
// abs, minimum / maximum, cast), gradients that stop at non-float32 values, and the errors of
// mixed-dtype misuse. References are written here in plain C++ over the same values.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "op_test_util.h"

namespace weft::testing {
namespace {

constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();

std::vector<std::int64_t> int64s(const Var& v) {
  const Tensor& t = v.value();
  EXPECT_EQ(t.dtype(), DType::kInt64);
  return std::vector<std::int64_t>(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
}

std::vector<bool> bools(const Var& v) {
  const Tensor& t = v.value();
  EXPECT_EQ(t.dtype(), DType::kBool);
  return std::vector<bool>(t.data<bool>(), t.data<bool>() + t.numel());
}

// Python's // on integers.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

TEST(Dtypes, SizesNamesAndTensorsOfEveryDtype) {
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  const Tensor b = Tensor::from_bools({3}, {true, false, true});
  EXPECT_EQ(b.nbytes(), 3u);
  EXPECT_EQ(b.to_string(), "Tensor(bool, [3], cpu, {true, false, true})");
  const Tensor i = Tensor::from_vector({2}, std::vector<std::int64_t>{kMax64, -5});
  EXPECT_EQ(i.to_string(), "Tensor(int64, [2], cpu, {9223372036854775807, -5})");
  const Tensor d = Tensor::from_vector({1}, std::vector<double>{0.1});
  EXPECT_EQ(d.to_double_vector()[0], 0.1);  // not 0.1f
  expect_error([&] { (void)d.data<float>(); }, {"requested float32 data of a float64 [1] tensor"});
  // zeros and fill work in every dtype.
  for (DType dtype : kAllDTypes) {
    const Tensor z = Tensor::zeros({4}, dtype);
    EXPECT_EQ(z.to_double_vector(), std::vector<double>(4, 0.0)) << dtype_name(dtype);
  }
}

TEST(Dtypes, IntegerArithmeticWrapsAndDividesByFlooring) {
  Tape tape;
  const std::vector<std::int64_t> av{7, -7, 7, -7, kMax64, kMin64, kMin64, 0};
  const std::vector<std::int64_t> bv{2, 2, -2, -2, 1, -1, 1, 3};
  Var a = tape.constant(Tensor::from_vector({8}, av));
  Var b = tape.constant(Tensor::from_vector({8}, bv));
  const auto sum_v = int64s(a + b), diff_v = int64s(a - b), prod_v = int64s(a * b),
             quot_v = int64s(a / b), min_v = int64s(minimum(a, b)), max_v = int64s(maximum(a, b));
  for (std::size_t i = 0; i < av.size(); ++i) {
    SCOPED_TRACE(std::to_string(av[i]) + " op " + std::to_string(bv[i]));
    auto u = [](std::int64_t x) { return std::uint64_t(x); };
    EXPECT_EQ(sum_v[i], std::int64_t(u(av[i]) + u(bv[i])));
    EXPECT_EQ(diff_v[i], std::int64_t(u(av[i]) - u(bv[i])));
    EXPECT_EQ(prod_v[i], std::int64_t(u(av[i]) * u(bv[i])));
    // The minimum divided by -1 wraps to itself, like the other overflows.
    EXPECT_EQ(quot_v[i], av[i] == kMin64 && bv[i] == -1 ? kMin64 : floor_div(av[i], bv[i]));
    EXPECT_EQ(min_v[i], std::min(av[i], bv[i]));
    EXPECT_EQ(max_v[i], std::max(av[i], bv[i]));
  }
  EXPECT_EQ(int64s(abs(a)), (std::vector<std::int64_t>{7, 7, 7, 7, kMax64, kMin64, kMin64, 0}));
  EXPECT_EQ(int64s(-b), (std::vector<std::int64_t>{-2, -2, 2, 2, -1, 1, -1, -3}));
  // int32 in the same way, with a row broadcast and a number.
  Var m = tape.constant(int_tensor({2, 3}, {1, -2, 3, -4, 5, -6}));
  Var row = tape.constant(int_tensor({3}, {10, 20, 30}));
  EXPECT_EQ((m * row + 1.0f).value().to_int_vector(),
            (std::vector<std::int32_t>{11, -39, 91, -39, 101, -179}));
  EXPECT_EQ((m / 4.0f).value().to_int_vector(), (std::vector<std::int32_t>{0, -1, 0, -1, 1, -2}));
  EXPECT_EQ(relu(m).value().to_int_vector(), (std::vector<std::int32_t>{1, 0, 3, 0, 5, 0}));
}

TEST(Dtypes, IntegerDivisionByZeroIsAnErrorNamingTheElement) {
  Tape tape;
  Var a = tape.constant(int_tensor({3}, {1, 2, 3}));
  Var b = tape.constant(int_tensor({3}, {1, 0, 3}));
  expect_error([&] { div(a, b); }, {"[div] integer division by zero: element 1 of the divisor"});
  // float division by zero is IEEE (infinity), not an error.
  Var f = tape.constant(Tensor::from_vector({1}, std::vector<double>{1.0}));
  Var zero = tape.constant(Tensor::from_vector({1}, std::vector<double>{0.0}));
  EXPECT_TRUE(std::isinf((f / zero).value().to_double_vector()[0]));
}

TEST(Dtypes, Float64KeepsItsPrecisionThroughTheOps) {
  Tape tape;
  Var big = tape.constant(Tensor::from_vector({1}, std::vector<double>{1e15}));
  Var one = tape.constant(Tensor::from_vector({1}, std::vector<double>{1.0}));
  EXPECT_EQ(((big + one) - big).value().to_double_vector()[0], 1.0);  // 0 in float32
  const std::vector<double> xs{-3.25, -0.5, 0.125, 2.0, 7.5};
  Var x = tape.constant(Tensor::from_vector({5}, xs));
  const auto t = tanh(x).value().to_double_vector(), e = exp(x).value().to_double_vector(),
             s = sigmoid(x).value().to_double_vector(), p = softplus(x).value().to_double_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(t[i], std::tanh(xs[i]), 1e-15);
    EXPECT_NEAR(e[i], std::exp(xs[i]), 1e-12 * std::exp(xs[i]));
    EXPECT_NEAR(s[i], 1.0 / (1.0 + std::exp(-xs[i])), 1e-15);
    EXPECT_NEAR(p[i], std::log1p(std::exp(xs[i])), 1e-14);
  }
  EXPECT_EQ(tanh(x).value().dtype(), DType::kFloat64);
}

TEST(Dtypes, ComparisonsGiveBoolInEveryDtype) {
  Tape tape;
  const std::vector<double> av{1, 2, 3, -1}, bv{2, 2, 1, -1};
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Var a = cast(tape.constant(Tensor::from_vector({4}, av)), dtype);
    Var b = cast(tape.constant(Tensor::from_vector({4}, bv)), dtype);
    ASSERT_EQ(a.value().dtype(), dtype);
    std::vector<bool> lt, le, gt, ge, eq, ne;
    for (std::size_t i = 0; i < 4; ++i) {
      lt.push_back(av[i] < bv[i]);
      le.push_back(av[i] <= bv[i]);
      gt.push_back(av[i] > bv[i]);
      ge.push_back(av[i] >= bv[i]);
      eq.push_back(av[i] == bv[i]);
      ne.push_back(av[i] != bv[i]);
    }
    EXPECT_EQ(bools(less(a, b)), lt);
    EXPECT_EQ(bools(less_equal(a, b)), le);
    EXPECT_EQ(bools(greater(a, b)), gt);
    EXPECT_EQ(bools(greater_equal(a, b)), ge);
    EXPECT_EQ(bools(equal(a, b)), eq);
    EXPECT_EQ(bools(not_equal(a, b)), ne);
  }
  Var p = tape.constant(Tensor::from_bools({2}, {true, false}));
  Var q = tape.constant(Tensor::from_bools({2}, {true, true}));
  EXPECT_EQ(bools(equal(p, q)), (std::vector<bool>{true, false}));
  EXPECT_EQ(bools(less(p, q)), (std::vector<bool>{false, true}));
  // Broadcast over rows, as the arithmetic does.
  Var m = tape.constant(int_tensor({2, 2}, {1, 5, 3, 0}));
  Var threshold = tape.constant(int_tensor({}, {2}));
  EXPECT_EQ(bools(greater(m, threshold)), (std::vector<bool>{false, true, true, false}));
}

TEST(Dtypes, WhereSelectsInEveryDtype) {
  Tape tape;
  Var cond = tape.constant(Tensor::from_bools({2, 2}, {true, false, false, true}));
  Var a = tape.constant(Tensor::from_vector({2, 2}, std::vector<std::int64_t>{1, 2, 3, 4}));
  Var b = tape.constant(Tensor::from_vector({}, std::vector<std::int64_t>{-9}));
  EXPECT_EQ(int64s(where(cond, a, b)), (std::vector<std::int64_t>{1, -9, -9, 4}));
  Var yes = tape.constant(Tensor::from_bools({2}, {true, true}));
  Var no = tape.constant(Tensor::from_bools({2}, {false, false}));
  EXPECT_EQ(bools(where(cond, yes, no)), (std::vector<bool>{true, false, false, true}));
  Var d = tape.constant(Tensor::from_vector({2}, std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(where(cond, d, d * 2.0f).value().to_double_vector(),
            (std::vector<double>{0.25, 1.0, 0.5, 0.5}));
}

TEST(Dtypes, CastsTruncateSaturateWrapAndTestNonZero) {
  Tape tape;
  const double inf = std::numeric_limits<double>::infinity();
  Var f = tape.constant(Tensor::from_vector(
      {7}, std::vector<double>{2.9, -2.9, 1e300, -inf, std::nan(""), 0.0, 3e9}));
  EXPECT_EQ(cast(f, DType::kInt32).value().to_int_vector(),
            (std::vector<std::int32_t>{2, -2, std::numeric_limits<std::int32_t>::max(),
                                       std::numeric_limits<std::int32_t>::min(), 0, 0,
                                       std::numeric_limits<std::int32_t>::max()}));
  EXPECT_EQ(int64s(cast(f, DType::kInt64)),
            (std::vector<std::int64_t>{2, -2, kMax64, kMin64, 0, 0, 3000000000}));
  EXPECT_EQ(bools(cast(f, DType::kBool)),
            (std::vector<bool>{true, true, true, true, true, false, true}));
  // int64 to int32 keeps the low 32 bits (two's complement), as NumPy's astype does.
  Var big = tape.constant(Tensor::from_vector({2}, std::vector<std::int64_t>{(1LL << 32) + 5, -1}));
  EXPECT_EQ(cast(big, DType::kInt32).value().to_int_vector(), (std::vector<std::int32_t>{5, -1}));
  Var flags = tape.constant(Tensor::from_bools({2}, {true, false}));
  EXPECT_EQ(cast(flags, DType::kFloat32).value().to_float_vector(), (std::vector<float>{1, 0}));
  // A cast to the same dtype is the Var itself.
  EXPECT_EQ(cast(f, DType::kFloat64).id(), f.id());
}

TEST(Dtypes, GradientsStopAtValuesThatAreNotFloat32) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({3}, std::vector<float>{1.5f, -2.5f, 3.0f}));
  // floor-ish through int32 and back: a step function, with no gradient through it.
  Var stepped = cast(cast(x, DType::kInt32), DType::kFloat32);
  EXPECT_FALSE(stepped.requires_grad());
  EXPECT_FALSE(greater(x, x).requires_grad());
  tape.backward(sum(x * stepped));
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{1, -2, 3}));
  Var where_x = tape.variable(Tensor::from_vector({3}, std::vector<float>{1, 2, 3}));
  Var threshold = tape.constant(Tensor::scalar(2.5f));
  tape.backward(sum(where(less(where_x, threshold), where_x, where_x * 3.0f)));
  EXPECT_EQ(where_x.grad().to_float_vector(), (std::vector<float>{1, 1, 3}));
}

TEST(Dtypes, ShapeAndIndexingOpsMoveEveryDtype) {
  Tape tape;
  Var big = tape.constant(
      Tensor::from_vector({3, 2}, std::vector<std::int64_t>{kMax64, 1, -2, 3, kMin64, 5}));
  Var flags = tape.constant(Tensor::from_bools({3, 2}, {true, false, false, true, true, true}));
  Var wide = tape.constant(Tensor::from_vector({3, 1}, std::vector<double>{0.1, 0.2, 0.3}));
  const Tensor rows = int_tensor({4}, {2, 0, 2, 1});
  EXPECT_EQ(int64s(gather_rows(big, rows)),
            (std::vector<std::int64_t>{kMin64, 5, kMax64, 1, kMin64, 5, -2, 3}));
  EXPECT_EQ(bools(gather_rows(flags, rows)),
            (std::vector<bool>{true, true, true, false, true, true, false, true}));
  EXPECT_EQ(gather_rows(wide, rows).value().to_double_vector(),
            (std::vector<double>{0.3, 0.1, 0.3, 0.2}));
  EXPECT_EQ(int64s(concat({big, big}, 1)),
            (std::vector<std::int64_t>{kMax64, 1, kMax64, 1, -2, 3, -2, 3, kMin64, 5, kMin64, 5}));
  EXPECT_EQ(bools(slice(flags, 1, 1, 1)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(reshape(wide, {3}).value().to_double_vector(), (std::vector<double>{0.1, 0.2, 0.3}));
}

TEST(Dtypes, Int64IndicesGatherAndScatterLikeInt32OnesAndAreCheckedBeforeNarrowing) {
  Tape tape;
  Var table = tape.variable(random_tensor({4, 3}, 5));
  const Tensor ids32 = int_tensor({3}, {3, 0, 3});
  const Tensor ids64 = Tensor::from_vector({3}, std::vector<std::int64_t>{3, 0, 3});
  EXPECT_EQ(gather_rows(table, ids64).value().to_float_vector(),
            gather_rows(table, ids32).value().to_float_vector());
  EXPECT_EQ(embedding_lookup(table, ids64).value().to_float_vector(),
            embedding_lookup(table, ids32).value().to_float_vector());
  Var rows = tape.variable(random_tensor({3, 2}, 6));
  EXPECT_EQ(scatter_add_rows(rows, ids64, 5).value().to_float_vector(),
            scatter_add_rows(rows, ids32, 5).value().to_float_vector());
  // The gradient reaches the rows read, twice for row 3.
  tape.backward(sum(gather_rows(table, ids64)));
  EXPECT_EQ(table.grad().to_float_vector(),
            (std::vector<float>{1, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2}));
  // 2^32 + 1 would be row 1 after narrowing: it is out of range, and said so.
  const Tensor wide_ids = Tensor::from_vector({2}, std::vector<std::int64_t>{1, (1LL << 32) + 1});
  expect_error([&] { gather_rows(table, wide_ids); },
               {"[gather_rows] indices value 4294967297 at position 1 is out of range [0, 4)"});
}

TEST(Dtypes, MixedOrUnsupportedDtypesAreErrorsNamingBoth) {
  Tape tape;
  Var i32 = tape.constant(int_tensor({2}, {1, 2}));
  Var i64 = tape.constant(Tensor::from_vector({2}, std::vector<std::int64_t>{1, 2}));
  Var f64 = tape.constant(Tensor::from_vector({2}, std::vector<double>{1, 2}));
  Var flags = tape.constant(Tensor::from_bools({2}, {true, false}));
  expect_error([&] { add(i32, i64); },
               {"[add] operands have different dtypes: lhs int32 [2] vs rhs int64 [2]", "cast()"});
  expect_error([&] { less(f64, i64); },
               {"[less] operands have different dtypes: lhs float64 [2] vs rhs int64 [2]"});
  expect_error([&] { add(flags, flags); }, {"[add] lhs must be a number dtype", "got bool [2]"});
  expect_error([&] { exp(i64); }, {"[exp] input must be float32 or float64, got int64 [2]"});
  expect_error([&] { where(i32, i32, i32); }, {"[where] the condition must be bool, got int32"});
  expect_error([&] { where(flags, i32, f64); },
               {"[where] operands have different dtypes: lhs int32 [2] vs rhs float64 [2]"});
  expect_error(
      [&] {
        matmul(tape.constant(Tensor::from_vector({1, 2}, std::vector<double>{1, 2})),
               tape.constant(Tensor::from_vector({2, 1}, std::vector<double>{1, 2})));
      },
      {"[matmul]", "float32", "float64 [1, 2]"});
}

}  // namespace
}  // namespace weft::testing
