// Initializers: each returns a closure that fills a float32 CPU tensor from the Rng, drawing
// elements in row-major order so a seed fixes every value.
#include "weft/nn/initializers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "weft/core/error.h"

namespace weft::nn {
namespace {

// The parameter's elements, after checking it is a float32 tensor in host memory.
float* host_floats(const char* where, Tensor& value) {
  if (!value.defined()) fail(where, "cannot fill an undefined tensor");
  if (value.dtype() != DType::kFloat32)
    fail(where, "initializers fill float32 tensors, got ", value.describe());
  if (value.device() != Device::kCpu)
    fail(where, "initializers fill host tensors, got one on another device: ", value.describe());
  return value.data<float>();
}

template <typename Draw>
Initializer fill_with(const char* where, Draw draw) {
  return [where, draw](Tensor& value, Rng& rng) {
    float* out = host_floats(where, value);
    const std::int64_t n = value.numel();
    for (std::int64_t i = 0; i < n; ++i) out[i] = draw(rng);
  };
}

Initializer symmetric_uniform(const char* where, float limit) {
  return fill_with(where, [limit](Rng& rng) { return rng.uniform(-limit, limit); });
}

void require_positive(const char* where, const char* what, float v) {
  if (!(v > 0.0f)) fail(where, what, " must be > 0, got ", v);
}

}  // namespace

Fans compute_fans(const Shape& shape) {
  Fans fans;
  const int rank = shape.rank();
  if (rank == 0) return fans;
  if (rank == 1) {
    fans.fan_in = fans.fan_out = double(shape[0]);
    return fans;
  }
  double receptive = 1;
  for (int a = 0; a + 2 < rank; ++a) receptive *= double(shape[a]);
  fans.fan_in = double(shape[rank - 2]) * receptive;
  fans.fan_out = double(shape[rank - 1]) * receptive;
  return fans;
}

Initializer zeros() { return constant(0.0f); }

Initializer constant(float v) {
  return fill_with("constant", [v](Rng&) { return v; });
}

Initializer uniform(float low, float high) {
  if (!(low < high)) fail("uniform", "needs low < high, got [", low, ", ", high, ")");
  return fill_with("uniform", [low, high](Rng& rng) { return rng.uniform(low, high); });
}

Initializer normal(float stddev) {
  require_positive("normal", "stddev", stddev);
  return fill_with("normal", [stddev](Rng& rng) { return stddev * rng.normal(); });
}

Initializer truncated_normal(float stddev) {
  require_positive("truncated_normal", "stddev", stddev);
  return fill_with("truncated_normal", [stddev](Rng& rng) {
    float z = rng.normal();
    while (std::abs(z) > 2.0f) z = rng.normal();
    return stddev * z;
  });
}

Initializer glorot_uniform() {
  return [](Tensor& value, Rng& rng) {
    const Fans fans = compute_fans(value.shape());
    const float limit = float(std::sqrt(6.0 / (fans.fan_in + fans.fan_out)));
    symmetric_uniform("glorot_uniform", limit)(value, rng);
  };
}

Initializer uniform_unit_scaling(float factor) {
  require_positive("uniform_unit_scaling", "factor", factor);
  return [factor](Tensor& value, Rng& rng) {
    double fan_in = 1;
    const Shape& shape = value.shape();
    for (int a = 0; a + 1 < shape.rank(); ++a) fan_in *= double(shape[a]);
    const float limit = float(std::sqrt(3.0 / std::max(fan_in, 1.0))) * factor;
    symmetric_uniform("uniform_unit_scaling", limit)(value, rng);
  };
}

Initializer from_tensor(Tensor source) {
  if (!source.defined()) fail("from_tensor", "the source tensor is undefined");
  if (source.dtype() != DType::kFloat32)
    fail("from_tensor", "the source must be float32, got ", source.describe());
  Tensor host = source.to(Device::kCpu);
  return [host](Tensor& value, Rng&) {
    float* out = host_floats("from_tensor", value);
    if (value.shape() != host.shape())
      fail("from_tensor", "source ", host.describe(), " does not match the parameter's shape ",
           value.shape().to_string());
    if (value.numel() > 0)
      std::memcpy(out, host.data<float>(), std::size_t(value.numel()) * sizeof(float));
  };
}

}  // namespace weft::nn
