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

// linear's checks of x, W and b; an x read where its rows lie (argument_rows) is a float32
// matrix on the CPU by construction: only its shape is checked, so checking does not gather it.
void check_linear(const char* op, const Var& x, const Tensor& vw, const Tensor& vb);
// dx (beta) = dy · wᵀ, reading w's transposed copy where the CPU's GEMM measured it faster.
void times_transposed(Tape& tape, const Tensor& dy, std::uint32_t w, float beta, Tensor& dx);

// Normalises a possibly negative axis against a rank, or throws.
int normalize_axis(const char* op, int axis, const Tensor& t);

}  // namespace weft::detail
