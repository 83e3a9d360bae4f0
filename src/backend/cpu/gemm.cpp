// sgemm for the CPU backend through oneDNN (dnnl_sgemm) or OpenBLAS (cblas_sgemm), and
// matrix transposes through OpenBLAS (cblas_somatcopy): GEMM is never hand-written here. Both
// libraries are row-major capable and choose kernels from the CPU's features at run time. Each
// product goes to the provider gemm_provider_for names (a forced one, or the one calibrated for its
// shape class: gemm_selection.cpp). The forced provider and the thread settings live here.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../kernels.h"
#include "calibration_clock.h"
#include "sgemm.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/denormals.h"
#include "weft/core/environment.h"
#include "weft/core/error.h"
#include "weft/core/named_enum.h"
#ifdef WEFT_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace weft {
namespace {

constexpr GemmProvider kProviders[] = {
#ifdef WEFT_HAVE_ONEDNN
    GemmProvider::kOneDnn,
#endif
    GemmProvider::kOpenBlas};

struct CpuSettings {
  // The provider every product uses (an index into kProviders), or -1: calibrated per class.
  // Atomic: products on other threads read it while a setter runs.
  std::atomic<int> forced{-1};
  std::string forced_by;  // "WEFT_GEMM=openblas" or "set_gemm_provider"
  int threads = 1;
  std::string summary;
  // Whether OpenBLAS's worker threads flush denormals at this thread count (see
  // openblas_workers_flush_denormals): probed when the thread count is applied.
  std::atomic<bool> openblas_workers_flush{true};
  // Batch-invariant mode (cpu.h): products in fixed row blocks (invariant_gemm.cpp).
  std::atomic<bool> invariant{false};
};

int provider_index(GemmProvider provider) {
  const auto* it = std::find(std::begin(kProviders), std::end(kProviders), provider);
  if (it == std::end(kProviders))
    fail("gemm", "provider ", gemm_provider_name(provider),
         " is not built into this Weft (configure with oneDNN installed: libdnnl-dev)");
  return int(it - std::begin(kProviders));
}

// Whether a product OpenBLAS splits over its worker threads flushes denormal inputs: its
// workers were started with the process's initial mode and copy the caller's only when OpenBLAS
// is built with CONSISTENT_FPCSR (Debian's 0.3.21 is not), and it has no hook to set it.
bool probe_openblas_workers_flush() {
  constexpr int n = 128;  // large enough for OpenBLAS to split over its threads
  std::vector<float> tiny(std::size_t(n * n), 1e-39f), ones(std::size_t(n * n), 1.0f),
      out(std::size_t(n * n), 1.0f);
  const DenormalScope denormals;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, tiny.data(), n, ones.data(),
              n, 0.0f, out.data(), n);
  return std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; });
}

// The thread counts, and the denormal mode on the OpenMP pool's workers (oneDNN's threads),
// which the kernels' DenormalScope on the calling thread does not reach. The calling thread
// (OpenMP's thread 0) keeps its own mode.
void apply_threads(CpuSettings& s, int threads) {
  omp_set_num_threads(threads);
  // In batch-invariant mode OpenBLAS runs each row block on its caller's thread.
  openblas_set_num_threads(s.invariant ? 1 : threads);
  const bool flush = denormal_mode() == DenormalMode::kFlush;
  if (threads > 1 && flush) {
#pragma omp parallel num_threads(threads)
    if (omp_get_thread_num() != 0) apply_denormal_mode_to_this_thread();
  }
  s.openblas_workers_flush = threads == 1 || !flush || probe_openblas_workers_flush();
}

std::string describe(const CpuSettings& s) {
  std::string cpu = __builtin_cpu_supports("avx512f") ? "avx512"
                    : __builtin_cpu_supports("avx2")  ? "avx2"
                                                      : "generic";
  const int forced = s.forced.load();
  const std::string gemm =
      forced >= 0 ? std::string(gemm_provider_name(kProviders[forced])) : "calibrated";
  // oneDNN's own set where ONEDNN_MAX_CPU_ISA holds it below the CPU's (an emulated AVX2 machine).
  if (const std::string isa = backend::cpu::onednn_isa(); isa != "none" && isa.rfind(cpu, 0) != 0)
    cpu += " onednn=" + isa;
  return "gemm=" + gemm + " threads=" + std::to_string(s.threads) + " cpu=" + cpu +
         (s.invariant ? " batch-invariant" : "");
}

