// GEMM on the CUDA backend through cuBLAS, never hand-written. cuBLAS is column-major and
// Weft row-major: a row-major [r, c] matrix is the column-major [c, r] matrix of its
// transpose, so c = op(a) · op(b) is computed as cᵀ = op(b)ᵀ · op(a)ᵀ, i.e. cuBLAS is called
// with the operands swapped and the same transpose flags. Full FP32 math (no TF32), so CPU
// and GPU agree to float rounding; TF32 tensor cores are a tuning decision left for later.
#include <cublas_v2.h>

#include <climits>

#include "../kernels.h"
#include "cuda_context.h"
#include "weft/backend/counters.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cuda gemm", what, " failed: cuBLAS status ", int(status), " (",
         cublas_status_name(status), ")");
}

// A cuBLAS call that queues work: counted as a launch (weft/backend/counters.h).
void check_cublas_launch(cublasStatus_t status, const char* what) {
  ++backend::detail::thread_counters().launches;
  check_cublas(status, what);
}

cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    check_cublas(cublasCreate(&created), "cublasCreate");
    check_cublas(cublasSetStream(created, stream()), "cublasSetStream");
    check_cublas(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return created;
  }();
  return h;
}

int as_int(std::int64_t v, const char* what) {
  if (v > INT_MAX) fail("cuda gemm", what, " ", v, " exceeds cuBLAS's 32-bit limit");
  return int(v);
}

}  // namespace

// y = xᵀ through cublasSgeam: x row-major [r, c] is column-major [c, r] (ld c), y row-major
// [c, r] column-major [r, c] (ld r): y = 1 · op(x) + 0 · op(x), both transposed.
void transpose(const Tensor& x, Tensor& y) {
  const std::int64_t r = x.rows(), c = x.row_size();
  WEFT_ASSERT(y.rows() == c && y.row_size() == r);
  if (r == 0 || c == 0) return;
  const float one = 1.0f, zero = 0.0f;
  check_cublas_launch(
      cublasSgeam(handle(), CUBLAS_OP_T, CUBLAS_OP_T, as_int(r, "rows"), as_int(c, "columns"), &one,
                  x.data<float>(), as_int(c, "lda"), &zero, x.data<float>(), as_int(c, "ldb"),
                  y.data<float>(), as_int(r, "ldc")),
      "cublasSgeam");
}

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, float alpha,
          float beta, Tensor& c) {
  const std::int64_t m = c.rows(), n = c.row_size();
  const std::int64_t k = transpose_a ? a.rows() : a.row_size();
  WEFT_ASSERT((transpose_a ? a.row_size() : a.rows()) == m);
  WEFT_ASSERT((transpose_b ? b.rows() : b.row_size()) == n);
  WEFT_ASSERT((transpose_b ? b.row_size() : b.rows()) == k);
  if (m == 0 || n == 0) return;
  float* out = c.data<float>();
  if (k == 0) {  // an empty sum: c = beta * c
    if (beta == 0.0f) {
      fill(c, 0.0f);
    } else {
      check_cublas_launch(cublasSscal(handle(), as_int(m * n, "size"), &beta, out, 1),
                          "cublasSscal");
    }
    return;
  }
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas_launch(
      cublasSgemm(handle(), op_b, op_a, as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha,
                  b.data<float>(), as_int(b.row_size(), "ldb"), a.data<float>(),
                  as_int(a.row_size(), "lda"), &beta, out, as_int(n, "ldc")),
      "cublasSgemm");
}

void batch_gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, float alpha,
                float beta, Tensor& c) {
  WEFT_ASSERT(a.rank() == 3 && b.rank() == 3 && c.rank() == 3);
  const std::int64_t batch = c.shape()[0], m = c.shape()[1], n = c.shape()[2];
  const std::int64_t a_rows = a.shape()[1], a_cols = a.shape()[2];
  const std::int64_t b_rows = b.shape()[1], b_cols = b.shape()[2];
  const std::int64_t k = transpose_a ? a_rows : a_cols;
  WEFT_ASSERT((transpose_a ? a_cols : a_rows) == m);
  WEFT_ASSERT((transpose_b ? b_rows : b_cols) == n);
  WEFT_ASSERT((transpose_b ? b_cols : b_rows) == k);
  if (batch == 0 || m == 0 || n == 0) return;
  float* out = c.data<float>();
  if (k == 0) {  // an empty sum: c = beta * c
    if (beta == 0.0f) {
      fill(c, 0.0f);
    } else {
      check_cublas_launch(cublasSscal(handle(), as_int(batch * m * n, "size"), &beta, out, 1),
                          "cublasSscal");
    }
    return;
  }
  // Row-major c = op(a) · op(b) is column-major cᵀ = op(b)ᵀ · op(a)ᵀ, per batch item.
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas_launch(cublasSgemmStridedBatched(
                          handle(), op_b, op_a, as_int(n, "n"), as_int(m, "m"), as_int(k, "k"),
                          &alpha, b.data<float>(), as_int(b_cols, "ldb"), b_rows * b_cols,
                          a.data<float>(), as_int(a_cols, "lda"), a_rows * a_cols, &beta, out,
                          as_int(n, "ldc"), m * n, as_int(batch, "batch")),
                      "cublasSgemmStridedBatched");
}

}  // namespace weft::backend::cuda
