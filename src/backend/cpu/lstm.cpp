// CPU kernels of the fused LSTM cell (kernels.def: lstm_cell_state, lstm_hidden); the gradient
// formulas are shared with CUDA (../elementwise_math.h). One pass per row computes every gate's
// activation, so a Tree-LSTM node keeps only its gates, children and dropout mask for backward
// instead of a dozen elementwise intermediates. The activations go
// through Eigen's vectorized logistic and tanh (scalar std::exp / std::tanh cost ~40 % of a
// training step at N = 128: BENCHMARKS.md, the ICLR benchmark). GCC 12 reports false
// (maybe-)uninitialized warnings inside its own AVX-512 intrinsics when Eigen's packet math is
// inlined (as in elementwise.cpp); they concern the compiler's header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "../elementwise_math.h"
#include "../kernels.h"
#include "fixed_blocks.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// dst = value for a fresh gradient buffer (not zero-filled), dst += value otherwise.
template <typename Value>
void store(ArrayMap dst, const Value& value, bool fresh) {
  if (fresh)
    dst = value;
  else
    dst += value;
}

// Child `child` of row r of a cell's children: in one [B, KN] tensor, or where the loom's
// argument rows lie (RowBlocks: a block per child, or one block of all K).
struct DenseChildren {
  const float* x;
  std::int64_t k, n;
  const float* operator()(std::int64_t r, std::int64_t child) const {
    return x + (r * k + child) * n;
  }
};
struct ChildrenInRows {
  ChildrenInRows(const RowBlocks& blocks, std::int64_t k, std::int64_t n) : rows(blocks) {
    for (std::int64_t child = 0; child < k; ++child) {
      const auto [p, column] = blocks.locate(child * n);
      block.push_back(p);
      offset.push_back(column);
    }
  }
  float* operator()(std::int64_t r, std::int64_t child) const {
    return rows.at(block[std::size_t(child)], r) + offset[std::size_t(child)];
  }
  bool adds(std::int64_t r, std::int64_t child) const {
    return rows.adds(block[std::size_t(child)], r);
  }
  const RowBlocks& rows;
  std::vector<std::size_t> block;
  std::vector<std::int64_t> offset;
};

// Where a child's gradient goes: rows of one [B, KN] tensor (fresh: not zero-filled, so written
// rather than added into), or the children's rows where they lie.
struct DenseChildGrads {
  float* dx;
  std::int64_t k, n;
  bool fresh;
  template <typename Value>
  void operator()(std::int64_t r, std::int64_t child, const Value& value) const {
    store(ArrayMap(dx + (r * k + child) * n, n), value, fresh);
  }
};

struct ChildGradsInRows {
  const ChildrenInRows& at;
  std::int64_t n;
  template <typename Value>
  void operator()(std::int64_t r, std::int64_t child, const Value& value) const {
    store(ArrayMap(at(r, child), n), value, !at.adds(r, child));
  }
};

// c from the gates. Their activations [sigmoid(f_1) .. sigmoid(f_K) | sigmoid(i) | tanh(g)]
// go to a row of scratch, or over the gates themselves when `activated` is the gates' tensor
// (lstm_cell_state_activating).
template <typename Children>
void cell_state(const Tensor& gates, Tensor* activated, const Tensor* bias, const Children& child,
                std::int64_t k, const Tensor* candidate_mask, Tensor& c) {
  const std::int64_t rows = gates.rows(), n = c.row_size(), stride = gates.row_size();
  WEFT_ASSERT(stride >= (k + 2) * n);
  const float* g = gates.data<float>();
  float* in_place = activated ? activated->data<float>() : nullptr;
  const float* m = candidate_mask ? candidate_mask->data<float>() : nullptr;
  float* out = c.data<float>();
  std::vector<float> scratch(std::size_t(in_place ? 0 : (k + 2) * n));
  WEFT_ASSERT(bias == nullptr || (in_place && bias->numel() == stride));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * stride;
    float* a = in_place ? in_place + r * stride : scratch.data();
    // The bias first (an add rounds alike in any lane), over the gates in place.
    if (bias) ArrayMap(a, stride) += ConstArrayMap(bias->data<float>(), stride);
    // [f_1 .. f_K | i] are contiguous: one logistic over them, one tanh over g. In fixed
    // blocks, so a row's c does not depend on its place in the batch (fixed_blocks.h).
    float* candidate = a + (k + 1) * n;
    for_fixed_blocks((k + 1) * n, a, [](auto& o, const auto& v) { o = v.logistic(); }, gr);
    for_fixed_blocks(
        n, candidate, [](auto& o, const auto& v) { o = v.tanh(); }, gr + (k + 1) * n);
    float* cr = out + r * n;
    for_fixed_blocks(
        n, cr, [](auto& cell, const auto& i, const auto& t) { cell = i * t; }, a + k * n,
        candidate);
    if (m)
      for_fixed_blocks<true>(
          n, cr, [](auto& cell, const auto& mask) { cell *= mask; }, m + r * n);
    for (std::int64_t j = 0; j < k; ++j)
      for_fixed_blocks<true>(
          n, cr, [](auto& cell, const auto& f, const auto& xc) { cell += f * xc; }, a + j * n,
          static_cast<const float*>(child(r, j)));
  }
}

