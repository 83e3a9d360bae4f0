// The model of the ICLR 2017 dynamic-batching benchmark (Looks et al.; spec §2): binary
// trees of random, balanced or sequence shape over word leaves, a leaf embedding lookup, and
// an internal cell that is either "tree LSTM" (relu hidden layer over [l|r], one matmul to
// four gates, no output gate) or "tree FC" (relu([l|r]·W + b)). Written on the loom; also
// callable directly on batches, which is what hand-batched ("manual") baselines use; and the
// sgemm products a batched level makes, for the GEMM ceiling (weft/backend/gemm_ceiling.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "weft/backend/gemm_ceiling.h"
#include "weft/core/named_enum.h"
#include "weft/core/rng.h"
#include "weft/loom/weaver.h"

namespace weft::treelstm {

#define WEFT_BENCH_TREE_TYPES(X) \
  X(kRandom, "random")           \
  X(kBalanced, "balanced")       \
  X(kSequence, "sequence")
enum class TreeType { WEFT_BENCH_TREE_TYPES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(TreeType, WEFT_BENCH_TREE_TYPES, tree_type_name, parse_tree_type, "tree",
                "tree type")

// A binary tree in post-order: a leaf is its word id (>= 0); kInternal combines the two
// subtrees completed just before it.
struct BinaryTree {
  static constexpr std::int32_t kInternal = -1;
  std::vector<std::int32_t> postorder;

  int leaves() const;
  // Internal nodes on the longest root-to-leaf path (a lone leaf has depth 0).
  int depth() const;
};

// random: a leaf for n <= 1, else (tree(r), tree(n - r)) with r uniform in [1, n - 1];
// balanced: a perfect tree (n must be a power of two); sequence: the left chain
// (seq(n - 1), leaf). Word ids are uniform in [0, vocab). Built without recursion.
BinaryTree make_tree(TreeType type, int leaves, int vocab, Rng& rng);

#define WEFT_BENCH_CELLS(X) \
  X(kTreeLstm, "tree-lstm") \
  X(kTreeFc, "tree-fc")
enum class BenchmarkCell { WEFT_BENCH_CELLS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(BenchmarkCell, WEFT_BENCH_CELLS, cell_name, parse_cell, "model", "model")

class IclrBenchmarkModel {
 public:
  // Initialised as the original: W0 and the FC weight uniform-unit-scaling 1.43, the gate
  // weight 1.0, biases 0, the embedding table uniform in [0, 1).
  // The parameters are drawn on the host (the same values on every device) and placed on
  // `device`.
  IclrBenchmarkModel(BenchmarkCell cell, std::int64_t vector_size, std::int64_t vocab, Rng& rng,
                     Device device = Device::kCpu);
  IclrBenchmarkModel(const IclrBenchmarkModel&) = delete;
  IclrBenchmarkModel& operator=(const IclrBenchmarkModel&) = delete;

  // Weaves one tree; returns its root value (type hidden_type()).
  loom::Value weave(loom::Weaver& weaver, const BinaryTree& tree) const;

  // The leaf op on a batch of word ids (int32 [B]) -> [B, N].
  Var leaf(const Tensor& ids) const;
  // The internal op on a batch of concatenated children [B, 2N] -> [B, N].
  Var internal(Var children) const;

  const loom::Loom& loom() const { return loom_; }
  loom::TypeId hidden_type() const { return hidden_; }
  loom::TypeId word_type() const { return word_; }
  std::int64_t vector_size() const { return vector_size_; }
  BenchmarkCell cell() const { return cell_; }
  Device device() const { return device_; }
  std::vector<Parameter> parameters() const;

 private:
  BenchmarkCell cell_;
  std::int64_t vector_size_;
  Device device_;
  Parameter table_, w0_, b0_, w1_, b1_;
  loom::Loom loom_;
  loom::TypeId word_ = 0, hidden_ = 0;
  loom::OpId leaf_op_ = 0, internal_op_ = 0;
};

// The sgemm products of one batched level of the ICLR 2017 Tree-LSTM benchmark model, for
// `rows` nodes at that level and vector size N (= vector_size):
//   hidden = relu([l | r] · W0 + b0), W0 [2N, N]   -> {rows, N, 2N}      (forward 1)
//   gates  = hidden · W1 (+ b1),      W1 [N, 4N]   -> {rows, 4N, N}      (forward 2)
// and when `training`, the backward products in the order the tape runs them (gates first),
// as linear's backward runs them: the weights' gradients accumulate (beta = 1); d_hidden is the
// first gradient to reach hidden (beta = 0), d_[l|r] adds to what the cell state's backward
// wrote; the inputs' gradients read each weight transposed, or its transposed copy (made once
// per step: Tape::transposed_value) untransposed where the GEMM calibration prefers that
// (gemm_prefers_untransposed_copy, so these shapes depend on the machine):
//   d_hidden = d_gates · W1ᵀ  -> {rows, N, 4N, transpose_b unless the copy is preferred}
//   dW1      = hiddenᵀ · d_gates -> {N, 4N, rows, transpose_a, accumulate}
//   d_[l|r]  = d_pre · W0ᵀ    -> {rows, 2N, N, transpose_b unless ..., accumulate}
//   dW0      = [l | r]ᵀ · d_pre  -> {2N, N, rows, transpose_a, accumulate}
// Forward flops per level: 12·rows·N² (12.6 MFLOP per node at N = 1024); training triples it.
std::vector<GemmShape> tree_lstm_gemm_shapes(std::int64_t rows, std::int64_t vector_size,
                                             bool training);

}  // namespace weft::treelstm
