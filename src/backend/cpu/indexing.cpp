// CPU row indexing: gather_rows (any 4-byte dtype, so float activations and int32 ids alike),
// scatter_add_rows (its gradient; sequential, so duplicated indices sum correctly) and
// find_bad_index, the range check the ops run before trusting indices.
#include <cstring>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {

void gather_rows(const Tensor& x, const Tensor& indices, Tensor& y) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32 && x.dtype() == y.dtype());
  WEFT_ASSERT(x.rank() >= 1 && y.rank() >= 1);
  const std::int64_t n = indices.numel();
  const std::int64_t row = x.row_size();
  WEFT_ASSERT(y.rows() == n && y.row_size() == row);
  if (n == 0 || row == 0) return;
  const std::int32_t* idx = indices.data<std::int32_t>();
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  const std::size_t row_bytes = std::size_t(row) * dtype_size(x.dtype());
  const std::int64_t limit = x.rows();
  detail::record_moved_bytes(n * std::int64_t(row_bytes));
  for (std::int64_t i = 0; i < n; ++i) {
    WEFT_ASSERT(idx[i] >= 0 && idx[i] < limit);
    std::memcpy(dst + std::size_t(i) * row_bytes, src + std::size_t(idx[i]) * row_bytes, row_bytes);
  }
}

void scatter_add_rows(const Tensor& x, const Tensor& indices, Tensor& y) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32);
  WEFT_ASSERT(x.rank() >= 1 && y.rank() >= 1);
  const std::int64_t n = indices.numel();
  const std::int64_t row = x.row_size();
  WEFT_ASSERT(x.rows() == n && y.row_size() == row);
  const std::int32_t* idx = indices.data<std::int32_t>();
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  const std::int64_t limit = y.rows();
  detail::record_moved_bytes(n * row * std::int64_t(sizeof(float)));
  for (std::int64_t i = 0; i < n; ++i) {
    WEFT_ASSERT(idx[i] >= 0 && idx[i] < limit);
    const float* from = src + i * row;
    float* to = dst + std::int64_t(idx[i]) * row;
    for (std::int64_t j = 0; j < row; ++j) to[j] += from[j];
  }
}

void find_bad_index(const Tensor& indices, std::int64_t limit, std::int64_t& first_bad) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32);
  const std::int32_t* idx = indices.data<std::int32_t>();
  const std::int64_t n = indices.numel();
  first_bad = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= limit) {
      first_bad = i;
      return;
    }
  }
}

}  // namespace weft::backend::cpu