std::int64_t children_count(const Tensor& children, std::int64_t n) {
  WEFT_ASSERT(n > 0 && children.row_size() % n == 0);
  return children.row_size() / n;
}

}  // namespace

void lstm_cell_state(const Tensor& gates, const Tensor& children, const Tensor* candidate_mask,
                     Tensor& c) {
  const std::int64_t k = children_count(children, c.row_size());
  cell_state(gates, nullptr, nullptr, DenseChildren{children.data<float>(), k, c.row_size()}, k,
             candidate_mask, c);
}

void lstm_cell_state_activating(Tensor& gates, const Tensor* bias, const Tensor& children,
                                const Tensor* candidate_mask, Tensor& c) {
  const std::int64_t k = children_count(children, c.row_size());
  cell_state(gates, &gates, bias, DenseChildren{children.data<float>(), k, c.row_size()}, k,
             candidate_mask, c);
}

void lstm_cell_state_activating_rows(Tensor& gates, const Tensor* bias, const RowBlocks& children,
                                     const Tensor* candidate_mask, Tensor& c) {
  const std::int64_t n = c.row_size(), k = children.width() / n;
  cell_state(gates, &gates, bias, ChildrenInRows(children, k, n), k, candidate_mask, c);
}

namespace {

// The cell state's gradient from the gates (kActivated false: the activations recomputed) or
// from their activations as lstm_cell_state_activating wrote them (kActivated true). The
// children's gradient goes to child_grad(r, child, value), when wanted.
template <bool kActivated, typename Children, typename ChildGrads>
void cell_state_backward(const Tensor& gates, const Children& child, std::int64_t k,
                         const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                         bool dgates_fresh, const ChildGrads* child_grad) {
  const std::int64_t rows = gates.rows(), n = dc.row_size(), stride = gates.row_size();
  WEFT_ASSERT(stride >= (k + 2) * n);
  const float* g = gates.data<float>();
  const float* m = candidate_mask ? candidate_mask->data<float>() : nullptr;
  const float* d = dc.data<float>();
  float* dg = dgates ? dgates->data<float>() : nullptr;
  // Written through maps, which never reallocate (an Eigen array assigned here made GCC 12
  // report a false use-after-free).
  std::vector<float> f_buffer(std::size_t(kActivated ? 0 : n)),
      t_buffer(std::size_t(kActivated ? 0 : n)), masked(std::size_t(m ? n : 0));
  // The activation of gate block `block` of row `gr`: read, or computed into `buffer`.
  auto activation = [&](const float* gr, std::int64_t block, bool is_tanh,
                        std::vector<float>& buffer) -> const float* {
    if constexpr (kActivated) {
      return gr + block * n;
    } else {
      // As the forward pass computed them (fixed_blocks.h).
      if (is_tanh)
        for_fixed_blocks(
            n, buffer.data(), [](auto& o, const auto& v) { o = v.tanh(); }, gr + block * n);
      else
        for_fixed_blocks(
            n, buffer.data(), [](auto& o, const auto& v) { o = v.logistic(); }, gr + block * n);
      return buffer.data();
    }
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * stride;
    const ConstArrayMap dr(d + r * n, n);
    float* dgr = dg ? dg + r * stride : nullptr;
    for (std::int64_t j = 0; j < k; ++j) {
      const ConstArrayMap f(activation(gr, j, false, f_buffer), n);
      if (dg)
        store(ArrayMap(dgr + j * n, n),
              math::lstm_forget_gate_grad(dr, ConstArrayMap(child(r, j), n), f), dgates_fresh);
      if (child_grad) (*child_grad)(r, j, math::lstm_child_state_grad(dr, f));
    }
    if (!dg) continue;
    const ConstArrayMap f(activation(gr, k, false, f_buffer), n);
    const ConstArrayMap t(activation(gr, k + 1, true, t_buffer), n);
    // With a mask m: d i = dc m t σ'(i), d g = dc m σ(i) tanh'(g): dc m in place of dc.
    if (m) ArrayMap(masked.data(), n) = dr * ConstArrayMap(m + r * n, n);
    const ConstArrayMap dm(m ? masked.data() : d + r * n, n);
    store(ArrayMap(dgr + k * n, n), math::lstm_input_gate_grad(dm, t, f), dgates_fresh);
    store(ArrayMap(dgr + (k + 1) * n, n), math::lstm_candidate_grad(dm, f, t), dgates_fresh);
    if (dgates_fresh) std::fill(dgr + (k + 2) * n, dgr + stride, 0.0f);
  }
}

template <bool kActivated>
void dense_cell_state_backward(const Tensor& gates, const Tensor& children,
                               const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                               bool dgates_fresh, Tensor* dchildren, bool dchildren_fresh) {
  const std::int64_t n = dc.row_size(), k = children_count(children, n);
  const DenseChildGrads grads{dchildren ? dchildren->data<float>() : nullptr, k, n,
                              dchildren_fresh};
  cell_state_backward<kActivated>(gates, DenseChildren{children.data<float>(), k, n}, k,
                                  candidate_mask, dc, dgates, dgates_fresh,
                                  dchildren ? &grads : nullptr);
}

}  // namespace

