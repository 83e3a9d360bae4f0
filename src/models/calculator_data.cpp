// Random expression trees for the calculator example and their exact evaluation (128-bit
// integers: a depth-5 tree has at most 32 digits, and 9^32 fits).
#include "weft/models/calculator_data.h"

#include <array>
#include <string_view>

#include "weft/core/error.h"
#include "weft/io/json_lines.h"

namespace weft::models {
namespace {

__extension__ typedef __int128 Int128;
constexpr std::array<std::string_view, 3> kOps{"+", "-", "*"};

nlohmann::json random_expression(Rng& rng, int depth, const CalculatorDataOptions& options) {
  const bool leaf =
      depth == options.max_depth || (depth > 0 && rng.uniform() < options.leaf_probability);
  if (leaf) return nlohmann::json{{"number", int(rng.below(10))}};
  nlohmann::json node;
  node["op"] = kOps[rng.below(kOps.size())];
  node["left"] = random_expression(rng, depth + 1, options);
  node["right"] = random_expression(rng, depth + 1, options);
  return node;
}

Int128 evaluate(const nlohmann::json& node, int depth) {
  if (!node.is_object())
    fail("calculator", "expression node is not an object: ", io::json_excerpt(node));
  if (depth > 5) fail("calculator", "expression deeper than 5 operators: ", io::json_excerpt(node));
  if (node.contains("number")) {
    const nlohmann::json& number = node["number"];
    if (!number.is_number_integer() || number.get<std::int64_t>() < 0 ||
        number.get<std::int64_t>() > 9) {
      fail("calculator", "\"number\" must be a digit 0-9, got ", io::json_excerpt(number));
    }
    return number.get<std::int64_t>();
  }
  if (!node.contains("op") || !node.contains("left") || !node.contains("right")) {
    fail("calculator",
         "a node needs \"number\", or \"op\", \"left\" and \"right\": ", io::json_excerpt(node));
  }
  const Int128 left = evaluate(node["left"], depth + 1);
  const Int128 right = evaluate(node["right"], depth + 1);
  const nlohmann::json& op = node["op"];
  if (op == "+") return left + right;
  if (op == "-") return left - right;
  if (op == "*") return left * right;
  fail("calculator", "unknown op ", io::json_excerpt(op), " (expected \"+\", \"-\" or \"*\")");
}

int depth_of(const nlohmann::json& node) {
  if (node.contains("number")) return 0;
  return 1 + std::max(depth_of(node["left"]), depth_of(node["right"]));
}

}  // namespace

std::vector<CalculatorExample> make_calculator_examples(std::int64_t count, Rng& rng,
                                                        const CalculatorDataOptions& options) {
  if (options.max_depth < 0 || options.max_depth > 5) {
    fail("calculator", "max_depth must be in [0, 5], got ", options.max_depth);
  }
  if (!(options.leaf_probability >= 0.f && options.leaf_probability <= 1.f)) {
    fail("calculator", "leaf_probability must be in [0, 1], got ", options.leaf_probability);
  }
  std::vector<CalculatorExample> examples;
  examples.reserve(std::size_t(std::max<std::int64_t>(count, 0)));
  for (std::int64_t i = 0; i < count; ++i) {
    CalculatorExample example;
    example.expression = random_expression(rng, 0, options);
    example.value_sign = expression_sign(example.expression);
    example.label = Sign(std::int32_t(example.value_sign + 1));
    example.depth = depth_of(example.expression);
    examples.push_back(std::move(example));
  }
  return examples;
}

std::int64_t expression_sign(const nlohmann::json& expression) {
  const Int128 value = evaluate(expression, 0);
  return value < 0 ? -1 : (value > 0 ? 1 : 0);
}

std::string expression_text(const nlohmann::json& expression) {
  if (expression.contains("number")) return std::to_string(expression["number"].get<int>());
  return "(" + expression_text(expression["left"]) + " " + expression["op"].get<std::string>() +
         " " + expression_text(expression["right"]) + ")";
}

}  // namespace weft::models
