// CPU optimizer kernels: the fused update of a parameter and its slots (SGD, Adagrad, Adam with
// either kind of weight decay), of the whole tensor or of some of its rows (a row-sparse
// gradient's), and the clamp that gradient clipping uses. Eigen array maps over
// chunks that stay in L1, so every statement is a vectorised loop (Eigen's packet sqrt, where a
// plain std::sqrt loop would not vectorise under -fmath-errno) and a chunk's several passes
// cost one trip through memory.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics when Eigen's
// packet math is inlined (as in elementwise.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

constexpr std::int64_t kChunk = 2048;  // floats: 8 KiB per array, 4 arrays in L1

// The rule's update of one chunk; g is the gradient with any L2 term already added.
void update_chunk(const UpdateArgs& a, ArrayMap value, ConstArrayMap g, float* slot0,
                  float* slot1) {
  const Eigen::Index n = value.size();
  switch (a.rule) {
    case UpdateRule::kSgd: {
      if (slot0 == nullptr) {
        value -= a.learning_rate * g;
        return;
      }
      ArrayMap v(slot0, n);
      v = a.momentum * v + g;
      if (a.nesterov) {
        value -= a.learning_rate * (g + a.momentum * v);
      } else {
        value -= a.learning_rate * v;
      }
      return;
    }
    case UpdateRule::kAdagrad: {
      ArrayMap s(slot0, n);
      s += g.square();
      value -= a.learning_rate * g / (s.sqrt() + a.epsilon);
      return;
    }
    case UpdateRule::kAdam: {
      ArrayMap m(slot0, n), v(slot1, n);
      m = a.beta1 * m + a.one_minus_beta1 * g;
      v = a.beta2 * v + a.one_minus_beta2 * g.square();
      value -= a.step_size * m / (v.sqrt() * a.rsqrt_correction2 + a.epsilon);
      return;
    }
  }
}

// The update of n consecutive elements: w (value), dw (gradient), s0 / s1 (slots or null), chunk
// by chunk; `decayed` is kChunk floats of scratch when args.l2 != 0.
void update_span(const UpdateArgs& args, float* w, const float* dw, float* s0, float* s1,
                 std::int64_t n, Eigen::ArrayXf& decayed) {
  for (std::int64_t start = 0; start < n; start += kChunk) {
    const Eigen::Index len = Eigen::Index(std::min(kChunk, n - start));
    ArrayMap chunk(w + start, len);
    if (args.l2 != 0.0f) decayed.head(len) = ConstArrayMap(dw + start, len) + args.l2 * chunk;
    const ConstArrayMap g(args.l2 != 0.0f ? decayed.data() : dw + start, len);
    if (args.shrink != 1.0f) chunk *= args.shrink;
    update_chunk(args, chunk, g, s0 ? s0 + start : nullptr, s1 ? s1 + start : nullptr);
  }
}

float* data_or_null(Tensor* t) { return t != nullptr ? t->data<float>() : nullptr; }

}  // namespace

void optimizer_update(const UpdateArgs& args, Tensor& value, const Tensor& grad, Tensor* slot0,
                      Tensor* slot1) {
  WEFT_ASSERT(value.numel() == grad.numel());
  Eigen::ArrayXf decayed(args.l2 != 0.0f ? kChunk : 0);  // the L2-decayed gradient, per chunk
  update_span(args, value.data<float>(), grad.data<float>(), data_or_null(slot0),
              data_or_null(slot1), value.numel(), decayed);
}

void optimizer_update_rows(const UpdateArgs& args, Tensor& value, const Tensor& indices,
                           const Tensor& grad_rows, Tensor* slot0, Tensor* slot1) {
  const std::int64_t k = indices.numel();
  const std::int64_t row = value.row_size();
  WEFT_ASSERT(grad_rows.numel() == k * row);
  const std::int32_t* idx = indices.data<std::int32_t>();
  float* w = value.data<float>();
  const float* dw = grad_rows.data<float>();
  float* s0 = data_or_null(slot0);
  float* s1 = data_or_null(slot1);
  Eigen::ArrayXf decayed(args.l2 != 0.0f ? kChunk : 0);
  for (std::int64_t r = 0; r < k; ++r) {
    WEFT_ASSERT(idx[r] >= 0 && idx[r] < value.rows());
    const std::int64_t at = std::int64_t(idx[r]) * row;
    update_span(args, w + at, dw + r * row, s0 ? s0 + at : nullptr, s1 ? s1 + at : nullptr, row,
                decayed);
  }
}

void scale_clamp(Tensor& x, float scale, float limit) {
  ArrayMap a(x.data<float>(), Eigen::Index(x.numel()));
  if (scale != 1.0f) a *= scale;
  a = a.max(-limit).min(limit);
}

}  // namespace weft::backend::cpu
