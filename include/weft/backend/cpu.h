// CPU backend settings: which sgemm implementation runs matrix products, and how many
// threads it uses. The default provider is the fastest one measured on this project's
// machines (BENCHMARKS.md, "GEMM providers"): oneDNN when built in, else OpenBLAS. Both pick
// their kernels from the running CPU's features, so the default is safe without AVX-512.
// The environment variables WEFT_GEMM (onednn | openblas) and WEFT_NUM_THREADS override the
// defaults when the first product runs.
#pragma once

#include <span>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

enum class GemmProvider { kOneDnn, kOpenBlas };

std::string_view gemm_provider_name(GemmProvider provider);
// Parses "onednn" / "openblas"; throws weft::Error naming the accepted names otherwise.
GemmProvider parse_gemm_provider(std::string_view name);
// The providers this build links, fastest-measured first.
std::span<const GemmProvider> available_gemm_providers();
GemmProvider gemm_provider();
// Throws weft::Error when the provider is not built in.
void set_gemm_provider(GemmProvider provider);

// Threads for GEMM (OpenBLAS's pool and OpenMP, which oneDNN uses). Benchmarks pin 1.
void set_num_threads(int threads);
int num_threads();

// A one-line description for logs: "gemm=onednn threads=1 cpu=avx512".
std::string_view cpu_backend_summary();

}  // namespace weft
WEFT_API_END
