// The GEMM ceiling: how fast this machine's sgemm runs at the products a model makes, measured
// in the same process as the model, so that benchmarks can report "achieved FLOP/s ÷ sgemm
// FLOP/s at the same shapes" (DESIGN.md §3) instead of a number that depends on the day's
// noise. Measurements go through Weft's own CPU gemm with the current provider and threads.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// One sgemm call, row-major: c [m, n] = op(a) · op(b) (+ c when accumulate), where op(a) is
// [m, k] and op(b) is [k, n]. a is stored [m, k], or [k, m] when transpose_a; b is stored
// [k, n], or [n, k] when transpose_b. accumulate means beta = 1, as gradient products on the
// tape run; otherwise beta = 0.
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  bool accumulate = false;

  bool operator==(const GemmShape&) const = default;
};

// 2·m·n·k: the multiply-adds counted as two flops, the usual GEMM convention (the beta term
// is not counted).
double gemm_flops(const GemmShape& shape);
// "256x1024x2048 NT" style label: m x n x k, then N or T for a and b, "+" when accumulate.
std::string gemm_shape_label(const GemmShape& shape);

// Times `product` (one call of the GEMM described by `shape`) and returns GFLOP/s =
// gemm_flops(shape) / median seconds per call / 1e9. Protocol: one untimed warm-up call,
// then further untimed calls until ~min_seconds/10 has passed (caches, page faults, thread
// pools); then samples, each a run of back-to-back calls sized to last about min_seconds/8,
// until at least 5 samples and min_seconds have been spent, or 3 samples and 2·min_seconds
// (calls longer than a sample). The median over samples of the per-call time is reported,
// which ignores a sample disturbed by another process. Wall-clock time.
double measure_gflops(const GemmShape& shape, const std::function<void()>& product,
                      double min_seconds = 0.2);

// Measures weft's backend gemm at `shape` with the provider it uses for that shape (forced,
// or calibrated: gemm_selection.h) and the thread count of set_num_threads, on float32
// tensors filled with small deterministic values, with measure_gflops' protocol.
double measure_sgemm_gflops(const GemmShape& shape, double min_seconds = 0.2);
// The same with `provider`, whatever Weft would choose.
double measure_sgemm_gflops(const GemmShape& shape, GemmProvider provider,
                            double min_seconds = 0.2);
// The fastest built-in provider's rate at `shape`: the ceiling a product could reach here.
double best_sgemm_gflops(const GemmShape& shape, double min_seconds = 0.2);

// Combines per-shape rates into the rate of running every shape once:
//   total flops / total time = Σ flops_i / Σ (flops_i / gflops_i)
// i.e. the flop-weighted harmonic mean. Shapes and rates must have the same length.
double combine_gflops(std::span<const GemmShape> shapes, std::span<const double> gflops);

// The sgemm ceiling for a list of products: best_sgemm_gflops of each shape (the fastest
// built-in provider there, whichever one Weft uses; current threads), combined with
// combine_gflops. This is the rate a model making exactly these products would reach if it
// spent all of its time in the best sgemm this machine has.
double sgemm_ceiling_gflops(const std::vector<GemmShape>& shapes, double min_seconds = 0.2);

}  // namespace weft
WEFT_API_END
