// Planning a run (weft/loom/batch_plan.h): the chunks the executor will make, in order, where
// every value will live, which arguments are views and which are gathers, and the one packed
// buffer holding the weave's constants and every gather's row references.
#include "weft/loom/batch_plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "weft/core/error.h"

namespace weft::loom {
namespace {

std::uint64_t aligned(std::uint64_t words) {
  return (words + BatchPlan::kAlignWords - 1) / BatchPlan::kAlignWords * BatchPlan::kAlignWords;
}

class Planner {
 public:
  Planner(const Weaver& weaver, BatchPlan& plan)
      : weaver_(weaver), loom_(weaver.loom()), plan_(plan) {
    plan_.locations.resize(weaver.num_values());
  }

  void place_depth_zero(std::uint32_t import_chunks, std::span<const ValueLocation> import_rows);
  void plan_step(const Schedule& schedule, const ScheduleStep& step);
  std::int64_t plan_list(std::span<const Value> values);
  void pack();

 private:
  Value arg(std::uint32_t call, std::size_t position) const {
    return weaver_.args()[weaver_.calls()[call].first_arg + position];
  }
  PlannedArgument argument(std::span<const std::uint32_t> calls, std::size_t position);
  // A view when `sources` are consecutive rows of one chunk, else a gather of them (rows
  // `rows` wide, in bytes `row_bytes` each).
  PlannedArgument rows_of(std::span<const ValueLocation> sources, std::int64_t row_bytes);
  PlannedArgument ragged_argument(std::span<const std::uint32_t> calls, TypeId type);
  std::optional<PlannedArgument> interleaved_view(std::span<const std::uint32_t> calls,
                                                  std::size_t positions) const;
  // A gather of `sources` (rows per position, position-major); returns its index.
  std::uint32_t add_gather(std::span<const ValueLocation> sources, std::uint32_t rows,
                           std::uint32_t positions);
  std::uint32_t new_chunk() { return chunks_++; }

