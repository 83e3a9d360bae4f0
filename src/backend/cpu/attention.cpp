// CPU kernels of dot-product attention over ragged memories (kernels.def: ragged_attention and
// its backward): each item's queries attend over the first lengths[i] rows of its own memory
// only, so an item's cost and its sums follow its own length, never its companions' padding.
// Every sum runs in an order fixed by the item's length and the hidden size (fixed_blocks.h),
// so a row's result does not depend on the batch it came in.
// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsics when
// Eigen's packet math is inlined (as in elementwise.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "../kernels.h"
#include "fixed_blocks.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

// Σ a[j] b[j] for j < n, in an order fixed by n alone: kFixedBlock running sums (the last block
// zero-padded), then those summed.
float fixed_order_dot(const float* a, const float* b, std::int64_t n) {
  FixedBlock lanes = FixedBlock::Zero();
  std::int64_t j = 0;
  for (; j + kFixedBlock <= n; j += kFixedBlock)
    lanes += ConstFixedBlockMap(a + j) * ConstFixedBlockMap(b + j);
  for (std::int64_t k = 0; j + k < n; ++k) lanes[k] += a[j + k] * b[j + k];
  return lanes.sum();
}

// y[:n] (+)= scale * x[:n].
void add_scaled(float scale, const float* x, float* y, std::int64_t n) {
  for_fixed_blocks<true>(
      n, y, [scale](auto& out, const auto& in) { out += scale * in; }, x);
}

// w[:length] = softmax(w[:length]) in place, shifted by the maximum.
void softmax_in_place(float* w, std::int64_t length) {
  const float max = *std::max_element(w, w + length);
  for_fixed_blocks(
      length, w, [max](auto& out, const auto& in) { out = (in - max).exp(); }, w);
  const float scale = 1.0f / fixed_order_sum(w, length);
  for_fixed_blocks(
      length, w, [scale](auto& out, const auto& in) { out = in * scale; }, w);
}

struct Sizes {
  std::int64_t items, beams, size, hidden;
};

Sizes sizes_of(const Tensor& queries, const Tensor& weights) {
  WEFT_ASSERT(queries.rank() == 3 && weights.rank() == 3);
  return {queries.shape()[0], queries.shape()[1], weights.shape()[2], queries.shape()[2]};
}

}  // namespace

void ragged_attention(const Tensor& queries, const RowBlocks& memory, const Tensor& lengths,
                      Tensor& weights, Tensor& context) {
  const Sizes s = sizes_of(queries, weights);
  WEFT_ASSERT(memory.rows == s.items && memory.width() == s.size * s.hidden);
  WEFT_ASSERT(context.shape() == queries.shape() && lengths.numel() == s.items);
  const std::int32_t* length = lengths.data<std::int32_t>();
  const float* q = queries.data<float>();
  float* w = weights.data<float>();
  float* c = context.data<float>();
  for (std::int64_t i = 0; i < s.items; ++i) {
    const float* m = memory.at(0, i);
    const std::int64_t used = length[i];
    WEFT_ASSERT(used >= 1 && used <= s.size);
    for (std::int64_t b = 0; b < s.beams; ++b) {
      const std::int64_t row = i * s.beams + b;
      const float* query = q + row * s.hidden;
      float* scores = w + row * s.size;
      float* out = c + row * s.hidden;
      for (std::int64_t t = 0; t < used; ++t)
        scores[t] = fixed_order_dot(query, m + t * s.hidden, s.hidden);
      softmax_in_place(scores, used);
      std::fill(scores + used, scores + s.size, 0.0f);
      std::fill(out, out + s.hidden, 0.0f);
      for (std::int64_t t = 0; t < used; ++t)
        add_scaled(scores[t], m + t * s.hidden, out, s.hidden);
    }
  }
}

// Per query row, with w = softmax(s), s[t] = q · m_t, c = Σ_t w[t] m_t: dw[t] = dc · m_t,
// ds[t] = w[t] (dw[t] - Σ_u w[u] dw[u]); dq = Σ_t ds[t] m_t; dm_t += w[t] dc + ds[t] q.
void ragged_attention_backward(const Tensor& queries, const Tensor& memory, const Tensor& lengths,
                               const Tensor& weights, const Tensor& dcontext, Tensor* dqueries,
                               bool dqueries_fresh, Tensor* dmemory, bool dmemory_fresh) {
  const Sizes s = sizes_of(queries, weights);
  WEFT_ASSERT(memory.rank() == 3 && memory.shape()[1] == s.size &&
              dcontext.shape() == queries.shape());
  const std::int32_t* length = lengths.data<std::int32_t>();
  const std::int64_t item_floats = s.size * s.hidden;
  if (dqueries && dqueries_fresh) backend::cpu::fill(*dqueries, 0.0f);
  if (dmemory && dmemory_fresh) backend::cpu::fill(*dmemory, 0.0f);
  std::vector<float> ds(static_cast<std::size_t>(s.size));
  for (std::int64_t i = 0; i < s.items; ++i) {
    const float* m = memory.data<float>() + i * item_floats;
    const std::int64_t used = length[i];
    for (std::int64_t b = 0; b < s.beams; ++b) {
      const std::int64_t row = i * s.beams + b;
      const float* w = weights.data<float>() + row * s.size;
      const float* dc = dcontext.data<float>() + row * s.hidden;
      for (std::int64_t t = 0; t < used; ++t)
        ds[std::size_t(t)] = fixed_order_dot(dc, m + t * s.hidden, s.hidden);
      const float expected = fixed_order_dot(w, ds.data(), used);
      for (std::int64_t t = 0; t < used; ++t)
        ds[std::size_t(t)] = w[t] * (ds[std::size_t(t)] - expected);
      if (dqueries) {
        float* dq = dqueries->data<float>() + row * s.hidden;
        for (std::int64_t t = 0; t < used; ++t)
          add_scaled(ds[std::size_t(t)], m + t * s.hidden, dq, s.hidden);
      }
      if (dmemory) {
        const float* q = queries.data<float>() + row * s.hidden;
        float* dm = dmemory->data<float>() + i * item_floats;
        for (std::int64_t t = 0; t < used; ++t) {
          add_scaled(w[t], dc, dm + t * s.hidden, s.hidden);
          add_scaled(ds[std::size_t(t)], q, dm + t * s.hidden, s.hidden);
        }
      }
    }
  }
}

}  // namespace weft::backend::cpu
