// Enums with names (command-line options, settings, checkpoints), each written once as an
// X-macro list of (enumerator, "name") pairs, as kernels.def lists the kernels:
//
//   #define WEFT_ACTIVATIONS(X) X(kNone, "none") X(kRelu, "relu") X(kTanh, "tanh")
//   enum class Activation { WEFT_ACTIVATIONS(WEFT_ENUMERATOR) };
//   WEFT_ENUM_NAMES(Activation, WEFT_ACTIVATIONS, activation_name, parse_activation,
//                   "activation", "activation")
//
// declares the enum and its names together, so a value cannot go without its name, and defines
// activation_name(value) and parse_activation(text), which fails with "[activation] unknown
// activation 'x'; expected none, relu or tanh" (listed from the table, so the message cannot
// drift from the enum). enum_name(value), parse_enum<Activation>(where, what, text) and
// enum_names<Activation>() do the same for any such enum.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/error.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

template <typename Enum>
struct NamedValue {
  Enum value;
  std::string_view name;
};

// X-macro helpers: an enumerator in the enum's definition, a row of its name table.
#define WEFT_ENUMERATOR(enumerator, name) enumerator,
#define WEFT_NAMED_VALUE(enumerator, name) {weft_enum::enumerator, name},
// Defines weft_enum_names(Enum), the table, next to the enum (found by argument-dependent
// look-up from enum_name and parse_enum).
#define WEFT_ENUM_TABLE(Enum, LIST)                                           \
  constexpr auto weft_enum_names(Enum) {                                      \
    using weft_enum = Enum;                                                   \
    return std::to_array<::weft::NamedValue<Enum>>({LIST(WEFT_NAMED_VALUE)}); \
  }
// The table and the enum's name and parse functions over it.
#define WEFT_ENUM_NAMES(Enum, LIST, name_function, parse_function, where, what)             \
  WEFT_ENUM_TABLE(Enum, LIST)                                                               \
  constexpr std::string_view name_function(Enum value) { return ::weft::enum_name(value); } \
  inline Enum parse_function(std::string_view name) {                                       \
    return ::weft::parse_enum<Enum>(where, what, name);                                     \
  }

template <typename Enum>
constexpr std::string_view enum_name(Enum value) {
  for (const NamedValue<Enum>& named : weft_enum_names(value)) {
    if (named.value == value) return named.name;
  }
  return "?";  // a value cast from a number outside the list
}

template <typename Enum>
std::vector<std::string> enum_names() {
  std::vector<std::string> names;
  for (const NamedValue<Enum>& named : weft_enum_names(Enum{})) names.emplace_back(named.name);
  return names;
}

template <typename Enum>
Enum parse_enum(std::string_view where, std::string_view what, std::string_view name) {
  std::string expected;
  const auto table = weft_enum_names(Enum{});
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (name == table[i].name) return table[i].value;
    expected += i == 0 ? "" : (i + 1 == table.size() ? " or " : ", ");
    expected += table[i].name;
  }
  fail(where, "unknown ", what, " '", name, "'; expected ", expected);
}

}  // namespace weft
WEFT_API_END
