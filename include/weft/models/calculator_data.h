// The data of the calculator example (TensorFlow Fold's blocks/examples/calculator): random
// arithmetic expression trees over the digits 0-9 with +, - and *, generated in-process from a
// seed, each labelled with the sign of its value. Expressions arrive as the JSON-like Input
// the blocks library reads: {"number": 7} or {"op": "+", "left": {...}, "right": {...}}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/core/rng.h"

WEFT_API_BEGIN
namespace weft::models {

// The three classes, in label order.
enum class Sign : std::int32_t { kNegative = 0, kZero = 1, kPositive = 2 };

struct CalculatorExample {
  nlohmann::json expression;
  std::int64_t value_sign;  // -1, 0 or 1
  Sign label;
  int depth;  // operators on the longest root-to-digit path (a lone digit has depth 0)
};

struct CalculatorDataOptions {
  // At most 5, so every value fits exactly in 128 bits (9^32 < 2^127).
  int max_depth = 4;
  // Below the root, a node becomes a digit with this probability before max_depth.
  float leaf_probability = 0.3f;
};

// `count` independent expressions drawn from rng. Throws weft::Error when max_depth is not in
// [0, 5] or leaf_probability not in [0, 1].
std::vector<CalculatorExample> make_calculator_examples(std::int64_t count, Rng& rng,
                                                        const CalculatorDataOptions& options = {});

// The infix text of an expression, fully parenthesised: "((3 + 4) * 2)".
std::string expression_text(const nlohmann::json& expression);

// Evaluates an expression (the form above) exactly; throws weft::Error naming the node when
// it is malformed (unknown op, a number outside 0-9, a missing child).
std::int64_t expression_sign(const nlohmann::json& expression);

}  // namespace weft::models
WEFT_API_END
