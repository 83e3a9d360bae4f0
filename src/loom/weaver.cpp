// Recording a weave: values and calls appended to flat arrays, arguments type-checked at
// the call, depths computed on the fly, and weaves merged by renumbering.
#include "weft/loom/weaver.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "weft/core/error.h"

namespace weft::loom {

Weaver::Weaver(const Loom& loom) : loom_(&loom), constants_(loom.num_types()) {}

void Weaver::missing_value(Value value) const {
  fail("weaver", "value ", value, " does not exist (this weaver has ", values_.size(), " values)");
}

void Weaver::check_type(TypeId type, const char* what) const {
  if (type >= loom_->num_types())
    fail("weaver", what, ": type id ", type, " is not registered (the loom has ",
         loom_->num_types(), " types)");
}

Value Weaver::add_value(TypeId type, std::uint32_t depth, ValueKind kind, std::uint32_t index) {
  values_.push_back(ValueInfo{type, depth, kind, index});
  return Value(values_.size() - 1);
}

Value Weaver::raw_constant(TypeId type, DType dtype, const void* values, std::size_t count) {
  check_type(type, "constant");
  const TypeShape& ts = loom_->type(type);
  if (ts.dtype != dtype || std::int64_t(count) != ts.shape.numel())
    fail("weaver", "constant of ", count, " ", dtype_name(dtype), " values does not match type ",
         ts.to_string());
  std::memcpy(new_constant_row(type), values, count * dtype_size(dtype));
  return add_value(type, 0, ValueKind::kConstant, constants_[type].rows - 1);
}

Value Weaver::constant(TypeId type, std::span<const float> values) {
  return raw_constant(type, DType::kFloat32, values.data(), values.size());
}

Value Weaver::constant(TypeId type, std::span<const std::int32_t> values) {
  return raw_constant(type, DType::kInt32, values.data(), values.size());
}

Value Weaver::constant(TypeId type, std::span<const double> values) {
  return raw_constant(type, DType::kFloat64, values.data(), values.size());
}

Value Weaver::constant(TypeId type, std::span<const std::int64_t> values) {
  return raw_constant(type, DType::kInt64, values.data(), values.size());
}

Value Weaver::bool_constant(TypeId type, std::span<const std::uint8_t> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] > 1)
      fail("weaver", "bool constant value ", int(values[i]), " at ", i, " is neither 0 nor 1");
  return raw_constant(type, DType::kBool, values.data(), values.size());
}

Value Weaver::constant(TypeId type, const Tensor& value) {
  check_type(type, "constant");
  const TypeShape& ts = loom_->type(type);
  if (value.dtype() != ts.dtype || value.shape() != ts.shape)
    fail("weaver", "constant ", value.describe(), " does not match type ", ts.to_string());
  Tensor host = value.to(Device::kCpu);
  std::memcpy(new_constant_row(type), host.raw_data(), host.nbytes());
  return add_value(type, 0, ValueKind::kConstant, constants_[type].rows - 1);
}

Value Weaver::parameter(TypeId type, const Parameter& parameter) {
  check_type(type, "parameter");
  const TypeShape& ts = loom_->type(type);
  if (!parameter.defined() || ts.dtype != DType::kFloat32 || parameter.shape() != ts.shape)
    fail("weaver", "parameter '", parameter.defined() ? parameter.name() : "<undefined>", "' ",
         parameter.defined() ? parameter.value().describe() : "", " does not match type ",
         ts.to_string());
  return add_value(type, 0, ValueKind::kParameter, parameter_slot(parameter));
}

Value Weaver::batch_input(TypeId type, std::int64_t row) {
  check_type(type, "batch_input");
  if (row < 0 || row > std::int64_t(UINT32_MAX))
    fail("weaver", "batch_input row ", row, " is out of range");
  return add_value(type, 0, ValueKind::kBatchInput, std::uint32_t(row));
}

Value Weaver::imported(TypeId type, std::uint32_t slot) {
  check_type(type, "imported");
  return add_value(type, 0, ValueKind::kImported, slot);
}

void Weaver::clear() {
  values_.clear();
  calls_.clear();
  args_.clear();
  outputs_.clear();
  parameters_.clear();
  parameter_slots_.clear();
  for (Constants& c : constants_) {
    c.bytes.clear();
    c.rows = 0;
  }
  deepest_ = 0;
}

