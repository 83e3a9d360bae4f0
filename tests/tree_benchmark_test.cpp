// The ICLR benchmark harness on tiny sizes: batches are deterministic and same-shape where
// asked, manual and the loom agree on identical-shape trees (loss and gradients), every mode
// yields a sane row, the CSV header is the documented schema, the SVG is well formed, and the
// sgemm products of a level are the model's.
#include "treelstm/tree_benchmark.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>

#include "op_test_util.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/build_info.h"

namespace weft::testing {
namespace {

using treelstm::BenchmarkCell;
using treelstm::BenchMode;
using treelstm::TreeType;

TEST(TreeBenchmark, TreeLstmLevelShapesAndFlops) {
  auto forward = treelstm::tree_lstm_gemm_shapes(256, 1024, false);
  ASSERT_EQ(forward.size(), 2u);
  // linear adds the product onto its bias rows: forward products accumulate too.
  EXPECT_EQ(forward[0], (GemmShape{256, 1024, 2048, false, false, true}));
  EXPECT_EQ(forward[1], (GemmShape{256, 4096, 1024, false, false, true}));
  double flops = 0;
  for (const auto& s : forward) flops += gemm_flops(s);
  EXPECT_DOUBLE_EQ(flops, 12.0 * 256 * 1024 * 1024);  // 12·rows·N²
  auto training = treelstm::tree_lstm_gemm_shapes(256, 1024, true);
  ASSERT_EQ(training.size(), 6u);
  double training_flops = 0;
  for (const auto& s : training) training_flops += gemm_flops(s);
  EXPECT_DOUBLE_EQ(training_flops, 3 * flops);
  // As the tape runs them: hidden's gradient written first (beta 0), every other one added;
  // the inputs' gradients read the weights' transposed copies where the calibration prefers.
  const GemmShape d_hidden{256, 1024, 4096, false, true, false};
  const GemmShape d_in{256, 2048, 1024, false, true, true};
  EXPECT_EQ(training[2],
            (GemmShape{256, 1024, 4096, false, !gemm_prefers_untransposed_copy(d_hidden), false}));
  EXPECT_EQ(training[3], (GemmShape{1024, 4096, 256, true, false, true}));
  EXPECT_EQ(training[4],
            (GemmShape{256, 2048, 1024, false, !gemm_prefers_untransposed_copy(d_in), true}));
}

TEST(TreeBenchmark, BatchesAreDeterministicAndSameShapeWhenAsked) {
  auto a = treelstm::benchmark_batch(TreeType::kRandom, 16, 5, true, 7, 1);
  auto b = treelstm::benchmark_batch(TreeType::kRandom, 16, 5, true, 7, 1);
  auto c = treelstm::benchmark_batch(TreeType::kRandom, 16, 5, true, 7, 2);
  ASSERT_EQ(a.size(), 5u);
  for (std::size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(a[t].postorder, b[t].postorder);
    EXPECT_EQ(a[t].leaves(), 16);
    for (std::size_t i = 0; i < a[t].postorder.size(); ++i) {  // one shape in every batch
      EXPECT_EQ(a[t].postorder[i] < 0, a[0].postorder[i] < 0);
      EXPECT_EQ(c[t].postorder[i] < 0, a[0].postorder[i] < 0);
    }
  }
  EXPECT_NE(a[0].postorder, a[1].postorder);  // the words differ
  auto r = treelstm::benchmark_batch(TreeType::kRandom, 16, 8, false, 7, 1);
  int shapes_differ = 0;
  for (std::size_t t = 1; t < r.size(); ++t) shapes_differ += r[t].depth() != r[0].depth();
  EXPECT_GT(shapes_differ, 0);
  EXPECT_EQ(treelstm::timed_batches(1, 3), 96);
  EXPECT_EQ(treelstm::timed_batches(8, 2), 8);
  EXPECT_EQ(treelstm::timed_batches(64, 2), 2);
}

// Manual (hand-batched) and the loom on the same identical-shape trees, from equal weights.
void expect_manual_equals_loom(BenchmarkCell cell, TreeType type, bool train) {
  const auto trees = treelstm::benchmark_batch(type, 8, 4, true, 3, 0);
  treelstm::StepResult results[2];
  const BenchMode modes[2] = {BenchMode::kManual, BenchMode::kDynamic};
  for (int k = 0; k < 2; ++k) {
    Rng rng(11);
    treelstm::IclrBenchmarkModel model(cell, 5, 8, rng);
    treelstm::TreeBenchmarkRunner runner(model, train, 1e-5f);
    results[k] = runner.step(modes[k], trees, true);
  }
  const char* what = treelstm::tree_type_name(type).data();
  EXPECT_NEAR(results[0].loss, results[1].loss, 1e-5 * std::abs(results[1].loss)) << what;
  EXPECT_NEAR(results[0].grad_sq, results[1].grad_sq, 1e-4 * results[1].grad_sq + 1e-9) << what;
  EXPECT_EQ(results[0].internal_nodes, 4 * 7);
  EXPECT_EQ(results[1].internal_nodes, 4 * 7);
  if (train) {
    EXPECT_GT(results[0].grad_sq, 0);
  }
}

TEST(TreeBenchmark, ManualEqualsDynamicOnIdenticalShapes) {
  for (TreeType type : {TreeType::kRandom, TreeType::kBalanced, TreeType::kSequence}) {
    expect_manual_equals_loom(BenchmarkCell::kTreeLstm, type, true);
    expect_manual_equals_loom(BenchmarkCell::kTreeFc, type, false);
  }
}

TEST(TreeBenchmark, UnbatchedEqualsFullDynamic) {
  const auto trees = treelstm::benchmark_batch(TreeType::kRandom, 8, 3, false, 5, 0);
  double losses[2];
  const BenchMode modes[2] = {BenchMode::kUnbatched, BenchMode::kFullDynamic};
  for (int k = 0; k < 2; ++k) {
    Rng rng(2);
    treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 4, 8, rng);
    treelstm::TreeBenchmarkRunner runner(model, true, 1e-5f);
    losses[k] = runner.step(modes[k], trees).loss;
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-5 * std::abs(losses[1]));
}

// A batch woven in shards on several threads is the batch woven on one: the same schedule,
// so the same loss and gradient, bit for bit.
TEST(TreeBenchmark, WeavingInShardsKeepsTheNumbers) {
  const auto trees = treelstm::benchmark_batch(TreeType::kRandom, 16, 7, false, 9, 0);
  treelstm::StepResult results[2];
  const int threads[2] = {1, 3};
  for (int k = 0; k < 2; ++k) {
    Rng rng(4);
    treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 6, 16, rng);
    treelstm::TreeBenchmarkRunner runner(model, true, 1e-5f);
    const treelstm::WovenTrees woven = runner.weave(BenchMode::kFullDynamic, trees, threads[k]);
    EXPECT_EQ(woven.weaver.outputs().size(), trees.size());
    results[k] = runner.run_woven(woven, true);
  }
  EXPECT_EQ(results[0].loss, results[1].loss);
  EXPECT_EQ(results[0].grad_sq, results[1].grad_sq);
  EXPECT_GT(results[0].grad_sq, 0);
  EXPECT_EQ(results[0].level_rows, results[1].level_rows);
}

