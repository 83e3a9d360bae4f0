// The benchmark's batches and its step runner: one batch through one mode. Loom modes weave,
// schedule (timed apart as weave_s; weave() alone may run on other threads, ahead) and
// execute; manual runs a precomputed per-shape plan of
// gathers, one leaf call and one internal call per depth, written with plain tensor ops.
#include "treelstm/tree_benchmark.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "weft/autodiff/ops.h"
#include "weft/backend/cuda.h"
#include "weft/core/error.h"
#include "weft/loom/executor.h"
#include "weft/train/optimizer.h"

namespace weft::treelstm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The shape of a tree: its post-order with every word replaced by 0.
std::vector<std::int32_t> shape_of(const BinaryTree& tree) {
  std::vector<std::int32_t> shape(tree.postorder);
  for (std::int32_t& v : shape) v = v >= 0 ? 0 : BinaryTree::kInternal;
  return shape;
}

}  // namespace

int timed_batches(int batch_size, int repeats) {
  return batch_size < 32 ? (32 / batch_size) * repeats : repeats;
}

std::vector<BinaryTree> benchmark_batch(TreeType type, int leaves, int batch_size, bool same_shape,
                                        std::uint64_t seed, int index) {
  if (batch_size < 1) fail("bench", "batch size must be at least 1, got ", batch_size);
  const std::uint64_t key = mix64(seed, std::uint64_t(batch_size) << 20 | std::uint64_t(type));
  Rng rng(mix64(key, std::uint64_t(index) * 2 + (same_shape ? 1 : 0)));
  std::vector<BinaryTree> trees;
  trees.reserve(std::size_t(batch_size));
  if (!same_shape) {
    for (int t = 0; t < batch_size; ++t) trees.push_back(make_tree(type, leaves, leaves, rng));
    return trees;
  }
  Rng shape_rng(key);  // one shape per (seed, batch size), the same for every batch index
  const BinaryTree shape = make_tree(type, leaves, leaves, shape_rng);
  for (int t = 0; t < batch_size; ++t) {
    BinaryTree tree = shape;
    for (std::int32_t& v : tree.postorder)
      if (v >= 0) v = std::int32_t(rng.below(std::uint64_t(leaves)));
    trees.push_back(std::move(tree));
  }
  return trees;
}

// How manual builds each depth's [k·B, 2N] input. Values live in "sources": 0 holds the
// leaves, d the outputs of depth d; rows are tree-major (row b·c_s + i is node i of tree b in
// source s, c_s nodes per tree). The children are gathered interleaved (l0, r0, l1, r1, ...)
// as [2·k·B, N] rows, which viewed as [k·B, 2N] are the concatenated [left | right] inputs:
// one gather when every child lies in one source, none when they are that source's rows in
// order (balanced trees), else per-source gathers concatenated then ordered by one gather.
namespace detail {
struct ManualPlan {
  struct Gather {
    std::vector<int> sources;
    std::vector<Tensor> indices;  // per source: its rows, in the order they are needed
    Tensor permutation;           // undefined when the pieces are already in order
  };
  struct Level {
    Gather children;
    bool identity = false;  // the single source's rows, in order: viewed, not gathered
  };
  std::vector<std::int32_t> shape;
  int batch = 0;
  std::vector<Level> levels;  // depth 1, 2, ...
  std::int64_t internal_nodes = 0;
  std::map<std::int64_t, std::int64_t> level_rows;
};
}  // namespace detail

namespace {

using Ref = std::pair<int, std::int32_t>;  // (source, node index within its tree's part)

detail::ManualPlan::Gather make_gather(const std::vector<Ref>& children,
                                       const std::vector<std::int32_t>& per_tree, int batch,
                                       Device device) {
  detail::ManualPlan::Gather gather;
  const auto k = std::int32_t(children.size());
  std::map<int, std::vector<std::int32_t>> rows_of;   // source -> rows, in row order
  std::map<int, std::vector<std::int32_t>> slots_of;  // source -> destination rows
  for (int b = 0; b < batch; ++b)
    for (std::int32_t j = 0; j < k; ++j) {
      const auto [source, index] = children[std::size_t(j)];
      rows_of[source].push_back(b * per_tree[std::size_t(source)] + index);
      slots_of[source].push_back(b * k + j);
    }
  std::vector<std::int32_t> permutation(std::size_t(k) * std::size_t(batch));
  std::int32_t position = 0;
  for (auto& [source, rows] : rows_of) {
    gather.sources.push_back(source);
    for (std::int32_t slot : slots_of[source]) permutation[std::size_t(slot)] = position++;
    gather.indices.push_back(
        Tensor::from_vector(Shape{std::int64_t(rows.size())}, rows).to(device));
  }
  if (gather.sources.size() > 1)
    gather.permutation =
        Tensor::from_vector(Shape{std::int64_t(permutation.size())}, permutation).to(device);
  return gather;
}

}  // namespace

