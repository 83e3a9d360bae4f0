// Reductions (sum/mean/max over rows, over segments, over everything): float64 references,
// gradients (max with distinct values, so no ties), empty segments, zero rows, segments
// against per-segment row reductions, float accumulation accuracy and validation messages.
#include <algorithm>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// Distinct values 0.05 apart in a random order: a max has no ties, and a finite-difference
// step never changes which element is largest.
Tensor distinct_tensor(const Shape& shape, std::uint64_t seed) {
  const std::size_t n = std::size_t(shape.numel());
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = 0.05f * (float(i) - float(n) / 2);
  Rng rng(seed);
  for (std::size_t i = n; i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  return Tensor::from_vector(shape, values);
}

enum class Kind { kSum, kMean, kMax };

// Reduces the rows r with ids[r] == s into row s of a [segments, F...] result (0 if empty).
HostArray segment_reference(const HostArray& x, const std::vector<std::int32_t>& ids,
                            std::int64_t segments, Kind kind) {
  const std::size_t row = std::size_t(x.shape.row_size());
  std::vector<double> out(std::size_t(segments) * row, 0.0);
  std::vector<int> count(std::size_t(segments), 0);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const std::size_t s = std::size_t(ids[r]);
    for (std::size_t j = 0; j < row; ++j) {
      double& o = out[s * row + j];
      const double v = x[r * row + j];
      o = kind == Kind::kMax ? (count[s] == 0 ? v : std::max(o, v)) : o + v;
    }
    ++count[s];
  }
  if (kind == Kind::kMean)
    for (std::size_t s = 0; s < count.size(); ++s)
      for (std::size_t j = 0; j < row && count[s] > 0; ++j) out[s * row + j] /= count[s];
  return HostArray(x.shape.with_rows(segments), out);
}

HostArray rows_reference(const HostArray& x, Kind kind) {
  const std::vector<std::int32_t> ids(std::size_t(x.shape[0]), 0);
  return segment_reference(x, ids, 1, kind);
}

Tensor ids_tensor(const std::vector<std::int32_t>& values) {
  return int_tensor({std::int64_t(values.size())}, values);
}

using RowsFn = Var (*)(Var);

void check_rows(RowsFn op, Kind kind) {
  for (const Shape& shape : {Shape{4, 3, 2}, Shape{5}, Shape{1, 3}}) {
    SCOPED_TRACE("input " + shape.to_string());
    check_op([op](const std::vector<Var>& v) { return op(v[0]); },
             [kind](const std::vector<HostArray>& h) { return rows_reference(h[0], kind); },
             {distinct_tensor(shape, 200 + std::uint64_t(shape.numel()))});
  }
}

WEFT_OP_TEST(sum_rows, ReferenceAndGradient) { check_rows(sum_rows, Kind::kSum); }
WEFT_OP_TEST(mean_rows, ReferenceAndGradient) { check_rows(mean_rows, Kind::kMean); }
WEFT_OP_TEST(max_rows, ReferenceAndGradient) { check_rows(max_rows, Kind::kMax); }

TEST(Op_max_rows, TiesGiveTheGradientToTheFirstRow) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({3, 2}, std::vector<float>{1, 0, 1, 5, -2, 5}));
  Var y = max_rows(x);
  EXPECT_EQ(y.value().to_float_vector(), (std::vector<float>{1, 5}));
  tape.backward(y, Tensor::from_vector({1, 2}, std::vector<float>{2, 3}));
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{2, 0, 0, 3, 0, 0}));
}

TEST(Op_sum_rows, ZeroRowsGiveZeros) {
  for (RowsFn op : {sum_rows, mean_rows, max_rows}) {
    Tape tape;
    Var x = tape.variable(Tensor::zeros({0, 3}));
    Var y = op(x);
    EXPECT_EQ(y.shape(), (Shape{1, 3}));
    EXPECT_EQ(y.value().to_float_vector(), std::vector<float>(3, 0.0f));
    tape.backward(y, Tensor::full({1, 3}, 1.0f));
    EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
  }
}

TEST(Op_sum_rows, ErrorsNameTheInput) {
  Tape tape;
  Var ints = tape.constant(int_tensor({2}, {1, 2}));
  expect_error([&] { sum_rows(ints); }, {"[sum_rows] input must be float32, got int32 [2]"});
  Var s = tape.constant(Tensor::scalar(2.0f));
  expect_error([&] { max_rows(s); },
               {"[max_rows] input must have a leading (row) axis, got float32 []"});
  expect_error([&] { mean_rows(s); }, {"[mean_rows] input must have a leading (row) axis"});
}

// Segments 1 and 4 are empty; rows of a segment are not adjacent.
const std::vector<std::int32_t> kSegmentIds = {0, 2, 0, 3, 2, 0, 3};
constexpr std::int64_t kSegments = 5;

using SegmentFn = Var (*)(Var, const Tensor&, std::int64_t);

void check_segments(SegmentFn op, Kind kind) {
  const Tensor ids = ids_tensor(kSegmentIds);
  check_op([&](const std::vector<Var>& v) { return op(v[0], ids, kSegments); },
           [&](const std::vector<HostArray>& h) {
             return segment_reference(h[0], kSegmentIds, kSegments, kind);
           },
           {distinct_tensor({7, 3, 2}, 210)});
}

