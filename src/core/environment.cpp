// Integers from environment variables (weft/core/environment.h).
#include "weft/core/environment.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "weft/core/error.h"

namespace weft {

std::optional<std::int64_t> integer_from_environment(const char* variable, std::int64_t minimum,
                                                     std::string_view where,
                                                     std::string_view expected,
                                                     std::int64_t maximum) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string_view held(text);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(held.data(), held.data() + held.size(), value);
  if (error != std::errc() || end != held.data() + held.size() || value < minimum ||
      value > maximum)
    fail(where, variable, " must be ", expected, ", got '", held.substr(0, 40), "'");
  return value;
}

}  // namespace weft
