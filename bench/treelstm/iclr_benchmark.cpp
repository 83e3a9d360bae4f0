// The ICLR 2017 benchmark model: tree generators, initialisation, the two cells and the
// products of one batched level.
#include "treelstm/iclr_benchmark.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "weft/autodiff/ops.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/error.h"

namespace weft::treelstm {
namespace {

Tensor uniform(const Shape& shape, float low, float high, Rng& rng) {
  std::vector<float> values(std::size_t(shape.numel()));
  for (float& v : values) v = rng.uniform(low, high);
  return Tensor::from_vector(shape, values);
}

// TensorFlow's uniform_unit_scaling: uniform in ±sqrt(3 / fan_in) * factor.
Tensor unit_scaling(std::int64_t fan_in, std::int64_t fan_out, float factor, Rng& rng) {
  const float limit = std::sqrt(3.0f / float(fan_in)) * factor;
  return uniform(Shape{fan_in, fan_out}, -limit, limit, rng);
}

}  // namespace

int BinaryTree::leaves() const {
  return int(std::count_if(postorder.begin(), postorder.end(), [](int v) { return v >= 0; }));
}

int BinaryTree::depth() const {
  std::vector<int> stack;
  for (std::int32_t v : postorder) {
    if (v >= 0) {
      stack.push_back(0);
      continue;
    }
    const int right = stack.back();
    stack.pop_back();
    stack.back() = 1 + std::max(stack.back(), right);
  }
  return stack.empty() ? 0 : stack.back();
}

BinaryTree make_tree(TreeType type, int leaves, int vocab, Rng& rng) {
  if (leaves < 1) fail("tree", "a tree needs at least one leaf, got ", leaves);
  if (vocab < 1) fail("tree", "the vocabulary needs at least one word, got ", vocab);
  if (type == TreeType::kBalanced && (leaves & (leaves - 1)) != 0)
    fail("tree", "a balanced tree needs a power-of-two number of leaves, got ", leaves);
  BinaryTree tree;
  tree.postorder.reserve(std::size_t(2 * leaves - 1));
  // Pending work: (subtree size, whether its children are already emitted).
  std::vector<std::pair<int, bool>> todo{{leaves, false}};
  while (!todo.empty()) {
    auto [size, children_done] = todo.back();
    todo.pop_back();
    if (size == 1) {
      tree.postorder.push_back(std::int32_t(rng.below(std::uint64_t(vocab))));
    } else if (children_done) {
      tree.postorder.push_back(BinaryTree::kInternal);
    } else {
      int left = size / 2;
      if (type == TreeType::kRandom) left = 1 + int(rng.below(std::uint64_t(size - 1)));
      if (type == TreeType::kSequence) left = size - 1;
      todo.push_back({size, true});
      todo.push_back({size - left, false});
      todo.push_back({left, false});
    }
  }
  return tree;
}

IclrBenchmarkModel::IclrBenchmarkModel(BenchmarkCell cell, std::int64_t vector_size,
                                       std::int64_t vocab, Rng& rng, Device device)
    : cell_(cell), vector_size_(vector_size), device_(device) {
  if (vector_size < 1 || vocab < 1)
    fail("model", "vector size and vocabulary must be positive, got ", vector_size, " and ", vocab);
  const std::int64_t n = vector_size;
  table_ = Parameter("embedding", uniform(Shape{vocab, n}, 0.0f, 1.0f, rng).to(device));
  w0_ = Parameter("w0", unit_scaling(2 * n, n, 1.43f, rng).to(device));
  b0_ = Parameter("b0", Tensor::zeros({n}, DType::kFloat32, device));
  if (cell == BenchmarkCell::kTreeLstm) {
    w1_ = Parameter("w1", unit_scaling(n, 4 * n, 1.0f, rng).to(device));
    b1_ = Parameter("b1", Tensor::zeros({4 * n}, DType::kFloat32, device));
  }
  const loom::TypeShape word{DType::kInt32, {}, "word"};
  const loom::TypeShape hidden{DType::kFloat32, {n}, "hidden"};
  leaf_op_ = loom_.add_operation("leaf", {word}, {hidden}, [this](std::span<const Var> in) {
    return std::vector<Var>{leaf(in[0].value())};
  });
  loom::OperationOptions concat;
  concat.concat_inputs = true;  // children arrive as one [B, 2N] batch: no separate concat
  internal_op_ = loom_.add_operation(
      "internal", {hidden, hidden}, {hidden},
      [this](std::span<const Var> in) { return std::vector<Var>{internal(in[0])}; }, concat);
  word_ = loom_.type_id(word);
  hidden_ = loom_.type_id(hidden);
}

Var IclrBenchmarkModel::leaf(const Tensor& ids) const { return embedding_lookup(table_, ids); }

Var IclrBenchmarkModel::internal(Var children) const {
  Var h0 = linear_relu(children, w0_, b0_);
  if (cell_ == BenchmarkCell::kTreeFc) return h0;
  // y = σ(f_l) l + σ(f_r) r + σ(i) tanh(g), with [f_l | f_r | i | g] = h0 · W1 + b1: the
  // gates are the op's own, activated in place.
  return linear_lstm_cell_state(h0, w1_, b1_, children);
}

loom::Value IclrBenchmarkModel::weave(loom::Weaver& weaver, const BinaryTree& tree) const {
  std::vector<loom::Value> stack;
  for (std::int32_t v : tree.postorder) {
    if (v >= 0) {
      stack.push_back(weaver.call(leaf_op_, {weaver.constant(word_, std::span(&v, 1))})[0]);
      continue;
    }
    if (stack.size() < 2) fail("tree", "malformed post-order: an internal node lacks children");
    const loom::Value right = stack.back();
    stack.pop_back();
    stack.back() = weaver.call(internal_op_, {stack.back(), right})[0];
  }
  if (stack.size() != 1) fail("tree", "malformed post-order: ", stack.size(), " roots");
  return stack.back();
}

std::vector<Parameter> IclrBenchmarkModel::parameters() const {
  std::vector<Parameter> all{table_, w0_, b0_};
  if (cell_ == BenchmarkCell::kTreeLstm) all.insert(all.end(), {w1_, b1_});
  return all;
}

std::vector<GemmShape> tree_lstm_gemm_shapes(std::int64_t rows, std::int64_t vector_size,
                                             bool training) {
  const std::int64_t n = vector_size;
  if (rows <= 0 || n <= 0)
    fail("gemm_ceiling", "rows and vector_size must be positive, got ", rows, " and ", n);
  std::vector<GemmShape> shapes = {
      // linear writes its bias rows first and adds the product onto them (beta 1)
      {rows, n, 2 * n, false, false, true},  // hidden = b0 + [l | r] · W0
      {rows, 4 * n, n, false, false, true},  // gates = b1 + hidden · W1
  };
  if (training) {
    // The weight transposed, or its transposed copy untransposed where the calibration prefers.
    const auto as_run = [](GemmShape shape) {
      if (gemm_prefers_untransposed_copy(shape)) shape.transpose_b = false;
      return shape;
    };
    shapes.push_back(as_run({rows, n, 4 * n, false, true, false}));  // d_hidden
    shapes.push_back({n, 4 * n, rows, true, false, true});           // dW1
    shapes.push_back(as_run({rows, 2 * n, n, false, true, true}));   // d_[l|r]
    shapes.push_back({2 * n, n, rows, true, false, true});           // dW0
  }
  return shapes;
}

}  // namespace weft::treelstm
