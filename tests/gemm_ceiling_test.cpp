// The GEMM-ceiling helpers that benchmarks divide by: flop counts, the flop-weighted
// combination, and one real (short) measurement.
#include "weft/backend/gemm_ceiling.h"

#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(GemmCeiling, CombinationIsFlopWeightedHarmonic) {
  const GemmShape big{100, 100, 100}, small{10, 10, 10};
  const std::vector<GemmShape> shapes{big, small};
  const std::vector<double> rates{100.0, 1.0};
  const double seconds = gemm_flops(big) / 100e9 + gemm_flops(small) / 1e9;
  EXPECT_NEAR(combine_gflops(shapes, rates), (gemm_flops(big) + gemm_flops(small)) / seconds / 1e9,
              1e-9);
  EXPECT_EQ(gemm_shape_label(GemmShape{2, 3, 4, false, true, true}), "2x3x4 NT+");
}

TEST(GemmCeiling, AMeasurementIsPositiveAndFinite) {
  const double gflops = measure_sgemm_gflops(GemmShape{32, 32, 32}, 0.01);
  EXPECT_GT(gflops, 0.0);
  EXPECT_LT(gflops, 1e6);
}

}  // namespace
}  // namespace weft::testing