// Weaving ahead runs the same batches in the same order: with a learning rate that moves the
// weights, every batch's loss (which depends on the updates before it) matches the run in
// turn exactly, for each loom mode, inference and training.
TEST(TreeBenchmark, WeavingAheadRunsTheSameBatchesInOrder) {
  std::vector<std::vector<treelstm::BinaryTree>> batches;
  for (int index = 0; index < 5; ++index)
    batches.push_back(treelstm::benchmark_batch(TreeType::kRandom, 8, 6, false, 3, index));
  for (bool train : {true, false})
    for (BenchMode mode : {BenchMode::kFullDynamic, BenchMode::kDynamic, BenchMode::kUnbatched}) {
      std::vector<double> losses[2];
      for (int ahead = 0; ahead < 2; ++ahead) {
        Rng rng(6);
        treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 5, 8, rng);
        treelstm::TreeBenchmarkRunner runner(model, train, 0.05f);
        for (const auto& batch : treelstm::run_batches(runner, mode, batches, ahead == 1, 2)) {
          EXPECT_GT(batch.batch_s, 0);
          EXPECT_EQ(batch.step.internal_nodes, 6 * 7);
          losses[ahead].push_back(batch.step.loss);
        }
      }
      EXPECT_EQ(losses[0], losses[1]) << treelstm::bench_mode_name(mode) << " train " << train;
      if (train) {
        EXPECT_NE(losses[0][0], losses[0][1]);  // the updates do change the losses
      }
    }
}