// WEFT_BATCH_INVARIANT: "1" on, "0" or empty off; anything else is an error naming it.
bool batch_invariant_from_environment() {
  const char* value = std::getenv("WEFT_BATCH_INVARIANT");
  if (!value || !*value || std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  fail("batch invariance", "WEFT_BATCH_INVARIANT must be 1 (on) or 0 (off), got '", value, "'");
}

CpuSettings& settings() {
  // Never destroyed (products may run during exit). Held by a unique_ptr until it is complete,
  // so a bad WEFT_* variable, which throws here, leaks nothing.
  static CpuSettings* s = [] {
    auto init = std::make_unique<CpuSettings>();
    if (const char* name = std::getenv("WEFT_GEMM");
        name && *name && std::string_view(name) != "auto") {
      init->forced = provider_index(parse_gemm_provider(name));
      init->forced_by = "WEFT_GEMM=" + std::string(name);
    }
    init->invariant = batch_invariant_from_environment();
    init->threads = omp_get_max_threads();
    if (const auto n = integer_from_environment("WEFT_NUM_THREADS", 1, "cpu backend",
                                                "a number of threads from 1 to 1024", 1024))
      init->threads = int(*n);
    apply_threads(*init, init->threads);
    init->summary = describe(*init);
    return init.release();
  }();
  return *s;
}

}  // namespace

GemmProvider parse_gemm_provider(std::string_view name) {
  if (name == "auto")
    fail("gemm",
         "'auto' is not a provider: it means no forced provider (WEFT_GEMM=auto, or "
         "use_calibrated_gemm())");
  return parse_enum<GemmProvider>("gemm", "GEMM provider", name);
}

std::span<const GemmProvider> available_gemm_providers() { return kProviders; }

void set_gemm_provider(GemmProvider provider) {
  const int index = provider_index(provider);
  settings().forced = index;
  settings().forced_by = "set_gemm_provider";
  settings().summary = describe(settings());
}

void use_calibrated_gemm() {
  settings().forced = -1;
  settings().forced_by.clear();
  settings().summary = describe(settings());
}

std::optional<GemmProvider> forced_gemm_provider() {
  const int forced = settings().forced.load();
  if (forced < 0) return std::nullopt;
  return kProviders[forced];
}

std::string forced_gemm_provider_source() { return settings().forced_by; }

void require_gemm_provider_built_in(GemmProvider provider) { provider_index(provider); }

void set_num_threads(int threads) {
  if (threads < 1) fail("threads", "thread count must be at least 1, got ", threads);
  settings().threads = threads;
  apply_threads(settings(), threads);
  settings().summary = describe(settings());
}

int num_threads() { return settings().threads; }

void adopt_num_threads() { omp_set_num_threads(settings().threads); }

void set_batch_invariant(bool on) {
  settings().invariant = on;
  apply_threads(settings(), settings().threads);
  settings().summary = describe(settings());
}

bool batch_invariant() { return settings().invariant; }

GemmProvider batch_invariant_gemm_provider() {
  return forced_gemm_provider().value_or(kProviders[0]);
}

std::string_view cpu_backend_summary() { return settings().summary; }

bool openblas_workers_flush_denormals() { return settings().openblas_workers_flush; }

namespace backend::cpu {

std::string onednn_isa() {
#ifdef WEFT_HAVE_ONEDNN
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "code " + std::to_string(int(dnnl_get_effective_cpu_isa()));
  }
#else
  return "none";
#endif
}

void sgemm_with(GemmProvider provider, bool transpose_a, bool transpose_b, std::int64_t m,
                std::int64_t n, std::int64_t k, float alpha, const float* pa, std::int64_t lda,
                const float* pb, std::int64_t ldb, float beta, float* out, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = beta * c
    for (std::int64_t i = 0; i < m * n; ++i) out[i] = beta == 0.0f ? 0.0f : beta * out[i];
    return;
  }
#ifdef WEFT_HAVE_ONEDNN
  if (provider == GemmProvider::kOneDnn) {
    dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k,
                                      alpha, pa, lda, pb, ldb, beta, out, ldc);
    if (status != dnnl_success) fail("gemm", "oneDNN sgemm failed with status ", int(status));
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha, pa, int(lda),
              pb, int(ldb), beta, out, int(ldc));
}

namespace {

void sgemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* pa, std::int64_t lda, const float* pb, std::int64_t ldb,
           float beta, float* out, std::int64_t ldc) {
  // Products whose left operand is transposed sum over its rows (a weight's gradient sums over
  // the batch): no row of theirs is an example's to keep invariant.
  if (batch_invariant() && !transpose_a && k > 0)
    return invariant_sgemm(batch_invariant_gemm_provider(), transpose_b, m, n, k, alpha, pa, lda,
                           pb, ldb, beta, out, ldc);
  const GemmShape shape{m, n, k, transpose_a, transpose_b, beta != 0.0f};
  const auto [provider, check_in_use] = gemm_route_for(shape);
  const double start = check_in_use ? calibration_seconds(num_threads()) : 0.0;
  sgemm_with(provider, transpose_a, transpose_b, m, n, k, alpha, pa, lda, pb, ldb, beta, out, ldc);
  if (check_in_use) gemm_check_in_use(shape, provider, calibration_seconds(num_threads()) - start);
}

}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, float alpha,
          float beta, Tensor& c) {
  const std::int64_t m = c.rows(), n = c.row_size();
  const std::int64_t k = transpose_a ? a.rows() : a.row_size();
  WEFT_ASSERT((transpose_a ? a.row_size() : a.rows()) == m);
  WEFT_ASSERT((transpose_b ? b.rows() : b.row_size()) == n);
  WEFT_ASSERT((transpose_b ? b.row_size() : b.rows()) == k);
  if (m == 0 || n == 0) return;
  sgemm(transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.row_size(), b.data<float>(),
        b.row_size(), beta, c.data<float>(), n);
}

