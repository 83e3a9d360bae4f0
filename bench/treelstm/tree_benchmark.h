// The ICLR 2017 timing benchmark (spec §2) run four ways on the model of iclr_benchmark.h:
// unbatched (one call per node), manual (identical-shape trees hand-batched level by level
// with tensor code, no loom), dynamic (the loom on those same trees) and full-dynamic (the loom
// on independently random trees). Produces one row per (vector size, batch size, mode), with
// throughput, weave time, ratios, the fraction of the sgemm ceiling and peak RSS, and renders
// rows as a table, CSV, JSON or an SVG plot. `weft bench treelstm` is a thin CLI over this.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "treelstm/iclr_benchmark.h"
#include "weft/backend/counters.h"
#include "weft/core/named_enum.h"
#include "weft/loom/batch_plan.h"
#include "weft/loom/schedule.h"

namespace weft::train {
class Optimizer;
}  // namespace weft::train

namespace weft::treelstm {

namespace detail {
struct ManualPlan;  // manual mode's gathers for one tree shape and batch size
}

#define WEFT_BENCH_MODES(X)  \
  X(kUnbatched, "unbatched") \
  X(kManual, "manual")       \
  X(kDynamic, "dynamic")     \
  X(kFullDynamic, "full-dynamic")
enum class BenchMode { WEFT_BENCH_MODES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(BenchMode, WEFT_BENCH_MODES, bench_mode_name, parse_bench_mode, "bench", "mode")

struct TreeBenchmarkOptions {
  BenchmarkCell cell = BenchmarkCell::kTreeLstm;
  TreeType tree_type = TreeType::kRandom;
  int tree_size = 128;  // leaves per tree; also the embedding table's rows, as the original
  std::vector<std::int64_t> vector_sizes{1024};
  std::vector<int> batch_sizes{1, 32, 64, 128, 256, 1024};
  std::vector<BenchMode> modes{BenchMode::kUnbatched, BenchMode::kManual, BenchMode::kDynamic,
                               BenchMode::kFullDynamic};
  bool train = true;  // forward + ½Σy² + backward + SGD; else forward + Σy only
  int threads = 1;
  int repeats = 3;  // timed batches per row (more below batch 32: see timed_batches)
  std::uint64_t seed = 1;
  // Unbatched rows time at most this many trees of each batch and scale the time to the
  // whole batch (its per-tree rate does not depend on the batch size).
  int max_unbatched_trees = 32;
  // Seconds per GEMM shape when measuring the sgemm ceiling; 0 skips it (gemm_fraction NaN).
  double ceiling_seconds = 0.05;
  // Where the model's parameters live and every mode runs (Device::kCuda: on the GPU, with
  // the ceiling measured through cuBLAS there).
  Device device = Device::kCpu;
  float learning_rate = 1e-5f;
  // Loom modes: steps of more calls than this run as several batched calls of at most this
  // many rows (loom::limit_step_rows), so a level's arrays stay in cache; 0: no limit.
  std::uint32_t max_step_rows = 0;
  // Dynamic and full-dynamic: weave and schedule batch k + 1 while batch k runs (a batch's
  // time then runs from the end of the batch before); off, each batch is woven, then run.
  bool weave_ahead = true;
  // Threads weaving one batch (shards of its trees woven apart, then appended in order).
  int weave_threads = 1;
  // Profile the execution's work by kind (weft/backend/counters.h: products, gathers,
  // scatters, elementwise, ..., forward and backward) into each row's `profile`.
  bool profile = false;
};

// Timed batches per row: int(32 / B) * repeats below batch 32 (the original's rule), else
// repeats; each row first runs one untimed warm-up batch.
int timed_batches(int batch_size, int repeats);

// The trees of batch `index` (0 = warm-up) at one batch size. same_shape: every tree has the
// shape of one tree drawn once per (seed, batch size), with its own random leaf words (manual
// and dynamic); otherwise every tree is drawn independently (full-dynamic and unbatched).
// Deterministic in (seed, type, leaves, batch_size, index).
std::vector<BinaryTree> benchmark_batch(TreeType type, int leaves, int batch_size, bool same_shape,
                                        std::uint64_t seed, int index);

// A batch of a loom mode woven and scheduled, ready to run (TreeBenchmarkRunner::weave).
struct WovenTrees {
  BenchMode mode = BenchMode::kFullDynamic;
  loom::Weaver weaver;
  loom::Schedule schedule;
  loom::BatchPlan plan;  // the constants and gathers' references packed for one upload
  double weave_s = 0;    // weave + schedule + plan, wall time
};

// One batch run by one mode.
struct StepResult {
  double weave_s = 0;  // weave + schedule (loom modes); 0 for manual
  double run_s = 0;    // forward (+ loss, backward, SGD update when training)
  double loss = 0;     // ½Σy² over the roots (training) or Σy (inference), before the update
  double grad_sq = 0;  // Σ grad² over every parameter, before the update, when asked
  std::int64_t internal_nodes = 0;
  std::map<std::int64_t, std::int64_t> level_rows;  // internal-op call size -> how many calls
  BackendCounters backend;  // what the execution asked of the backend (run_s's thread)
};

// Runs batches of one mode on one model, reusing a tape (and, for manual, the index plan of
// the last tree shape, which like the original's static graph is built outside the timing).
class TreeBenchmarkRunner {
 public:
  TreeBenchmarkRunner(const IclrBenchmarkModel& model, bool train, float learning_rate,
                      std::uint32_t max_step_rows = 0);
  ~TreeBenchmarkRunner();
  TreeBenchmarkRunner(const TreeBenchmarkRunner&) = delete;
  TreeBenchmarkRunner& operator=(const TreeBenchmarkRunner&) = delete;

