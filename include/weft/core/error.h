// Weft's error type and the checks that user-facing functions use to reject bad input.
// Messages follow one shape: "[op] what is wrong: lhs [3, 4] vs rhs [5, 2]" — the op in
// brackets, the operands involved, and a hint where a common cause is known.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

namespace detail {
// Messages longer than this are cut (at a character boundary) with a note of how much was
// left out, so an error about a 100 MB input line is still one short line.
inline constexpr std::size_t kMaxErrorMessageBytes = 2048;

inline std::string bounded_message(const std::string& message) {
  if (message.size() <= kMaxErrorMessageBytes) return message;
  std::size_t cut = kMaxErrorMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  std::ostringstream out;
  out << message.substr(0, cut) << "... (" << message.size() - cut << " more bytes)";
  return out.str();
}
}  // namespace detail

// Every error Weft raises on bad input (shapes, dtypes, files, arguments) is a weft::Error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message)
      : std::runtime_error(detail::bounded_message(message)) {}
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
