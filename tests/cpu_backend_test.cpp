// CPU backend settings: GEMM providers agree, thread and provider settings validate input
// (choosing between providers: gemm_selection_test.cpp).
#include "weft/backend/cpu.h"

#include "weft/backend/gemm_selection.h"

#include "../src/backend/kernels.h"
#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(CpuBackend, EveryProviderComputesTheSameProducts) {
  const std::optional<GemmProvider> original = forced_gemm_provider();
  Tensor a = random_tensor({33, 70}, 1);
  Tensor b = random_tensor({70, 45}, 2);
  std::vector<std::vector<float>> results;
  for (GemmProvider provider : available_gemm_providers()) {
    set_gemm_provider(provider);
    Tape tape;
    results.push_back(
        matmul(tape.constant(a), tape.constant(b), false, false).value().to_float_vector());
  }
  if (original)
    set_gemm_provider(*original);
  else
    use_calibrated_gemm();
  for (std::size_t p = 1; p < results.size(); ++p)
    for (std::size_t i = 0; i < results[0].size(); ++i)
      ASSERT_NEAR(results[p][i], results[0][i], 1e-4) << "provider " << p << " element " << i;
}

TEST(CpuBackend, SettingsRejectBadValues) {
  expect_error([] { parse_gemm_provider("mkl"); },
               {"[gemm] unknown GEMM provider 'mkl'; expected onednn or openblas"});
  expect_error([] { parse_gemm_provider("auto"); }, {"[gemm] 'auto' is not a provider"});
  expect_error([] { set_num_threads(0); }, {"[threads] thread count must be at least 1, got 0"});
  EXPECT_EQ(parse_gemm_provider("openblas"), GemmProvider::kOpenBlas);
}

TEST(CpuBackend, ThreadSettingIsKept) {
  const int original = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_NE(cpu_backend_summary().find("threads=1"), std::string_view::npos);
  set_num_threads(original);
}

TEST(CpuBackend, KernelListIsComplete) {
  // Every kernel in kernels.def has a CPU implementation (else this would not link) and a name.
  EXPECT_GE(std::size(backend::kKernelNames), 20u);
}

}  // namespace
}  // namespace weft::testing
