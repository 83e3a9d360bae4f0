// The input limits and their environment overrides (see weft/io/input_limits.h).
#include "weft/io/input_limits.h"

#include <string>

#include "weft/core/environment.h"
#include "weft/core/error.h"

namespace weft::io {
namespace {

struct LimitField {
  std::string_view name;
  std::string_view variable;
  std::int64_t InputLimits::*member;
};

constexpr LimitField kFields[] = {
    {"max_json_depth", "WEFT_LIMIT_JSON_DEPTH", &InputLimits::max_json_depth},
    {"max_tree_depth", "WEFT_LIMIT_TREE_DEPTH", &InputLimits::max_tree_depth},
    {"max_line_bytes", "WEFT_LIMIT_LINE_BYTES", &InputLimits::max_line_bytes},
    {"max_example_bytes", "WEFT_LIMIT_EXAMPLE_BYTES", &InputLimits::max_example_bytes},
    {"max_molecule_atoms", "WEFT_LIMIT_MOLECULE_ATOMS", &InputLimits::max_molecule_atoms},
    {"max_ring_wildcards", "WEFT_LIMIT_RING_WILDCARDS", &InputLimits::max_ring_wildcards},
    {"max_sentence_chars", "WEFT_LIMIT_SENTENCE_CHARS", &InputLimits::max_sentence_chars},
    {"max_vector_dim", "WEFT_LIMIT_VECTOR_DIM", &InputLimits::max_vector_dim},
    {"max_tensor_elements", "WEFT_LIMIT_TENSOR_ELEMENTS", &InputLimits::max_tensor_elements},
};

InputLimits read_limits() {
  InputLimits limits;
  for (const LimitField& field : kFields)
    if (const auto value = integer_from_environment(std::string(field.variable).c_str(), 1,
                                                    "limits", "a positive integer"))
      limits.*field.member = *value;
  return limits;
}

InputLimits& process_limits() {
  static InputLimits limits = read_limits();
  return limits;
}

}  // namespace

const InputLimits& input_limits() { return process_limits(); }

void set_input_limits(const InputLimits& limits) { process_limits() = limits; }

std::string limit_hint(std::string_view limit) {
  for (const LimitField& field : kFields)
    if (field.name == limit)
      return weft::detail::concat_message("(limit ", field.name, " = ",
                                          input_limits().*field.member, "; raise it with ",
                                          field.variable, ")");
  return weft::detail::concat_message("(limit ", limit, ")");
}

}  // namespace weft::io
