// The GEMM ceiling: timing protocol and the flop-weighted combination that benchmarks
// divide by (definitions in weft/backend/gemm_ceiling.h).
#include "weft/backend/gemm_ceiling.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "sgemm.h"
#include "weft/backend/gemm_selection.h"
#include "weft/core/error.h"
#include "weft/tensor/tensor.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds per call of `calls` back-to-back calls.
double time_calls(const std::function<void()>& product, std::int64_t calls) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < calls; ++i) product();
  return seconds_since(start) / double(calls);
}

// Small values in [-0.08, 0.08]: no overflow or denormals at any k, so the timing does not
// depend on the data.
Tensor patterned(std::int64_t rows, std::int64_t cols, int seed) {
  Tensor t = Tensor::empty(Shape{rows, cols});
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < rows * cols; ++i) p[i] = float((i * 7 + seed) % 17 - 8) * 0.01f;
  return t;
}

void check_shape(const GemmShape& shape) {
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0)
    fail("gemm_ceiling", "every extent must be positive: m ", shape.m, ", n ", shape.n, ", k ",
         shape.k);
}

}  // namespace

double gemm_flops(const GemmShape& shape) {
  return 2.0 * double(shape.m) * double(shape.n) * double(shape.k);
}

std::string gemm_shape_label(const GemmShape& shape) {
  std::string label = std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" +
                      std::to_string(shape.k) + " " + (shape.transpose_a ? "T" : "N") +
                      (shape.transpose_b ? "T" : "N");
  if (shape.accumulate) label += "+";
  return label;
}

double measure_gflops(const GemmShape& shape, const std::function<void()>& product,
                      double min_seconds) {
  check_shape(shape);
  product();  // first call: lazy initialisation, page faults, thread pool start
  // Warm up until min_seconds / 10 has passed; one further call is enough when a single call
  // takes that long (the largest shapes), and its time calibrates the sample size.
  std::int64_t warm_calls = 0;
  const auto warm_start = Clock::now();
  do {
    product();
    ++warm_calls;
  } while (seconds_since(warm_start) < min_seconds / 10);
  const double per_call = seconds_since(warm_start) / double(warm_calls);
  const std::int64_t calls =
      std::max<std::int64_t>(1, std::llround(min_seconds / 8 / std::max(per_call, 1e-9)));

  std::vector<double> samples;
  const auto start = Clock::now();
  for (;;) {
    samples.push_back(time_calls(product, calls));
    const double spent = seconds_since(start);
    const std::size_t n = samples.size();
    if (n >= 5 && spent >= min_seconds) break;
    if (n >= 3 && spent >= 2 * min_seconds) break;  // a single call longer than a sample
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  const double median = samples[samples.size() / 2];
  return gemm_flops(shape) / median / 1e9;
}

namespace {

double measure_with(const GemmShape& shape, GemmProvider provider, double min_seconds) {
  check_shape(shape);
  Tensor a = shape.transpose_a ? patterned(shape.k, shape.m, 1) : patterned(shape.m, shape.k, 1);
  Tensor b = shape.transpose_b ? patterned(shape.n, shape.k, 2) : patterned(shape.k, shape.n, 2);
  Tensor c = Tensor::zeros(Shape{shape.m, shape.n});
  const float beta = shape.accumulate ? 1.0f : 0.0f;
  return measure_gflops(
      shape,
      [&] {
        backend::cpu::sgemm_with(provider, shape.transpose_a, shape.transpose_b, shape.m, shape.n,
                                 shape.k, 1.0f, a.data<float>(), a.row_size(), b.data<float>(),
                                 b.row_size(), beta, c.data<float>(), shape.n);
      },
      min_seconds);
}

}  // namespace

double measure_sgemm_gflops(const GemmShape& shape, double min_seconds) {
  check_shape(shape);
  return measure_with(shape, gemm_provider_for(shape), min_seconds);
}

double measure_sgemm_gflops(const GemmShape& shape, GemmProvider provider, double min_seconds) {
  require_gemm_provider_built_in(provider);
  return measure_with(shape, provider, min_seconds);
}

double best_sgemm_gflops(const GemmShape& shape, double min_seconds) {
  double best = 0;
  for (GemmProvider provider : available_gemm_providers())
    best = std::max(best, measure_with(shape, provider, min_seconds));
  return best;
}

double combine_gflops(std::span<const GemmShape> shapes, std::span<const double> gflops) {
  if (shapes.size() != gflops.size() || shapes.empty())
    fail("gemm_ceiling", "need one rate per shape and at least one shape: ", shapes.size(),
         " shapes vs ", gflops.size(), " rates");
  double flops = 0, seconds = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!(gflops[i] > 0))
      fail("gemm_ceiling", "rate ", i, " (", gemm_shape_label(shapes[i]), ") is not positive");
    flops += gemm_flops(shapes[i]);
    seconds += gemm_flops(shapes[i]) / (gflops[i] * 1e9);
  }
  return flops / seconds / 1e9;
}

double sgemm_ceiling_gflops(const std::vector<GemmShape>& shapes, double min_seconds) {
  std::vector<double> rates;
  rates.reserve(shapes.size());
  for (const GemmShape& shape : shapes) rates.push_back(best_sgemm_gflops(shape, min_seconds));
  return combine_gflops(shapes, rates);
}

}  // namespace weft
