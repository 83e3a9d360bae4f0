// Denormal floats are flushed while Weft's CPU kernels run (weft/core/denormals.h): on by
// default, off with WEFT_DENORMALS=keep or set_denormal_mode, on every thread that computes
// (the caller's, other threads', the GEMM providers' workers), and the caller's own mode is
// given back. Each test starts from a new thread, whose mode is the process's default
// (denormals kept), so what it sees is what Weft set.
#include "weft/core/denormals.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <thread>

#include "op_test_util.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_selection.h"

namespace weft::testing {
namespace {

// A denormal: below FLT_MIN (1.18e-38) and above zero.
constexpr float kTiny = 1e-39f;

// Runs `body` on a new thread (the process's initial floating-point mode) and waits.
template <typename Body>
void on_fresh_thread(Body body) {
  std::thread thread(body);
  thread.join();
}

// x · w for an [m, k] x of denormals and a w of ones: each output is a sum of k denormals, a
// denormal too when they are kept, zero when inputs are flushed (DAZ).
std::vector<float> denormal_product(std::int64_t m, std::int64_t k, std::int64_t n) {
  Tape tape;
  Var x = tape.constant(Tensor::full(Shape{m, k}, kTiny));
  Var w = tape.constant(Tensor::full(Shape{k, n}, 1.0f));
  return matmul(x, w).value().to_float_vector();
}

// Restores the process's setting after a test changes it.
class DenormalsTest : public ::testing::Test {
 protected:
  void TearDown() override { set_denormal_mode(DenormalMode::kFlush); }
};

TEST_F(DenormalsTest, FlushIsTheDefaultWithoutTheEnvironmentVariable) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";  // a fresh process
  ::unsetenv("WEFT_DENORMALS");
  EXPECT_EXIT(
      {
        const bool ok = denormal_mode() == DenormalMode::kFlush &&
                        denormal_mode_source() == "default" && denormal_product(1, 2, 1)[0] == 0.0f;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DenormalsTest, TheEnvironmentVariableKeepsThem) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  ::setenv("WEFT_DENORMALS", "keep", 1);
  EXPECT_EXIT(
      {
        float value = -1;
        on_fresh_thread([&] { value = denormal_product(1, 2, 1)[0]; });
        const bool ok = denormal_mode() == DenormalMode::kKeep &&
                        denormal_mode_source() == "WEFT_DENORMALS" && value == 2 * kTiny;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  ::setenv("WEFT_DENORMALS", "sometimes", 1);
  EXPECT_EXIT(
      {
        try {
          denormal_product(1, 2, 1);
        } catch (const Error& e) {
          std::exit(std::string(e.what()).find("WEFT_DENORMALS='sometimes'") != std::string::npos
                        ? 0
                        : 1);
        }
        std::exit(2);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("WEFT_DENORMALS");
}

TEST_F(DenormalsTest, KernelsFlushAndTheCallerKeepsItsMode) {
  if (!denormal_control_supported()) GTEST_SKIP() << "no denormal control on this CPU";
  set_denormal_mode(DenormalMode::kFlush);
  on_fresh_thread([] {
    ASSERT_FALSE(thread_flushes_denormals());
    EXPECT_EQ(denormal_product(3, 5, 4), std::vector<float>(12, 0.0f));
    Tape tape;
    Var tiny = tape.constant(Tensor::full(Shape{2, 3}, kTiny));
    EXPECT_EQ((tiny * tape.constant(Tensor::full(Shape{2, 3}, 1.0f))).value().to_float_vector(),
              std::vector<float>(6, 0.0f));
    EXPECT_FALSE(thread_flushes_denormals()) << "the caller's mode was not given back";
  });
}

TEST_F(DenormalsTest, KeepLeavesDenormalsAndTheThreadAlone) {
  set_denormal_mode(DenormalMode::kKeep);
  on_fresh_thread([] {
    EXPECT_EQ(denormal_product(3, 5, 4), std::vector<float>(12, 5 * kTiny));
    EXPECT_FALSE(thread_flushes_denormals());
  });
}

TEST_F(DenormalsTest, ScopesNestAndRestore) {
  if (!denormal_control_supported()) GTEST_SKIP() << "no denormal control on this CPU";
  on_fresh_thread([] {
    {
      const DenormalScope outer;
      EXPECT_TRUE(thread_flushes_denormals());
      {
        const DenormalScope inner;
        EXPECT_TRUE(thread_flushes_denormals());
      }
      EXPECT_TRUE(thread_flushes_denormals()) << "an inner scope undid the outer one";
    }
    EXPECT_FALSE(thread_flushes_denormals());
  });
}

// Products large enough that the providers split them over their worker threads. oneDNN's
// OpenMP workers flush (Weft sets them); OpenBLAS's flush exactly when the probe said so, and
// when they do not, calibrated products avoid OpenBLAS and flush all the same.
TEST_F(DenormalsTest, ProductsOnSeveralThreadsFlush) {
  if (!denormal_control_supported()) GTEST_SKIP() << "no denormal control on this CPU";
  const int threads = num_threads();
  const std::optional<GemmProvider> forced = forced_gemm_provider();
  set_num_threads(2);
  const auto all_flushed = [] {
    bool flushed = false;
    on_fresh_thread([&] {
      const std::vector<float> out = denormal_product(256, 256, 256);
      flushed = std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; });
    });
    return flushed;
  };
  for (GemmProvider provider : available_gemm_providers()) {
    set_gemm_provider(provider);
    const bool expected =
        provider == GemmProvider::kOpenBlas ? openblas_workers_flush_denormals() : true;
    EXPECT_EQ(all_flushed(), expected) << gemm_provider_name(provider);
  }
  use_calibrated_gemm();
  EXPECT_TRUE(all_flushed()) << "a calibrated product left denormals on a worker thread";
  set_num_threads(threads);
  if (forced) set_gemm_provider(*forced);
}

TEST_F(DenormalsTest, ModeNamesParse) {
  EXPECT_EQ(parse_denormal_mode("keep"), DenormalMode::kKeep);
  EXPECT_EQ(parse_denormal_mode("flush"), DenormalMode::kFlush);
  expect_error([] { parse_denormal_mode("off"); },
               {"[denormals] unknown denormal mode 'off'; expected flush or keep"});
}

}  // namespace
}  // namespace weft::testing
