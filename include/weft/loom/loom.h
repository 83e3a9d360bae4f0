// The loom's registry: TypeShapes (dtype + per-example shape + optional tag) and the
// operations over them. An operation's body is ordinary code over batched Vars: it receives
// one [B, ...shape] Var per input and returns one per output, and the executor calls it once
// per group of same-operation calls. This is TensorFlow Fold's Loom/LoomOp, natively.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::loom {

// A value type of the loom: two TypeShapes with equal dtype and shape but different tags are
// different types (so, e.g., word vectors and hidden states never mix by accident). A tag names
// one TypeShape: registering one tag with two dtypes or shapes throws, naming both.
struct TypeShape {
  DType dtype = DType::kFloat32;
  Shape shape;  // per example: no batch axis
  std::string tag;

  bool operator==(const TypeShape& other) const = default;
  // "float32 [4]" or "float32 [4] 'hidden'"
  std::string to_string() const;
};

using TypeId = std::uint32_t;
using OpId = std::uint32_t;

// The batched body of an operation: inputs[i] is [B, ...input type i], the result has one
// [B, ...output type k] Var per output.
using OperationBody = std::function<std::vector<Var>(std::span<const Var> inputs)>;

struct OperationOptions {
  // The body receives ONE input: the concatenation of every argument along the feature axis
  // ([B, sum of widths]), gathered straight into that layout with no separate concat. Every
  // input type must then be float32 of rank 1.
  bool concat_inputs = false;
  // Ragged rows: the operation has ONE input type and a call takes one or more values of it, as
  // many as it likes (a reduction over a sequence: Sum as ONE batched call per depth, not
  // log2(n) levels of pairwise adds). The body receives three inputs: the step's values row
  // after row, [total, ...type] (call 0's in the order given, then call 1's, ...);
  // segment_ids, int32 [total] (row r belongs to call segment_ids[r] of the step); counts, int32
  // [B] (each call's number of values). Its outputs have B rows, as any operation's.
  bool ragged_rows = false;
};

struct Operation {
  std::string name;
  std::vector<TypeId> inputs;
  std::vector<TypeId> outputs;
  OperationBody body;
  OperationOptions options;
};

class Loom {
 public:
  // max_depth 0 means unlimited; otherwise a call deeper than it is an error when woven.
  explicit Loom(int max_depth = 0);

  // The id of a type, registering it on first use.
  TypeId add_type(const TypeShape& type);
  // Registers an operation (at least one input and one output, names unique).
  OpId add_operation(std::string name, const std::vector<TypeShape>& inputs,
                     const std::vector<TypeShape>& outputs, OperationBody body,
                     OperationOptions options = {});

  const TypeShape& type(TypeId id) const { return types_.at(id); }
  const Operation& operation(OpId id) const { return operations_.at(id); }
  std::size_t num_types() const { return types_.size(); }
  std::size_t num_operations() const { return operations_.size(); }
  int max_depth() const { return max_depth_; }
  // The id of a registered type; throws naming the type when it is unknown.
  TypeId type_id(const TypeShape& type) const;

 private:
  std::vector<TypeShape> types_;
  std::vector<Operation> operations_;
  int max_depth_;
};

}  // namespace weft::loom
WEFT_API_END
