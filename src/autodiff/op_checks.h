// Validation shared by the user-facing ops: each failure throws weft::Error in the form
// "[op] what: lhs float32 [3, 4] vs rhs float32 [5, 2]".
#pragma once

#include <cstdint>

#include "weft/autodiff/tape.h"
#include "weft/core/error.h"

namespace weft::detail {

inline void require_float(const char* op, const char* role, const Tensor& t) {
  if (t.dtype() != DType::kFloat32) fail(op, role, " must be float32, got ", t.describe());
}

inline void require_rank(const char* op, const char* role, const Tensor& t, int rank) {
  if (t.rank() != rank) fail(op, role, " must have rank ", rank, ", got ", t.describe());
}

inline void require_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device())
    fail(op, "operands are on different devices: ", device_name(a.device()), " vs ",
         device_name(b.device()), "; move one with Tensor::to()");
}

// Index tensors: int32, rank 1, every value in [0, limit).
void require_indices(const char* op, const char* role, const Tensor& indices, std::int64_t limit);
// The same check for int32 or int64 indices (int64 ones are checked before they are narrowed,
// so 2^32 + 1 is an error, not row 1); returns them as the int32 tensor the kernels take.
Tensor row_indices(const char* op, const char* role, const Tensor& indices, std::int64_t limit);

// linear's node with y = x · W alone (its backward is linear's: the bias's gradient is the
// column sums of dy either way): for an op that adds the bias in a fused pass of its own before
// anything reads y (linear_lstm_cell_state). `op` names the caller in errors.
Var linear_without_bias(Var x, Var weight, Var bias, const char* op);

// Normalises a possibly negative axis against a rank, or throws.
int normalize_axis(const char* op, int axis, const Tensor& t);

}  // namespace weft::detail
