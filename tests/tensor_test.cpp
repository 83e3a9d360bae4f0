// Tensor handles: construction, sharing, views, copies and their errors.
#include "weft/tensor/tensor.h"

#include "op_test_util.h"
#include "weft/backend/cuda.h"

namespace weft::testing {
namespace {

TEST(Shape, ArithmeticAndPrinting) {
  Shape s{3, 4, 5};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 60);
  EXPECT_EQ(s.row_size(), 20);
  EXPECT_EQ(s.to_string(), "[3, 4, 5]");
  EXPECT_EQ(s.without_rows(), (Shape{4, 5}));
  EXPECT_EQ(s.with_rows(7), (Shape{7, 4, 5}));
  EXPECT_EQ(Shape{}.to_string(), "[]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ((Shape{2, 0, 3}).numel(), 0);
  EXPECT_EQ(Shape{4}.prepend(2), (Shape{2, 4}));
  expect_error([] { Shape{1, -2}; }, {"[shape] [1, -2]: negative extent -2"});
  expect_error([] { Shape{1, 1, 1, 1, 1, 1, 1}; }, {"rank 7 exceeds the maximum rank 6"});
}

// Element and byte counts that do not fit 64 bits are errors naming the shape, never a wrapped
// count (which allocated 4 elements for [2^62 + 1, 4] and nothing for [2^32, 2^32]).
TEST(Shape, ElementCountsThatOverflowAreErrors) {
  constexpr std::int64_t k2to32 = std::int64_t(1) << 32, k2to62 = std::int64_t(1) << 62;
  expect_error(
      [] {
        Shape{k2to32, k2to32};
      },
      {"[shape] [4294967296, 4294967296] has more elements than a 64-bit count holds"});
  expect_error([] { Shape{k2to62 + 1, 4}; }, {"[4611686018427387905, 4]", "64-bit count"});
  expect_error([] { Shape{3, k2to62, 2, 2}; }, {"64-bit count"});
  // An extent of 0 makes the shape empty however large the others are.
  EXPECT_EQ((Shape{k2to62, 4, 0}).numel(), 0);
  EXPECT_EQ((Shape{4, 0, k2to62}).row_size(), 0);
  expect_error([] { Shape{0, k2to62, 4}.row_size(); }, {"64-bit count"});  // rows of 2^64
  // A shape that fits as elements but not as bytes, and shapes grown past the limit in place.
  expect_error([] { Tensor::empty(Shape{k2to62}, DType::kFloat32); },
               {"[tensor] shape [4611686018427387904] of float32 needs more than 2^63 bytes"});
  expect_error([] { Tensor::zeros(Shape{k2to62 / 2 + 1, 2}, DType::kFloat64); }, {"2^63 bytes"});
  expect_error([] { Shape{4}.prepend(k2to62).numel(); }, {"[4611686018427387904, 4]"});
  expect_error([] { Shape{1, k2to32}.with_rows(k2to32).numel(); }, {"64-bit count"});
}

TEST(Tensor, FromVectorRoundTripsBothDtypes) {
  Tensor f = Tensor::from_vector({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(f.rows(), 2);
  EXPECT_EQ(f.row_size(), 3);
  EXPECT_EQ(f.to_float_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor i = Tensor::from_vector({3}, std::vector<std::int32_t>{7, -1, 2});
  EXPECT_EQ(i.dtype(), DType::kInt32);
  EXPECT_EQ(i.to_int_vector(), (std::vector<std::int32_t>{7, -1, 2}));
  expect_error(
      [] {
        Tensor::from_vector({2, 2}, std::vector<float>{1, 2, 3});
      },
      {"[from_vector] 3 values do not fill shape [2, 2] (4 elements)"});
}

TEST(Tensor, CopiesShareStorageAndClonesDoNot) {
  Tensor a = Tensor::zeros({2, 2});
  Tensor shared = a;
  Tensor copy = a.clone();
  a.data<float>()[0] = 5.0f;
  EXPECT_EQ(shared.to_float_vector()[0], 5.0f);
  EXPECT_EQ(copy.to_float_vector()[0], 0.0f);
}

TEST(Tensor, RowViewsAndReshapesAreViews) {
  Tensor a = Tensor::from_vector({3, 2}, std::vector<float>{0, 1, 2, 3, 4, 5});
  Tensor middle = a.rows_view(1, 2);
  EXPECT_EQ(middle.shape(), (Shape{2, 2}));
  EXPECT_EQ(middle.to_float_vector(), (std::vector<float>{2, 3, 4, 5}));
  middle.data<float>()[0] = 9.0f;
  EXPECT_EQ(a.to_float_vector()[2], 9.0f);
  EXPECT_EQ(a.reshaped({2, 3}).shape(), (Shape{2, 3}));
  expect_error([&] { a.rows_view(2, 2); },
               {"[rows_view] rows [2, 4) out of range for float32 [3, 2]"});
  expect_error(
      [&] {
        a.reshaped({4, 2});
      },
      {"[reshape] cannot view float32 [3, 2] (6 elements) as [4, 2]"});
}

TEST(Tensor, TypedAccessChecksTheDtype) {
  Tensor i = Tensor::zeros({2}, DType::kInt32);
  expect_error([&] { i.data<float>(); }, {"[data] requested float32 data of a int32 [2] tensor"});
  expect_error([&] { Tensor::zeros({2}).item(); }, {"[item] expected a one-element tensor"});
  EXPECT_EQ(Tensor::scalar(2.5f).item(), 2.5f);
}

TEST(Tensor, CudaWithoutCudaIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is usable here";
  if (cuda_built()) {
    expect_error([] { Tensor::zeros({2}, DType::kFloat32, Device::kCuda); },
                 {"no CUDA device is usable", "Device::kCpu"});
  } else {
    expect_error([] { Tensor::zeros({2}, DType::kFloat32, Device::kCuda); },
                 {"built without CUDA", "WEFT_WITH_CUDA"});
  }
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  expect_error([] { cuda_device_name(0); }, {"[cuda] device 0 does not exist"});
  cuda_synchronize();  // nothing queued, nothing to wait for
}

TEST(Tensor, ToStringShowsSmallValues) {
  Tensor a = Tensor::from_vector({2}, std::vector<float>{1.5f, -2});
  EXPECT_EQ(a.to_string(), "Tensor(float32, [2], cpu, {1.5, -2})");
  EXPECT_EQ(a.describe(), "float32 [2]");
}

}  // namespace
}  // namespace weft::testing
