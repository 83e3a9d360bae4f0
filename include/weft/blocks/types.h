// The types of the blocks library: what a block takes and gives. Tensor (per-example shape and
// dtype, no batch axis), Tuple (fixed, heterogeneous), Sequence (variable length), Broadcast
// (one value repeated without end, made by Broadcast), Void (nothing) and Input (a dynamic
// JSON-like value: the user's data, nlohmann::json). Types are immutable values compared
// structurally; their text ("Sequence(Tensor([3], float32))") names them in every error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/loom/loom.h"

WEFT_API_BEGIN
namespace weft::blocks {

// User data as it reaches a model: numbers, strings, arrays, objects, null. User C++ types
// enter through nlohmann's to_json (define `void to_json(Input&, const MyType&)`), or through
// an InputTransform block.
using Input = nlohmann::json;

class Type {
 public:
  enum class Kind { kTensor, kTuple, kSequence, kBroadcast, kVoid, kInput };

  // Void by default.
  Type();
  static Type tensor(const Shape& shape, DType dtype = DType::kFloat32);
  static Type scalar(DType dtype = DType::kFloat32) { return tensor(Shape{}, dtype); }
  static Type vector(std::int64_t size, DType dtype = DType::kFloat32) {
    return tensor(Shape{size}, dtype);
  }
  // A non-empty tuple whose items are all Input is Input (the original's canonical types); the
  // empty tuple Tuple() is a type like any other.
  static Type tuple(std::vector<Type> items);
  // A Sequence of Input is Input (as the original canonicalizes sequences of Python objects):
  // so Map(Scalar()) takes Input, and Map(InputTransform(f)) gives Input.
  static Type sequence(const Type& element);
  static Type broadcast(const Type& element);
  static Type void_type();
  static Type input();

  Kind kind() const;
  bool is_tensor() const { return kind() == Kind::kTensor; }
  bool is_tuple() const { return kind() == Kind::kTuple; }
  bool is_void() const { return kind() == Kind::kVoid; }
  bool is_input() const { return kind() == Kind::kInput; }
  // Sequence or Broadcast.
  bool is_sequence_like() const { return kind() == Kind::kSequence || kind() == Kind::kBroadcast; }

  // Tensor: its per-example shape and dtype.
  const Shape& shape() const;
  DType dtype() const;
  // Tuple: its items.
  const std::vector<Type>& items() const;
  // Sequence / Broadcast: the element type.
  const Type& element() const;

  // True for a tensor or a tuple (nested) of tensors only.
  bool is_tensor_nest() const;
  // The terminal types in pre-order: tensors and Input (user data is terminal, as in the
  // original); a sequence contributes its element's terminals, Void none. For a tensor nest,
  // what a Function's loom op takes.
  std::vector<Type> terminals() const;
  // The total number of elements of a value of this type (the original's `size`): a tensor's
  // element count, a tuple's sum, 0 for Void; nullopt (unsized) when it holds a Sequence,
  // Broadcast or Input anywhere.
  std::optional<std::int64_t> size() const;
  // The loom type of a tensor type.
  loom::TypeShape type_shape() const;

  // "Tensor([3], float32)", "Tuple(Tensor([], int32), Input)", "Sequence(...)",
  // "Broadcast(...)", "Void", "Input".
  std::string to_string() const;
  bool operator==(const Type& other) const;
  bool operator!=(const Type& other) const { return !(*this == other); }
  // Identifies the type object (copies share it), for caches.
  const void* identity() const { return node_.get(); }

  struct Node;  // the shared representation (types.cpp)

 private:
  explicit Type(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

std::ostream& operator<<(std::ostream& out, const Type& type);

}  // namespace weft::blocks
WEFT_API_END
