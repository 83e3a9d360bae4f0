// CPU reductions: over all rows (reduce_rows), over groups of rows named by segment ids
// (segment_reduce), the gradient of a max (scatter_by_argmax) and of every element to one
// number (reduce_all). Row reductions add whole rows so the inner loop vectorizes; reduce_all
// accumulates in double over several lanes, since losses sum millions of float terms.
#include <algorithm>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

// Folds one row of x into the running max of a segment; argmax < 0 marks "nothing yet".
void max_into(const float* row, std::int64_t r, std::int64_t size, float* best, std::int32_t* arg) {
  for (std::int64_t f = 0; f < size; ++f) {
    if (arg[f] < 0 || row[f] > best[f]) {
      best[f] = row[f];
      arg[f] = std::int32_t(r);
    }
  }
}

void add_row(const float* row, std::int64_t size, float* out) {
  for (std::int64_t f = 0; f < size; ++f) out[f] += row[f];
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& x, Tensor& y, Tensor* argmax) {
  const std::int64_t rows = x.rows(), size = x.row_size();
  WEFT_ASSERT(x.rank() >= 1 && y.numel() == size);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  std::fill_n(py, size, 0.0f);
  if (op == ReduceOp::kSum) {
    for (std::int64_t r = 0; r < rows; ++r) add_row(px + r * size, size, py);
    return;
  }
  WEFT_ASSERT(argmax != nullptr && argmax->numel() == size);
  std::int32_t* arg = argmax->data<std::int32_t>();
  std::fill_n(arg, size, -1);
  for (std::int64_t r = 0; r < rows; ++r) max_into(px + r * size, r, size, py, arg);
}

void segment_reduce(ReduceOp op, const Tensor& x, const Tensor& segment_ids, Tensor& y,
                    Tensor* argmax) {
  const std::int64_t rows = x.rows(), size = x.row_size(), segments = y.rows();
  WEFT_ASSERT(x.rank() >= 1 && y.rank() >= 1 && y.row_size() == size);
  WEFT_ASSERT(segment_ids.dtype() == DType::kInt32 && segment_ids.numel() == rows);
  const std::int32_t* ids = segment_ids.data<std::int32_t>();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  std::fill_n(py, y.numel(), 0.0f);
  std::int32_t* arg = nullptr;
  if (op == ReduceOp::kMax) {
    WEFT_ASSERT(argmax != nullptr && argmax->numel() == y.numel());
    arg = argmax->data<std::int32_t>();
    std::fill_n(arg, argmax->numel(), -1);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t s = ids[r];
    WEFT_ASSERT(s >= 0 && s < segments);
    if (op == ReduceOp::kSum)
      add_row(px + r * size, size, py + s * size);
    else
      max_into(px + r * size, r, size, py + s * size, arg + s * size);
  }
}

void scatter_by_argmax(const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  const std::int64_t size = dx.row_size();
  WEFT_ASSERT(dy.numel() == argmax.numel() && argmax.dtype() == DType::kInt32);
  WEFT_ASSERT(size > 0 ? dy.numel() % size == 0 : dy.numel() == 0);
  if (dy.numel() == 0) return;
  const float* pdy = dy.data<float>();
  const std::int32_t* arg = argmax.data<std::int32_t>();
  float* pdx = dx.data<float>();
  const std::int64_t groups = dy.numel() / size, rows = dx.rows();
  for (std::int64_t s = 0; s < groups; ++s) {
    for (std::int64_t f = 0; f < size; ++f) {
      const std::int64_t r = arg[s * size + f];
      if (r < 0) continue;
      WEFT_ASSERT(r < rows);
      pdx[r * size + f] += pdy[s * size + f];
    }
  }
}

void reduce_all(ReduceAllOp op, const Tensor& x, Tensor& y) {
  WEFT_ASSERT(y.numel() == 1);
  constexpr int kLanes = 8;  // independent double sums: vectorizable and still exact enough
  double lanes[kLanes] = {};
  const float* px = x.data<float>();
  const std::int64_t n = x.numel(), whole = n - n % kLanes;
  const bool squares = op == ReduceAllOp::kSumSquares;
  for (std::int64_t i = 0; i < whole; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const double v = px[i + k];
      lanes[k] += squares ? v * v : v;
    }
  }
  for (std::int64_t i = whole; i < n; ++i) {
    const double v = px[i];
    lanes[i - whole] += squares ? v * v : v;
  }
  double total = 0;
  for (double lane : lanes) total += lane;
  y.data<float>()[0] = float(total);
}

}  // namespace weft::backend::cpu
