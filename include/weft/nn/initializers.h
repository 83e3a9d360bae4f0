// Initializers: functions that fill a freshly created float32 parameter tensor from an Rng.
// The names and defaults follow TensorFlow's (what TF Fold's layers used), so a model ported
// from Fold starts from the same distributions. Every random draw comes from the Rng passed
// in, so the same seed gives the same parameters.
#pragma once

#include <cstdint>
#include <functional>

#include "weft/core/export.h"
#include "weft/core/rng.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::nn {

// Fills `value` (a float32 CPU tensor whose shape is already set) in place.
using Initializer = std::function<void(Tensor& value, Rng& rng)>;

Initializer zeros();
Initializer constant(float v);
// U[low, high); throws unless low < high.
Initializer uniform(float low, float high);
// N(0, stddev^2).
Initializer normal(float stddev);
// N(0, stddev^2), redrawing any value beyond 2 stddev (TF's truncated_normal).
Initializer truncated_normal(float stddev);
// U(-s, s), s = sqrt(6 / (fan_in + fan_out)); fans from compute_fans().
Initializer glorot_uniform();
// TF's uniform_unit_scaling: U(-s, s), s = sqrt(3 / fan_in) * factor, where fan_in is the
// product of every extent but the last (shape[0] for a 2-D [in, out] weight; 1 for 1-D).
Initializer uniform_unit_scaling(float factor = 1.0f);
// Copies `value` (float32) into the parameter; throws if the shapes differ. For pretrained
// vectors (e.g. GloVe) and restoring fixed weights.
Initializer from_tensor(Tensor value);

// Fan-in and fan-out of a weight shape, as TF/Keras compute them: rank 0 -> (1, 1); rank 1
// -> (n, n); rank 2 [in, out] -> (in, out); higher ranks multiply by the leading extents.
struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};
Fans compute_fans(const Shape& shape);

}  // namespace weft::nn
WEFT_API_END