// Batching makes the kernels a batch runs a matter of its trees' levels, not of how many trees
// there are: dynamic mode runs as many kernels for 6 trees of one shape as for 2 of them, where
// unbatched runs about 3 times as many. On the CPU nothing is launched, copied or waited for.
TEST(TreeBenchmark, KernelCallsFollowTheLevelsNotTheTrees) {
  const auto six = treelstm::benchmark_batch(TreeType::kRandom, 8, 6, true, 2, 0);
  const std::vector<treelstm::BinaryTree> two(six.begin(), six.begin() + 2);
  std::int64_t calls[2][2];  // [dynamic, unbatched][two, six]
  std::int64_t weights = 0;
  const BenchMode modes[2] = {BenchMode::kDynamic, BenchMode::kUnbatched};
  for (int m = 0; m < 2; ++m)
    for (int b = 0; b < 2; ++b) {
      Rng rng(5);
      treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 4, 8, rng);
      treelstm::TreeBenchmarkRunner runner(model, true, 1e-5f);
      const treelstm::StepResult step = runner.step(modes[m], b == 0 ? two : six);
      EXPECT_EQ(step.backend.launches, 0);
      EXPECT_EQ(step.backend.host_to_device, 0);
      EXPECT_EQ(step.backend.synchronizations, 0);
      calls[m][b] = step.backend.kernel_calls;
      weights = std::int64_t(model.parameters().size());
    }
  EXPECT_GT(calls[0][0], 7);  // at least a kernel per level (7 internal levels at most)
  // The same kernels for two trees as for six, but for the transposed copies of weights: the
  // GEMM calibration decides per shape class, and two trees' row counts fall in other classes
  // than six trees', whether a weight's input gradient reads a copy made once per step
  // (gemm_prefers_untransposed_copy) -- at most one more kernel per weight.
  EXPECT_LE(std::abs(calls[0][1] - calls[0][0]), weights);
  EXPECT_GT(calls[1][1], 2 * calls[1][0]);
  EXPECT_GT(calls[1][0], calls[0][0]);
}

TEST(TreeBenchmark, WeavingNeedsALoomModeAndAThread) {
  Rng rng(1);
  treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 4, 8, rng);
  treelstm::TreeBenchmarkRunner runner(model, false, 1e-5f);
  const auto trees = treelstm::benchmark_batch(TreeType::kRandom, 8, 2, true, 1, 0);
  expect_error([&] { runner.weave(BenchMode::kManual, trees); },
               {"[bench] manual mode runs a plan; it is not woven"});
  expect_error([&] { runner.weave(BenchMode::kDynamic, trees, 0); },
               {"[bench] weave threads must be at least 1, got 0"});
  expect_error([&] { runner.weave(BenchMode::kDynamic, {}); },
               {"[bench] a batch needs at least one tree"});
}

// Steps cut to at most 3 rows compute the same loss and gradient as whole levels.
TEST(TreeBenchmark, LimitingStepRowsKeepsTheNumbers) {
  const auto trees = treelstm::benchmark_batch(TreeType::kRandom, 16, 6, false, 9, 0);
  treelstm::StepResult results[2];
  const std::uint32_t limits[2] = {0, 3};
  for (int k = 0; k < 2; ++k) {
    Rng rng(4);
    treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 6, 16, rng);
    treelstm::TreeBenchmarkRunner runner(model, true, 1e-5f, limits[k]);
    results[k] = runner.step(BenchMode::kFullDynamic, trees, true);
  }
  EXPECT_NEAR(results[0].loss, results[1].loss, 1e-5 * std::abs(results[0].loss));
  EXPECT_NEAR(results[0].grad_sq, results[1].grad_sq, 1e-4 * results[0].grad_sq);
  EXPECT_GT(results[0].grad_sq, 0);
  EXPECT_EQ(results[0].internal_nodes, results[1].internal_nodes);
  for (const auto& [rows, calls] : results[1].level_rows) EXPECT_LE(rows, 3);
}

