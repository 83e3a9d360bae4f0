// Loom scale benchmark (issue "the loom"): weave + schedule throughput on random binary trees,
// a batch of ~1M nodes and a 100k-deep chain run forward and backward, and the peak memory
// of the ICLR Tree-LSTM model at vector size 1024, batch 256, training. Prints CSV rows
// (benchmark,metric,value,unit) and the targets. Usage: weft_bench_loom
// [weave|million|chain|memory]
#include <chrono>
#include <cstdio>
#include <string>

#include "treelstm/iclr_benchmark.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/core/memory_usage.h"
#include "weft/loom/executor.h"

namespace {

using namespace weft;
using treelstm::BenchmarkCell;
using treelstm::IclrBenchmarkModel;
using treelstm::TreeType;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void row(const char* bench, const char* metric, double value, const char* unit) {
  std::printf("%s,%s,%.6g,%s\n", bench, metric, value, unit);
}

// Weaving (including making the trees) and scheduling 8000 random 128-leaf trees.
void weave_throughput() {
  Rng rng(1);
  IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, 8, 128, rng);
  std::vector<treelstm::BinaryTree> trees;
  for (int t = 0; t < 8000; ++t)
    trees.push_back(treelstm::make_tree(TreeType::kRandom, 128, 128, rng));
  const double t0 = now_seconds();
  loom::Weaver weaver(model.loom());
  for (const auto& tree : trees) weaver.add_output(model.weave(weaver, tree));
  const double t1 = now_seconds();
  loom::Schedule schedule = loom::make_schedule(weaver, loom::Strategy::kByDepth);
  const double t2 = now_seconds();
  loom::Schedule agenda = loom::make_schedule(weaver, loom::Strategy::kAgenda);
  const double t3 = now_seconds();
  const double nodes = double(weaver.num_calls());
  row("weave", "nodes", nodes, "calls");
  row("weave", "weave_rate", nodes / (t1 - t0), "nodes/s");
  row("weave", "by_depth_schedule_rate", nodes / (t2 - t1), "nodes/s");
  row("weave", "weave_and_schedule_rate", nodes / (t2 - t0), "nodes/s");
  row("weave", "agenda_schedule_rate", nodes / (t3 - t2), "nodes/s");
  row("weave", "levels", schedule.num_levels, "levels");
  row("weave", "agenda_steps", double(agenda.steps.size()), "steps");
}

// Forward + backward of ½Σy² over the roots; reports time, memory, and the values' size.
void run_forward_backward(const char* name, const IclrBenchmarkModel& model,
                          const loom::Weaver& weaver) {
  reset_peak_bytes();
  const double t0 = now_seconds();
  Tape tape;
  loom::Executor executor(model.loom(), tape);
  auto result = executor.run(weaver);
  tape.backward(l2_loss(result.outputs(model.hidden_type())));
  const double t1 = now_seconds();
  row(name, "nodes", double(weaver.num_calls()), "calls");
  row(name, "forward_backward_s", t1 - t0, "s");
  row(name, "levels", result.stats().levels, "levels");
  row(name, "values_mb", double(weaver.num_calls()) * double(model.vector_size()) * 4 / 1e6, "MB");
  row(name, "peak_tensor_mb", double(allocator_stats().peak_bytes_in_use) / 1e6, "MB");
  row(name, "peak_rss_mb", peak_rss_mb(), "MB");
}

void trees(const char* name, TreeType type, int leaves, std::int64_t n, std::size_t min_nodes) {
  Rng rng(2);
  IclrBenchmarkModel model(BenchmarkCell::kTreeLstm, n, 128, rng);
  loom::Weaver weaver(model.loom());
  while (weaver.num_calls() < min_nodes)
    weaver.add_output(model.weave(weaver, treelstm::make_tree(type, leaves, 128, rng)));
  run_forward_backward(name, model, weaver);
}

}  // namespace

int main(int argc, char** argv) {
  weft::set_num_threads(1);
  std::printf("benchmark,metric,value,unit\n");
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "weave") weave_throughput();
  if (only.empty() || only == "million")
    trees("million_nodes", TreeType::kRandom, 128, 16, 1000000);
  // One sequence tree of 100,000 leaves: 99,999 internal nodes, each one level deeper.
  if (only.empty() || only == "chain") trees("chain_100k", TreeType::kSequence, 100000, 16, 1);
  // 256 random trees of 128 leaves: the ICLR benchmark batch at vector size 1024, training.
  if (only.empty() || only == "memory")
    trees("iclr_v1024_b256_train", TreeType::kRandom, 128, 1024, 256 * 255);
  std::printf("# targets: weave_and_schedule_rate >= 5e6 nodes/s; iclr peak_rss_mb < 3000\n");
  return 0;
}