void lstm_cell_state_backward(const Tensor& gates, const Tensor& children,
                              const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                              bool dgates_fresh, Tensor* dchildren, bool dchildren_fresh) {
  dense_cell_state_backward<false>(gates, children, candidate_mask, dc, dgates, dgates_fresh,
                                   dchildren, dchildren_fresh);
}

void lstm_cell_state_backward_activated(const Tensor& activations, const Tensor& children,
                                        const Tensor* candidate_mask, const Tensor& dc,
                                        Tensor* dgates, bool dgates_fresh, Tensor* dchildren,
                                        bool dchildren_fresh) {
  dense_cell_state_backward<true>(activations, children, candidate_mask, dc, dgates, dgates_fresh,
                                  dchildren, dchildren_fresh);
}

void lstm_cell_state_rows(const Tensor& gates, const RowBlocks& children,
                          const Tensor* candidate_mask, Tensor& c) {
  const std::int64_t n = c.row_size(), k = children.width() / n;
  cell_state(gates, nullptr, nullptr, ChildrenInRows(children, k, n), k, candidate_mask, c);
}

namespace {

// The activating and plain backward with the children where they lie: one body.
template <bool kActivated>
void cell_state_backward_rows(const Tensor& gates, const RowBlocks& children,
                              const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                              bool dgates_fresh, const RowBlocks* dchildren) {
  const std::int64_t n = dc.row_size(), k = children.width() / n;
  const ChildrenInRows child(children, k, n);
  if (dchildren == nullptr)
    return cell_state_backward<kActivated, ChildrenInRows, ChildGradsInRows>(
        gates, child, k, candidate_mask, dc, dgates, dgates_fresh, nullptr);
  const ChildrenInRows to(*dchildren, k, n);
  const ChildGradsInRows grads{to, n};
  cell_state_backward<kActivated>(gates, child, k, candidate_mask, dc, dgates, dgates_fresh,
                                  &grads);
}

}  // namespace

void lstm_cell_state_backward_rows(const Tensor& gates, const RowBlocks& children,
                                   const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                                   bool dgates_fresh, const RowBlocks* dchildren) {
  cell_state_backward_rows<false>(gates, children, candidate_mask, dc, dgates, dgates_fresh,
                                  dchildren);
}

void lstm_cell_state_backward_activated_rows(const Tensor& activations, const RowBlocks& children,
                                             const Tensor* candidate_mask, const Tensor& dc,
                                             Tensor* dgates, bool dgates_fresh,
                                             const RowBlocks* dchildren) {
  cell_state_backward_rows<true>(activations, children, candidate_mask, dc, dgates, dgates_fresh,
                                 dchildren);
}

void lstm_hidden(const Tensor& gates, std::int64_t offset, const Tensor& c, Tensor& h) {
  const std::int64_t rows = c.rows(), n = c.row_size(), stride = gates.row_size();
  WEFT_ASSERT(gates.rows() == rows && offset >= 0 && offset + n <= stride);
  const float* g = gates.data<float>();
  const float* cv = c.data<float>();
  float* out = h.data<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    for_fixed_blocks(
        n, out + r * n,
        [](auto& hidden, const auto& o, const auto& cell) { hidden = o.logistic() * cell.tanh(); },
        g + r * stride + offset, cv + r * n);
}

void lstm_hidden_backward(const Tensor& gates, std::int64_t offset, const Tensor& c,
                          const Tensor& dh, Tensor* dgates, bool dgates_fresh, Tensor* dc,
                          bool dc_fresh) {
  const std::int64_t rows = c.rows(), n = c.row_size(), stride = gates.row_size();
  WEFT_ASSERT(gates.rows() == rows && offset >= 0 && offset + n <= stride);
  const float* g = gates.data<float>();
  const float* cv = c.data<float>();
  const float* d = dh.data<float>();
  float* dg = dgates ? dgates->data<float>() : nullptr;
  float* dcv = dc ? dc->data<float>() : nullptr;
  Eigen::ArrayXf o(n), t(n);
  for (std::int64_t r = 0; r < rows; ++r) {
    o = ConstArrayMap(g + r * stride + offset, n).logistic();
    t = ConstArrayMap(cv + r * n, n).tanh();
    const ConstArrayMap dr(d + r * n, n);
    if (dg) {
      float* row = dg + r * stride;
      store(ArrayMap(row + offset, n), math::lstm_output_gate_grad(dr, t, o), dgates_fresh);
      if (dgates_fresh) {
        std::fill(row, row + offset, 0.0f);
        std::fill(row + offset + n, row + stride, 0.0f);
      }
    }
    if (dcv) store(ArrayMap(dcv + r * n, n), math::lstm_hidden_cell_grad(dr, o, t), dc_fresh);
  }
}

}  // namespace weft::backend::cpu