TreeBenchmarkRunner::TreeBenchmarkRunner(const IclrBenchmarkModel& model, bool train,
                                         float learning_rate, std::uint32_t max_step_rows)
    : model_(&model), train_(train), learning_rate_(learning_rate), max_step_rows_(max_step_rows) {
  // Plain SGD (no momentum, no decay): value -= lr * grad, the update the original times.
  if (train_) optimizer_ = train::make_optimizer(train::OptimizerSpec{}, model.parameters());
}

TreeBenchmarkRunner::~TreeBenchmarkRunner() = default;

namespace {

// Per depth, per internal node in post-order: its (left, right) children as source refs.
struct ShapeLevels {
  std::vector<std::vector<Ref>> left, right;  // [depth - 1][node in post-order]
  std::vector<std::int32_t> per_tree;         // nodes per tree in each source
};

ShapeLevels levels_of(const std::vector<std::int32_t>& shape) {
  ShapeLevels out;
  out.per_tree.push_back(0);
  std::vector<Ref> stack;  // (source = depth, index)
  for (std::int32_t v : shape) {
    if (v >= 0) {
      stack.push_back({0, out.per_tree[0]++});
      continue;
    }
    if (stack.size() < 2) fail("bench", "malformed post-order: an internal node lacks children");
    const Ref right = stack.back();
    stack.pop_back();
    const Ref left = stack.back();
    const int depth = 1 + std::max(left.first, right.first);
    if (std::size_t(depth) >= out.per_tree.size()) {
      out.per_tree.resize(std::size_t(depth) + 1, 0);
      out.left.resize(std::size_t(depth));
      out.right.resize(std::size_t(depth));
    }
    out.left[std::size_t(depth - 1)].push_back(left);
    out.right[std::size_t(depth - 1)].push_back(right);
    stack.back() = {depth, out.per_tree[std::size_t(depth)]++};
  }
  return out;
}

// Node j's children are rows 2j and 2j + 1 of one source in every tree, and that source
// holds nothing else (balanced trees, level after level).
bool is_identity(const std::vector<Ref>& interleaved, const std::vector<std::int32_t>& per_tree) {
  const int source = interleaved[0].first;
  if (per_tree[std::size_t(source)] != std::int32_t(interleaved.size())) return false;
  for (std::size_t i = 0; i < interleaved.size(); ++i)
    if (interleaved[i] != Ref{source, std::int32_t(i)}) return false;
  return true;
}

Var build_children(const detail::ManualPlan::Gather& gather, const std::vector<Var>& values,
                   bool identity) {
  if (identity) return values[std::size_t(gather.sources[0])];
  if (gather.sources.size() == 1)
    return gather_rows(values[std::size_t(gather.sources[0])], gather.indices[0]);
  std::vector<Var> pieces;
  for (std::size_t s = 0; s < gather.sources.size(); ++s)
    pieces.push_back(gather_rows(values[std::size_t(gather.sources[s])], gather.indices[s]));
  return gather_rows(concat(pieces, 0), gather.permutation);
}

}  // namespace

StepResult TreeBenchmarkRunner::step(BenchMode mode, std::span<const BinaryTree> trees,
                                     bool want_grad_sq) {
  if (trees.empty()) fail("bench", "a batch needs at least one tree");
  return mode == BenchMode::kManual ? step_manual(trees, want_grad_sq)
                                    : run_woven(weave(mode, trees), want_grad_sq);
}

namespace {

// Weaves `trees` into `weaver`, in order.
void weave_trees(const IclrBenchmarkModel& model, loom::Weaver& weaver,
                 std::span<const BinaryTree> trees) {
  for (const BinaryTree& tree : trees) weaver.add_output(model.weave(weaver, tree));
}

}  // namespace

WovenTrees TreeBenchmarkRunner::weave(BenchMode mode, std::span<const BinaryTree> trees,
                                      int threads) const {
  if (mode == BenchMode::kManual) fail("bench", "manual mode runs a plan; it is not woven");
  if (trees.empty()) fail("bench", "a batch needs at least one tree");
  if (threads < 1) fail("bench", "weave threads must be at least 1, got ", threads);
  const auto start = std::chrono::steady_clock::now();
  WovenTrees woven{mode, loom::Weaver(model_->loom()), {}, {}, 0};
  const std::size_t shards = std::min(std::size_t(threads), trees.size());
  if (shards == 1) {
    weave_trees(*model_, woven.weaver, trees);
  } else {  // shard s holds trees [n·s / shards, n·(s + 1) / shards); the first is woven here
    std::vector<loom::Weaver> parts(shards - 1, loom::Weaver(model_->loom()));
    const auto shard = [&](std::size_t s) {
      const std::size_t first = trees.size() * s / shards;
      return trees.subspan(first, trees.size() * (s + 1) / shards - first);
    };
    std::vector<std::future<void>> pending;
    for (std::size_t s = 1; s < shards; ++s)
      pending.push_back(std::async(std::launch::async, [this, &parts, &shard, s] {
        weave_trees(*model_, parts[s - 1], shard(s));
      }));
    weave_trees(*model_, woven.weaver, shard(0));
    for (std::future<void>& done : pending) done.get();  // rethrows a shard's error
    for (const loom::Weaver& part : parts) woven.weaver.append(part);
  }
  woven.schedule =
      loom::make_schedule(woven.weaver, mode == BenchMode::kUnbatched ? loom::Strategy::kNone
                                                                      : loom::Strategy::kByDepth);
  loom::limit_step_rows(woven.schedule, max_step_rows_);
  woven.plan = loom::make_batch_plan(woven.weaver, woven.schedule);
  woven.weave_s = seconds_since(start);
  return woven;
}

