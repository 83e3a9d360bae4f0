// Parsing an enum from its name (command-line options, settings): one loop over the values,
// and an error that lists the accepted names from the values themselves, so the message
// cannot drift from the enum: "[where] unknown strategy 'x'; expected a, b or c".
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "weft/core/error.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

template <typename Enum, typename NameOf>
Enum parse_named(std::string_view where, std::string_view what, std::string_view name,
                 std::initializer_list<Enum> values, NameOf name_of) {
  std::string expected;
  std::size_t i = 0;
  for (Enum value : values) {
    if (name == name_of(value)) return value;
    expected += i == 0 ? "" : (i + 1 == values.size() ? " or " : ", ");
    expected += name_of(value);
    ++i;
  }
  fail(where, "unknown ", what, " '", name, "'; expected ", expected);
}

}  // namespace weft
WEFT_API_END
