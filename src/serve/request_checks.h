// Checks the server makes on what a client sends before trusting it (private to the server; the
// public ones are in weft/serve/server.h): which instance a byte of a body belongs to, and a
// secret comparison whose time does not depend on where the strings differ.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::serve::detail {

// The index of the element of the body's top-level "instances" array that holds the byte at
// `offset` (found by parsing the body up to it), or -1 when the byte is outside that array.
long instance_at_offset(std::string_view body, std::size_t offset);

// a == b, in a time that depends only on the lengths.
bool same_secret(std::string_view a, std::string_view b);

}  // namespace weft::serve::detail