StepResult TreeBenchmarkRunner::run_woven(const WovenTrees& woven, bool want_grad_sq) {
  StepResult result;
  result.weave_s = woven.weave_s;
  const auto run_start = std::chrono::steady_clock::now();
  const BackendCounters counted_before = backend_counters();
  {
    tape_.clear();
    tape_.set_grad_enabled(train_);
    TapeScope scope(tape_);
    loom::Executor executor(model_->loom(), tape_, model_->device());
    const loom::LoomResult run = executor.run(woven.weaver, woven.schedule, &woven.plan);
    finish(run.outputs(model_->hidden_type()), result, want_grad_sq);
  }
  result.run_s = seconds_since(run_start);
  result.backend = backend_counters() - counted_before;
  for (const loom::ScheduleStep& s : woven.schedule.steps)
    if (model_->loom().operation(s.op).name == "internal") {
      ++result.level_rows[s.size()];
      result.internal_nodes += s.size();
    }
  return result;
}

StepResult TreeBenchmarkRunner::step_manual(std::span<const BinaryTree> trees, bool want_grad_sq) {
  std::vector<std::int32_t> shape = shape_of(trees[0]);
  for (const BinaryTree& tree : trees)
    if (tree.postorder.size() != shape.size() || shape_of(tree) != shape)
      fail("bench", "manual batching needs every tree of the batch to have the same shape");
  const int batch = int(trees.size());
  if (!plan_ || plan_->shape != shape || plan_->batch != batch) {  // the "static graph"
    plan_ = std::make_unique<detail::ManualPlan>();
    plan_->shape = shape;
    plan_->batch = batch;
    const ShapeLevels levels = levels_of(shape);
    for (std::size_t d = 0; d < levels.left.size(); ++d) {
      detail::ManualPlan::Level level;
      std::vector<Ref> interleaved;
      for (std::size_t j = 0; j < levels.left[d].size(); ++j)
        interleaved.insert(interleaved.end(), {levels.left[d][j], levels.right[d][j]});
      level.identity = is_identity(interleaved, levels.per_tree);
      level.children = make_gather(interleaved, levels.per_tree, batch, model_->device());
      plan_->levels.push_back(std::move(level));
      const std::int64_t rows = std::int64_t(levels.left[d].size()) * batch;
      ++plan_->level_rows[rows];
      plan_->internal_nodes += rows;
    }
  }
  StepResult result;
  const auto start = std::chrono::steady_clock::now();
  const BackendCounters counted_before = backend_counters();
  {
    tape_.clear();
    tape_.set_grad_enabled(train_);
    TapeScope scope(tape_);
    std::vector<std::int32_t> words;
    words.reserve(trees.size() * (shape.size() + 1) / 2);
    for (const BinaryTree& tree : trees)
      for (std::int32_t v : tree.postorder)
        if (v >= 0) words.push_back(v);
    std::vector<Var> values{model_->leaf(
        Tensor::from_vector(Shape{std::int64_t(words.size())}, words).to(model_->device()))};
    const std::int64_t n = model_->vector_size();
    for (const detail::ManualPlan::Level& level : plan_->levels) {
      Var rows = build_children(level.children, values, level.identity);
      values.push_back(model_->internal(reshape(rows, {-1, 2 * n})));
    }
    finish(values.back(), result, want_grad_sq);
  }
  result.run_s = seconds_since(start);
  result.backend = backend_counters() - counted_before;
  result.internal_nodes = plan_->internal_nodes;
  result.level_rows = plan_->level_rows;
  return result;
}

// The loss and, when training, backward and the SGD update p -= lr · grad (then grad = 0),
// through the library's optimizer. On a GPU the step ends when its last kernel has run.
void TreeBenchmarkRunner::finish(Var roots, StepResult& result, bool want_grad_sq) {
  if (!train_) {
    result.loss = double(sum(roots).value().item());  // a copy to the host: synchronises
    return;
  }
  Var loss = l2_loss(roots);
  result.loss = double(loss.value().item());
  tape_.backward(loss);
  if (want_grad_sq)
    for (const Parameter& p : optimizer_->parameters())
      for (float g : p.grad().to_float_vector()) result.grad_sq += double(g) * double(g);
  optimizer_->step(learning_rate_);
  optimizer_->zero_grad();
  if (model_->device() == Device::kCuda) cuda_synchronize();
}

}  // namespace weft::treelstm
