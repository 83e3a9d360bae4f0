// The limits Weft puts on untrusted input: every byte read from a file, a pipe or a socket is
// treated as written by an adversary, so each reader bounds the nesting it recurses into, the
// lines it buffers and the sizes it allocates from, and fails with one line naming the limit.
//
// Each limit has a default that real data sets stay far below and can be raised (or lowered)
// for the whole process with an environment variable, read once at first use:
//
// clang-format off
//   limit                 variable                       default   bounds
//   max_json_depth        WEFT_LIMIT_JSON_DEPTH          256       arrays/objects inside one another
//   max_tree_depth        WEFT_LIMIT_TREE_DEPTH          256       levels of a bracketed (SST) tree
//   max_line_bytes        WEFT_LIMIT_LINE_BYTES          64 MiB    one line of a data file
//   max_example_bytes     WEFT_LIMIT_EXAMPLE_BYTES       1 MiB     one example given to infer/serve
//   max_molecule_atoms    WEFT_LIMIT_MOLECULE_ATOMS      1000      atoms (heavy and explicit H) per molecule
//   max_ring_wildcards    WEFT_LIMIT_RING_WILDCARDS      6         wildcard atoms (*) in rings per molecule
//   max_sentence_chars    WEFT_LIMIT_SENTENCE_CHARS      10000     characters per langid sentence
//   max_vector_dim        WEFT_LIMIT_VECTOR_DIM          100000    values per word vector
//   max_tensor_elements   WEFT_LIMIT_TENSOR_ELEMENTS     2^34      elements of one stored tensor
// clang-format on
//
// (README.md, "Limits on input", lists the same.) A value that is not a positive integer in the
// variable is an error at first use, not a silent default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::io {

struct InputLimits {
  std::int64_t max_json_depth = 256;
  std::int64_t max_tree_depth = 256;
  std::int64_t max_line_bytes = std::int64_t(64) << 20;
  std::int64_t max_example_bytes = std::int64_t(1) << 20;
  std::int64_t max_molecule_atoms = 1000;
  // RDKit kekulizes an aromatic system that holds wildcard atoms by trying subsets of them
  // until one works: an unkekulizable system costs time exponential in its ring wildcards.
  std::int64_t max_ring_wildcards = 6;
  std::int64_t max_sentence_chars = 10000;
  std::int64_t max_vector_dim = 100000;
  std::int64_t max_tensor_elements = std::int64_t(1) << 34;
};

// The process's limits: the defaults above, each overridden by its WEFT_LIMIT_* variable.
// Throws weft::Error naming the variable when one holds something other than a positive integer.
const InputLimits& input_limits();

// Replaces the process's limits (a program embedding Weft may set its own; tests use it to
// reach a limit with small inputs). Call it before other threads read input.
void set_input_limits(const InputLimits& limits);

// "... (limit max_json_depth = 256; raise it with WEFT_LIMIT_JSON_DEPTH)": the tail every
// limit error ends with, so a user who has a legitimate large input knows what to set.
std::string limit_hint(std::string_view limit);

}  // namespace weft::io
WEFT_API_END
