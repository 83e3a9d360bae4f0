// The calculator's expressions as infix text tokens, shared by tree2seq (which writes the text)
// and seq2tree (which reads it): the symbols, tokenising a line (a bad character is named with
// its column), parsing tokens back into an expression tree, and writing tokens as text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace weft::models::expression_tokens {

// Digits are their own value; then the operators and the parentheses.
constexpr std::int32_t kPlus = 10, kMinus = 11, kTimes = 12, kOpen = 13, kClose = 14;
constexpr std::int32_t kSymbols = 15;
// "+", "-" or "*" of an operator token's symbol; and the symbol of an operator's text.
std::string_view operator_text(std::int32_t symbol);
std::int32_t operator_symbol(std::string_view op);

// The tokens of the calculator's text of `expression` (models::expression_text).
std::vector<std::int32_t> expression_tokens(const nlohmann::json& expression);
// Tokens as the calculator writes text: "((3 + 4) * 2)". Symbols outside [0, kSymbols) are
// written as "?".
std::string tokens_text(std::span<const std::int32_t> tokens);

struct Tokenized {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> columns;  // each token's column in the text, from 1
};
// Splits text into symbols, skipping spaces; anything else fails naming `where`, the column
// and the character ("[owner] where: column 4: unexpected character 'x' ...").
Tokenized tokenize(std::string_view text, std::string_view owner, std::string_view where);
// The expression tree of tokens: + and - associate left, * binds tighter, parentheses group.
// A malformed text fails naming `where`, the column and what was expected.
nlohmann::json parse(const Tokenized& text, std::string_view owner, std::string_view where);

// Checks an expression tree (digits, known operators, depth at most 5: expression_sign's
// checks), failing as "[owner] where: what".
void check_expression(const nlohmann::json& expression, std::string_view owner,
                      std::string_view where);

}  // namespace weft::models::expression_tokens
