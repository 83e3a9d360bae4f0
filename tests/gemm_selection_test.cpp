// The GEMM provider per shape class: buckets, calibration, the cache file (used, merged,
// replaced when it is not valid, optional when it cannot be written), and forcing a provider.
#include "weft/backend/gemm_selection.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "backend/cpu/calibration_checks.h"
#include "backend/cpu/calibration_clock.h"
#include "io_test_util.h"
#include "op_test_util.h"

namespace weft::testing {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Each test gets its own cache file in a temporary directory and leaves the process as it
// found it: calibrated choices, cached where they were.
class GemmSelection : public IoTempDir {
 protected:
  void SetUp() override {
    IoTempDir::SetUp();
    original_forced_ = forced_gemm_provider();
    original_cache_ = gemm_selection_report().cache_path;
    use_calibrated_gemm();
    cache_ = (dir_ / "gemm.txt").string();
    // Measurements count as clean unless a test says otherwise, so that a loaded machine
    // (ctest -j2, a build beside) does not decide what these tests see.
    backend::cpu::set_calibration_noise_override(&clean_);
    // One GEMM thread: at several, a Debian OpenBLAS whose workers cannot flush denormals is
    // left out of the calibration (openblas_workers_flush_denormals), leaving nothing to choose.
    original_threads_ = num_threads();
    set_num_threads(1);
  }
  void TearDown() override {
    set_num_threads(original_threads_);
    backend::cpu::set_calibration_noise_override(nullptr);
    if (original_forced_)
      set_gemm_provider(*original_forced_);
    else
      use_calibrated_gemm();
    set_gemm_cache_path(original_cache_);
    IoTempDir::TearDown();
  }
  void skip_unless_two_providers() {
    if (available_gemm_providers().size() < 2)
      GTEST_SKIP() << "one GEMM provider built in: nothing to choose between";
  }
  // The first two lines every valid cache file starts with.
  std::string header() const {
    return "weft gemm calibration 3\ncpu " + gemm_selection_report().cpu_identity + "\n";
  }

