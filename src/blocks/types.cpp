// Block types: one immutable node per type, compared structurally.
#include "weft/blocks/types.h"

#include <ostream>
#include <sstream>

#include "weft/core/error.h"

namespace weft::blocks {

struct Type::Node {
  Kind kind = Kind::kVoid;
  Shape shape;
  DType dtype = DType::kFloat32;
  std::vector<Type> items;  // tuple items, or the one element of a sequence / broadcast
};

namespace {
std::shared_ptr<const Type::Node> void_node() {
  static const auto node = std::make_shared<const Type::Node>();
  return node;
}
}  // namespace

Type::Type() : node_(void_node()) {}

Type Type::tensor(const Shape& shape, DType dtype) {
  for (std::int64_t d : shape.dims())
    if (d < 0) fail("blocks", "a tensor type needs non-negative extents, got ", shape);
  auto node = std::make_shared<Node>();
  node->kind = Kind::kTensor;
  node->shape = shape;
  node->dtype = dtype;
  return Type(std::move(node));
}

Type Type::tuple(std::vector<Type> items) {
  // A (non-empty) tuple of user values is a user value, as the original canonicalizes tuples
  // of PyObjectType; the empty tuple stays a type of its own.
  bool all_input = !items.empty();
  for (const Type& item : items) all_input = all_input && item.is_input();
  if (all_input) return input();
  auto node = std::make_shared<Node>();
  node->kind = Kind::kTuple;
  node->items = std::move(items);
  return Type(std::move(node));
}

Type Type::sequence(const Type& element) {
  if (element.is_input()) return element;  // a sequence of user values is a user value
  auto node = std::make_shared<Node>();
  node->kind = Kind::kSequence;
  node->items = {element};
  return Type(std::move(node));
}

Type Type::broadcast(const Type& element) {
  auto node = std::make_shared<Node>();
  node->kind = Kind::kBroadcast;
  node->items = {element};
  return Type(std::move(node));
}

Type Type::void_type() { return Type(); }

Type Type::input() {
  static const auto node = [] {
    auto n = std::make_shared<Node>();
    n->kind = Kind::kInput;
    return std::shared_ptr<const Node>(std::move(n));
  }();
  return Type(node);
}

Type::Kind Type::kind() const { return node_->kind; }

const Shape& Type::shape() const {
  if (!is_tensor()) fail("blocks", "type ", to_string(), " is not a tensor type (no shape)");
  return node_->shape;
}

DType Type::dtype() const {
  if (!is_tensor()) fail("blocks", "type ", to_string(), " is not a tensor type (no dtype)");
  return node_->dtype;
}

const std::vector<Type>& Type::items() const {
  if (!is_tuple()) fail("blocks", "type ", to_string(), " is not a tuple type (no items)");
  return node_->items;
}

const Type& Type::element() const {
  if (!is_sequence_like()) fail("blocks", "type ", to_string(), " is not a sequence type");
  return node_->items[0];
}

bool Type::is_tensor_nest() const {
  if (is_tensor()) return true;
  if (!is_tuple()) return false;
  for (const Type& item : node_->items)
    if (!item.is_tensor_nest()) return false;
  return true;
}

namespace {
void collect_terminals(const Type& type, std::vector<Type>& out) {
  if (type.is_tensor() || type.is_input()) {
    out.push_back(type);
  } else if (type.is_tuple()) {
    for (const Type& item : type.items()) collect_terminals(item, out);
  } else if (type.is_sequence_like()) {
    collect_terminals(type.element(), out);
  }
}
}  // namespace

std::vector<Type> Type::terminals() const {
  std::vector<Type> out;
  collect_terminals(*this, out);
  return out;
}

loom::TypeShape Type::type_shape() const { return loom::TypeShape{dtype(), shape(), ""}; }

std::string Type::to_string() const {
  std::ostringstream out;
  switch (kind()) {
    case Kind::kTensor:
      out << "Tensor(" << node_->shape << ", " << dtype_name(node_->dtype) << ")";
      break;
    case Kind::kTuple: {
      out << "Tuple(";
      for (std::size_t i = 0; i < node_->items.size(); ++i)
        out << (i ? ", " : "") << node_->items[i].to_string();
      out << ")";
      break;
    }
    case Kind::kSequence:
      out << "Sequence(" << node_->items[0].to_string() << ")";
      break;
    case Kind::kBroadcast:
      out << "Broadcast(" << node_->items[0].to_string() << ")";
      break;
    case Kind::kVoid:
      out << "Void";
      break;
    case Kind::kInput:
      out << "Input";
      break;
  }
  return out.str();
}

bool Type::operator==(const Type& other) const {
  if (node_ == other.node_) return true;
  if (kind() != other.kind()) return false;
  if (is_tensor()) return node_->shape == other.node_->shape && node_->dtype == other.node_->dtype;
  return node_->items == other.node_->items;
}

std::ostream& operator<<(std::ostream& out, const Type& type) { return out << type.to_string(); }

}  // namespace weft::blocks