TEST(TreeBenchmark, ManualRejectsMixedShapes) {
  Rng rng(1);
  treelstm::IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 4, 8, rng);
  treelstm::TreeBenchmarkRunner runner(model, false, 1e-5f);
  std::vector<treelstm::BinaryTree> trees{treelstm::make_tree(TreeType::kSequence, 8, 8, rng),
                                          treelstm::make_tree(TreeType::kBalanced, 8, 8, rng)};
  expect_error([&] { runner.step(BenchMode::kManual, trees); },
               {"[bench] manual batching needs every tree of the batch to have the same shape"});
  expect_error([] { treelstm::parse_bench_mode("static"); },
               {"[bench] unknown mode 'static'; expected unbatched, manual, dynamic or "
                "full-dynamic"});
}

treelstm::TreeBenchmarkOptions tiny_options(bool train) {
  treelstm::TreeBenchmarkOptions o;
  o.tree_size = 8;
  o.vector_sizes = {4};
  o.batch_sizes = {2, 32};
  o.repeats = 1;
  o.train = train;
  o.max_unbatched_trees = 4;
  o.ceiling_seconds = 0.001;
  return o;
}

TEST(TreeBenchmark, EveryModeGivesASaneRowAndTheCsvFollowsTheSchema) {
  for (bool train : {true, false}) {
    const auto rows = treelstm::run_tree_benchmark(tiny_options(train));
    ASSERT_EQ(rows.size(), 8u);
    for (const auto& r : rows) {
      const std::string mode(treelstm::bench_mode_name(r.mode));
      EXPECT_GT(r.trees_per_s, 0) << mode;
      EXPECT_LE(r.batch_s_min, r.batch_s_median) << mode;
      EXPECT_LE(r.batch_s_median, r.batch_s_max) << mode;
      EXPECT_GE(r.weave_s, 0) << mode;
      EXPECT_GT(r.run_s, 0) << mode;
      EXPECT_LE(r.run_s, r.batch_s_median) << mode;  // a batch's time holds its run
      // Woven ahead, a batch's weave overlaps the run before; in turn, it is part of the batch.
      EXPECT_EQ(r.weave_ahead, r.mode == BenchMode::kDynamic || r.mode == BenchMode::kFullDynamic);
      if (!r.weave_ahead) {
        EXPECT_LE(r.weave_s, r.batch_s_median) << mode;
      }
      EXPECT_TRUE(std::isfinite(r.speedup_vs_unbatched)) << mode;
      EXPECT_TRUE(std::isfinite(r.ratio_vs_manual)) << mode;
      EXPECT_GT(r.gemm_fraction, 0) << mode;
      EXPECT_GT(r.peak_rss_mb, 0) << mode;
      EXPECT_EQ(r.trees_timed,
                r.mode == BenchMode::kUnbatched ? std::min(4, r.batch_size) : r.batch_size);
      if (r.mode == BenchMode::kManual) {
        EXPECT_DOUBLE_EQ(r.ratio_vs_manual, 1.0);
        EXPECT_EQ(r.weave_s, 0);
      }
      if (r.mode == BenchMode::kUnbatched) {
        EXPECT_DOUBLE_EQ(r.speedup_vs_unbatched, 1.0);
      }
    }
    const std::string csv = treelstm::tree_benchmark_csv(rows);
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "mode,model,tree_type,vector_size,batch_size,phase,trees_per_s,batch_s_min,"
              "batch_s_median,batch_s_max,weave_s,speedup_vs_unbatched,ratio_vs_manual,"
              "gemm_fraction,peak_rss_mb,run_s,weave_ahead,kernel_calls,launches,host_to_device,"
              "synchronizations");
    const std::regex line(
        std::string("(unbatched|manual|dynamic|full-dynamic),tree-lstm,random,4,(2|32),") +
        (train ? "train" : "infer") + "(,[0-9.e+-]+){10},[01],[0-9.e+]+,0,0,0");
    std::size_t lines = 0, pos = csv.find('\n') + 1;
    while (pos < csv.size()) {
      const std::size_t end = csv.find('\n', pos);
      EXPECT_TRUE(std::regex_match(csv.substr(pos, end - pos), line)) << csv.substr(pos, end - pos);
      ++lines;
      pos = end + 1;
    }
    EXPECT_EQ(lines, rows.size());
    const std::string json = treelstm::tree_benchmark_json(rows, tiny_options(train));
    EXPECT_NE(json.find("\"mode\": \"full-dynamic\""), std::string::npos);
    EXPECT_NE(json.find(std::string("\"commit\": \"") + weft::build_commit() + "\""),
              std::string::npos);  // the build measured
    EXPECT_EQ(treelstm::tree_benchmark_csv(treelstm::tree_benchmark_rows_from_json(json)), csv);
    EXPECT_NE(treelstm::tree_benchmark_table(rows).find("full-dynamic"), std::string::npos);
  }
}

