// Type utilities: a type's size, and flattening / unflattening values by type (the original's
// ResultType.size, flatten and unflatten).
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"

namespace weft::blocks {

std::optional<std::int64_t> Type::size() const {
  switch (kind()) {
    case Kind::kTensor:
      return shape().numel();
    case Kind::kTuple: {
      std::int64_t total = 0;
      for (const Type& item : items()) {
        auto n = item.size();
        if (!n) return std::nullopt;
        total += *n;
      }
      return total;
    }
    case Kind::kVoid:
      return 0;
    default:
      return std::nullopt;
  }
}

namespace {

void flatten_into(const Type& type, const EvalValue& value, std::vector<EvalValue>& out) {
  auto expect = [&](Type::Kind kind) {
    if (value.kind != kind)
      fail("blocks", "flatten: the value does not have the type ", type.to_string());
  };
  switch (type.kind()) {
    case Type::Kind::kTensor:
      expect(Type::Kind::kTensor);
      if (value.tensor.shape() != type.shape() || value.tensor.dtype() != type.dtype())
        fail("blocks", "flatten: a tensor of shape ", value.tensor.shape(), " and dtype ",
             dtype_name(value.tensor.dtype()), " is not a ", type.to_string());
      out.push_back(value);
      return;
    case Type::Kind::kInput:
      expect(Type::Kind::kInput);
      out.push_back(value);
      return;
    case Type::Kind::kTuple:
      expect(Type::Kind::kTuple);
      if (value.items.size() != type.items().size())
        fail("blocks", "flatten: a tuple of ", value.items.size(), " items is not a ",
             type.to_string());
      for (std::size_t i = 0; i < value.items.size(); ++i)
        flatten_into(type.items()[i], value.items[i], out);
      return;
    case Type::Kind::kSequence:
    case Type::Kind::kBroadcast:
      if (value.kind != Type::Kind::kSequence && value.kind != Type::Kind::kBroadcast)
        fail("blocks", "flatten: the value does not have the type ", type.to_string());
      for (const EvalValue& element : value.items) flatten_into(type.element(), element, out);
      return;
    case Type::Kind::kVoid:
      return;
  }
}

EvalValue unflatten_from(const Type& type, std::span<const EvalValue> terminals, std::size_t& next,
                         const EvalValue* like) {
  auto take = [&]() -> const EvalValue& {
    if (next >= terminals.size())
      fail("blocks", "unflatten: too few terminals (", terminals.size(), ") for ",
           type.to_string());
    return terminals[next++];
  };
  EvalValue out;
  out.kind = type.kind();
  switch (type.kind()) {
    case Type::Kind::kTensor: {
      const EvalValue& t = take();
      if (t.kind != Type::Kind::kTensor || t.tensor.shape() != type.shape() ||
          t.tensor.dtype() != type.dtype())
        fail("blocks", "unflatten: terminal ", next - 1, " is not a ", type.to_string());
      return t;
    }
    case Type::Kind::kInput: {
      const EvalValue& t = take();
      if (t.kind != Type::Kind::kInput)
        fail("blocks", "unflatten: terminal ", next - 1, " is not Input");
      return t;
    }
    case Type::Kind::kTuple:
      for (std::size_t i = 0; i < type.items().size(); ++i)
        out.items.push_back(
            unflatten_from(type.items()[i], terminals, next,
                           like && i < like->items.size() ? &like->items[i] : nullptr));
      return out;
    case Type::Kind::kSequence:
    case Type::Kind::kBroadcast:
      if (!like)
        fail("blocks", "unflatten: ", type.to_string(),
             " holds a sequence: pass a value shaped like the result");
      for (const EvalValue& element : like->items)
        out.items.push_back(unflatten_from(type.element(), terminals, next, &element));
      return out;
    case Type::Kind::kVoid:
      return out;
  }
  return out;
}

}  // namespace

std::vector<EvalValue> flatten(const Type& type, const EvalValue& value) {
  std::vector<EvalValue> out;
  flatten_into(type, value, out);
  return out;
}

EvalValue unflatten(const Type& type, std::span<const EvalValue> terminals,
                    const EvalValue* shaped_like) {
  std::size_t next = 0;
  EvalValue out = unflatten_from(type, terminals, next, shaped_like);
  if (next != terminals.size())
    fail("blocks", "unflatten: ", terminals.size() - next, " terminal(s) left over for ",
         type.to_string());
  return out;
}

}  // namespace weft::blocks
