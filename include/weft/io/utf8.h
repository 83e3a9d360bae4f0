// UTF-8 validation for text read from untrusted sources: a reader that keeps text (a word, a
// sentence) refuses bytes that are not UTF-8 instead of passing them on to vocabularies, JSON
// output and error messages.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

// The byte offset of the first byte that does not start or continue a well-formed UTF-8
// character (overlong forms, surrogates and code points past U+10FFFF included), or nothing.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

}  // namespace weft::io
WEFT_API_END
