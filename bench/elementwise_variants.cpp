// Decides DESIGN.md §2's "Eigen 3.4 maps, or plain loops the compiler vectorizes; measure":
// tanh, sigmoid and exp over 256×1024 floats as (a) a plain loop over std:: functions, (b) an
// Eigen::Map<ArrayXf> expression, (c) Weft's CPU kernel (backend::cpu::unary), and (d) a plain
// loop over a polynomial exp written so the compiler vectorizes it. Each reports its largest
// absolute error against double-precision std:: math, so speed is not bought with accuracy.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 inside Eigen's AVX-512 code
#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "benchmark/benchmark.h"
#include "weft/core/rng.h"

namespace {

constexpr std::int64_t kCount = 256 * 1024;

enum class Function { kTanh, kSigmoid, kExp };
enum class Variant { kStdLoop, kEigenMap, kWeftKernel, kPolynomialLoop };

// e^x for finite float x, vectorizable: x = n·ln2 + r with |r| <= ln2/2, e^r by its Taylor
// series to r^6 (truncation error < 1.2e-7 relative), 2^n put into the exponent bits. GCC 12
// vectorizes this only without branches and without std::floor (which it will not vectorize
// under the default -ftrapping-math): n is rounded by adding and subtracting 1.5·2^23.
inline float poly_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;  // ln2 split in two parts
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((std::int32_t(n) + 127) << 23);
}

// tanh from e^(-2|x|); near 0, where 1 - e^(-2|x|) cancels, its odd Taylor series.
inline float poly_tanh(float x) {
  const float a = std::abs(x);
  const float t = poly_exp(-2.0f * a);
  const float far = (1.0f - t) / (1.0f + t);
  const float x2 = x * x;
  const float near = a * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 - x2 * (17.0f / 315))));
  return std::copysign(a < 0.125f ? near : far, x);
}

inline float poly_sigmoid(float x) { return 1.0f / (1.0f + poly_exp(-x)); }

void run_std_loop(Function f, const float* x, float* y) {
  switch (f) {
    case Function::kTanh:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = std::tanh(x[i]);
      break;
    case Function::kSigmoid:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      break;
    case Function::kExp:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = std::exp(x[i]);
      break;
  }
}

void run_polynomial_loop(Function f, const float* x, float* y) {
  switch (f) {
    case Function::kTanh:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = poly_tanh(x[i]);
      break;
    case Function::kSigmoid:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = poly_sigmoid(x[i]);
      break;
    case Function::kExp:
      for (std::int64_t i = 0; i < kCount; ++i) y[i] = poly_exp(x[i]);
      break;
  }
}

void run_eigen_map(Function f, const float* x, float* y) {
  Eigen::Map<const Eigen::ArrayXf> in(x, kCount);
  Eigen::Map<Eigen::ArrayXf> out(y, kCount);
  switch (f) {
    case Function::kTanh:
      out = in.tanh();
      break;
    case Function::kSigmoid:
      out = in.logistic();
      break;
    case Function::kExp:
      out = in.exp();
      break;
  }
}

weft::backend::UnaryOp unary_op_of(Function f) {
  switch (f) {
    case Function::kTanh:
      return weft::backend::UnaryOp::kTanh;
    case Function::kSigmoid:
      return weft::backend::UnaryOp::kSigmoid;
    case Function::kExp:
      break;
  }
  return weft::backend::UnaryOp::kExp;
}

void run_variant(Variant v, Function f, const weft::Tensor& x, weft::Tensor& y) {
  switch (v) {
    case Variant::kStdLoop:
      return run_std_loop(f, x.data<float>(), y.data<float>());
    case Variant::kEigenMap:
      return run_eigen_map(f, x.data<float>(), y.data<float>());
    case Variant::kWeftKernel:
      return weft::backend::cpu::unary(unary_op_of(f), x, y);
    case Variant::kPolynomialLoop:
      return run_polynomial_loop(f, x.data<float>(), y.data<float>());
  }
}

double reference(Function f, double x) {
  switch (f) {
    case Function::kTanh:
      return std::tanh(x);
    case Function::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Function::kExp:
      break;
  }
  return std::exp(x);
}

// Inputs in [-5, 5): the range the Tree-LSTM's gates see, and e^x stays well inside float.
weft::Tensor inputs() {
  weft::Rng rng(21);
  weft::Tensor x = weft::Tensor::empty(weft::Shape{256, 1024});
  float* p = x.data<float>();
  for (std::int64_t i = 0; i < kCount; ++i) p[i] = rng.uniform(-5.0f, 5.0f);
  return x;
}

void BM_elementwise_variant(benchmark::State& state, Function f, Variant v) {
  const weft::Tensor x = inputs();
  weft::Tensor y = weft::Tensor::empty(x.shape());
  for (auto _ : state) {
    run_variant(v, f, x, y);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  double max_error = 0;
  for (std::int64_t i = 0; i < kCount; ++i) {
    const double want = reference(f, double(x.data<float>()[i]));
    const double err = std::abs(double(y.data<float>()[i]) - want);
    max_error = std::max(max_error, f == Function::kExp ? err / want : err);
  }
  state.counters["max_err"] = max_error;  // relative for exp, absolute for tanh and sigmoid
  state.SetItemsProcessed(state.iterations() * kCount);
  state.SetBytesProcessed(state.iterations() * kCount * 8);
}

// Registered as elementwise_variant/<function>/<variant>.
const bool registered = [] {
  const char* functions[] = {"tanh", "sigmoid", "exp"};
  const char* variants[] = {"std_loop", "eigen_map", "weft_kernel", "polynomial_loop"};
  for (int f = 0; f < 3; ++f)
    for (int v = 0; v < 4; ++v) {
      const std::string name =
          std::string("elementwise_variant/") + functions[f] + "/" + variants[v];
      benchmark::RegisterBenchmark(name.c_str(), BM_elementwise_variant, Function(f), Variant(v))
          ->Unit(benchmark::kMicrosecond);
    }
  return true;
}();

}  // namespace
