// Settings read from environment variables (WEFT_LIMIT_*, WEFT_CELL_BLOCK_ROWS,
// WEFT_NUM_THREADS): a value is taken whole or refused with an error naming the variable and
// what it expects.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// The integer `variable` holds; nullopt where it is unset or empty. Anything but a whole
// decimal integer from `minimum` to `maximum` fails, naming `where`, the variable, what it must
// be (`expected`, e.g. "a positive integer") and the text it holds (its first 40 characters).
std::optional<std::int64_t> integer_from_environment(
    const char* variable, std::int64_t minimum, std::string_view where, std::string_view expected,
    std::int64_t maximum = std::numeric_limits<std::int64_t>::max());

}  // namespace weft
WEFT_API_END
