// CPU backend settings: which sgemm implementations are built in, forcing one of them for
// every product, and how many threads they use. Unforced, each product goes to the provider
// measured fastest for its shape class on this machine (weft/backend/gemm_selection.h). Both
// providers pick their kernels from the running CPU's features, so either is safe on any
// x86-64. The environment variables WEFT_GEMM (onednn | openblas | auto) and
// WEFT_NUM_THREADS set these when the first product runs.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"

WEFT_API_BEGIN
namespace weft {

#define WEFT_GEMM_PROVIDERS(X) \
  X(kOneDnn, "onednn")         \
  X(kOpenBlas, "openblas")
enum class GemmProvider { WEFT_GEMM_PROVIDERS(WEFT_ENUMERATOR) };
WEFT_ENUM_TABLE(GemmProvider, WEFT_GEMM_PROVIDERS)

constexpr std::string_view gemm_provider_name(GemmProvider value) { return enum_name(value); }
// Parses "onednn" / "openblas"; throws weft::Error naming the accepted names otherwise.
GemmProvider parse_gemm_provider(std::string_view name);
// The providers this build links (oneDNN first when built in).
std::span<const GemmProvider> available_gemm_providers();
// Forces `provider` for every product (use_calibrated_gemm() undoes it). Throws weft::Error
// when the provider is not built in.
void set_gemm_provider(GemmProvider provider);

// Threads for GEMM (OpenBLAS's pool and OpenMP, which oneDNN uses). Benchmarks pin 1.
void set_num_threads(int threads);
int num_threads();
// Gives the calling thread the process's thread count: OpenMP's count is per thread, and a
// thread started after set_num_threads (a server's worker) begins with OpenMP's default, whose
// idle workers spin beside it.
void adopt_num_threads();

// Batch-invariant mode: while on, each row of a product x · W (the batch's rows times a
// weight), and so each example's values, decoded tokens, scores and metrics, come out
// bit-identical whatever batch the example is in, whichever examples share it, at any position
// and thread count. Products x · W go through Weft's fixed-order kernel (each element one chain
// of fused multiply-adds over k in order, vectorised across n: no padding, no library choice)
// where the build targets FMA vectors (AVX2 with FMA, or AVX-512). Without it, and for x · Wᵀ,
// through one provider (the forced one, else oneDNN when built in, else OpenBLAS: never the
// per-class calibration, whose choice can change between processes) in blocks of rows, each a
// single-threaded call of exactly that many rows (oneDNN: 48, the last block zero-padded;
// OpenBLAS: 1, since its kernels round a row by its place in a call), so no kernel choice or
// split of k depends on the row count; OpenBLAS's own threads are held to 1 meanwhile. Row
// softmaxes, reductions and the transcendentals are row-independent in every mode. What it
// does not cover: another machine, instruction set, library version or build; the CUDA
// backend; training's gradients (sums over the batch); products whose left operand is
// transposed (their sum runs over the batch's rows). Off by default (`weft serve` turns it on);
// WEFT_BATCH_INVARIANT=1 turns it on when the first product runs (0 or empty: off).
void set_batch_invariant(bool on);
bool batch_invariant();
// The provider the mode's products use.
GemmProvider batch_invariant_gemm_provider();

// The kernel set OpenBLAS chose for this CPU (openblas_get_corename) and whether it is a
// fallback: kernels older than the CPU's vector units (no AVX2 kernels on a CPU that has AVX2),
// as when Debian's OpenBLAS 0.3.21 takes a Xeon of family 6 model 207 for a "Prescott" and runs
// products at 5-30 GFLOP/s. The remedy is OPENBLAS_CORETYPE set before the process starts;
// meanwhile the GEMM calibration holds OpenBLAS to a margin over oneDNN (gemm_selection.h).
struct OpenBlasCore {
  std::string name;  // e.g. "Haswell", "SkylakeX", "Prescott"
  bool fallback = false;
  std::string remedy;  // e.g. "OPENBLAS_CORETYPE=SkylakeX"; empty unless a fallback
};
OpenBlasCore openblas_core();

// Whether a product OpenBLAS splits over its worker threads flushes denormals as the process
// asks (weft/core/denormals.h): its workers copy the caller's mode only when OpenBLAS is built
// with CONSISTENT_FPCSR (Debian's 0.3.21 is not), so this is probed when the thread count is
// set; always true at one thread or with denormals kept. When false, calibrated products go to
// oneDNN, whose OpenMP workers Weft sets; a forced OpenBLAS keeps denormals on its workers.
bool openblas_workers_flush_denormals();

// A one-line description for logs: "gemm=calibrated threads=1 cpu=avx2", or the forced
// provider's name in place of "calibrated".
std::string_view cpu_backend_summary();

}  // namespace weft
WEFT_API_END
