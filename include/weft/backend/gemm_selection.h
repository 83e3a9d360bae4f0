// Which GEMM provider runs each matrix product. No provider is fastest everywhere: oneDNN wins
// the Tree-LSTM products on an AVX-512 Zen 4, OpenBLAS some of them on an AVX2 Zen 3, and the
// winner changes with the row count, the transposes and whether the product accumulates. So
// unless a provider is forced (WEFT_GEMM=onednn|openblas, or set_gemm_provider), Weft
// measures: products fall into shape classes (transposes, accumulation, and a power-of-two
// size bucket for each of m, n and k), and the first product of a class times every built-in
// provider at the class's representative shape, interleaved, and keeps the fastest. The choices are
// cached on disk per CPU identity, thread count and library versions, so a machine calibrates each
// class once:
//   $WEFT_GEMM_CACHE                        (a file; "off" or empty: memory only), else
//   $XDG_CACHE_HOME/weft/gemm-<id>.txt, else $HOME/.cache/weft/gemm-<id>.txt.
// A cache file that does not parse or belongs to another identity is ignored (and replaced);
// one that cannot be written leaves the choices in memory. Processes that calibrate the same
// class at once may choose differently when the providers are within noise of each other.
// A loaded machine cannot spoil the cache for good: a measurement during which the thread was
// off the CPU for more than 15% of the time, or whose rounds spread more than 30%, is used but
// not cached, and measured again after 1, 2 and 4 s; and the first product of a cached class
// (big enough to time) is timed, and a rate 3x away from the record, either way, measures the
// class again (calibration_checks.h). `weft info --calibrate MODEL` measures a model's classes
// ahead of time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/backend/gemm_ceiling.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// A shape class: the transposes, accumulation (beta = 1) and a bucket per extent. Bucket b
// holds the extents in (2^(b-1), 2^b] (bucket 0: 1), the last one (13) everything over 4096.
struct GemmShapeClass {
  bool transpose_a = false, transpose_b = false, accumulate = false;
  int m_bucket = 0, n_bucket = 0, k_bucket = 0;

  bool operator==(const GemmShapeClass&) const = default;
};

GemmShapeClass gemm_shape_class(const GemmShape& shape);
// The shape measured for a class: each extent at its bucket's upper end (2^b: the sizes
// models use most), halved largest-first until one call is at most 2^31 flops, so a class
// costs at most a few tenths of a second to calibrate, most of them milliseconds.
GemmShape gemm_class_representative(const GemmShapeClass& shape_class);
// "NT+ m 129-256 n 513-1024 k 17-32" ("+": accumulates).
std::string gemm_class_label(const GemmShapeClass& shape_class);

// The provider Weft uses for `shape` now: the forced one, the only one built in, or the
// calibrated choice for its class (measured now when neither this process nor the cache has
// it).
GemmProvider gemm_provider_for(const GemmShape& shape);

// Whether c = op(a) · bᵀ (shape.transpose_b) runs more than 5% faster as c = op(a) · b' on a
// copy b' = bᵀ: the two shapes' classes as calibrated (measured now if needed, also with a
// forced provider), each at the provider it would use. A weight read transposed at every loom
// level is copied once when this says so (Tape::transposed_value); the answer depends on the
// machine (on a Zen 4, yes at the SST and ICLR N = 128 shapes from 8 rows, no at N = 1024
// below 16 rows: bench/log/2026-11-26-weight-transposes.md).
bool gemm_prefers_untransposed_copy(const GemmShape& shape);

// Back to calibrated choices after set_gemm_provider (WEFT_GEMM=auto means the same).
void use_calibrated_gemm();
// The provider every product uses, when one is forced.
std::optional<GemmProvider> forced_gemm_provider();

// Forgets this process's choices at the current thread count, cached or measured, so every
// class is measured again at its next product (clean measurements then replace the cached
// ones). For `weft info --calibrate`.
void remeasure_gemm_classes();

// Where calibrations are cached from now on ("" : memory only). Forgets this process's
// choices and reads the file's. For tests and tools; WEFT_GEMM_CACHE sets it at start.
void set_gemm_cache_path(const std::string& path);

// What calibration measured for one class at the current thread count.
struct GemmClassChoice {
  GemmShapeClass shape_class;
  GemmProvider provider = GemmProvider::kOpenBlas;
  // GFLOP/s of each built-in provider at the representative shape (best of the rounds), in
  // available_gemm_providers() order.
  std::vector<double> gflops;
  bool from_cache = false;  // read from the cache file rather than measured by this process
  std::string noise;        // why this measurement is not cached ("" when it is clean)
  // For a class with b transposed whose untransposed twin is calibrated too: whether its
  // products read a transposed copy of b (gemm_prefers_untransposed_copy); unset otherwise.
  std::optional<bool> untransposed_copy;
};

// For `weft info` and benchmarks: how products are assigned and why.
struct GemmSelectionReport {
  std::string mode;          // e.g. "forced by WEFT_GEMM=openblas", "calibrated per shape class"
  std::string cpu_identity;  // the key of the cache: CPU, features, libraries, format
  std::string cache_path;    // "" when memory only
  std::string cache_status;  // "read 12 classes", "none yet", "ignored: <why>", "not written: ..."
  std::vector<GemmClassChoice> classes;  // this thread count's choices known so far
  std::string clock;  // what timed them: the thread's CPU clock at one thread, else the wall clock
};
GemmSelectionReport gemm_selection_report();

}  // namespace weft
WEFT_API_END