  const Weaver& weaver_;
  const Loom& loom_;
  BatchPlan& plan_;
  std::uint32_t chunks_ = 0;
  std::vector<unsigned char> constant_bytes_;
  std::vector<std::int32_t> refs_;
  std::vector<std::uint32_t> local_of_;        // chunk id -> index in the gather's table + 1
  std::vector<std::size_t> ragged_arguments_;  // arguments whose ids_word pack() moves
};

void Planner::place_depth_zero(std::uint32_t import_chunks,
                               std::span<const ValueLocation> import_rows) {
  std::vector<std::uint32_t> constant_chunk(loom_.num_types(), 0);
  for (TypeId t = 0; t < loom_.num_types(); ++t) {
    const std::int64_t rows = weaver_.constant_rows(t);
    if (rows == 0) continue;
    const auto bytes = weaver_.constant_bytes(t);
    const std::uint64_t word = aligned((constant_bytes_.size() + 3) / 4);
    constant_bytes_.resize(std::size_t(word * 4 + bytes.size()));
    std::memcpy(constant_bytes_.data() + word * 4, bytes.data(), bytes.size());
    plan_.constants.push_back({t, rows, word, std::uint64_t(bytes.size())});
    constant_chunk[t] = new_chunk();
  }
  const std::uint32_t first_parameter = chunks_;
  plan_.parameter_chunks = std::uint32_t(weaver_.parameters().size());
  chunks_ += plan_.parameter_chunks;
  // Fed batches in type order, then the imported chunks, so the layout needs no first-use order.
  std::vector<std::uint32_t> fed_chunk(loom_.num_types(), UINT32_MAX);
  plan_.fed_rows_used.assign(loom_.num_types(), 0);
  for (Value v = 0; v < weaver_.num_values(); ++v) {
    const auto& info = weaver_.info(v);
    if (info.kind == ValueKind::kBatchInput)
      plan_.fed_rows_used[info.type] =
          std::max(plan_.fed_rows_used[info.type], std::int64_t(info.index) + 1);
    if (info.kind == ValueKind::kImported) plan_.uses_imports = true;
  }
  for (TypeId t = 0; t < loom_.num_types(); ++t) {
    if (plan_.fed_rows_used[t] == 0) continue;
    plan_.fed_types.push_back(t);
    fed_chunk[t] = new_chunk();
  }
  const std::uint32_t import_base = chunks_;
  if (plan_.uses_imports) {
    plan_.import_chunks = import_chunks;
    chunks_ += import_chunks;
  }
  for (Value v = 0; v < weaver_.num_values(); ++v) {
    const auto& info = weaver_.info(v);
    ValueLocation& at = plan_.locations[v];
    switch (info.kind) {
      case ValueKind::kConstant:
        at = {constant_chunk[info.type], info.index};
        break;
      case ValueKind::kParameter:
        at = {first_parameter + info.index, 0};
        break;
      case ValueKind::kBatchInput:
        at = {fed_chunk[info.type], info.index};
        break;
      case ValueKind::kImported:
        if (info.index >= import_rows.size())
          fail("loom", "imported value ", v, " refers to slot ", info.index, " but ",
               import_rows.size(), " rows were imported (Executor::import)");
        at = {import_base + import_rows[info.index].chunk, import_rows[info.index].row};
        break;
      case ValueKind::kCallOutput:
        break;
    }
  }
}

std::uint32_t Planner::add_gather(std::span<const ValueLocation> sources, std::uint32_t rows,
                                  std::uint32_t positions) {
  PlannedGather gather;
  gather.refs_word = refs_.size();
  gather.rows = rows;
  gather.positions = positions;
  gather.first_chunk = std::uint32_t(plan_.gather_chunks.size());
  for (const ValueLocation& loc : sources) {
    if (loc.chunk >= local_of_.size()) local_of_.resize(loc.chunk + 1, 0);
    if (local_of_[loc.chunk] == 0) {
      plan_.gather_chunks.push_back(loc.chunk);
      local_of_[loc.chunk] = std::uint32_t(plan_.gather_chunks.size() - gather.first_chunk);
    }
    refs_.push_back(std::int32_t(local_of_[loc.chunk] - 1));
    refs_.push_back(std::int32_t(loc.row));
  }
  gather.num_chunks = std::uint32_t(plan_.gather_chunks.size()) - gather.first_chunk;
  for (std::uint32_t k = gather.first_chunk; k < plan_.gather_chunks.size(); ++k)
    local_of_[plan_.gather_chunks[k]] = 0;
  plan_.gathers.push_back(gather);
  return std::uint32_t(plan_.gathers.size() - 1);
}

PlannedArgument Planner::rows_of(std::span<const ValueLocation> sources, std::int64_t row_bytes) {
  const ValueLocation first = sources[0];
  bool contiguous = true;
  for (std::size_t j = 1; j < sources.size() && contiguous; ++j)
    contiguous = sources[j].chunk == first.chunk && sources[j].row == first.row + j;
  PlannedArgument out;
  if (contiguous) {
    ++plan_.gathers_skipped;
    out.is_view = true;
    out.chunk = first.chunk;
    out.row = first.row;
    return out;
  }
  plan_.bytes_gathered += std::int64_t(sources.size()) * row_bytes;
  out.gather = add_gather(sources, std::uint32_t(sources.size()), 1);
  return out;
}

PlannedArgument Planner::argument(std::span<const std::uint32_t> calls, std::size_t position) {
  std::vector<ValueLocation> sources;
  sources.reserve(calls.size());
  for (std::uint32_t call : calls) sources.push_back(plan_.locations[arg(call, position)]);
  const OpId op = weaver_.calls()[calls[0]].op;
  return rows_of(sources, loom_.type(loom_.operation(op).inputs[position]).shape.numel() * 4);
}

// Every call's values, call after call, then their segment ids and the calls' counts (packed
// beside the gathers' references).
PlannedArgument Planner::ragged_argument(std::span<const std::uint32_t> calls, TypeId type) {
  std::vector<ValueLocation> sources;
  std::vector<std::int32_t> counts;
  counts.reserve(calls.size());
  for (std::uint32_t call : calls) {
    const auto values = weaver_.call_args(call);
    for (Value v : values) sources.push_back(plan_.locations[v]);
    counts.push_back(std::int32_t(values.size()));
  }
  PlannedArgument out = rows_of(sources, loom_.type(type).shape.numel() * 4);
  out.ragged_rows = std::uint32_t(sources.size());
  out.ids_word = refs_.size();
  for (std::size_t j = 0; j < counts.size(); ++j)
    refs_.insert(refs_.end(), std::size_t(counts[j]), std::int32_t(j));
  refs_.insert(refs_.end(), counts.begin(), counts.end());
  ragged_arguments_.push_back(plan_.arguments.size());
  return out;
}

// A concat_inputs step whose arguments, row after row and position after position, are
// consecutive rows of one chunk (order_calls_for_views lays them out so): those rows seen
// `positions` at a time are the concatenated batch.
std::optional<PlannedArgument> Planner::interleaved_view(std::span<const std::uint32_t> calls,
                                                         std::size_t positions) const {
  const ValueLocation first = plan_.locations[arg(calls[0], 0)];
  std::uint32_t expected = first.row;
  for (std::uint32_t call : calls)
    for (std::size_t p = 0; p < positions; ++p, ++expected) {
      const ValueLocation loc = plan_.locations[arg(call, p)];
      if (loc.chunk != first.chunk || loc.row != expected) return std::nullopt;
    }
  PlannedArgument view;
  view.is_view = true;
  view.chunk = first.chunk;
  view.row = first.row;
  return view;
}

void Planner::plan_step(const Schedule& schedule, const ScheduleStep& step) {
  const Operation& op = loom_.operation(step.op);
  const auto calls = schedule.step_calls(step);
  plan_.step_first_argument.push_back(std::uint32_t(plan_.arguments.size()));
  const auto view =
      op.options.concat_inputs && std::adjacent_find(op.inputs.begin(), op.inputs.end(),
                                                     std::not_equal_to<>()) == op.inputs.end()
          ? interleaved_view(calls, op.inputs.size())
          : std::nullopt;
  if (op.options.ragged_rows) {
    plan_.arguments.push_back(ragged_argument(calls, op.inputs[0]));
  } else if (view) {
    ++plan_.gathers_skipped;
    plan_.arguments.push_back(*view);
  } else if (op.options.concat_inputs) {
    std::vector<ValueLocation> sources;
    sources.reserve(calls.size() * op.inputs.size());
    std::int64_t width = 0;
    for (std::size_t p = 0; p < op.inputs.size(); ++p) {
      width += loom_.type(op.inputs[p]).shape[0];
      for (std::uint32_t call : calls) sources.push_back(plan_.locations[arg(call, p)]);
    }
    plan_.bytes_gathered += std::int64_t(calls.size()) * width * 4;
    PlannedArgument gathered;
    gathered.gather =
        add_gather(sources, std::uint32_t(calls.size()), std::uint32_t(op.inputs.size()));
    plan_.arguments.push_back(gathered);
  } else {
    for (std::size_t p = 0; p < op.inputs.size(); ++p)
      plan_.arguments.push_back(argument(calls, p));
  }
  for (std::size_t k = 0; k < op.outputs.size(); ++k) {
    const std::uint32_t chunk = new_chunk();
    for (std::size_t j = 0; j < calls.size(); ++j)
      plan_.locations[weaver_.calls()[calls[j]].first_output + k] = {chunk, std::uint32_t(j)};
  }
}

std::int64_t Planner::plan_list(std::span<const Value> values) {
  if (values.empty()) return -1;
  std::vector<ValueLocation> sources;
  sources.reserve(values.size());
  for (Value v : values) {
    if (v >= plan_.locations.size()) fail("loom", "plan: value ", v, " is not in the weave");
    if (weaver_.type_of(v) != weaver_.type_of(values[0]))
      fail("loom", "plan: a list mixes types ", loom_.type(weaver_.type_of(values[0])).to_string(),
           " and ", loom_.type(weaver_.type_of(v)).to_string());
    sources.push_back(plan_.locations[v]);
  }
  return add_gather(sources, std::uint32_t(values.size()), 1);
}

void Planner::pack() {
  const std::uint64_t refs_start = aligned((constant_bytes_.size() + 3) / 4);
  for (PlannedGather& g : plan_.gathers) g.refs_word += refs_start;
  for (std::size_t a : ragged_arguments_) plan_.arguments[a].ids_word += refs_start;
  const std::uint64_t total = refs_start + refs_.size();
  plan_.packed = Tensor::empty(Shape{std::int64_t(total)}, DType::kInt32);
  auto* words = plan_.packed.data<std::int32_t>();
  std::fill(words, words + refs_start, 0);
  if (!constant_bytes_.empty()) std::memcpy(words, constant_bytes_.data(), constant_bytes_.size());
  std::copy(refs_.begin(), refs_.end(), words + refs_start);
}

}  // namespace

Tensor BatchPlan::segment(const Tensor& packed_there, std::uint64_t word, std::uint64_t count) {
  return packed_there.rows_view(std::int64_t(word), std::int64_t(count));
}

Tensor BatchPlan::view_as(const Tensor& packed_there, std::uint64_t word, const Shape& shape,
                          DType dtype) {
  const std::uint64_t bytes = std::uint64_t(shape.numel()) * std::uint64_t(dtype_size(dtype));
  WEFT_ASSERT(word + (bytes + 3) / 4 <= std::uint64_t(packed_there.numel()));
  auto* keep = new Tensor(packed_there);
  void* data = static_cast<std::int32_t*>(keep->raw_data()) + word;
  return Tensor::from_external(
      data, shape, dtype, packed_there.device(),
      [](void* context) { delete static_cast<Tensor*>(context); }, keep);
}

BatchPlan make_batch_plan(const Weaver& weaver, const Schedule& schedule,
                          std::uint32_t import_chunks, std::span<const ValueLocation> import_rows,
                          std::span<const std::vector<Value>> result_lists) {
  BatchPlan plan;
  Planner planner(weaver, plan);
  planner.place_depth_zero(import_chunks, import_rows);
  for (const ScheduleStep& step : schedule.steps) planner.plan_step(schedule, step);
  plan.step_first_argument.push_back(std::uint32_t(plan.arguments.size()));
  for (const std::vector<Value>& list : result_lists) {
    plan.result_gathers.push_back(planner.plan_list(list));
    plan.result_types.push_back(list.empty() ? 0 : weaver.type_of(list[0]));
  }
  const Loom& loom = weaver.loom();
  plan.output_gathers.assign(loom.num_types(), -1);
  for (TypeId t = 0; t < loom.num_types(); ++t) {
    std::vector<Value> of_type;
    for (Value v : weaver.outputs())
      if (weaver.type_of(v) == t) of_type.push_back(v);
    plan.output_gathers[t] = planner.plan_list(of_type);
  }
  planner.pack();
  return plan;
}

}  // namespace weft::loom
