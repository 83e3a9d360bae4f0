// The harness every op test uses: a naive float64 reference written in the test, checked
// against the op's forward; the op's backward (with a random cotangent, so transposes and
// broadcasts cannot hide behind a plain sum) checked against float64 central finite
// differences of that reference; and batched-vs-per-row agreement. WEFT_OP_TEST registers
// the op as covered, and op_coverage_test fails for any op in ops.def without a case.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::testing {

// Records that `op` has a test case; returns true (used in static initialisers).
bool register_op_case(const char* op);
// Every op name registered so far.
const std::vector<std::string>& registered_op_cases();

#define WEFT_OP_TEST(op, case_name)                                                              \
  static const bool weft_registered_##op##_##case_name = ::weft::testing::register_op_case(#op); \
  TEST(Op_##op, case_name)

// A float64 host array with a shape: inputs and outputs of reference implementations.
struct HostArray {
  Shape shape;
  std::vector<double> values;

  HostArray() = default;
  HostArray(Shape s, std::vector<double> v) : shape(s), values(std::move(v)) {}
  explicit HostArray(const Tensor& t);
  std::size_t size() const { return values.size(); }
  double& operator[](std::size_t i) { return values[i]; }
  double operator[](std::size_t i) const { return values[i]; }
  Tensor to_tensor() const;  // float32
};

// The reference: inputs -> output, in float64. It must not depend on anything else.
using Reference = std::function<HostArray(const std::vector<HostArray>&)>;
// The op under test, applied to Vars (one per differentiable input).
using OpUnderTest = std::function<Var(const std::vector<Var>&)>;

struct Tolerance {
  double forward_abs = 1e-5;
  double forward_rel = 1e-5;
  double grad_abs = 2e-4;
  double grad_rel = 2e-3;
  double fd_step = 1e-5;
};

// Uniform values in [low, high), deterministic from the seed.
Tensor random_tensor(const Shape& shape, std::uint64_t seed, float low = -1.0f, float high = 1.0f);
Tensor int_tensor(const Shape& shape, const std::vector<std::int32_t>& values);

// |actual - expected| <= abs_tol + rel_tol |expected|.
bool close(double actual, double expected, double abs_tol, double rel_tol);

// The one finite-difference check every gradient test uses: for each `stride`-th entry j of
// `values` (float64 reference inputs, or a parameter's float32 storage), analytic[j] against
// the central difference (loss(values + step e_j) - loss(values - step e_j)) / (2 step), within
// abs_tol + rel_tol |difference|; each entry is restored exactly. `what` names the argument
// in failures ("gradient of input 1 element 4: backward ... vs finite difference ...").
template <typename Value, typename Analytic>
void check_finite_differences(const std::string& what, std::span<Value> values,
                              const Analytic& analytic, const std::function<double()>& loss,
                              double step, double abs_tol, double rel_tol, std::size_t stride = 1) {
  ASSERT_EQ(std::size(analytic), values.size()) << "gradient of " << what << ": wrong size";
  for (std::size_t j = 0; j < values.size(); j += stride) {
    const Value saved = values[j];
    values[j] = Value(saved + step);
    const double up = loss();
    values[j] = Value(saved - step);
    const double down = loss();
    values[j] = saved;
    const double numeric = (up - down) / (2 * step);
    EXPECT_TRUE(close(double(analytic[j]), numeric, abs_tol, rel_tol))
        << "gradient of " << what << " element " << j << ": backward " << analytic[j]
        << " vs finite difference " << numeric;
  }
}

// A random cotangent for an output of `size` elements (float32 values, as backward takes them),
// deterministic from the seed: gradients of sum(c * y), which a transposed or mis-broadcast
// backward gets wrong even where sum(y) would not notice.
std::vector<float> random_cotangent(std::size_t size, std::uint64_t seed);
// sum(weights * y), in float64.
double weighted_sum(const HostArray& y, std::span<const float> weights);
// Every element of `actual` against `expected` within the forward tolerances; `who` names the
// computation in failures ("op", "layer").
void expect_matches_reference(const HostArray& actual, const HostArray& expected,
                              const Tolerance& tolerance, const char* who);

// Forward against the reference, then every input's gradient against finite differences
// of the reference under a random cotangent. Reports mismatches with indices via gtest.
void check_op(const OpUnderTest& op, const Reference& reference, const std::vector<Tensor>& inputs,
              const Tolerance& tolerance = {});

// Runs the op on the whole batch and on each row alone (rows of the inputs listed in
// `batched`; the others passed whole) and expects row r of the batch result to equal the
// per-row result.
void check_batched_matches_rows(const OpUnderTest& op, const std::vector<Tensor>& inputs,
                                const std::vector<bool>& batched, double tolerance = 1e-5);

// Expects `body` to throw weft::Error whose message contains every fragment.
void expect_error(const std::function<void()>& body, const std::vector<std::string>& fragments);

}  // namespace weft::testing