  // kManual needs trees of one shape (checked). kUnbatched runs every node as its own call.
  StepResult step(BenchMode mode, std::span<const BinaryTree> trees, bool want_grad_sq = false);
  // A loom mode's first half of step(): weaves `trees` (in `threads` shards woven at once, then
  // appended in order) and schedules them. Reads only the model's loom, never the tape or the
  // parameters, so it may run on another thread while run_woven runs an earlier batch.
  WovenTrees weave(BenchMode mode, std::span<const BinaryTree> trees, int threads = 1) const;
  // The second half: executes a woven batch (and, training, the loss, backward and update).
  StepResult run_woven(const WovenTrees& woven, bool want_grad_sq = false);

 private:
  StepResult step_manual(std::span<const BinaryTree> trees, bool want_grad_sq);
  void finish(Var roots, StepResult& result, bool want_grad_sq);

  const IclrBenchmarkModel* model_;
  bool train_;
  float learning_rate_;
  std::uint32_t max_step_rows_;
  std::unique_ptr<train::Optimizer> optimizer_;  // SGD, when training
  Tape tape_;
  std::unique_ptr<detail::ManualPlan> plan_;
};

struct TreeBenchmarkRow {
  BenchMode mode = BenchMode::kFullDynamic;
  BenchmarkCell cell = BenchmarkCell::kTreeLstm;
  TreeType tree_type = TreeType::kRandom;
  std::int64_t vector_size = 0;
  int batch_size = 0;
  bool train = true;
  double trees_per_s = 0;
  // Per batch: weave + run in turn, or woven ahead from the end of the batch before.
  double batch_s_min = 0, batch_s_median = 0, batch_s_max = 0;
  double weave_s = 0;        // median, per batch
  double run_s = 0;          // median execution, per batch: what weaving ahead can approach
  bool weave_ahead = false;  // the batches were woven ahead
  // Medians per batch of the execution's backend counters (weft/backend/counters.h): kernels
  // on any device; on CUDA, launches, host-to-device copies and waits for the device.
  double kernel_calls = 0, launches = 0, host_to_device = 0, synchronizations = 0;
  double speedup_vs_unbatched = 0;  // NaN without an unbatched row
  double ratio_vs_manual = 0;       // NaN without a manual row
  double gemm_fraction = 0;  // model GEMM GFLOP/s per batch time ÷ sgemm ceiling at its shapes
  double peak_rss_mb = 0;
  // Not in the CSV: for JSON and the side-by-side script.
  double gemm_gflops = 0, ceiling_gflops = 0;
  double loss = 0;      // of the warm-up batch
  int trees_timed = 0;  // per batch (unbatched: at most max_unbatched_trees)
  // With options.profile: the execution's work per batch (the mean over the timed batches),
  // and its time outside kernels and allocation (run_s's mean less the profiled seconds: the
  // tape, the ops' checks, the run's plan).
  WorkProfile profile;
  double unprofiled_s = 0;
};

using ProgressFn = std::function<void(const std::string& line)>;

// One batch of a row as timed (batch index 0 is the untimed warm-up).
struct TimedBatch {
  double batch_s = 0;  // in turn: weave + run; woven ahead: since the end of the batch before
  StepResult step;
};

// Runs `batches` in order on `runner` in `mode`: each woven, then run, or, for dynamic and
// full-dynamic with weave_ahead, batch k + 1 woven on other threads while batch k runs.
std::vector<TimedBatch> run_batches(TreeBenchmarkRunner& runner, BenchMode mode,
                                    std::span<const std::vector<BinaryTree>> batches,
                                    bool weave_ahead, int weave_threads = 1);

// Runs every (vector size, batch size, mode) and fills in the ratios. Sets the GEMM threads.
std::vector<TreeBenchmarkRow> run_tree_benchmark(const TreeBenchmarkOptions& options,
                                                 const ProgressFn& progress = {});

// Model GEMM flops of a batch: internal nodes × (12 N² tree-LSTM, 4 N² tree-FC) × 3 if training.
double benchmark_gemm_flops(BenchmarkCell cell, std::int64_t vector_size,
                            std::int64_t internal_nodes, bool train);

// Output. The CSV header is exactly kTreeBenchmarkCsvHeader (a stable schema, documented in
// BENCHMARKS.md and `weft bench treelstm --help`); missing ratios are empty fields.
inline constexpr std::string_view kTreeBenchmarkCsvHeader =
    "mode,model,tree_type,vector_size,batch_size,phase,trees_per_s,batch_s_min,batch_s_median,"
    "batch_s_max,weave_s,speedup_vs_unbatched,ratio_vs_manual,gemm_fraction,peak_rss_mb,run_s,"
    "weave_ahead,kernel_calls,launches,host_to_device,synchronizations";
std::string tree_benchmark_csv(std::span<const TreeBenchmarkRow> rows);
std::string tree_benchmark_json(std::span<const TreeBenchmarkRow> rows,
                                const TreeBenchmarkOptions& options);
// Rows only, without the options and backend (for rows merged from saved runs).
std::string tree_benchmark_json(std::span<const TreeBenchmarkRow> rows);
std::string tree_benchmark_table(std::span<const TreeBenchmarkRow> rows);
// Where each row's batch went (rows run with options.profile): per kind of work, milliseconds
// forward and backward and the megabytes the data-moving kernels wrote; then the unprofiled
// rest of the execution and the weave.
std::string tree_benchmark_profile_table(std::span<const TreeBenchmarkRow> rows);
// The rows of tree_benchmark_json's output (to re-render or merge saved runs); the speedups
// and ratios are kept as saved.
std::vector<TreeBenchmarkRow> tree_benchmark_rows_from_json(const std::string& text);
// Speedup against unbatched (log scale) over batch size, one polyline per mode and vector size.
std::string tree_benchmark_svg(std::span<const TreeBenchmarkRow> rows);

// For cross-checks with other implementations (bench/peers): writes `dir`/trees.safetensors
// (every batch of every batch size, int32 post-orders) and `dir`/weights_V<N>.safetensors
// (initial weights per vector size), and returns, per vector size, the loss and Σ grad² of
// one training step's forward/backward on the first random batch of the first batch size.
struct CrossCheck {
  std::int64_t vector_size;
  double loss, grad_sq;
};
std::vector<CrossCheck> export_tree_benchmark(const TreeBenchmarkOptions& options,
                                              const std::string& dir);

}  // namespace weft::treelstm