// Segment s of the batch equals the row reduction of segment s's rows gathered alone.
void check_segments_match_rows(SegmentFn op, RowsFn rows_op) {
  Tape tape;
  Var x = tape.constant(distinct_tensor({7, 4}, 211));
  auto batched = op(x, ids_tensor(kSegmentIds), kSegments).value().to_float_vector();
  for (std::int32_t s = 0; s < kSegments; ++s) {
    std::vector<std::int32_t> members;
    for (std::size_t r = 0; r < kSegmentIds.size(); ++r)
      if (kSegmentIds[r] == s) members.push_back(std::int32_t(r));
    auto alone = rows_op(gather_rows(x, ids_tensor(members))).value().to_float_vector();
    for (std::size_t j = 0; j < alone.size(); ++j)
      EXPECT_NEAR(batched[std::size_t(s) * 4 + j], alone[j], 1e-6) << "segment " << s;
  }
}

WEFT_OP_TEST(segment_sum, EmptySegments) { check_segments(segment_sum, Kind::kSum); }
WEFT_OP_TEST(segment_mean, EmptySegments) { check_segments(segment_mean, Kind::kMean); }
WEFT_OP_TEST(segment_max, EmptySegments) { check_segments(segment_max, Kind::kMax); }

TEST(Op_segment_sum, SegmentsMatchRowReductions) {
  check_segments_match_rows(segment_sum, sum_rows);
  check_segments_match_rows(segment_mean, mean_rows);
  check_segments_match_rows(segment_max, max_rows);
}

TEST(Op_segment_max, EmptySegmentGetsNoGradient) {
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({3, 1}, std::vector<float>{-4, -1, -3}));
  Var y = segment_max(x, ids_tensor({2, 0, 2}), 3);
  EXPECT_EQ(y.value().to_float_vector(), (std::vector<float>{-1, 0, -3}));
  tape.backward(y, Tensor::from_vector({3, 1}, std::vector<float>{5, 7, 11}));
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{0, 5, 11}));
}

TEST(Op_segment_sum, ZeroRows) {
  for (SegmentFn op : {segment_sum, segment_mean, segment_max}) {
    Tape tape;
    Var x = tape.variable(Tensor::zeros({0, 2}));
    Var y = op(x, ids_tensor({}), 3);
    EXPECT_EQ(y.value().to_float_vector(), std::vector<float>(6, 0.0f));
    tape.backward(sum(y));
    EXPECT_EQ(x.grad().shape(), (Shape{0, 2}));
  }
  Tape tape;
  EXPECT_EQ(segment_sum(tape.constant(Tensor::zeros({0, 2})), ids_tensor({}), 0).shape(),
            (Shape{0, 2}));
}

TEST(Op_segment_sum, ErrorsNameTheSegmentIds) {
  Tape tape;
  Var x = tape.constant(random_tensor({3, 2}, 6));
  expect_error(
      [&] {
        segment_sum(x, ids_tensor({0, 1, 5}), 5);
      },
      {"[segment_sum] segment_ids value 5 at position 2 is out of range [0, 5)"});
  expect_error(
      [&] {
        segment_mean(x, ids_tensor({0, 1}), 2);
      },
      {"[segment_mean] segment_ids int32 [2] must have one entry per row of input "
       "float32 [3, 2]"});
  expect_error([&] { segment_max(x, random_tensor({3}, 7), 2); },
               {"[segment_max] segment_ids must be int32, got float32 [3]"});
  expect_error(
      [&] {
        segment_sum(x, int_tensor({3, 1}, {0, 0, 0}), 2);
      },
      {"[segment_sum] segment_ids must have rank 1, got int32 [3, 1]"});
  expect_error(
      [&] {
        segment_sum(x, ids_tensor({0, 0, 0}), -2);
      },
      {"[segment_sum] num_segments must be >= 0, got -2"});
}

WEFT_OP_TEST(sum, EveryElementToAScalar) {
  check_op([](const std::vector<Var>& v) { return sum(v[0]); },
           [](const std::vector<HostArray>& h) {
             double total = 0;
             for (double v : h[0].values) total += v;
             return HostArray(Shape{}, {total});
           },
           {random_tensor({3, 4, 2}, 220)});
}

WEFT_OP_TEST(mean, EveryElementToAScalar) {
  check_op([](const std::vector<Var>& v) { return mean(v[0]); },
           [](const std::vector<HostArray>& h) {
             double total = 0;
             for (double v : h[0].values) total += v;
             return HostArray(Shape{}, {total / double(h[0].size())});
           },
           {random_tensor({5, 3}, 221)});
}

TEST(Op_sum, AccurateOverAMillionTerms) {
  // A float running sum of 2^20 copies of 0.1f drifts by ~1e-3 relative; the kernel does not.
  const std::int64_t n = 1 << 20;
  Tape tape;
  Var x = tape.constant(Tensor::full({n}, 0.1f));
  const double exact = double(n) * double(0.1f);
  EXPECT_NEAR(sum(x).value().item(), exact, exact * 1e-7);
  EXPECT_NEAR(mean(x).value().item(), double(0.1f), 1e-7);
}

TEST(Op_sum, ZeroElementsGiveZero) {
  Tape tape;
  Var x = tape.variable(Tensor::zeros({0, 3}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(sum(x).value().item(), 0.0f);
  EXPECT_EQ(mean(x).value().item(), 0.0f);
  tape.backward(mean(x));
  EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
}

TEST(Op_sum, ErrorsNameTheInput) {
  Tape tape;
  Var ints = tape.constant(int_tensor({2}, {1, 2}));
  expect_error([&] { sum(ints); }, {"[sum] input must be float32, got int32 [2]"});
  expect_error([&] { mean(ints); }, {"[mean] input must be float32, got int32 [2]"});
}

}  // namespace
}  // namespace weft::testing
