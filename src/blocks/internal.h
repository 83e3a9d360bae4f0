// Helpers shared by the block implementations (not installed): zero values of a type, tensor
// values read from user data, Python-style indices, and flattening weave values.
#pragma once

#include <string>
#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/blocks/blocks.h"
#include "weft/core/error.h"

namespace weft::blocks::internal {

// The value of Zeros(type) (tensors are memoized per (owner, terminal) within a weave).
WeaveValue zeros_value(WeaveState& state, const detail::BlockImpl* owner, const Type& type);
// Throws unless Zeros(type) exists (no Input, no Broadcast anywhere in it).
void check_zeros_type(const std::string& block, const Type& type);

// Appends the loom values of a tensor nest's terminals, in pre-order.
void flatten_tensors(const WeaveValue& value, std::vector<loom::Value>& out);
// Rebuilds a tensor nest of `type` from consecutive values starting at `next`.
WeaveValue unflatten_tensors(const Type& type, std::span<const loom::Value> values,
                             std::size_t& next);

// i in [-n, n) -> [0, n); throws naming the block and the index otherwise.
std::int64_t python_index(const std::string& block, std::int64_t index, std::int64_t n);
// The positions of x[start:stop:step] on n elements, with Python's meaning.
std::vector<std::int64_t> slice_positions(std::optional<std::int64_t> start,
                                          std::optional<std::int64_t> stop,
                                          std::optional<std::int64_t> step, std::int64_t n);

// The user-data input of a block, or a clear error when the value is not an Input.
const Input& input_of(const std::string& block, const WeaveValue& value);
// The items of a tuple, sequence or Input array as weave values (Input elements are views):
// a copy to transform, or the value's own items shared (O(1)) to read.
// The characters (code points) of UTF-8 text, each as its own string.
std::vector<std::string> utf8_characters(const std::string& text);
// (A string of user data is the sequence of its characters, as Python iterates it: each one
// kept in `state` for the weave.)
WeaveList elements_of(const std::string& block, const WeaveValue& value, WeaveState& state);
WeaveItems shared_elements_of(const std::string& block, const WeaveValue& value, WeaveState& state);

// A value of `type`: when the type is Input (a tuple or sequence of user data is user data) and
// the value was built as a tuple or sequence, its items become one Input array (kept for the
// weave), so that types and values agree.
WeaveValue as_type(WeaveState& state, const Type& type, WeaveValue value);

// `block` unless it is an empty handle; else throws "<Kind>: the <argument> block is empty (a
// default-constructed Block handle)", naming the block being built and the argument.
const Block& required(const Block& block, const std::string& kind, const std::string& argument);

// A Function whose input type comes from composition (Sum's add, Mean's scaling, ...).
Block generic_function(std::string name, FunctionBody body);

}  // namespace weft::blocks::internal
