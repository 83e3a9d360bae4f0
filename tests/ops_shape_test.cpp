// Shape ops (concat, split, slice, reshape): float64 references written here by index
// arithmetic, finite-difference gradients, feature-axis batching, zero-row and zero-width
// edges, and the error messages for bad axes, extents, sizes and shapes.
#include <cmath>
#include <numeric>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// The extents before and after `axis`, multiplied out.
std::pair<std::size_t, std::size_t> outer_inner(const Shape& shape, int axis) {
  std::size_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= std::size_t(shape[i]);
  for (int i = axis + 1; i < shape.rank(); ++i) inner *= std::size_t(shape[i]);
  return {outer, inner};
}

HostArray concat_reference(const std::vector<HostArray>& parts, int axis) {
  Shape shape = parts[0].shape;
  shape[axis] = 0;
  for (const HostArray& p : parts) shape[axis] += p.shape[axis];
  auto [outer, inner] = outer_inner(shape, axis);
  std::vector<double> out;
  for (std::size_t o = 0; o < outer; ++o) {
    for (const HostArray& p : parts) {
      const std::size_t block = std::size_t(p.shape[axis]) * inner;
      for (std::size_t j = 0; j < block; ++j) out.push_back(p[o * block + j]);
    }
  }
  return HostArray(shape, out);
}

HostArray slice_reference(const HostArray& x, int axis, std::int64_t start, std::int64_t length) {
  Shape shape = x.shape;
  shape[axis] = length;
  auto [outer, inner] = outer_inner(x.shape, axis);
  const std::size_t extent = std::size_t(x.shape[axis]);
  std::vector<double> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t p = std::size_t(start); p < std::size_t(start + length); ++p)
      for (std::size_t i = 0; i < inner; ++i) out.push_back(x[(o * extent + p) * inner + i]);
  return HostArray(shape, out);
}

// Three rank-3 parts whose extents differ only along `axis` (1, 3 and 2 there).
std::vector<Tensor> rank3_parts(int axis, std::uint64_t seed) {
  std::vector<Tensor> parts;
  for (std::int64_t extent : {1, 3, 2}) {
    Shape shape{2, 3, 4};
    shape[axis] = extent;
    parts.push_back(random_tensor(shape, seed++));
  }
  return parts;
}

WEFT_OP_TEST(concat, Rank3EveryAxis) {
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    check_op([axis](const std::vector<Var>& v) { return concat(v, axis); },
             [axis](const std::vector<HostArray>& h) { return concat_reference(h, axis); },
             rank3_parts(axis, 10 + std::uint64_t(axis) * 5));
  }
}

WEFT_OP_TEST(concat, NegativeAxisAndInitializerList) {
  check_op(
      [](const std::vector<Var>& v) {
        return concat({v[0], v[1], v[2]}, -1);
      },
      [](const std::vector<HostArray>& h) { return concat_reference(h, 2); }, rank3_parts(2, 40));
  // The default axis is 1, the feature axis of [B, F].
  check_op(
      [](const std::vector<Var>& v) {
        return concat({v[0], v[1]});
      },
      [](const std::vector<HostArray>& h) { return concat_reference(h, 1); },
      {random_tensor({3, 2}, 41), random_tensor({3, 5}, 42)});
}

WEFT_OP_TEST(concat, SamePartTwiceSumsItsGradient) {
  check_op(
      [](const std::vector<Var>& v) {
        return concat({v[0], v[1], v[0]}, 1);
      },
      [](const std::vector<HostArray>& h) {
        return concat_reference({h[0], h[1], h[0]}, 1);
      },
      {random_tensor({3, 2}, 43), random_tensor({3, 4}, 44)});
}

WEFT_OP_TEST(concat, ZeroWidthPart) {
  check_op(
      [](const std::vector<Var>& v) {
        return concat({v[0], v[1], v[2]}, 1);
      },
      [](const std::vector<HostArray>& h) { return concat_reference(h, 1); },
      {random_tensor({3, 2}, 45), Tensor::zeros({3, 0}), random_tensor({3, 1}, 46)});
}