// With --profile each row says where its execution went: training moves gathered rows forward
// and scatters their gradients backward (full-dynamic trees are not contiguous), the products
// take time in both passes, and the profiled time is part of the run; without it, nothing.
TEST(TreeBenchmark, TheProfileSplitsTheRunByKindAndPass) {
  treelstm::TreeBenchmarkOptions options = tiny_options(true);
  options.modes = {BenchMode::kFullDynamic, BenchMode::kManual};
  options.profile = true;
  const auto rows = treelstm::run_tree_benchmark(options);
  for (const auto& r : rows) {
    const std::string mode(treelstm::bench_mode_name(r.mode));
    EXPECT_GT(r.profile.of(false, WorkKind::kGather).bytes, 0) << mode;
    EXPECT_GT(r.profile.of(true, WorkKind::kScatter).bytes, 0) << mode;
    EXPECT_GT(r.profile.of(false, WorkKind::kProduct).seconds, 0) << mode;
    EXPECT_GT(r.profile.of(true, WorkKind::kProduct).seconds, 0) << mode;
    EXPECT_GT(r.profile.of(false, WorkKind::kOptimizer).calls, 0) << mode;  // after backward
    EXPECT_EQ(r.profile.of(true, WorkKind::kOptimizer).calls, 0) << mode;
    // Kernels' intervals lie inside their batch's and never overlap (nested kernels are not
    // counted twice): per batch, the profiled time is at most the run's, whatever the load.
    EXPECT_GE(r.unprofiled_s, -1e-6) << mode;
  }
  const std::string table = treelstm::tree_benchmark_profile_table(rows);
  EXPECT_NE(table.find("gathers f/b"), std::string::npos) << table;
  const std::string json = treelstm::tree_benchmark_json(rows, options);
  EXPECT_NE(json.find("\"scatters\""), std::string::npos);
  EXPECT_EQ(treelstm::tree_benchmark_profile_table(treelstm::tree_benchmark_rows_from_json(json)),
            table);
  options.profile = false;
  for (const auto& r : treelstm::run_tree_benchmark(options)) EXPECT_EQ(r.profile.seconds(), 0.0);
}

TEST(TreeBenchmark, SvgHasOnePolylinePerMode) {
  auto options = tiny_options(false);
  options.ceiling_seconds = 0;
  const auto rows = treelstm::run_tree_benchmark(options);
  EXPECT_TRUE(std::isnan(rows[0].gemm_fraction));
  const std::string svg = treelstm::tree_benchmark_svg(rows);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t p = svg.find("<polyline"); p != std::string::npos;
       p = svg.find("<polyline", p + 1))
    ++polylines;
  EXPECT_EQ(polylines, 4u);
  for (const char* mode : {"unbatched V=4", "manual V=4", "dynamic V=4", "full-dynamic V=4"})
    EXPECT_NE(svg.find(mode), std::string::npos) << mode;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(TreeBenchmark, BadOptionsAreReported) {
  auto options = tiny_options(true);
  options.batch_sizes = {0};
  expect_error([&] { treelstm::run_tree_benchmark(options); },
               {"[bench] batch sizes must be positive, got 0"});
  options.batch_sizes = {2};
  options.weave_threads = 0;
  expect_error([&] { treelstm::run_tree_benchmark(options); },
               {"[bench] weave threads must be at least 1, got 0"});
  expect_error(
      [] { treelstm::tree_benchmark_rows_from_json("{\"rows\": [{\"mode\": \"manual\"}]}"); },
      {"[bench] row 0 of the JSON is malformed"});
  expect_error([] { treelstm::tree_benchmark_rows_from_json("[1, 2"); },
               {"[bench] not the JSON of `weft bench treelstm --format json`"});
}

}  // namespace
}  // namespace weft::testing