void transpose(const Tensor& x, Tensor& y) {
  const std::int64_t r = x.rows(), c = x.row_size();
  WEFT_ASSERT(y.rows() == c && y.row_size() == r);
  if (r == 0 || c == 0) return;
  detail::record_moved_bytes(r * c * std::int64_t(sizeof(float)));
  cblas_somatcopy(CblasRowMajor, CblasTrans, int(r), int(c), 1.0f, x.data<float>(), int(c),
                  y.data<float>(), int(r));
}

namespace {

// c[i] = alpha * op(A_i) · op(B_i) + beta * c[i] for the batch's items, A_i at item_a(i) and
// B_i at item_b(i), [a_rows, a_cols] and [b_rows, b_cols] row-major: one product per item.
template <typename ItemA, typename ItemB>
void item_products(ItemA item_a, std::int64_t a_cols, bool transpose_a, ItemB item_b,
                   std::int64_t b_cols, bool transpose_b, float alpha, float beta, Tensor& c,
                   std::int64_t k) {
  const std::int64_t batch = c.shape()[0], m = c.shape()[1], n = c.shape()[2];
  float* out = c.data<float>();
  const bool invariant = batch_invariant();
  for (std::int64_t i = 0; i < batch; ++i) {
    if (invariant)
      invariant_item_sgemm(batch_invariant_gemm_provider(), transpose_a, transpose_b, m, n, k,
                           alpha, item_a(i), a_cols, item_b(i), b_cols, beta, out + i * m * n, n);
    else
      sgemm(transpose_a, transpose_b, m, n, k, alpha, item_a(i), a_cols, item_b(i), b_cols, beta,
            out + i * m * n, n);
  }
}

}  // namespace

void batch_gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, float alpha,
                float beta, Tensor& c) {
  WEFT_ASSERT(a.rank() == 3 && b.rank() == 3 && c.rank() == 3);
  const std::int64_t batch = c.shape()[0], m = c.shape()[1], n = c.shape()[2];
  const std::int64_t a_rows = a.shape()[1], a_cols = a.shape()[2];
  const std::int64_t b_rows = b.shape()[1], b_cols = b.shape()[2];
  const std::int64_t k = transpose_a ? a_rows : a_cols;
  WEFT_ASSERT(a.shape()[0] == batch && b.shape()[0] == batch);
  WEFT_ASSERT((transpose_a ? a_cols : a_rows) == m);
  WEFT_ASSERT((transpose_b ? b_rows : b_cols) == n);
  WEFT_ASSERT((transpose_b ? b_cols : b_rows) == k);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  item_products([&](std::int64_t i) { return pa + i * a_rows * a_cols; }, a_cols, transpose_a,
                [&](std::int64_t i) { return pb + i * b_rows * b_cols; }, b_cols, transpose_b,
                alpha, beta, c, k);
}

void batch_gemm_read_rows(const RowBlocks& a, std::int64_t a_rows, bool transpose_a,
                          const RowBlocks& b, std::int64_t b_rows, bool transpose_b, float alpha,
                          float beta, Tensor& c) {
  WEFT_ASSERT(c.rank() == 3 && a.rows == c.shape()[0] && b.rows == c.shape()[0]);
  WEFT_ASSERT(a.widths.size() == 1 && b.widths.size() == 1);
  const std::int64_t a_cols = a.widths[0] / a_rows, b_cols = b.widths[0] / b_rows;
  WEFT_ASSERT(a_cols * a_rows == a.widths[0] && b_cols * b_rows == b.widths[0]);
  const std::int64_t k = transpose_a ? a_rows : a_cols;
  WEFT_ASSERT((transpose_b ? b_cols : b_rows) == k);
  item_products([&](std::int64_t i) { return a.at(0, i); }, a_cols, transpose_a,
                [&](std::int64_t i) { return b.at(0, i); }, b_cols, transpose_b, alpha, beta, c, k);
}

}  // namespace backend::cpu
}  // namespace weft
