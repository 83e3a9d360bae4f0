// Running the benchmark: rows of timed batches per (vector size, batch size, mode), the sgemm
// ceiling at the products each row made (measured in this process), peak RSS per row, the
// ratios between rows, and the export of trees and weights for cross-checks with peers.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "treelstm/tree_benchmark.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/backend/cuda.h"
#include "weft/backend/gemm_ceiling.h"
#include "weft/core/claimable_task.h"
#include "weft/core/error.h"
#include "weft/core/job_threads.h"
#include "weft/core/memory_usage.h"
#include "weft/io/safetensors.h"
#include "weft/tensor/allocator.h"

namespace weft::treelstm {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The sgemm products of one internal call of `rows` nodes (tree-FC has only W0's).
std::vector<GemmShape> cell_shapes(BenchmarkCell cell, std::int64_t rows, std::int64_t n,
                                   bool train) {
  std::vector<GemmShape> all = tree_lstm_gemm_shapes(rows, n, train);
  if (cell == BenchmarkCell::kTreeLstm) return all;
  std::vector<GemmShape> fc{all[0]};
  if (train) {
    GemmShape d_in = all[4];
    d_in.accumulate = false;  // no cell state adds to [l | r]'s gradient: written, beta 0
    fc.insert(fc.end(), {d_in, all[5]});
  }
  return fc;
}

// GFLOP/s of one product shape on `device` (the CUDA side of sgemm_ceiling_gflops), with
// measure_gflops' protocol over calls of 16 products queued back to back through matmul on a
// tape without gradients, then a synchronisation, as a loom step queues its kernels. (matmul
// writes a fresh output: the accumulating shapes are timed without their beta = 1, a
// negligible difference.)
double device_gemm_gflops(const GemmShape& shape, Device device, double min_seconds) {
  constexpr int kQueued = 16;
  const auto operand = [&](std::int64_t rows, std::int64_t cols) {
    return Tensor::full(Shape{rows, cols}, 0.5f, device);
  };
  const Tensor a = shape.transpose_a ? operand(shape.k, shape.m) : operand(shape.m, shape.k);
  const Tensor b = shape.transpose_b ? operand(shape.n, shape.k) : operand(shape.k, shape.n);
  Tape tape;
  tape.set_grad_enabled(false);
  const auto queued_products = [&] {
    tape.clear();
    const Var va = tape.constant(a), vb = tape.constant(b);
    for (int k = 0; k < kQueued; ++k) matmul(va, vb, shape.transpose_a, shape.transpose_b);
    cuda_synchronize();
  };
  return kQueued * measure_gflops(shape, queued_products, min_seconds);
}

double ceiling_gflops(const std::vector<GemmShape>& shapes, Device device, double min_seconds) {
  if (device == Device::kCpu) return sgemm_ceiling_gflops(shapes, min_seconds);
  std::vector<double> rates;
  for (const GemmShape& shape : shapes)
    rates.push_back(device_gemm_gflops(shape, device, min_seconds));
  return combine_gflops(shapes, rates);
}

// Call sizes are bucketed to the nearest power of two up to 1024 (sgemm's rate is flat
// beyond), and each bucket's ceiling is measured once per process.
class CeilingCache {
 public:
  CeilingCache(double seconds, Device device) : seconds_(seconds), device_(device) {}

  // GFLOP/s of sgemm at the products of every internal call in `level_rows`, combined as
  // the flop-weighted harmonic mean (the rate of running them all).
  double ceiling(BenchmarkCell cell, std::int64_t n, bool train,
                 const std::map<std::int64_t, std::int64_t>& level_rows) {
    if (seconds_ <= 0 || level_rows.empty()) return kNaN;
    std::map<std::int64_t, double> weight;  // bucket -> rows (flops are proportional)
    for (const auto& [rows, calls] : level_rows) {
      const double exponent = std::round(std::log2(double(rows)));
      weight[std::int64_t(1) << std::int64_t(std::clamp(exponent, 0.0, 10.0))] +=
          double(rows) * double(calls);
    }
    double total = 0, seconds = 0;
    for (const auto& [bucket, w] : weight) {
      const auto key = std::make_tuple(cell, n, train, bucket);
      auto found = cache_.find(key);
      if (found == cache_.end())
        found = cache_
                    .emplace(key,
                             ceiling_gflops(cell_shapes(cell, bucket, n, train), device_, seconds_))
                    .first;
      total += w;
      seconds += w / found->second;
    }
    return total / seconds;
  }

 private:
  double seconds_;
  Device device_;
  std::map<std::tuple<BenchmarkCell, std::int64_t, bool, std::int64_t>, double> cache_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::uint64_t model_seed(std::uint64_t seed, std::int64_t vector_size) {
  return mix64(seed, std::uint64_t(vector_size));
}

struct RowContext {
  const TreeBenchmarkOptions& options;
  std::int64_t vector_size;
  int batch_size;
  BenchMode mode;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Batch k + 1 woven (on weave_threads threads) by a weaving thread, kept for the row, while
// batch k runs on this one; when batch k + 1 is wanted before the weaving thread has begun it
// (a busy machine), this thread weaves it itself, as in turn.
std::vector<TimedBatch> run_woven_ahead(TreeBenchmarkRunner& runner, BenchMode mode,
                                        std::span<const std::vector<BinaryTree>> batches,
                                        int weave_threads) {
  using WeaveJob = ClaimableTask<WovenTrees>;
  JobThreads weaver(1);
  const auto job_for = [&](std::size_t k) {
    auto job =
        std::make_shared<WeaveJob>([&runner, mode, trees = std::span(batches[k]), weave_threads] {
          return runner.weave(mode, trees, weave_threads);
        });
    weaver.submit([job] { job->run_if_unclaimed(); });
    return job;
  };
  std::vector<TimedBatch> timed;
  std::shared_ptr<WeaveJob> next = job_for(0);
  auto last_end = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const WovenTrees woven = next->take();
    if (k + 1 < batches.size()) next = job_for(k + 1);
    TimedBatch batch;
    batch.step = runner.run_woven(woven);
    batch.batch_s = seconds_since(last_end);  // the first: its weave and run, one after the other
    last_end = std::chrono::steady_clock::now();
    timed.push_back(std::move(batch));
  }
  return timed;
}

}  // namespace

std::vector<TimedBatch> run_batches(TreeBenchmarkRunner& runner, BenchMode mode,
                                    std::span<const std::vector<BinaryTree>> batches,
                                    bool weave_ahead, int weave_threads) {
  if (weave_threads < 1) fail("bench", "weave threads must be at least 1, got ", weave_threads);
  if (weave_ahead && (mode == BenchMode::kDynamic || mode == BenchMode::kFullDynamic))
    return run_woven_ahead(runner, mode, batches, weave_threads);
  std::vector<TimedBatch> timed;
  for (const std::vector<BinaryTree>& trees : batches) {
    TimedBatch batch;
    batch.step = mode == BenchMode::kManual
                     ? runner.step(mode, trees)
                     : runner.run_woven(runner.weave(mode, trees, weave_threads));
    batch.batch_s = batch.step.weave_s + batch.step.run_s;
    timed.push_back(std::move(batch));
  }
  return timed;
}

namespace {

WorkProfile scaled(WorkProfile profile, double factor) {
  for (auto* pass : {&profile.forward, &profile.backward})
    for (WorkTime& t : *pass) {
      t.seconds *= factor;
      t.calls = std::int64_t(std::llround(double(t.calls) * factor));
      t.bytes = std::int64_t(std::llround(double(t.bytes) * factor));
    }
  return profile;
}

// Times one row: a warm-up batch, then timed_batches batches (trees made outside the timing).
TreeBenchmarkRow run_row(const RowContext& ctx, CeilingCache& ceilings) {
  const TreeBenchmarkOptions& o = ctx.options;
  Rng init(model_seed(o.seed, ctx.vector_size));
  IclrBenchmarkModel model(o.cell, ctx.vector_size, o.tree_size, init, o.device);
  TreeBenchmarkRunner runner(model, o.train, o.learning_rate, o.max_step_rows);
  const bool same_shape = ctx.mode == BenchMode::kManual || ctx.mode == BenchMode::kDynamic;
  const int trees = ctx.mode == BenchMode::kUnbatched
                        ? std::min(ctx.batch_size, std::max(1, o.max_unbatched_trees))
                        : ctx.batch_size;
  const double scale = double(ctx.batch_size) / double(trees);
  std::vector<std::vector<BinaryTree>> batches;
  for (int index = 0; index <= timed_batches(ctx.batch_size, o.repeats); ++index) {
    batches.push_back(
        benchmark_batch(o.tree_type, o.tree_size, ctx.batch_size, same_shape, o.seed, index));
    batches.back().resize(std::size_t(trees));
  }
  release_cached_memory();  // the allocator's cached blocks, then the heap and the mark
  reset_peak_rss();
  const bool was_profiling = set_work_profiling(o.profile);
  const std::vector<TimedBatch> timed =
      run_batches(runner, ctx.mode, batches, o.weave_ahead, o.weave_threads);
  set_work_profiling(was_profiling);
  TreeBenchmarkRow row;
  row.peak_rss_mb = peak_rss_mb();
  row.loss = timed[0].step.loss;
  std::vector<double> batch_s, weave_s, run_s, kernel_calls, launches, copies, syncs;
  std::map<std::int64_t, std::int64_t> level_rows;
  double gemm_flops = 0;
  for (std::size_t k = 1; k < timed.size(); ++k) {  // batch 0 is the warm-up
    const StepResult& step = timed[k].step;
    batch_s.push_back(timed[k].batch_s * scale);
    weave_s.push_back(step.weave_s * scale);
    run_s.push_back(step.run_s * scale);
    kernel_calls.push_back(double(step.backend.kernel_calls) * scale);
    launches.push_back(double(step.backend.launches) * scale);
    copies.push_back(double(step.backend.host_to_device) * scale);
    syncs.push_back(double(step.backend.synchronizations) * scale);
    for (const auto& [rows, calls] : step.level_rows) level_rows[rows] += calls;
    row.profile += step.backend.profile;
    row.unprofiled_s += step.run_s - step.backend.profile.seconds();
    gemm_flops += benchmark_gemm_flops(o.cell, ctx.vector_size, step.internal_nodes, o.train);
  }
  row.profile = scaled(row.profile, scale / double(timed.size() - 1));
  row.unprofiled_s *= scale / double(timed.size() - 1);
  row.mode = ctx.mode;
  row.cell = o.cell;
  row.tree_type = o.tree_type;
  row.vector_size = ctx.vector_size;
  row.batch_size = ctx.batch_size;
  row.train = o.train;
  row.trees_timed = trees;
  row.weave_ahead =
      o.weave_ahead && (ctx.mode == BenchMode::kDynamic || ctx.mode == BenchMode::kFullDynamic);
  row.batch_s_min = *std::min_element(batch_s.begin(), batch_s.end());
  row.batch_s_max = *std::max_element(batch_s.begin(), batch_s.end());
  row.batch_s_median = median(batch_s);
  row.weave_s = median(weave_s);
  row.run_s = median(run_s);
  row.kernel_calls = median(kernel_calls);
  row.launches = median(launches);
  row.host_to_device = median(copies);
  row.synchronizations = median(syncs);
  row.trees_per_s = double(ctx.batch_size) / row.batch_s_median;
  double total_s = 0;
  for (double s : batch_s) total_s += s / scale;
  row.gemm_gflops = gemm_flops / total_s / 1e9;
  row.ceiling_gflops = ceilings.ceiling(o.cell, ctx.vector_size, o.train, level_rows);
  row.gemm_fraction = row.gemm_gflops / row.ceiling_gflops;
  return row;
}

// The row of `mode` at the same vector size and batch size, or, for unbatched (whose
// per-tree rate does not depend on the batch), the one at the nearest batch size.
const TreeBenchmarkRow* reference_row(std::span<const TreeBenchmarkRow> rows,
                                      const TreeBenchmarkRow& row, BenchMode mode, bool nearest) {
  const TreeBenchmarkRow* best = nullptr;
  for (const TreeBenchmarkRow& r : rows) {
    if (r.mode != mode || r.vector_size != row.vector_size) continue;
    if (r.batch_size == row.batch_size) return &r;
    if (nearest && (!best || std::abs(std::log2(double(r.batch_size) / row.batch_size)) <
                                 std::abs(std::log2(double(best->batch_size) / row.batch_size))))
      best = &r;
  }
  return best;
}

void check_options(const TreeBenchmarkOptions& o) {
  if (o.vector_sizes.empty() || o.batch_sizes.empty() || o.modes.empty())
    fail("bench", "need at least one vector size, batch size and mode");
  for (std::int64_t v : o.vector_sizes)
    if (v < 1) fail("bench", "vector sizes must be positive, got ", v);
  for (int b : o.batch_sizes)
    if (b < 1) fail("bench", "batch sizes must be positive, got ", b);
  if (o.repeats < 1) fail("bench", "repeats must be at least 1, got ", o.repeats);
  if (o.threads < 1) fail("bench", "threads must be at least 1, got ", o.threads);
  if (o.tree_size < 1) fail("bench", "tree size must be at least 1, got ", o.tree_size);
  if (o.weave_threads < 1) fail("bench", "weave threads must be at least 1, got ", o.weave_threads);
}

}  // namespace

double benchmark_gemm_flops(BenchmarkCell cell, std::int64_t vector_size,
                            std::int64_t internal_nodes, bool train) {
  const double n = double(vector_size);
  const double per_node = (cell == BenchmarkCell::kTreeLstm ? 12.0 : 4.0) * n * n;
  return per_node * double(internal_nodes) * (train ? 3.0 : 1.0);
}

std::vector<TreeBenchmarkRow> run_tree_benchmark(const TreeBenchmarkOptions& options,
                                                 const ProgressFn& progress) {
  check_options(options);
  set_num_threads(options.threads);
  if (options.device == Device::kCuda && !cuda_available())
    fail("bench", "--device cuda: CUDA is not available (", cuda_unavailable_reason(), ")");
  CeilingCache ceilings(options.ceiling_seconds, options.device);
  std::vector<TreeBenchmarkRow> rows;
  for (std::int64_t v : options.vector_sizes)
    for (int b : options.batch_sizes)
      for (BenchMode mode : options.modes) {
        rows.push_back(run_row(RowContext{options, v, b, mode}, ceilings));
        const TreeBenchmarkRow& r = rows.back();
        if (progress)
          progress(fmt::format("{} V={} B={}: {:.4g} trees/s, median batch {:.4g} s",
                               bench_mode_name(mode), v, b, r.trees_per_s, r.batch_s_median));
      }
  for (TreeBenchmarkRow& row : rows) {
    const TreeBenchmarkRow* unbatched = reference_row(rows, row, BenchMode::kUnbatched, true);
    const TreeBenchmarkRow* manual = reference_row(rows, row, BenchMode::kManual, false);
    row.speedup_vs_unbatched = unbatched ? row.trees_per_s / unbatched->trees_per_s : kNaN;
    row.ratio_vs_manual = manual ? row.batch_s_median / manual->batch_s_median : kNaN;
  }
  return rows;
}

std::vector<CrossCheck> export_tree_benchmark(const TreeBenchmarkOptions& options,
                                              const std::string& dir) {
  check_options(options);
  io::TensorMap trees;
  const std::int64_t entries = 2 * std::int64_t(options.tree_size) - 1;
  for (int b : options.batch_sizes)
    for (int index = 0; index <= timed_batches(b, options.repeats); ++index)
      for (bool same : {true, false}) {
        std::vector<std::int32_t> flat;
        for (const BinaryTree& t :
             benchmark_batch(options.tree_type, options.tree_size, b, same, options.seed, index))
          flat.insert(flat.end(), t.postorder.begin(), t.postorder.end());
        const std::string name = fmt::format("B{}/{}/{}", b, same ? "same" : "random", index);
        trees[name] = Tensor::from_vector(Shape{b, entries}, flat);
      }
  const io::Metadata metadata{{"tree_type", std::string(tree_type_name(options.tree_type))},
                              {"model", std::string(cell_name(options.cell))},
                              {"tree_size", std::to_string(options.tree_size)},
                              {"repeats", std::to_string(options.repeats)},
                              {"max_unbatched_trees", std::to_string(options.max_unbatched_trees)},
                              {"seed", std::to_string(options.seed)}};
  io::save_safetensors(dir + "/trees.safetensors", trees, metadata);
  std::vector<CrossCheck> checks;
  const std::vector<BinaryTree> batch = benchmark_batch(
      options.tree_type, options.tree_size, options.batch_sizes[0], false, options.seed, 0);
  for (std::int64_t v : options.vector_sizes) {
    Rng init(model_seed(options.seed, v));
    IclrBenchmarkModel model(options.cell, v, options.tree_size, init);
    io::TensorMap weights;
    for (const Parameter& p : model.parameters()) weights[p.name()] = p.value().clone();
    io::save_safetensors(fmt::format("{}/weights_V{}.safetensors", dir, v), weights, metadata);
    TreeBenchmarkRunner runner(model, true, options.learning_rate);
    const StepResult step = runner.step(BenchMode::kFullDynamic, batch, true);
    checks.push_back(CrossCheck{v, step.loss, step.grad_sq});
  }
  return checks;
}

}  // namespace weft::treelstm