std::span<const Value> Weaver::call(OpId op_id, std::span<const Value> args) {
  if (op_id >= loom_->num_operations())
    fail("weaver", "operation id ", op_id, " is not registered (the loom has ",
         loom_->num_operations(), " operations)");
  const Operation& op = loom_->operation(op_id);
  const bool ragged = op.options.ragged_rows;
  if (ragged ? args.empty() : args.size() != op.inputs.size())
    fail("weaver", "operation '", op.name, "' takes ",
         ragged ? "one or more (ragged rows)" : std::to_string(op.inputs.size()),
         " arguments, got ", args.size());
  std::uint32_t deepest_arg = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ValueInfo& arg = info(args[i]);
    const TypeId expected = op.inputs[ragged ? 0 : i];
    if (arg.type != expected)
      fail("weaver", "operation '", op.name, "' argument ", i, " expects ",
           loom_->type(expected).to_string(), " but got ", loom_->type(arg.type).to_string());
    deepest_arg = std::max(deepest_arg, arg.depth);
  }
  const std::uint32_t depth = deepest_arg + 1;
  if (loom_->max_depth() > 0 && int(depth) > loom_->max_depth())
    fail("weaver", "maximum depth ", loom_->max_depth(), " exceeded by a call of '", op.name,
         "' (its deepest argument is at depth ", deepest_arg, ")");
  const std::uint32_t call_id = std::uint32_t(calls_.size());
  calls_.push_back(CallInfo{op_id, depth, std::uint32_t(args_.size()),
                            std::uint32_t(values_.size()), std::uint32_t(args.size())});
  args_.insert(args_.end(), args.begin(), args.end());
  for (TypeId out : op.outputs) add_value(out, depth, ValueKind::kCallOutput, call_id);
  deepest_ = std::max(deepest_, int(depth));
  call_outputs_.resize(op.outputs.size());
  for (std::size_t k = 0; k < call_outputs_.size(); ++k)
    call_outputs_[k] = calls_.back().first_output + Value(k);
  return call_outputs_;
}

std::uint32_t Weaver::parameter_slot(const Parameter& parameter) {
  auto [it, inserted] =
      parameter_slots_.try_emplace(parameter.identity(), std::uint32_t(parameters_.size()));
  if (inserted) parameters_.push_back(parameter);
  return it->second;
}

void Weaver::add_output(Value value) {
  info(value);  // validates the id
  outputs_.push_back(value);
}

std::span<const Value> Weaver::call_args(std::uint32_t call) const {
  const CallInfo& c = calls_[call];
  return std::span<const Value>(args_).subspan(c.first_arg, c.num_args);
}

unsigned char* Weaver::new_constant_row(TypeId type) {
  if (constants_.size() < loom_->num_types()) constants_.resize(loom_->num_types());
  Constants& c = constants_[type];
  const TypeShape& ts = loom_->type(type);
  const std::size_t start = c.bytes.size();
  c.bytes.resize(start + std::size_t(ts.shape.numel()) * dtype_size(ts.dtype));
  ++c.rows;
  return c.bytes.data() + start;
}

std::span<const unsigned char> Weaver::constant_bytes(TypeId type) const {
  if (type >= constants_.size()) return {};
  return constants_[type].bytes;
}

std::int64_t Weaver::constant_rows(TypeId type) const {
  return type < constants_.size() ? constants_[type].rows : 0;
}

}  // namespace weft::loom

namespace weft::loom {

Value Weaver::append(const Weaver& other) {
  if (other.loom_ != loom_) fail("weaver", "cannot append a weave recorded for another loom");
  if (&other == this) fail("weaver", "cannot append a weaver to itself");
  const Value value_offset = Value(values_.size());
  const std::uint32_t call_offset = std::uint32_t(calls_.size());
  const std::uint32_t arg_offset = std::uint32_t(args_.size());
  if (constants_.size() < loom_->num_types()) constants_.resize(loom_->num_types());
  std::vector<std::uint32_t> row_offset(constants_.size(), 0);
  for (TypeId t = 0; t < other.constants_.size(); ++t) {
    row_offset[t] = constants_[t].rows;
    constants_[t].bytes.insert(constants_[t].bytes.end(), other.constants_[t].bytes.begin(),
                               other.constants_[t].bytes.end());
    constants_[t].rows += other.constants_[t].rows;
  }
  std::vector<std::uint32_t> slot_map;
  for (const Parameter& p : other.parameters_) slot_map.push_back(parameter_slot(p));
  values_.reserve(values_.size() + other.values_.size());
  for (ValueInfo v : other.values_) {
    if (v.kind == ValueKind::kConstant) v.index += row_offset[v.type];
    if (v.kind == ValueKind::kParameter) v.index = slot_map[v.index];
    if (v.kind == ValueKind::kCallOutput) v.index += call_offset;
    values_.push_back(v);
  }
  for (CallInfo c : other.calls_) {
    c.first_arg += arg_offset;
    c.first_output += value_offset;
    calls_.push_back(c);
  }
  for (Value a : other.args_) args_.push_back(a + value_offset);
  for (Value o : other.outputs_) outputs_.push_back(o + value_offset);
  deepest_ = std::max(deepest_, other.deepest_);
  return value_offset;
}

}  // namespace weft::loom
