// The calculator example's data: exact evaluation of hand-written expressions, the generator's
// bounds and determinism, and errors on malformed expressions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "weft/core/error.h"
#include "weft/models/calculator_data.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json number(int n) { return json{{"number", n}}; }
json node(const char* op, json left, json right) {
  return json{{"op", op}, {"left", std::move(left)}, {"right", std::move(right)}};
}

TEST(CalculatorData, EvaluatesHandWrittenExpressions) {
  EXPECT_EQ(expression_sign(number(0)), 0);
  EXPECT_EQ(expression_sign(number(7)), 1);
  EXPECT_EQ(expression_sign(node("-", number(3), number(4))), -1);
  EXPECT_EQ(expression_sign(node("-", number(4), number(4))), 0);
  // (3 - 4) * (2 - 9) = 7
  EXPECT_EQ(
      expression_sign(node("*", node("-", number(3), number(4)), node("-", number(2), number(9)))),
      1);
  // 9^32 (depth 5) overflows 64 bits but not the evaluator's 128; depth 6 is rejected.
  json nines = number(9);
  for (int i = 0; i < 5; ++i) nines = node("*", nines, nines);
  EXPECT_EQ(expression_sign(nines), 1);
  EXPECT_EQ(expression_sign(node("-", number(0), nines.at("left"))), -1);
  EXPECT_THROW(expression_sign(node("-", nines, nines)), Error);
  EXPECT_EQ(expression_text(node("*", node("-", number(3), number(4)), number(2))),
            "((3 - 4) * 2)");
}

TEST(CalculatorData, GeneratorIsSeededBoundedAndBalancedEnough) {
  Rng a(5), b(5);
  const auto first = make_calculator_examples(500, a);
  const auto second = make_calculator_examples(500, b);
  ASSERT_EQ(first.size(), 500u);
  std::map<Sign, int> counts;
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].expression, second[i].expression);
    EXPECT_LE(first[i].depth, 4);
    EXPECT_GE(first[i].depth, 1);  // the root is always an operator
    EXPECT_EQ(first[i].value_sign, expression_sign(first[i].expression));
    EXPECT_EQ(std::int32_t(first[i].label), first[i].value_sign + 1);
    ++counts[first[i].label];
  }
  // Every class occurs, and no class is the whole set.
  for (Sign s : {Sign::kNegative, Sign::kZero, Sign::kPositive}) {
    EXPECT_GT(counts[s], 10) << int(s);
    EXPECT_LT(counts[s], 400) << int(s);
  }
}

TEST(CalculatorData, MalformedExpressionsAreNamed) {
  EXPECT_THAT(
      [] {
        expression_sign(json{{"number", 12}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("must be a digit 0-9, got 12")));
  EXPECT_THAT([] { expression_sign(node("/", number(1), number(2))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown op \"/\"")));
  EXPECT_THAT(
      [] {
        expression_sign(json{{"op", "+"}, {"left", number(1)}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("needs \"number\", or \"op\"")));
  Rng rng(1);
  EXPECT_THAT([&] { make_calculator_examples(1, rng, {.max_depth = 6}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("max_depth must be in [0, 5]")));
}

}  // namespace
}  // namespace weft::models
