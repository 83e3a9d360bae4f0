// Weft's error type and the checks that user-facing functions use to reject bad input.
// Messages follow one shape: "[op] what is wrong: lhs [3, 4] vs rhs [5, 2]" — the op in
// brackets, the operands involved, and a hint where a common cause is known.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// Every error Weft raises on bad input (shapes, dtypes, files, arguments) is a weft::Error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Parts>
std::string concat_message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Throws weft::Error("[where] " + parts...).
template <typename... Parts>
[[noreturn]] void fail(std::string_view where, const Parts&... parts) {
  throw Error(detail::concat_message("[", where, "] ", parts...));
}

}  // namespace weft

// Internal invariant for kernels: inputs were validated by the user-facing op, so a failure
// here is a bug in Weft, reported with file and line rather than silently wrong numbers.
#define WEFT_ASSERT(cond)                                                                        \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      throw ::weft::Error(::weft::detail::concat_message("[internal] assertion failed: ", #cond, \
                                                         " at ", __FILE__, ":", __LINE__));      \
  } while (0)
WEFT_API_END
