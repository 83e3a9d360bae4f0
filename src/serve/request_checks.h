// Checks the server makes on what a client sends before trusting it (private to the server; the
// public ones are in weft/serve/server.h): which instance a byte of a body belongs to, where a
// control character lies, and a secret comparison whose time does not depend on where the
// strings differ.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::serve::detail {

// The index of the element of the body's top-level "instances" array that holds the byte at
// `offset` (found by parsing the body up to it), or -1 when the byte is outside that array.
long instance_at_offset(std::string_view body, std::size_t offset);

// The offset of the first control character in `text` (C0 but tab, DEL, and with `c1` the
// UTF-8 encoded C1 controls U+0080-U+009F), or npos: what no header value and no path needs,
// and what forges log lines or cuts C strings.
std::size_t first_control_character(std::string_view text, bool c1);

// a == b, in a time that depends only on the lengths.
bool same_secret(std::string_view a, std::string_view b);

}  // namespace weft::serve::detail