  std::optional<GemmProvider> original_forced_;
  std::string original_cache_;
  std::string cache_;
  const std::string clean_;
  int original_threads_ = 1;
};

TEST(GemmShapeClasses, EachExtentFallsInItsPowerOfTwoBucket) {
  const GemmShapeClass c = gemm_shape_class(GemmShape{1, 16, 17, false, true});
  EXPECT_EQ(c, (GemmShapeClass{false, true, false, 0, 4, 5}));
  EXPECT_EQ(gemm_class_label(c), "NT m 1 n 9-16 k 17-32");
  EXPECT_EQ(gemm_shape_class(GemmShape{2, 3, 4}), (GemmShapeClass{false, false, false, 1, 2, 2}));
  EXPECT_EQ(gemm_shape_class(GemmShape{257, 512, 4097, true, false, true}),
            (GemmShapeClass{true, false, true, 9, 9, 13}));
  EXPECT_EQ(gemm_class_label(gemm_shape_class(GemmShape{2, 1 << 20, 5, true, true, true})),
            "TT+ m 2 n >4096 k 5-8");
}

// At one GEMM thread the calibration's clock counts the thread's work and not the time it
// spends off the CPU (a wall clock would count the sleep, and a run that another process
// interrupted would measure slow); at several threads it is the wall clock.
TEST(GemmCalibrationClock, OneThreadCountsWorkNotTimeOffTheCpu) {
  using backend::cpu::calibration_seconds;
  const double before_sleep = calibration_seconds(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(calibration_seconds(1) - before_sleep, 0.05);

  const double start = calibration_seconds(1);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  volatile double sink = 0;
  while (calibration_seconds(1) - start < 0.02 && std::chrono::steady_clock::now() < give_up)
    sink = sink + 1;
  EXPECT_GE(calibration_seconds(1) - start, 0.02) << "busy work did not advance it";

  const double wall = calibration_seconds(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_GE(calibration_seconds(2) - wall, 0.03);
}

TEST(GemmShapeClasses, RepresentativesAreCheapAndInTheirClassUnlessHalved) {
  for (int kind = 0; kind < 8; ++kind)
    for (int m = 0; m < 14; ++m)
      for (int n = 0; n < 14; ++n)
        for (int k = 0; k < 14; ++k) {
          const GemmShapeClass c{(kind & 4) != 0, (kind & 2) != 0, (kind & 1) != 0, m, n, k};
          const GemmShape shape = gemm_class_representative(c);
          ASSERT_LE(gemm_flops(shape), double(1ll << 31)) << gemm_class_label(c);
          ASSERT_GE(std::min({shape.m, shape.n, shape.k}), 1) << gemm_class_label(c);
          ASSERT_EQ(shape.transpose_a, c.transpose_a);
          ASSERT_EQ(shape.transpose_b, c.transpose_b);
          ASSERT_EQ(shape.accumulate, c.accumulate);
          // Only classes whose 2^m x 2^n x 2^k product is too long to time are halved below
          // their bucket; the rest are measured at a shape of the class they stand for.
          if (m + n + k <= 30) {
            ASSERT_EQ(gemm_shape_class(shape), c) << gemm_class_label(c);
          }
        }
}

TEST_F(GemmSelection, CalibratesAClassOnceAndCachesIt) {
  skip_unless_two_providers();
  set_gemm_cache_path(cache_);
  EXPECT_EQ(gemm_selection_report().cache_status, "none yet");
  const GemmShape shape{300, 512, 128, false, true};
  const GemmProvider chosen = gemm_provider_for(shape);
  GemmSelectionReport report = gemm_selection_report();
  EXPECT_EQ(report.mode, "calibrated per shape class");
  ASSERT_EQ(report.classes.size(), 1u);
  const GemmClassChoice choice = report.classes[0];  // a copy: `report` is read again below
  EXPECT_EQ(choice.shape_class, gemm_shape_class(shape));
  EXPECT_FALSE(choice.from_cache);
  EXPECT_EQ(choice.provider, chosen);
  ASSERT_EQ(choice.gflops.size(), available_gemm_providers().size());
  for (std::size_t p = 0; p < choice.gflops.size(); ++p) {
    EXPECT_GT(choice.gflops[p], 0.0);
    if (available_gemm_providers()[p] != chosen) {
      const auto chosen_at =
          std::find(available_gemm_providers().begin(), available_gemm_providers().end(), chosen) -
          available_gemm_providers().begin();
      EXPECT_GE(choice.gflops[std::size_t(chosen_at)], choice.gflops[p]) << "not the fastest";
    }
  }
  // Another shape of the same class is not measured again.
  EXPECT_EQ(gemm_provider_for(GemmShape{280, 500, 100, false, true}), chosen);
  EXPECT_EQ(gemm_selection_report().classes.size(), 1u);

  const std::string text = read_text(cache_);
  EXPECT_EQ(text.rfind(header(), 0), 0u) << text;
  EXPECT_NE(text.find("class "), std::string::npos) << text;

  // A new process (here: the cache read afresh) takes the choice from the file.
  set_gemm_cache_path(cache_);
  report = gemm_selection_report();
  EXPECT_EQ(report.cache_status,
            "read 1 classes for " + std::to_string(num_threads()) + " thread(s)");
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_TRUE(report.classes[0].from_cache);
  EXPECT_EQ(report.classes[0].provider, chosen);
  EXPECT_EQ(report.classes[0].gflops.size(), choice.gflops.size());
}

TEST_F(GemmSelection, TheCacheDecidesWithoutMeasuring) {
  skip_unless_two_providers();
  // The cache names each provider in turn for the class of 300x512x128 NT (buckets 9 9 7);
  // rates that no
  // measurement would give show that nothing was measured.
  for (GemmProvider provider : available_gemm_providers()) {
    std::string line = "class " + std::to_string(num_threads()) + " NT 9 9 7 " +
                       std::string(gemm_provider_name(provider));
    for (GemmProvider p : available_gemm_providers())
      line += " " + std::string(gemm_provider_name(p)) + "=" + (p == provider ? "2" : "1");
    write_file("gemm.txt", header() + line + "\n");
    set_gemm_cache_path(cache_);
    EXPECT_EQ(gemm_provider_for(GemmShape{300, 512, 128, false, true}), provider);
    const GemmSelectionReport report = gemm_selection_report();
    ASSERT_EQ(report.classes.size(), 1u);
    EXPECT_TRUE(report.classes[0].from_cache);
    EXPECT_EQ(*std::max_element(report.classes[0].gflops.begin(), report.classes[0].gflops.end()),
              2.0);
  }
}

TEST_F(GemmSelection, ProductsAgreeWithEveryForcedProvider) {
  // Whatever calibration picks, a product equals the same product through each provider.
  set_gemm_cache_path(cache_);
  Tensor a = random_tensor({40, 70}, 1);
  Tensor b = random_tensor({45, 70}, 2);
  auto product = [&] {
    Tape tape;
    return matmul(tape.constant(a), tape.constant(b), false, true).value().to_float_vector();
  };
  const std::vector<float> calibrated = product();
  for (GemmProvider provider : available_gemm_providers()) {
    set_gemm_provider(provider);
    EXPECT_EQ(gemm_provider_for(GemmShape{40, 45, 70, false, true}), provider);
    EXPECT_EQ(gemm_selection_report().mode, "forced by set_gemm_provider");
    const std::vector<float> forced = product();
    for (std::size_t i = 0; i < forced.size(); ++i)
      ASSERT_NEAR(forced[i], calibrated[i], 1e-4) << gemm_provider_name(provider) << " " << i;
  }
  use_calibrated_gemm();
  EXPECT_EQ(gemm_selection_report().mode, available_gemm_providers().size() > 1
                                              ? "calibrated per shape class"
                                              : "the only provider built in");
}

TEST_F(GemmSelection, AnInvalidCacheIsIgnoredWithItsReasonAndReplaced) {
  skip_unless_two_providers();
  const std::string threads = std::to_string(num_threads());
  const std::string rates = [] {
    std::string text;
    for (GemmProvider p : available_gemm_providers())
      text += " " + std::string(gemm_provider_name(p)) + "=1";
    return text;
  }();
  const std::string provider(gemm_provider_name(available_gemm_providers()[0]));
  const std::pair<std::string, std::string> cases[] = {
      {"not a cache\n", "line 1 is not 'weft gemm calibration 3'"},
      // version 2 timed by the wall clock: measured again
      {"weft gemm calibration 2\ncpu " + gemm_selection_report().cpu_identity + "\n",
       "line 1 is not 'weft gemm calibration 3'"},
      {"weft gemm calibration 3\ncpu some other machine\n", "line 2: written for another CPU"},
      {header() + "class " + threads + " NT 9 14 7 " + provider + rates + "\n",
       "line 3: a size bucket outside 0..13"},
      {header() + "class " + threads + " NX 9 9 7 " + provider + rates + "\n",
       "line 3: kind 'NX' is not NN, NT, TN or TT, with or without '+'"},
      {header() + "class " + threads + " NT 9 9 7 mkl" + rates + "\n",
       "line 3: provider 'mkl' is not built in"},
      {header() + "class " + threads + " NT 9 9 7 " + provider + " " + provider + "=nan\n",
       "line 3: rate '" + provider + "=nan' is not a positive number"},
      {header() + "class " + threads + " NT 9 9 7 " + provider + rates + " extra\n",
       "line 3: unexpected 'extra' after the rates"},
      {header() + std::string(1 << 20, '#'), "larger than 1048576 bytes"},
  };
  for (const auto& [text, why] : cases) {
    write_file("gemm.txt", text);
    set_gemm_cache_path(cache_);
    const std::string status = gemm_selection_report().cache_status;
    EXPECT_EQ(status.rfind("ignored (will be replaced): ", 0), 0u) << status;
    EXPECT_NE(status.find(why), std::string::npos) << status << " lacks " << why;
    gemm_provider_for(GemmShape{300, 512, 128, false, true});
    set_gemm_cache_path(cache_);
    EXPECT_EQ(gemm_selection_report().cache_status, "read 1 classes for " + threads + " thread(s)")
        << "after " << why;
  }
}

TEST_F(GemmSelection, OtherThreadCountsAndClassesInTheFileAreKept) {
  skip_unless_two_providers();
  const int other_threads = num_threads() + 6;
  std::string line = "class " + std::to_string(other_threads) + " TN+ 3 3 3 " +
                     std::string(gemm_provider_name(available_gemm_providers()[1]));
  for (GemmProvider p : available_gemm_providers())
    line += " " + std::string(gemm_provider_name(p)) + "=5.00";
  write_file("gemm.txt", header() + line + "\n");
  set_gemm_cache_path(cache_);
  EXPECT_TRUE(gemm_selection_report().classes.empty());  // another thread count's choice
  gemm_provider_for(GemmShape{8, 8, 8});
  const std::string text = read_text(cache_);
  EXPECT_NE(text.find(line + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("class " + std::to_string(num_threads()) + " NN 3 3 3 "), std::string::npos)
      << text;
}

TEST_F(GemmSelection, AnUnwritableCacheLeavesTheChoicesInMemory) {
  skip_unless_two_providers();
  write_file("not-a-directory", "x");
  set_gemm_cache_path((dir_ / "not-a-directory" / "gemm.txt").string());
  const GemmProvider chosen = gemm_provider_for(GemmShape{100, 100, 100});
  const GemmSelectionReport report = gemm_selection_report();
  EXPECT_EQ(report.cache_status.rfind("not written: cannot create ", 0), 0u) << report.cache_status;
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_EQ(gemm_provider_for(GemmShape{100, 100, 100}), chosen);
  EXPECT_EQ(gemm_selection_report().classes.size(), 1u);
}

// A cache line for one class with the rate each provider is given.
std::string class_line(const std::string& kind, int m, int n, int k,
                       const std::function<double(GemmProvider)>& rate) {
  std::string line = "class " + std::to_string(num_threads()) + " " + kind + " " +
                     std::to_string(m) + " " + std::to_string(n) + " " + std::to_string(k) + " ";
  GemmProvider best = available_gemm_providers()[0];
  for (GemmProvider p : available_gemm_providers())
    if (rate(p) > rate(best)) best = p;
  line += std::string(gemm_provider_name(best));
  for (GemmProvider p : available_gemm_providers())
    line += " " + std::string(gemm_provider_name(p)) + "=" + std::to_string(rate(p));
  return line + "\n";
}

TEST_F(GemmSelection, TheUntransposedCopyIsPreferredWhereItMeasuredFaster) {
  const GemmShape nt{300, 512, 128, false, true};  // buckets 9 9 7
  const auto same = [](double r) { return [r](GemmProvider) { return r; }; };
  const auto expect = [&](double nn_rate, bool preferred) {
    write_file("gemm.txt", header() + class_line("NT", 9, 9, 7, same(1.0)) +
                               class_line("NN", 9, 9, 7, same(nn_rate)));
    set_gemm_cache_path(cache_);
    EXPECT_EQ(gemm_prefers_untransposed_copy(nt), preferred) << "NN at " << nn_rate;
    // weft info's report says the same for the NT class (and nothing for its twin).
    for (const GemmClassChoice& choice : gemm_selection_report().classes)
      EXPECT_EQ(choice.untransposed_copy,
                choice.shape_class.transpose_b ? std::optional<bool>(preferred) : std::nullopt)
          << gemm_class_label(choice.shape_class);
  };
  expect(2.0, true);
  expect(1.04, false);  // within the 5% margin
  expect(0.5, false);
  GemmShape nn = nt;
  nn.transpose_b = false;
  EXPECT_FALSE(gemm_prefers_untransposed_copy(nn));  // nothing to untranspose
  // A forced provider is judged by its own rates.
  if (available_gemm_providers().size() > 1) {
    const GemmProvider forced = available_gemm_providers()[1];
    write_file("gemm.txt", header() + class_line("NT", 9, 9, 7, same(1.0)) +
                               class_line("NN", 9, 9, 7,
                                          [&](GemmProvider p) { return p == forced ? 0.5 : 2.0; }));
    set_gemm_cache_path(cache_);
    EXPECT_TRUE(gemm_prefers_untransposed_copy(nt));
    set_gemm_provider(forced);
    EXPECT_FALSE(gemm_prefers_untransposed_copy(nt));
    EXPECT_FALSE(gemm_prefers_untransposed_copy(nt));  // remembered for that provider
    use_calibrated_gemm();
    EXPECT_TRUE(gemm_prefers_untransposed_copy(nt));  // not taken for the calibrated answer
  }
}

// linear's backward reads its weight's transposed copy exactly where the calibration says the
// untransposed product is faster, and the gradients are right either way.
TEST_F(GemmSelection, LinearBackwardReadsTheCopyWhereTheCalibrationSaysSo) {
  // dx = dy · wᵀ for x [6, 5], w [5, 3]: {6, 5, 3}, buckets 3 3 2, written (beta 0).
  for (const bool faster : {true, false}) {
    SCOPED_TRACE(faster ? "untransposed faster" : "transposed faster");
    write_file("gemm.txt",
               header() + class_line("NT", 3, 3, 2, [&](GemmProvider) {
                 return faster ? 1.0 : 2.0;
               }) + class_line("NN", 3, 3, 2, [&](GemmProvider) { return faster ? 2.0 : 1.0; }));
    set_gemm_cache_path(cache_);
    Tape tape;
    const Var x = tape.variable(random_tensor({6, 5}, 41));
    const Var w = tape.variable(random_tensor({5, 3}, 42));
    const Var b = tape.variable(random_tensor({3}, 43));
    tape.backward(sum(linear(x, w, b)));
    EXPECT_EQ(tape.node(w.id()).saved[0].defined(), faster);
    check_op([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); },
             [](const std::vector<HostArray>& h) {
               HostArray y(Shape{6, 3}, std::vector<double>(18, 0.0));
               for (int r = 0; r < 6; ++r)
                 for (int c = 0; c < 3; ++c) {
                   double sum = h[2][std::size_t(c)];
                   for (int k = 0; k < 5; ++k)
                     sum += h[0][std::size_t(r * 5 + k)] * h[1][std::size_t(k * 3 + c)];
                   y[std::size_t(r * 3 + c)] = sum;
                 }
               return y;
             },
             {random_tensor({6, 5}, 44), random_tensor({5, 3}, 45), random_tensor({3}, 46)});
  }
}

TEST_F(GemmSelection, MemoryOnlyWritesNothing) {
  set_gemm_cache_path("");
  gemm_provider_for(GemmShape{5, 5, 5});
  const GemmSelectionReport report = gemm_selection_report();
  EXPECT_EQ(report.cache_path, "");
  EXPECT_EQ(report.cache_status, "memory only");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST(GemmCalibrationNoise, ABusyCoreOrSpreadRoundsAreNotClean) {
  using backend::cpu::calibration_noise;
  using backend::cpu::CalibrationTimes;
  const std::vector<std::vector<double>> steady = {{1.0, 1.02, 1.01, 1.05}, {2.0, 2.1, 2.0, 2.2}};
  EXPECT_EQ(calibration_noise(CalibrationTimes{1.0, 1.05, 1}, steady), "");
  EXPECT_EQ(calibration_noise(CalibrationTimes{0.5, 1.0, 1}, steady),
            "the measuring thread ran 50% of the wall time (another process shares the core)");
  // Several GEMM threads: the calling thread's CPU time says nothing.
  EXPECT_EQ(calibration_noise(CalibrationTimes{0.5, 1.0, 4}, steady), "");
  const std::vector<std::vector<double>> spread = {{1.0, 1.02, 1.01, 1.05}, {2.0, 3.0, 3.2, 2.9}};
  EXPECT_EQ(calibration_noise(CalibrationTimes{1.0, 1.0, 1}, spread),
            "a provider's rounds spread 48% (median over best run)");
  EXPECT_FALSE(backend::cpu::in_use_rate_contradicts(10.0, 20.0));
  EXPECT_TRUE(backend::cpu::in_use_rate_contradicts(5.0, 20.0));  // 4x slower than recorded
  EXPECT_TRUE(backend::cpu::in_use_rate_contradicts(30.0, 1.5));  // a record made under load
  // A product of half the representative's flops at a quarter of its rate takes twice its time:
  // no contradiction; at a twelfth of the rate, six times its time: one.
  EXPECT_FALSE(backend::cpu::in_use_rate_contradicts(5.0, 20.0, 0.5));
  EXPECT_TRUE(backend::cpu::in_use_rate_contradicts(5.0 / 3, 20.0, 0.5));
}

// A measurement made under load is used, not cached, and measured again a second later; the
// clean one replaces it and is cached.
TEST_F(GemmSelection, ANoisyMeasurementIsUsedButNotCachedAndMeasuredAgain) {
  skip_unless_two_providers();
  const std::string busy = "the measuring thread ran 40% of the wall time";
  backend::cpu::set_calibration_noise_override(&busy);
  set_gemm_cache_path(cache_);
  const GemmShape shape{200, 200, 200};
  gemm_provider_for(shape);
  GemmSelectionReport report = gemm_selection_report();
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_EQ(report.classes[0].noise, busy);
  EXPECT_EQ(read_text(cache_).find("class "), std::string::npos) << "a noisy class was cached";
  backend::cpu::set_calibration_noise_override(&clean_);
  gemm_provider_for(shape);  // not due yet: still the noisy choice
  EXPECT_EQ(gemm_selection_report().classes[0].noise, busy);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  gemm_provider_for(shape);
  report = gemm_selection_report();
  EXPECT_EQ(report.classes[0].noise, "");
  EXPECT_NE(read_text(cache_).find("class "), std::string::npos) << "the clean one was not cached";
}

// A cached record that products in use contradict (rates written while the machine was loaded)
// is measured again at the class's second product (the first, paying for first touches, runs
// untimed); a record that use confirms is kept.
TEST_F(GemmSelection, ACachedRateThatUseContradictsIsMeasuredAgain) {
  const auto product = [] {
    Tape tape;
    matmul(tape.constant(random_tensor({256, 256}, 7)),
           tape.constant(random_tensor({256, 256}, 8)));
  };
  std::string spoiled = "class " + std::to_string(num_threads()) + " NN 8 8 8 " +
                        std::string(gemm_provider_name(available_gemm_providers()[0]));
  for (GemmProvider p : available_gemm_providers())
    spoiled += " " + std::string(gemm_provider_name(p)) + "=0.001";
  write_file("gemm.txt", header() + spoiled + "\n");
  set_gemm_cache_path(cache_);
  product();
  GemmSelectionReport report = gemm_selection_report();
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_TRUE(report.classes[0].from_cache) << "the first product was timed against the record";
  product();
  report = gemm_selection_report();
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_FALSE(report.classes[0].from_cache) << "the spoiled record was kept";
  EXPECT_GT(*std::max_element(report.classes[0].gflops.begin(), report.classes[0].gflops.end()),
            0.01);
  // Now the file holds a real measurement: a new process (a reload) keeps it after products.
  set_gemm_cache_path(cache_);
  product();
  product();
  report = gemm_selection_report();
  ASSERT_EQ(report.classes.size(), 1u);
  EXPECT_TRUE(report.classes[0].from_cache) << "a record that use confirms was measured again";
}

}  // namespace
}  // namespace weft::testing
