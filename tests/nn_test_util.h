// Test helpers for the nn layers: float64 building blocks for hand-written references
// (affine maps, column slices, activations) and check_layer, check_op for layers: the forward
// against the reference, then the gradients of the inputs AND of the layer's parameters
// against op_test_util's one finite-difference check of the reference.
#pragma once

#include <functional>
#include <vector>

#include "op_test_util.h"

namespace weft::testing {

// ---- float64 reference pieces (row-major [rows, cols] HostArrays) ----
HostArray affine(const HostArray& x, const HostArray& weight, const HostArray& bias);
HostArray concat_cols(const std::vector<HostArray>& parts);
HostArray cols(const HostArray& x, std::int64_t start, std::int64_t count);
HostArray map(const HostArray& x, const std::function<double(double)>& f);
// Elementwise a*b and a+b of equal shapes.
HostArray times(const HostArray& a, const HostArray& b);
HostArray plus(const HostArray& a, const HostArray& b);
double sigmoid64(double v);
HostArray sigmoid64(const HostArray& x);
HostArray tanh64(const HostArray& x);

// The reference of a layer: (inputs, parameter values) -> output, in float64.
using LayerReference = std::function<HostArray(const std::vector<HostArray>& inputs,
                                               const std::vector<HostArray>& params)>;

// Runs forward(vars of inputs) on a fresh tape (made current), compares with the reference,
// backpropagates a random cotangent and checks every input's and every parameter's gradient
// against finite differences of the reference. Parameters' gradients are zeroed first.
void check_layer(const std::vector<Parameter>& params, const OpUnderTest& forward,
                 const LayerReference& reference, const std::vector<Tensor>& inputs,
                 const Tolerance& tolerance = {});

std::vector<float> values_of(Var v);

// The mask dropout(x, drop_prob, Rng(seed)) applies to a [rows, cols] x (0 or 1 / keep),
// read back by running the op on ones: a reference multiplies by it.
HostArray dropout_mask(std::int64_t rows, std::int64_t cols, float drop_prob, std::uint64_t seed);

}  // namespace weft::testing
