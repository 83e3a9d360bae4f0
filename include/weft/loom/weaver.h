// The weaver records, for one example or many, the small DAG the loom will batch: constants,
// parameters, rows of fed batch tensors (all at depth 0) and calls of operations on earlier
// values (depth 1 + the deepest argument). Recording is a few appends to flat arrays, so
// weaving runs at millions of nodes per second. Weavers built independently (one per
// example, on several threads) merge with append(), keeping output order.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <unordered_map>
#include <vector>

#include "weft/core/export.h"
#include "weft/loom/loom.h"

WEFT_API_BEGIN
namespace weft::loom {

using Value = std::uint32_t;

// kImported: a value an earlier run on the same tape computed (Executor::import), so a weave can
// continue from another's results without re-weaving them (the flow layer's steps).
enum class ValueKind : std::uint8_t { kConstant, kParameter, kBatchInput, kCallOutput, kImported };

class Weaver {
 public:
  explicit Weaver(const Loom& loom);

  // A constant of the given type (value's shape must be the type's per-example shape).
  Value constant(TypeId type, const Tensor& value);
  // A constant from raw values (exactly the type's number of elements, of its dtype): the
  // fast path for weaving, with no tensor made per value.
  Value constant(TypeId type, std::span<const float> values);
  Value constant(TypeId type, std::span<const std::int32_t> values);
  Value constant(TypeId type, std::span<const double> values);
  Value constant(TypeId type, std::span<const std::int64_t> values);
  // bool values as bytes, each 0 or 1 (std::vector<bool> has no contiguous storage).
  Value bool_constant(TypeId type, std::span<const std::uint8_t> values);
  // A parameter / shared tensor whose shape is the type's shape; differentiable. Used any
  // number of times, it is one row of the type's value buffer.
  Value parameter(TypeId type, const Parameter& parameter);
  // Row `row` of the batch tensor fed for this type at run time; differentiable.
  Value batch_input(TypeId type, std::int64_t row);
  // Entry `slot` of the locations handed to Executor::import before the run; differentiable.
  Value imported(TypeId type, std::uint32_t slot);
  // Calls an operation; returns its output values (valid until the next call). A ragged_rows
  // operation (loom.h) takes one or more values of its input type.
  std::span<const Value> call(OpId op, std::span<const Value> args);
  std::span<const Value> call(OpId op, std::initializer_list<Value> args) {
    return call(op, std::span<const Value>(args.begin(), args.size()));
  }
  // Marks a value as an output; outputs are returned per type, in the order added.
  void add_output(Value value);

  // Appends another weaver's recording (of the same loom): its values are renumbered after
  // ours, its outputs follow ours, shared parameters stay one row. Returns the offset added
  // to the other weaver's value ids.
  Value append(const Weaver& other);
  // Forgets everything recorded, keeping the buffers: a weaver reused weave after weave
  // allocates nothing once its buffers have grown.
  void clear();

  const Loom& loom() const { return *loom_; }
  std::size_t num_values() const { return values_.size(); }
  std::size_t num_calls() const { return calls_.size(); }
  int depth(Value value) const { return int(info(value).depth); }
  TypeId type_of(Value value) const { return info(value).type; }
  ValueKind kind_of(Value value) const { return info(value).kind; }
  int deepest() const { return deepest_; }
  std::span<const Value> outputs() const { return outputs_; }

  // For the scheduler and executor ---------------------------------------------------
  struct ValueInfo {
    TypeId type;
    std::uint32_t depth;
    ValueKind kind;
    std::uint32_t index;  // constant row, parameter slot, batch row, or call index
  };
  struct CallInfo {
    OpId op;
    std::uint32_t depth;
    std::uint32_t first_arg;     // into args()
    std::uint32_t first_output;  // value id of output 0; outputs are consecutive
    std::uint32_t num_args;      // the operation's inputs, or a ragged_rows call's values
  };
  // Inline: the scheduler and the batch plan ask it of every value and argument each run.
  const ValueInfo& info(Value value) const {
    if (value >= values_.size()) [[unlikely]]
      missing_value(value);
    return values_[value];
  }
  std::span<const CallInfo> calls() const { return calls_; }
  std::span<const Value> args() const { return args_; }
  std::span<const Value> call_args(std::uint32_t call) const;
  std::span<const Parameter> parameters() const { return parameters_; }
  // The raw bytes of every constant of a type (in its dtype), row after row.
  std::span<const unsigned char> constant_bytes(TypeId type) const;
  std::int64_t constant_rows(TypeId type) const;

 private:
  struct Constants {
    std::vector<unsigned char> bytes;
    std::uint32_t rows = 0;
  };
  Value add_value(TypeId type, std::uint32_t depth, ValueKind kind, std::uint32_t index);
  void check_type(TypeId type, const char* what) const;
  [[noreturn]] void missing_value(Value value) const;
  unsigned char* new_constant_row(TypeId type);
  Value raw_constant(TypeId type, DType dtype, const void* values, std::size_t count);
  std::uint32_t parameter_slot(const Parameter& parameter);

  const Loom* loom_;
  std::vector<ValueInfo> values_;
  std::vector<CallInfo> calls_;
  std::vector<Value> args_;
  std::vector<Value> outputs_;
  std::vector<Parameter> parameters_;
  std::vector<Constants> constants_;  // per type
  std::unordered_map<const void*, std::uint32_t> parameter_slots_;
  std::vector<Value> call_outputs_;
  int deepest_ = 0;
};

}  // namespace weft::loom
WEFT_API_END
