// CPU kernels of the fused LSTM cell state (kernels.def: lstm_cell_state). One pass per row
// computes every gate's activation, so a Tree-LSTM node keeps only its gates and children
// for backward instead of a dozen elementwise intermediates. The activations go through
// Eigen's vectorized logistic and tanh (scalar std::exp / std::tanh cost ~40 % of a training
// step at N = 128: BENCHMARKS.md, the ICLR benchmark).
// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsics when
// Eigen's packet math is inlined (as in elementwise.cpp); they concern the compiler's header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

struct CellShape {
  std::int64_t rows, n, k;
};

CellShape cell_shape(const Tensor& gates, const Tensor& children) {
  const std::int64_t n = (gates.row_size() - children.row_size()) / 2;
  WEFT_ASSERT(n > 0 && children.row_size() % n == 0 && gates.rows() == children.rows());
  return {gates.rows(), n, children.row_size() / n};
}

}  // namespace

void lstm_cell_state(const Tensor& gates, const Tensor& children, Tensor& c) {
  const auto [rows, n, k] = cell_shape(gates, children);
  const float* g = gates.data<float>();
  const float* x = children.data<float>();
  float* out = c.data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * (k + 2) * n;
    const float* xr = x + r * k * n;
    ArrayMap cr(out + r * n, n);
    cr = ConstArrayMap(gr + k * n, n).logistic() * ConstArrayMap(gr + (k + 1) * n, n).tanh();
    for (std::int64_t child = 0; child < k; ++child)
      cr += ConstArrayMap(gr + child * n, n).logistic() * ConstArrayMap(xr + child * n, n);
  }
}

void lstm_cell_state_backward(const Tensor& gates, const Tensor& children, const Tensor& dc,
                              Tensor* dgates, Tensor* dchildren) {
  const auto [rows, n, k] = cell_shape(gates, children);
  const float* g = gates.data<float>();
  const float* x = children.data<float>();
  const float* d = dc.data<float>();
  float* dg = dgates ? dgates->data<float>() : nullptr;
  float* dx = dchildren ? dchildren->data<float>() : nullptr;
  Eigen::ArrayXf f(n), t(n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * (k + 2) * n;
    const float* xr = x + r * k * n;
    const ConstArrayMap dr(d + r * n, n);
    for (std::int64_t child = 0; child < k; ++child) {
      f = ConstArrayMap(gr + child * n, n).logistic();
      if (dg)
        ArrayMap(dg + r * (k + 2) * n + child * n, n) +=
            dr * ConstArrayMap(xr + child * n, n) * f * (1 - f);
      if (dx) ArrayMap(dx + r * k * n + child * n, n) += dr * f;
    }
    if (!dg) continue;
    f = ConstArrayMap(gr + k * n, n).logistic();
    t = ConstArrayMap(gr + (k + 1) * n, n).tanh();
    ArrayMap(dg + r * (k + 2) * n + k * n, n) += dr * t * f * (1 - f);
    ArrayMap(dg + r * (k + 2) * n + (k + 1) * n, n) += dr * f * (1 - t * t);
  }
}

}  // namespace weft::backend::cpu