TEST(Op_concat, BatchedMatchesRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) { return concat(v, 1); },
      {random_tensor({5, 3}, 50), random_tensor({5, 4}, 51), random_tensor({5, 2}, 52)},
      {true, true, true});
}

TEST(Op_concat, ZeroRows) {
  Tape tape;
  Var a = tape.variable(Tensor::zeros({0, 3}));
  Var b = tape.variable(Tensor::zeros({0, 4}));
  Var y = concat({a, b});
  EXPECT_EQ(y.shape(), (Shape{0, 7}));
  tape.backward(y, Tensor::zeros({0, 7}));
  EXPECT_EQ(a.grad().shape(), (Shape{0, 3}));
  EXPECT_EQ(concat({a, a}, 0).shape(), (Shape{0, 3}));
}

TEST(Op_concat, IntPartsConcatenate) {
  Tape tape;
  Var a = tape.constant(int_tensor({2, 1}, {1, 2}));
  Var b = tape.constant(int_tensor({2, 2}, {3, 4, 5, 6}));
  EXPECT_EQ(concat({a, b}).value().to_int_vector(), (std::vector<std::int32_t>{1, 3, 4, 2, 5, 6}));
}

TEST(Op_concat, ErrorsNameThePartsAndAxis) {
  Tape tape;
  Var a = tape.constant(random_tensor({3, 4}, 1));
  Var b = tape.constant(random_tensor({2, 5}, 2));
  expect_error(
      [&] {
        concat({a, b});
      },
      {"[concat] part 1 has float32 [2, 5] but part 0 has "
       "float32 [3, 4]: all extents except axis 1 must match"});
  expect_error(
      [&] {
        concat({a, b}, 0);
      },
      {"[concat] part 1 has float32 [2, 5]", "all extents except axis 0 must match"});
  expect_error([&] { concat({a, a}, 2); }, {"[concat] axis 2 is out of range for float32 [3, 4]"});
  expect_error([&] { concat({a, a}, -3); }, {"[concat] axis -3 is out of range"});
  expect_error([&] { concat(std::span<const Var>{}); },
               {"[concat] needs at least one part, got an empty list"});
  Var c = tape.constant(random_tensor({3, 4, 1}, 3));
  expect_error([&] { concat({a, c}); }, {"[concat] part 1 has float32 [3, 4, 1] but part 0"});
  Var ints = tape.constant(int_tensor({3, 1}, {1, 2, 3}));
  expect_error(
      [&] {
        concat({a, ints});
      },
      {"[concat] part 1 has int32 [3, 1]", "the dtypes must match"});
  Var s = tape.constant(Tensor::scalar(1.0f));
  expect_error([&] { concat({s, s}, 0); }, {"[concat] part 0 is a scalar"});
}

// The parts of split(x, sizes, axis), concatenated in reverse so that every part's gradient
// flows back into the same input, each from a different place of the cotangent.
WEFT_OP_TEST(split, Rank3EveryAxisAllParts) {
  const std::vector<std::int64_t> sizes = {1, 0, 2, 1};
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Shape shape{2, 3, 4};
    shape[axis] = 4;
    auto op = [axis, sizes](const std::vector<Var>& v) {
      std::vector<Var> parts = split(v[0], sizes, axis);
      EXPECT_EQ(parts.size(), sizes.size());
      return concat({parts[3], parts[2], parts[1], parts[0]}, axis);
    };
    auto reference = [axis, sizes](const std::vector<HostArray>& h) {
      std::vector<HostArray> parts;
      std::int64_t start = 0;
      for (std::int64_t size : sizes) {
        parts.push_back(slice_reference(h[0], axis, start, size));
        start += size;
      }
      return concat_reference({parts[3], parts[2], parts[1], parts[0]}, axis);
    };
    check_op(op, reference, {random_tensor(shape, 60 + std::uint64_t(axis))});
  }
}

