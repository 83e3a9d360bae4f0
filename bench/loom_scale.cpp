// Loom scale benchmark (issue "the loom"): weave + schedule throughput on random binary trees,
// a batch of ~1M nodes and a 100k-deep chain run forward and backward, and the peak memory
// of the ICLR Tree-LSTM model at vector size 1024, batch 256, training. Prints CSV rows
// (benchmark,metric,value,unit) and a summary against the targets.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/loom/executor.h"

namespace {

using namespace weft;
using loom::Value;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key)
    if (key == "VmHWM:") {
      double kb = 0;
      status >> kb;
      return kb / 1024.0;
    }
  return 0;
}

void row(const char* bench, const char* metric, double value, const char* unit) {
  std::printf("%s,%s,%.6g,%s\n", bench, metric, value, unit);
}

// The ICLR benchmark model: leaves look up a word vector, internal nodes run the Tree-LSTM
// variant h = relu([l|r]·W0 + b0); [fl, fr, i, g] = h·W + b; c = σ(fl)l + σ(fr)r + σ(i)tanh(g).
struct TreeModel {
  loom::Loom loom;
  loom::TypeId word, hidden;
  loom::OpId leaf, cell;
  Parameter table, w0, b0, w, b;

  TreeModel(std::int64_t n, std::int64_t vocab, Rng& rng)
      : table("table", init({vocab, n}, rng)),
        w0("w0", init({2 * n, n}, rng)),
        b0("b0", Tensor::zeros({n})),
        w("w", init({n, 4 * n}, rng)),
        b("b", Tensor::zeros({4 * n})) {
    const loom::TypeShape word_type{DType::kInt32, {}, "word"};
    const loom::TypeShape hidden_type{DType::kFloat32, {n}, "hidden"};
    leaf = loom.add_operation("leaf", {word_type}, {hidden_type}, [this](std::span<const Var> in) {
      return std::vector<Var>{embedding_lookup(table, in[0].value())};
    });
    loom::OperationOptions concat;
    concat.concat_inputs = true;
    cell = loom.add_operation(
        "cell", {hidden_type, hidden_type}, {hidden_type},
        [this](std::span<const Var> in) {
          Var h = relu(linear(in[0], w0, b0));
          return std::vector<Var>{lstm_cell_state(linear(h, w, b), in[0])};
        },
        concat);
    word = loom.type_id(word_type);
    hidden = loom.type_id(hidden_type);
  }
  static Tensor init(const Shape& shape, Rng& rng) {
    std::vector<float> v(std::size_t(shape.numel()));
    for (float& x : v) x = rng.uniform(-0.05f, 0.05f);
    return Tensor::from_vector(shape, v);
  }
  std::vector<Parameter> parameters() const { return {table, w0, b0, w, b}; }
};

// A random binary tree over `leaves` words, woven iteratively (no recursion): a stack of
// (leaf count) splits, children before parents.
Value weave_random_tree(TreeModel& m, loom::Weaver& weaver, int leaves, Rng& rng) {
  std::vector<Value> stack;
  std::vector<int> sizes;  // pending subtree sizes, processed left to right
  std::vector<std::pair<int, bool>> todo{{leaves, false}};
  while (!todo.empty()) {
    auto [size, expanded] = todo.back();
    todo.pop_back();
    if (size == 1) {
      const float word = float(rng.below(1000));
      std::int32_t id = std::int32_t(word);
      Value c =
          weaver.constant(m.word, Tensor::from_vector(Shape{}, std::vector<std::int32_t>{id}));
      stack.push_back(weaver.call(m.leaf, {c})[0]);
    } else if (expanded) {
      Value right = stack.back();
      stack.pop_back();
      Value left = stack.back();
      stack.pop_back();
      stack.push_back(weaver.call(m.cell, {left, right})[0]);
    } else {
      const int left = 1 + int(rng.below(std::uint64_t(size - 1)));
      todo.push_back({size, true});
      todo.push_back({size - left, false});
      todo.push_back({left, false});
    }
  }
  return stack.back();
}

