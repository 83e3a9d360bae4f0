// One row-major sgemm through a named provider, for the CPU backend's gemm and for the
// calibration that chooses between providers (gemm_selection.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "weft/backend/cpu.h"

namespace weft::backend::cpu {

// out[m, n] = alpha * op(a) · op(b) + beta * out, with leading dimensions.
void sgemm_with(GemmProvider provider, bool transpose_a, bool transpose_b, std::int64_t m,
                std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
                const float* b, std::int64_t ldb, float beta, float* out, std::int64_t ldc);

}  // namespace weft::backend::cpu

namespace weft {
// What forced the provider: "WEFT_GEMM=openblas", "set_gemm_provider", or "" when none is.
std::string forced_gemm_provider_source();
// Throws weft::Error naming the provider when this build does not link it.
void require_gemm_provider_built_in(GemmProvider provider);
}  // namespace weft
