// One row-major sgemm through a named provider, for the CPU backend's gemm and for the
// calibration that chooses between providers (gemm_selection.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "weft/backend/cpu.h"
#include "weft/backend/gemm_ceiling.h"

namespace weft::backend::cpu {

// The instruction set oneDNN's kernels use here: the CPU's best unless ONEDNN_MAX_CPU_ISA holds
// it lower (as an AVX2 machine is emulated), which halves its rates on an AVX-512 core; "none"
// in a build without oneDNN.
std::string onednn_isa();

// out[m, n] = alpha * op(a) · op(b) + beta * out, with leading dimensions.
void sgemm_with(GemmProvider provider, bool transpose_a, bool transpose_b, std::int64_t m,
                std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
                const float* b, std::int64_t ldb, float beta, float* out, std::int64_t ldc);

// c = alpha * a · b + beta * c (b perhaps transposed), row-major with leading dimensions.
struct ProductOperands {
  std::int64_t m, n, k;
  float alpha;
  const float* a;
  std::int64_t lda;
  const float* b;
  std::int64_t ldb;
  float beta;
  float* c;
  std::int64_t ldc;
};

// The batch-invariant route (invariant_gemm.cpp): c = alpha * a · op(b) + beta * c. With b not
// transposed, through Weft's fixed-order kernel where it is built; otherwise in blocks of
// invariant_row_block(provider) rows, each through one single-threaded call of that many rows.
std::int64_t invariant_row_block(GemmProvider provider);
void invariant_sgemm(GemmProvider provider, bool transpose_b, std::int64_t m, std::int64_t n,
                     std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// Weft's own kernel (fixed_order_gemm.cpp), built where the compiler targets FMA vectors
// (AVX-512, or AVX2 with FMA): c = alpha * a · b + beta * c, b row-major [k, n], each element
// one chain of fused multiply-adds over k from 0 upwards, then times alpha, then plus beta * c
// in one fused step (skipped when alpha is 1 or beta 0), so a row's values depend on that row,
// b, k, alpha and beta alone.
bool fixed_order_sgemm_built();
void fixed_order_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                       std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                       std::int64_t ldc);

// One product of an example's own matrices (batch_gemm's items) in the batch-invariant mode: its
// rows are the same rows at the same places alone or in a batch, so one single-threaded call of
// the mode's provider keeps it invariant without row blocks (and without padding them).
void invariant_item_sgemm(GemmProvider provider, bool transpose_a, bool transpose_b, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const float* a,
                          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                          std::int64_t ldc);

// The provider for a product (gemm_provider_for) and whether to time it to check its class's
// cached choice: once per class and process, for classes read from the cache
// (gemm_selection.cpp). One look-up of the class for both.
struct GemmRoute {
  GemmProvider provider;
  bool check_in_use;
};
GemmRoute gemm_route_for(const GemmShape& shape);
// The timed product's verdict: a rate kInUseRateFactor away from the record (either way)
// measures the class again, as a record written under load would be.
void gemm_check_in_use(const GemmShape& shape, GemmProvider provider, double seconds);

}  // namespace weft::backend::cpu

namespace weft {
// What forced the provider: "WEFT_GEMM=openblas", "set_gemm_provider", or "" when none is.
std::string forced_gemm_provider_source();
// Throws weft::Error naming the provider when this build does not link it.
void require_gemm_provider_built_in(GemmProvider provider);
}  // namespace weft
