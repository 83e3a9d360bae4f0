// Validation shared by the user-facing ops.
#include "op_checks.h"

#include "../backend/kernels.h"

namespace weft::detail {

void require_indices(const char* op, const char* role, const Tensor& indices, std::int64_t limit) {
  if (indices.dtype() != DType::kInt32) fail(op, role, " must be int32, got ", indices.describe());
  if (indices.rank() != 1) fail(op, role, " must have rank 1, got ", indices.describe());
  std::int64_t first_bad = -1;
  backend::find_bad_index(indices, limit, first_bad);
  if (first_bad >= 0) {
    std::int32_t value = indices.rows_view(first_bad, 1).to_int_vector()[0];
    fail(op, role, " value ", value, " at position ", first_bad, " is out of range [0, ", limit,
         ")");
  }
}

Tensor row_indices(const char* op, const char* role, const Tensor& indices, std::int64_t limit) {
  if (indices.dtype() != DType::kInt64) {
    if (indices.dtype() != DType::kInt32)
      fail(op, role, " must be int32 or int64, got ", indices.describe());
    require_indices(op, role, indices, limit);
    return indices;
  }
  if (indices.rank() != 1) fail(op, role, " must have rank 1, got ", indices.describe());
  const Tensor host = indices.to(Device::kCpu);
  const std::int64_t* values = host.data<std::int64_t>();
  for (std::int64_t i = 0; i < host.numel(); ++i)
    if (values[i] < 0 || values[i] >= limit)
      fail(op, role, " value ", values[i], " at position ", i, " is out of range [0, ", limit, ")");
  Tensor narrowed = Tensor::empty(indices.shape(), DType::kInt32, indices.device());
  backend::cast(indices, narrowed);
  return narrowed;
}

int normalize_axis(const char* op, int axis, const Tensor& t) {
  int normalized = axis < 0 ? axis + t.rank() : axis;
  if (normalized < 0 || normalized >= t.rank())
    fail(op, "axis ", axis, " is out of range for ", t.describe());
  return normalized;
}

}  // namespace weft::detail
