// How far apart two float32 computations of one value may land when they round differently:
// the same model run in batches of another composition may take another GEMM kernel (oneDNN and
// OpenBLAS pick micro-kernels and summation orders by the row count and the instruction set)
// and other vector lanes for its elementwise math, so equality to the bit holds only where the
// code guarantees it (the batch-invariant mode). Elsewhere tests compare within this bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft::testing {

// A value accumulated over `roundings` float32 steps (a sum of per-step log-probabilities, a
// chain of layers), each of magnitude at most |value| and each off by at most
// `ulps_per_rounding` units in the last place between the two computations. 8 ulps a step
// covers a dot product summed in another order plus a vectorised exp / tanh against the scalar
// one; magnitudes below 1 are taken as 1 (absolute error near zero).
inline double float32_tolerance(double value, int roundings, double ulps_per_rounding = 8.0) {
  const double epsilon = std::numeric_limits<float>::epsilon();
  return double(std::max(roundings, 1)) * ulps_per_rounding * epsilon *
         std::max(1.0, std::abs(value));
}

}  // namespace weft::testing
