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

int normalize_axis(const char* op, int axis, const Tensor& t) {
  int normalized = axis < 0 ? axis + t.rank() : axis;
  if (normalized < 0 || normalized >= t.rank())
    fail(op, "axis ", axis, " is out of range for ", t.describe());
  return normalized;
}

}  // namespace weft::detail
