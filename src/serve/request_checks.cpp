// What the server checks in a request body before parsing it (nesting depth, UTF-8), where a
// bad byte falls, addresses and secrets: small scans, none of them recursive.
#include "request_checks.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/serve/server.h"

namespace weft::serve {

namespace {

template <typename Open, typename Close>
int scan_depth(std::string_view text, int limit, bool json_strings, Open open, Close close) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (json_strings && c == '"') {
      in_string = true;
    } else if (open(c)) {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if (close(c)) {
      --depth;
    }
  }
  return deepest;
}

// Counts the elements of the top-level "instances" array as a SAX parse meets them.
class InstanceCounter : public nlohmann::json_sax<nlohmann::json> {
 public:
  // The element a parse that stopped here was in: a new one when it stopped between elements.
  long current() const {
    return depth_ == array_depth_                      ? count_
           : depth_ > array_depth_ && array_depth_ > 0 ? count_ - 1
                                                       : -1;
  }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& key) override {
    instances_key_ = depth_ == 1 && key == "instances";
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool value() {
    if (depth_ == array_depth_) ++count_;
    return true;
  }
  bool open(bool array) {
    value();
    ++depth_;
    if (array && depth_ == 2 && instances_key_ && array_depth_ < 0) array_depth_ = 2;
    instances_key_ = false;
    return true;
  }
  bool close() {
    if (depth_ == array_depth_) array_depth_ = -2;  // the array ended: later bytes are outside
    --depth_;
    return true;
  }

  int depth_ = 0, array_depth_ = -1;
  long count_ = 0;
  bool instances_key_ = false;
};

}  // namespace

int json_nesting_depth(std::string_view text, int limit) {
  return scan_depth(
      text, limit, true, [](char c) { return c == '[' || c == '{'; },
      [](char c) { return c == ']' || c == '}'; });
}

int bracket_depth(std::string_view text, int limit) {
  return scan_depth(
      text, limit, false, [](char c) { return c == '(' || c == '[' || c == '{'; },
      [](char c) { return c == ')' || c == ']' || c == '}'; });
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

namespace detail {

long instance_at_offset(std::string_view body, std::size_t offset) {
  InstanceCounter counter;
  const std::string_view prefix = body.substr(0, std::min(offset, body.size()));
  nlohmann::json::sax_parse(prefix.begin(), prefix.end(), &counter);  // iterative, no recursion
  return counter.current();
}

std::size_t first_control_character(std::string_view text, bool c1) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7F) return i;
    if (c1 && c == 0xC2 && i + 1 < text.size() &&
        (static_cast<unsigned char>(text[i + 1]) & 0xE0) == 0x80)
      return i;
  }
  return std::string_view::npos;
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned difference = a.size() == b.size() ? 0u : 1u;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0u;
    const unsigned y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0u;
    difference |= x ^ y;
  }
  return difference == 0;
}

}  // namespace detail
}  // namespace weft::serve
