// The loom registry: types and operations, validated when registered.
#include "weft/loom/loom.h"

#include "weft/core/error.h"

namespace weft::loom {

std::string TypeShape::to_string() const {
  std::string out = std::string(dtype_name(dtype)) + " " + shape.to_string();
  if (!tag.empty()) out += " '" + tag + "'";
  return out;
}

Loom::Loom(int max_depth) : max_depth_(max_depth) {
  if (max_depth < 0) fail("loom", "max_depth must be 0 (unlimited) or positive, got ", max_depth);
}

TypeId Loom::add_type(const TypeShape& type) {
  for (TypeId id = 0; id < types_.size(); ++id) {
    if (types_[id] == type) return id;
    // A tag names one TypeShape (as the original: tags are unique within a Loom).
    if (!type.tag.empty() && types_[id].tag == type.tag)
      fail("loom", "tag '", type.tag, "' already names type ", types_[id].to_string(),
           "; it cannot also name ", type.to_string());
  }
  types_.push_back(type);
  return TypeId(types_.size() - 1);
}

TypeId Loom::type_id(const TypeShape& type) const {
  for (TypeId id = 0; id < types_.size(); ++id)
    if (types_[id] == type) return id;
  fail("loom", "type ", type.to_string(), " is not registered with this loom");
}

OpId Loom::add_operation(std::string name, const std::vector<TypeShape>& inputs,
                         const std::vector<TypeShape>& outputs, OperationBody body,
                         OperationOptions options) {
  if (inputs.empty() || outputs.empty())
    fail("loom", "operation '", name, "' needs at least one input and one output, got ",
         inputs.size(), " and ", outputs.size());
  if (!body) fail("loom", "operation '", name, "' has no body");
  for (const Operation& existing : operations_)
    if (existing.name == name) fail("loom", "an operation named '", name, "' already exists");
  if (options.ragged_rows && (inputs.size() != 1 || options.concat_inputs))
    fail("loom", "operation '", name, "' takes ragged rows, so it has exactly one input type ",
         "(a call passes any number of values of it) and no concat_inputs; got ", inputs.size(),
         " input types", options.concat_inputs ? " and concat_inputs" : "");
  if (options.concat_inputs)
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dtype != inputs[0].dtype || inputs[i].shape.rank() != 1)
        fail("loom", "operation '", name, "' concatenates its inputs, so each must be of rank 1 ",
             "and of one dtype, but input ", i, " is ", inputs[i].to_string(), " and input 0 ",
             inputs[0].to_string());
  Operation op{std::move(name), {}, {}, std::move(body), options};
  for (const TypeShape& t : inputs) op.inputs.push_back(add_type(t));
  for (const TypeShape& t : outputs) op.outputs.push_back(add_type(t));
  operations_.push_back(std::move(op));
  return OpId(operations_.size() - 1);
}

}  // namespace weft::loom
