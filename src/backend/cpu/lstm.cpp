// CPU kernels of the fused LSTM cell state (kernels.def: lstm_cell_state). One pass per row
// computes every gate's activation, so a Tree-LSTM node keeps only its gates and children
// for backward instead of a dozen elementwise intermediates.
#include <cmath>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

inline float sigmoid_of(float v) { return 1.0f / (1.0f + std::exp(-v)); }

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
    float* cr = out + r * n;
    for (std::int64_t j = 0; j < n; ++j)
      cr[j] = sigmoid_of(gr[k * n + j]) * std::tanh(gr[(k + 1) * n + j]);
    for (std::int64_t child = 0; child < k; ++child)
      for (std::int64_t j = 0; j < n; ++j)
        cr[j] += sigmoid_of(gr[child * n + j]) * xr[child * n + j];
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
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * (k + 2) * n;
    const float* xr = x + r * k * n;
    const float* dr = d + r * n;
    for (std::int64_t child = 0; child < k; ++child)
      for (std::int64_t j = 0; j < n; ++j) {
        const float f = sigmoid_of(gr[child * n + j]);
        if (dg) dg[r * (k + 2) * n + child * n + j] += dr[j] * xr[child * n + j] * f * (1 - f);
        if (dx) dx[r * k * n + child * n + j] += dr[j] * f;
      }
    if (!dg) continue;
    for (std::int64_t j = 0; j < n; ++j) {
      const float i = sigmoid_of(gr[k * n + j]);
      const float t = std::tanh(gr[(k + 1) * n + j]);
      dg[r * (k + 2) * n + k * n + j] += dr[j] * t * i * (1 - i);
      dg[r * (k + 2) * n + (k + 1) * n + j] += dr[j] * i * (1 - t * t);
    }
  }
}

}  // namespace weft::backend::cpu