WEFT_OP_TEST(split, EachPartAlone) {
  const std::vector<std::int64_t> sizes = {2, 3, 1};
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    SCOPED_TRACE("part " + std::to_string(k));
    const std::int64_t start =
        std::accumulate(sizes.begin(), sizes.begin() + std::ptrdiff_t(k), std::int64_t{0});
    check_op([k, sizes](const std::vector<Var>& v) { return split(v[0], sizes, -1)[k]; },
             [k, sizes, start](const std::vector<HostArray>& h) {
               return slice_reference(h[0], 2, start, sizes[k]);
             },
             {random_tensor({2, 3, 6}, 70)});
  }
}

TEST(Op_split, EqualPartsTemplate) {
  Tape tape;
  Var x = tape.constant(random_tensor({4, 8}, 71));
  auto [f, i, o, g] = split<4>(x);
  HostArray host(x.value());
  EXPECT_EQ(HostArray(o.value()).values, slice_reference(host, 1, 4, 2).values);
  EXPECT_EQ(g.shape(), (Shape{4, 2}));
  auto [top, bottom] = split<2>(x, 0);
  EXPECT_EQ(HostArray(bottom.value()).values, slice_reference(host, 0, 2, 2).values);
  EXPECT_EQ(top.shape(), (Shape{2, 8}));
}

TEST(Op_split, BatchedMatchesRows) {
  const std::vector<std::int64_t> sizes = {3, 1, 2};
  for (std::size_t k = 0; k < sizes.size(); ++k)
    check_batched_matches_rows(
        [k, sizes](const std::vector<Var>& v) { return split(v[0], sizes)[k]; },
        {random_tensor({5, 6}, 72)}, {true});
}

TEST(Op_split, ZeroRows) {
  Tape tape;
  Var x = tape.variable(Tensor::zeros({0, 6}));
  auto [a, b] = split<2>(x);
  EXPECT_EQ(b.shape(), (Shape{0, 3}));
  tape.backward(concat({b, a}), Tensor::zeros({0, 6}));
  EXPECT_EQ(x.grad().shape(), (Shape{0, 6}));
}

TEST(Op_split, ErrorsNameTheExtentAndSizes) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 10}, 3));
  expect_error([&] { split<4>(x); }, {"[split] extent 10 of float32 [2, 10] along axis 1 does not "
                                      "divide into 4 equal parts"});
  expect_error([&] { split<3>(x, -2); }, {"[split] extent 2 of float32 [2, 10] along axis 0"});
  const std::vector<std::int64_t> short_sizes = {3, 4};
  expect_error([&] { split(x, short_sizes); },
               {"[split] sizes [3, 4] sum to 7 but float32 [2, 10] has extent 10 along axis 1"});
  const std::vector<std::int64_t> negative = {12, -2};
  expect_error([&] { split(x, negative); }, {"[split] size -2 at position 1", "is negative"});
  expect_error([&] { split(x, std::span<const std::int64_t>{}); },
               {"[split] needs at least one size"});
  expect_error([&] { split<2>(x, 2); }, {"[split] axis 2 is out of range for float32 [2, 10]"});
}

WEFT_OP_TEST(slice, Rank3EveryAxis) {
  const std::int64_t starts[] = {1, 0, 2}, lengths[] = {1, 2, 2};
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const std::int64_t start = starts[axis], length = lengths[axis];
    check_op(
        [=](const std::vector<Var>& v) { return slice(v[0], axis, start, length); },
        [=](const std::vector<HostArray>& h) { return slice_reference(h[0], axis, start, length); },
        {random_tensor({2, 3, 4}, 80 + std::uint64_t(axis))});
  }
}

WEFT_OP_TEST(slice, NegativeAxisAndEmptyRange) {
  check_op([](const std::vector<Var>& v) { return slice(v[0], -1, 1, 3); },
           [](const std::vector<HostArray>& h) { return slice_reference(h[0], 1, 1, 3); },
           {random_tensor({3, 5}, 84)});
  Tape tape;
  Var x = tape.variable(random_tensor({3, 5}, 85));
  Var empty = slice(x, 1, 5, 0);
  EXPECT_EQ(empty.shape(), (Shape{3, 0}));
  tape.backward(sum(concat({empty, slice(x, 1, 3, 2)}, 1)));
  EXPECT_EQ(x.grad().to_float_vector(),
            (std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1}));
}

