// CPU softmax kernels: softmax / log_softmax over each row's features, their gradients, and
// the fused softmax cross-entropy. Every row is shifted by its maximum before exponentiating,
// so logits of any magnitude give finite results; log-softmax is x - max - log Σ exp(x - max)
// rather than the log of a probability that may have underflowed to 0.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics when
// Eigen's packet math is inlined (as in elementwise.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#include <cmath>
#include <utility>

#include "../kernels.h"
#include "fixed_blocks.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

using RowMap = Eigen::Map<Eigen::ArrayXf>;
using ConstRowMap = Eigen::Map<const Eigen::ArrayXf>;

ConstRowMap row_of(const Tensor& t, std::int64_t r) {
  const std::int64_t n = t.row_size();
  return {t.data<float>() + r * n, Eigen::Index(n)};
}
RowMap row_of(Tensor& t, std::int64_t r) {
  const std::int64_t n = t.row_size();
  return {t.data<float>() + r * n, Eigen::Index(n)};
}

// Writes exp(x - max) into e and returns (max, Σ exp(x - max)); the sum is at least 1. The
// exponentials and the sum go in an order fixed by the row's length, not its address, so a
// row's result does not depend on its place in the batch (fixed_blocks.h).
std::pair<float, float> shifted_exp(const ConstRowMap& x, RowMap& e) {
  const float max = x.maxCoeff();
  for_fixed_blocks(
      x.size(), e.data(), [max](auto& out, const auto& in) { out = (in - max).exp(); }, x.data());
  return {max, fixed_order_sum(e.data(), e.size())};
}

}  // namespace

void softmax(const Tensor& x, bool log, Tensor& y) {
  WEFT_ASSERT(x.shape() == y.shape());
  if (x.row_size() == 0) return;
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    ConstRowMap in = row_of(x, r);
    RowMap out = row_of(y, r);
    const auto [max, total] = shifted_exp(in, out);
    if (log)
      out = in - (max + std::log(total));
    else
      out *= 1.0f / total;
  }
}

void softmax_backward(const Tensor& y, const Tensor& dy, bool log, Tensor& dx) {
  WEFT_ASSERT(y.shape() == dy.shape() && y.shape() == dx.shape());
  if (y.row_size() == 0) return;
  for (std::int64_t r = 0; r < y.rows(); ++r) {
    ConstRowMap out = row_of(y, r);
    ConstRowMap grad_out = row_of(dy, r);
    RowMap grad_in = row_of(dx, r);
    if (log)  // y = x - lse(x): dx = dy - softmax(x) Σ dy, with softmax(x) = exp(y)
      grad_in += grad_out - out.exp() * grad_out.sum();
    else  // y = softmax(x): dx = y (dy - Σ y dy)
      grad_in += out * (grad_out - (out * grad_out).sum());
  }
}

void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& losses,
                           Tensor& probs) {
  WEFT_ASSERT(logits.rank() == 2 && logits.shape() == probs.shape());
  WEFT_ASSERT(labels.numel() == logits.rows() && losses.numel() == logits.rows());
  const std::int64_t classes = logits.row_size();
  const std::int32_t* label = labels.data<std::int32_t>();
  float* loss = losses.data<float>();
  for (std::int64_t r = 0; r < logits.rows(); ++r) {
    WEFT_ASSERT(label[r] >= 0 && label[r] < classes);
    ConstRowMap in = row_of(logits, r);
    RowMap p = row_of(probs, r);
    const auto [max, total] = shifted_exp(in, p);
    p *= 1.0f / total;
    // -log softmax(x)[l] = log Σ exp(x - max) - (x[l] - max)
    loss[r] = std::log(total) - (in[label[r]] - max);
  }
}

void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                    const Tensor& dlosses, Tensor& dlogits) {
  WEFT_ASSERT(probs.shape() == dlogits.shape());
  WEFT_ASSERT(labels.numel() == probs.rows() && dlosses.numel() == probs.rows());
  const std::int32_t* label = labels.data<std::int32_t>();
  const float* grad_loss = dlosses.data<float>();
  for (std::int64_t r = 0; r < probs.rows(); ++r) {
    RowMap grad_in = row_of(dlogits, r);
    grad_in += row_of(probs, r) * grad_loss[r];
    grad_in[label[r]] -= grad_loss[r];
  }
}

}  // namespace weft::backend::cpu
