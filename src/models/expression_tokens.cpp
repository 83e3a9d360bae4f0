// Infix text of calculator expressions (expression_tokens.h): a tokeniser and a small
// recursive-descent parser that say where a text goes wrong.
#include "expression_tokens.h"

#include <array>

#include "weft/core/error.h"
#include "weft/models/calculator_data.h"

namespace weft::models::expression_tokens {
namespace {

constexpr std::array<std::string_view, 3> kOperators{"+", "-", "*"};

void append_tokens(const nlohmann::json& node, std::vector<std::int32_t>& out) {
  if (node.contains("number")) {
    out.push_back(node["number"].get<std::int32_t>());
    return;
  }
  out.push_back(kOpen);
  append_tokens(node["left"], out);
  out.push_back(operator_symbol(node["op"].get<std::string>()));
  append_tokens(node["right"], out);
  out.push_back(kClose);
}

// Recursive descent over the tokens; depth bounded so a hostile text cannot overflow the stack.
class Parser {
 public:
  Parser(const Tokenized& text, std::string_view owner, std::string_view where)
      : text_(text), owner_(owner), where_(where) {}

  nlohmann::json whole() {
    if (text_.tokens.empty()) fail(owner_, where_, ": an empty expression");
    nlohmann::json tree = sum(0);
    if (at_ < text_.tokens.size()) error("an operator or the end of the expression");
    return tree;
  }

 private:
  static constexpr int kMaxNesting = 64;

  nlohmann::json sum(int nesting) {
    nlohmann::json left = product(nesting);
    while (peek() == kPlus || peek() == kMinus) {
      const std::int32_t op = text_.tokens[at_++];
      left = binary(op, std::move(left), product(nesting));
    }
    return left;
  }
  nlohmann::json product(int nesting) {
    nlohmann::json left = factor(nesting);
    while (peek() == kTimes) {
      ++at_;
      left = binary(kTimes, std::move(left), factor(nesting));
    }
    return left;
  }
  static nlohmann::json binary(std::int32_t op, nlohmann::json left, nlohmann::json right) {
    return nlohmann::json{
        {"op", operator_text(op)}, {"left", std::move(left)}, {"right", std::move(right)}};
  }
  nlohmann::json factor(int nesting) {
    const std::int32_t token = peek();
    if (token >= 0 && token <= 9) {
      ++at_;
      return nlohmann::json{{"number", token}};
    }
    if (token != kOpen) error("a digit or '('");
    if (nesting >= kMaxNesting) error("at most 64 nested parentheses, not more");
    ++at_;
    nlohmann::json inner = sum(nesting + 1);
    if (peek() != kClose) error("')'");
    ++at_;
    return inner;
  }
  std::int32_t peek() const { return at_ < text_.tokens.size() ? text_.tokens[at_] : -1; }
  [[noreturn]] void error(std::string_view expected) const {
    if (at_ >= text_.tokens.size())
      fail(owner_, where_, ": the text ends where ", expected, " was expected");
    const std::int32_t t = text_.tokens[at_];
    fail(owner_, where_, ": column ", text_.columns[at_], ": expected ", expected, ", got '",
         tokens_text(std::span(&t, 1)), "'");
  }

  const Tokenized& text_;
  std::string_view owner_, where_;
  std::size_t at_ = 0;
};

}  // namespace

std::string_view operator_text(std::int32_t symbol) {
  if (symbol < kPlus || symbol > kTimes) fail("expression", "symbol ", symbol, " is no operator");
  return kOperators[std::size_t(symbol - kPlus)];
}

std::int32_t operator_symbol(std::string_view op) {
  for (std::size_t k = 0; k < kOperators.size(); ++k)
    if (kOperators[k] == op) return kPlus + std::int32_t(k);
  fail("expression", "unknown operator '", op, "' (expected +, - or *)");
}

std::vector<std::int32_t> expression_tokens(const nlohmann::json& expression) {
  std::vector<std::int32_t> out;
  append_tokens(expression, out);
  return out;
}

std::string tokens_text(std::span<const std::int32_t> tokens) {
  std::string out;
  for (std::int32_t t : tokens) {
    if (t >= 0 && t <= 9)
      out += char('0' + t);
    else if (t >= kPlus && t <= kTimes)
      out += " " + std::string(operator_text(t)) + " ";
    else if (t == kOpen)
      out += '(';
    else if (t == kClose)
      out += ')';
    else
      out += '?';
  }
  return out;
}

Tokenized tokenize(std::string_view text, std::string_view owner, std::string_view where) {
  Tokenized out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::int32_t symbol = -1;
    if (c >= '0' && c <= '9')
      symbol = c - '0';
    else if (c == '+')
      symbol = kPlus;
    else if (c == '-')
      symbol = kMinus;
    else if (c == '*')
      symbol = kTimes;
    else if (c == '(')
      symbol = kOpen;
    else if (c == ')')
      symbol = kClose;
    else if (c == ' ' || c == '\t')
      continue;
    else
      fail(owner, where, ": column ", i + 1, ": unexpected character '",
           (c >= 32 && c < 127) ? std::string(1, c) : "\\x" + std::to_string(int(unsigned(c))),
           "' (expected digits 0-9, + - *, parentheses and spaces)");
    out.tokens.push_back(symbol);
    out.columns.push_back(std::int32_t(i + 1));
  }
  return out;
}

nlohmann::json parse(const Tokenized& text, std::string_view owner, std::string_view where) {
  return Parser(text, owner, where).whole();
}

void check_expression(const nlohmann::json& expression, std::string_view owner,
                      std::string_view where) {
  try {
    (void)expression_sign(expression);
  } catch (const Error& e) {
    const std::string_view what = e.what(), own = "[calculator] ";
    fail(owner, where, ": ", what.starts_with(own) ? what.substr(own.size()) : what);
  }
}

}  // namespace weft::models::expression_tokens