TEST(Op_slice, BatchedMatchesRows) {
  check_batched_matches_rows([](const std::vector<Var>& v) { return slice(v[0], 1, 2, 3); },
                             {random_tensor({6, 7}, 86)}, {true});
}

TEST(Op_slice, ErrorsNameTheRange) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 5}, 4));
  expect_error(
      [&] { slice(x, 1, 3, 4); },
      {"[slice] range [3, 7) is out of bounds for extent 5 of float32 [2, 5] along axis 1"});
  expect_error([&] { slice(x, 0, -1, 1); }, {"[slice] range [-1, 0) is out of bounds"});
  expect_error([&] { slice(x, 1, 0, -1); }, {"[slice] range [0, -1) is out of bounds"});
  expect_error([&] { slice(x, 3, 0, 1); }, {"[slice] axis 3 is out of range for float32 [2, 5]"});
}

WEFT_OP_TEST(reshape, InferredAndExplicitShapes) {
  const std::vector<std::vector<std::int64_t>> shapes = {{4, -1}, {24}, {2, 12}, {-1, 2, 2, 3}};
  for (const auto& dims : shapes) {
    auto op = [dims](const std::vector<Var>& v) { return reshape(v[0], dims); };
    auto reference = [dims](const std::vector<HostArray>& h) {
      std::vector<std::int64_t> resolved = dims;
      std::int64_t known = 1;
      for (std::int64_t d : dims) known *= d == -1 ? 1 : d;
      for (std::int64_t& d : resolved)
        if (d == -1) d = std::int64_t(h[0].size()) / known;
      return HostArray(Shape(std::span<const std::int64_t>(resolved)), h[0].values);
    };
    check_op(op, reference, {random_tensor({2, 3, 4}, 90)});
  }
}

WEFT_OP_TEST(reshape, ChainBackToTheStart) {
  check_op(
      [](const std::vector<Var>& v) {
        return reshape(tanh(reshape(v[0], {6, 2})), {3, 4});
      },
      [](const std::vector<HostArray>& h) {
        HostArray y = h[0];
        for (double& value : y.values) value = std::tanh(value);
        return y;
      },
      {random_tensor({3, 4}, 91)});
}

TEST(Op_reshape, BatchedMatchesRows) {
  check_batched_matches_rows(
      [](const std::vector<Var>& v) {
        return reshape(v[0], {-1, 2, 3});
      },
      {random_tensor({4, 6}, 92)}, {true});
}

TEST(Op_reshape, ZeroRowsKeepTheirFeatures) {
  Tape tape;
  Var x = tape.variable(Tensor::zeros({0, 6}));
  EXPECT_EQ(reshape(x, {0, 2, 3}).shape(), (Shape{0, 2, 3}));
  expect_error([&] { reshape(x, {-1, 0}); }, {"[reshape] cannot infer the -1 in [-1, 0]"});
}

TEST(Op_reshape, ErrorsNameBothShapes) {
  Tape tape;
  Var x = tape.constant(random_tensor({2, 6}, 5));
  expect_error(
      [&] {
        reshape(x, {5, 3});
      },
      {"[reshape] cannot reshape float32 [2, 6] (12 elements) to [5, 3] (15 elements)"});
  expect_error([&] { reshape(x, {-1, -1}); }, {"[reshape] shape [-1, -1] has more than one -1"});
  expect_error([&] { reshape(x, {-2, 6}); }, {"[reshape] extent -2 at position 0 of [-2, 6]"});
  expect_error(
      [&] {
        reshape(x, {5, -1});
      },
      {"[reshape] cannot infer the -1 in [5, -1] for float32 [2, 6] (12 elements)"});
  expect_error(
      [&] {
        reshape(x, {1, 1, 1, 1, 1, 2, 6});
      },
      {"[reshape] shape [1, 1, 1, 1, 1, 2, 6] has rank 7, above the maximum 6"});
}

}  // namespace
}  // namespace weft::testing