void weave_throughput() {
  Rng rng(1);
  TreeModel m(8, 1000, rng);
  const int trees = 4000, leaves = 128;
  const double t0 = now_seconds();
  loom::Weaver weaver(m.loom);
  for (int t = 0; t < trees; ++t) weaver.add_output(weave_random_tree(m, weaver, leaves, rng));
  const double t1 = now_seconds();
  loom::Schedule schedule = loom::make_schedule(weaver, loom::Strategy::kByDepth);
  const double t2 = now_seconds();
  const double nodes = double(weaver.num_calls());
  row("weave", "nodes", nodes, "calls");
  row("weave", "weave_rate", nodes / (t1 - t0), "nodes/s");
  row("weave", "schedule_rate", nodes / (t2 - t1), "nodes/s");
  row("weave", "weave_and_schedule_rate", nodes / (t2 - t0), "nodes/s");
  loom::Schedule agenda = loom::make_schedule(weaver, loom::Strategy::kAgenda);
  row("weave", "agenda_schedule_rate", nodes / (now_seconds() - t2), "nodes/s");
  row("weave", "levels", schedule.num_levels, "levels");
}

// Forward + backward of a weave; returns seconds and reports the values' own size.
void run_forward_backward(const char* name, TreeModel& m, loom::Weaver& weaver, std::int64_t n) {
  reset_peak_bytes();
  const double t0 = now_seconds();
  Tape tape;
  loom::Executor executor(m.loom, tape);
  auto result = executor.run(weaver);
  Var out = result.outputs(m.hidden);
  tape.backward(l2_loss(out));
  const double t1 = now_seconds();
  const double values_mb = double(weaver.num_calls()) * double(n) * 4 / 1e6;
  row(name, "nodes", double(weaver.num_calls()), "calls");
  row(name, "forward_backward_s", t1 - t0, "s");
  row(name, "levels", result.stats().levels, "levels");
  row(name, "values_mb", values_mb, "MB");
  row(name, "peak_tensor_mb", double(allocator_stats().peak_bytes_in_use) / 1e6, "MB");
  row(name, "peak_rss_mb", peak_rss_mb(), "MB");
}

// Random 128-leaf trees at vector size n until at least `min_nodes` calls, forward+backward.
void random_trees(const char* name, std::int64_t n, std::size_t min_nodes, std::uint64_t seed) {
  Rng rng(seed);
  TreeModel m(n, 1000, rng);
  loom::Weaver weaver(m.loom);
  while (weaver.num_calls() < min_nodes) weaver.add_output(weave_random_tree(m, weaver, 128, rng));
  run_forward_backward(name, m, weaver, n);
}

constexpr std::int32_t kWord = 7;

void deep_chain() {
  Rng rng(3);
  const std::int64_t n = 16;
  TreeModel m(n, 1000, rng);
  loom::Weaver weaver(m.loom);
  auto word = [&] {
    return weaver.call(m.leaf,
                       {weaver.constant(m.word, std::span<const std::int32_t>(&kWord, 1))})[0];
  };
  Value h = word();
  for (int i = 0; i < 100000; ++i) h = weaver.call(m.cell, {h, word()})[0];
  weaver.add_output(h);
  run_forward_backward("chain_100k", m, weaver, n);
}

}  // namespace

int main(int argc, char** argv) {
  weft::set_num_threads(1);
  std::printf("benchmark,metric,value,unit\n");
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "weave") weave_throughput();
  if (only.empty() || only == "million") random_trees("million_nodes", 16, 1000000, 2);
  if (only.empty() || only == "chain") deep_chain();
  // 256 trees of 255 calls: the ICLR benchmark batch at vector size 1024, training.
  if (only.empty() || only == "memory") random_trees("iclr_v1024_b256_train", 1024, 256 * 255, 4);
  std::printf("# targets: weave_and_schedule_rate >= 5e6 nodes/s; iclr peak_rss_mb < 3000\n");
  return 0;
}
