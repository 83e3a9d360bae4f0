// Shared helpers of the blocks tests: small Function blocks over plain ops and readers of
// eval results.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/blocks/blocks.h"
#include "weft/blocks/compiler.h"

namespace weft::testing {

using namespace weft::blocks;  // NOLINT: tests read like models
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// (a, b) -> a + b over two scalars.
inline Function scalar_add() {
  return Function("add", {Type::scalar(), Type::scalar()},
                  [](std::span<const Var> x) { return x[0] + x[1]; });
}
// (a, b) -> 10 a + b: records the order of a pairing.
inline Function digits() {
  return Function("digits", {Type::scalar(), Type::scalar()},
                  [](std::span<const Var> x) { return x[0] * 10.0f + x[1]; });
}

inline std::vector<float> floats(const EvalValue& v) { return v.tensor.to_float_vector(); }
inline float number(const EvalValue& v) { return v.tensor.to_float_vector().at(0); }

// The message of the weft::Error thrown by body ("" when none).
template <typename F>
std::string error_of(F body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace weft::testing
