// Running a schedule: depth-0 values become the first chunks (constants per type, one row
// per parameter, the fed batches); then per step the arguments are fetched (a view when
// contiguous, else one gather), the body runs once, and its outputs become new chunks.
#include "weft/loom/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "chunk_ops.h"
#include "weft/autodiff/ops.h"
#include "weft/core/denormals.h"
#include "weft/core/error.h"

namespace weft::loom {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Gathers the rows at `sources` (positions × rows of them, position-major) into one Var,
// passing the gather op only the chunks actually read.
Var gather_locations(const std::vector<Var>& chunks, std::span<const ValueLocation> sources,
                     std::int64_t rows, int positions, const Shape& shape) {
  std::vector<Var> involved;
  std::vector<std::uint32_t> local_of;  // chunk id -> index in `involved` + 1 (0 = not yet)
  std::vector<std::int32_t> refs;
  refs.reserve(2 * sources.size());
  for (const ValueLocation& loc : sources) {
    if (loc.chunk >= local_of.size()) local_of.resize(loc.chunk + 1, 0);
    if (local_of[loc.chunk] == 0) {
      involved.push_back(chunks[loc.chunk]);
      local_of[loc.chunk] = std::uint32_t(involved.size());
    }
    refs.push_back(std::int32_t(local_of[loc.chunk] - 1));
    refs.push_back(std::int32_t(loc.row));
  }
  return detail::gather_chunk_rows(involved, refs, rows, positions, shape);
}

}  // namespace

std::string RunStats::to_string() const {
  std::ostringstream out;
  out << "levels " << levels << ", batched calls " << batched_calls << " (lower bound "
      << min_batched_calls << ")"
      << ", nodes " << nodes << ", gathered " << bytes_gathered << " bytes (" << gathers_skipped
      << " arguments passed as views), schedule " << schedule_seconds << " s, execute "
      << execute_seconds << " s\n"
      << "backend: " << backend.kernel_calls << " kernels, " << backend.launches << " launches, "
      << backend.host_to_device << " host-to-device copies, " << backend.synchronizations
      << " synchronizations\n";
  for (const OperationStats& op : operations)
    out << "  " << op.name << ": " << op.batched_calls << " calls (lower bound "
        << op.min_batched_calls << "), " << op.rows << " rows, mean " << op.mean_rows() << ", max "
        << op.max_rows << "\n";
  return out.str();
}

Executor::Executor(const Loom& loom, Tape& tape, Device device)
    : loom_(&loom), tape_(&tape), device_(device) {}

void Executor::feed(TypeId type, Var batch) {
  if (type >= loom_->num_types()) fail("loom", "feed: type id ", type, " is not registered");
  const TypeShape& ts = loom_->type(type);
  if (batch.value().dtype() != ts.dtype || batch.shape().rank() != ts.shape.rank() + 1 ||
      batch.shape().without_rows() != ts.shape)
    fail("loom", "feed: batch ", batch.value().describe(), " does not hold rows of type ",
         ts.to_string());
  if (batch.value().device() != device_)
    fail("loom", "feed: batch ", batch.value().describe(), " is on ",
         device_name(batch.value().device()), " but the executor runs on ", device_name(device_),
         "; move it with Tensor::to() or construct the Executor with its device");
  if (fed_.size() < loom_->num_types()) fed_.resize(loom_->num_types());
  fed_[type] = batch;
}

void Executor::import(std::span<const Var> chunks, std::span<const ValueLocation> rows) {
  for (const ValueLocation& loc : rows)
    if (loc.chunk >= chunks.size() || std::int64_t(loc.row) >= chunks[loc.chunk].shape()[0])
      fail("loom", "import: row ", loc.row, " of chunk ", loc.chunk, " is not among the ",
           chunks.size(), " chunks given");
  import_chunks_.assign(chunks.begin(), chunks.end());
  import_rows_.assign(rows.begin(), rows.end());
}

LoomResult Executor::run(const Weaver& weaver, Strategy strategy, std::uint32_t max_step_rows) {
  auto start = std::chrono::steady_clock::now();
  Schedule schedule = make_schedule(weaver, strategy);
  limit_step_rows(schedule, max_step_rows);
  double schedule_seconds = seconds_since(start);
  LoomResult result = run(weaver, schedule);
  result.stats_.schedule_seconds = schedule_seconds;
  return result;
}

namespace {

// Runs the steps of one schedule, recording chunks and value locations into a LoomResult.
class StepRunner {
 public:
  StepRunner(const Loom& loom, const Weaver& weaver, std::vector<Var>& chunks,
             std::vector<ValueLocation>& locations, RunStats& stats)
      : loom_(loom), weaver_(weaver), chunks_(chunks), locations_(locations), stats_(stats) {}

  // Constants, parameters, fed batches and imported values: every value of depth zero.
  void place_depth_zero(Tape& tape, const std::vector<Var>& fed, Device device,
                        std::span<const Var> import_chunks,
                        std::span<const ValueLocation> import_rows);
  void run_step(const Schedule& schedule, const ScheduleStep& step);

 private:
  Var fetch_argument(std::span<const std::uint32_t> calls, std::size_t position);
  Var gather(std::span<const std::uint32_t> calls, std::size_t first, std::size_t count,
             const Shape& shape);
  std::uint32_t add_chunk(Var chunk) {
    chunks_.push_back(chunk);
    return std::uint32_t(chunks_.size() - 1);
  }
  Value arg(std::uint32_t call, std::size_t position) const {
    return weaver_.args()[weaver_.calls()[call].first_arg + position];
  }

  const Loom& loom_;
  const Weaver& weaver_;
  std::vector<Var>& chunks_;
  std::vector<ValueLocation>& locations_;
  RunStats& stats_;
};

void StepRunner::place_depth_zero(Tape& tape, const std::vector<Var>& fed, Device device,
                                  std::span<const Var> import_chunks,
                                  std::span<const ValueLocation> import_rows) {
  std::vector<std::uint32_t> constant_chunk(loom_.num_types(), 0);
  for (TypeId t = 0; t < loom_.num_types(); ++t) {
    const std::int64_t rows = weaver_.constant_rows(t);
    if (rows == 0) continue;
    const TypeShape& ts = loom_.type(t);
    Tensor block = Tensor::empty(ts.shape.prepend(rows), ts.dtype);
    const auto bytes = weaver_.constant_bytes(t);
    std::memcpy(block.raw_data(), bytes.data(), bytes.size());
    constant_chunk[t] = add_chunk(tape.constant(block.to(device)));
  }
  std::vector<std::uint32_t> parameter_chunk;
  for (const Parameter& p : weaver_.parameters()) {
    Var row = reshape(tape.parameter(p), p.shape().prepend(1).dims());
    parameter_chunk.push_back(add_chunk(row));
  }
  std::vector<std::uint32_t> fed_chunk(loom_.num_types(), UINT32_MAX);
  std::uint32_t import_base = UINT32_MAX;  // imported chunks join this run's at the first use
  for (Value v = 0; v < weaver_.num_values(); ++v) {
    const auto& info = weaver_.info(v);
    switch (info.kind) {
      case ValueKind::kConstant:
        locations_[v] = {constant_chunk[info.type], info.index};
        break;
      case ValueKind::kParameter:
        locations_[v] = {parameter_chunk[info.index], 0};
        break;
      case ValueKind::kBatchInput: {
        if (info.type >= fed.size() || !fed[info.type].defined())
          fail("loom", "a batch_input of type ", loom_.type(info.type).to_string(),
               " was woven but no batch was fed for that type (Executor::feed)");
        if (std::int64_t(info.index) >= fed[info.type].shape()[0])
          fail("loom", "batch_input row ", info.index, " of type ",
               loom_.type(info.type).to_string(), " is beyond the fed batch ",
               fed[info.type].value().describe());
        if (fed_chunk[info.type] == UINT32_MAX) fed_chunk[info.type] = add_chunk(fed[info.type]);
        locations_[v] = {fed_chunk[info.type], info.index};
        break;
      }
      case ValueKind::kImported: {  // keeps its row in an earlier run's chunk
        if (info.index >= import_rows.size())
          fail("loom", "imported value ", v, " refers to slot ", info.index, " but ",
               import_rows.size(), " rows were imported (Executor::import)");
        if (import_base == UINT32_MAX) {
          import_base = std::uint32_t(chunks_.size());
          chunks_.insert(chunks_.end(), import_chunks.begin(), import_chunks.end());
        }
        const ValueLocation at = import_rows[info.index];
        locations_[v] = {import_base + at.chunk, at.row};
        break;
      }
      case ValueKind::kCallOutput:
        break;
    }
  }
}

Var StepRunner::fetch_argument(std::span<const std::uint32_t> calls, std::size_t position) {
  const ValueLocation first = locations_[arg(calls[0], position)];
  bool contiguous = true;
  for (std::size_t j = 1; j < calls.size() && contiguous; ++j) {
    const ValueLocation loc = locations_[arg(calls[j], position)];
    contiguous = loc.chunk == first.chunk && loc.row == first.row + j;
  }
  if (contiguous) {
    ++stats_.gathers_skipped;
    const Var& chunk = chunks_[first.chunk];
    if (first.row == 0 && std::int64_t(calls.size()) == chunk.shape()[0]) return chunk;
    return detail::chunk_rows_view(chunk, first.row, std::int64_t(calls.size()));
  }
  const TypeShape& ts = loom_.type(loom_.operation(weaver_.calls()[calls[0]].op).inputs[position]);
  return gather(calls, position, 1, ts.shape.prepend(std::int64_t(calls.size())));
}

// One gather of argument positions [first, first + count) of every call, side by side.
Var StepRunner::gather(std::span<const std::uint32_t> calls, std::size_t first, std::size_t count,
                       const Shape& shape) {
  std::vector<ValueLocation> sources;
  sources.reserve(calls.size() * count);
  for (std::size_t p = first; p < first + count; ++p)
    for (std::uint32_t call : calls) sources.push_back(locations_[arg(call, p)]);
  stats_.bytes_gathered += shape.numel() * 4;
  return gather_locations(chunks_, sources, std::int64_t(calls.size()), int(count), shape);
}

void StepRunner::run_step(const Schedule& schedule, const ScheduleStep& step) {
  const Operation& op = loom_.operation(step.op);
  const auto calls = schedule.step_calls(step);
  const std::int64_t rows = std::int64_t(calls.size());
  std::vector<Var> inputs;
  if (op.options.concat_inputs) {
    std::int64_t width = 0;
    for (TypeId t : op.inputs) width += loom_.type(t).shape[0];
    inputs.push_back(gather(calls, 0, op.inputs.size(), Shape{rows, width}));
  } else {
    for (std::size_t i = 0; i < op.inputs.size(); ++i) inputs.push_back(fetch_argument(calls, i));
  }
  std::vector<Var> outputs = op.body(inputs);
  if (outputs.size() != op.outputs.size())
    fail("loom", "operation '", op.name, "' returned ", outputs.size(), " outputs, expected ",
         op.outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const TypeShape& ts = loom_.type(op.outputs[k]);
    const Tensor& value = outputs[k].value();
    if (value.dtype() != ts.dtype || value.shape() != ts.shape.prepend(rows))
      fail("loom", "operation '", op.name, "' returned ", value.describe(), " for output ", k,
           ", expected ", dtype_name(ts.dtype), " ", ts.shape.prepend(rows), " (", rows,
           " rows of ", ts.to_string(), ")");
    const std::uint32_t chunk = add_chunk(outputs[k]);
    for (std::size_t j = 0; j < calls.size(); ++j)
      locations_[weaver_.calls()[calls[j]].first_output + k] = {chunk, std::uint32_t(j)};
  }
  OperationStats& s = stats_.operations[step.op];
  ++s.batched_calls;
  s.rows += rows;
  s.max_rows = std::max(s.max_rows, rows);
}

}  // namespace

LoomResult Executor::run(const Weaver& weaver, const Schedule& schedule) {
  if (&weaver.loom() != loom_) fail("loom", "the weave was recorded for another loom");
  auto start = std::chrono::steady_clock::now();
  const BackendCounters counted_before = backend_counters();
  TapeScope scope(*tape_);
  const DenormalScope denormals;  // once for the run, not per kernel (denormals.h)
  LoomResult result;
  result.weaver_ = &weaver;
  result.schedule_ = schedule;
  result.locations_.resize(weaver.num_values());
  RunStats& stats = result.stats_;
  stats.operations.resize(loom_->num_operations());
  for (OpId op = 0; op < loom_->num_operations(); ++op)
    stats.operations[op].name = loom_->operation(op).name;
  StepRunner runner(*loom_, weaver, result.chunks_, result.locations_, stats);
  runner.place_depth_zero(*tape_, fed_, device_, import_chunks_, import_rows_);
  for (const ScheduleStep& step : schedule.steps) runner.run_step(schedule, step);
  stats.levels = schedule.num_levels;
  stats.batched_calls = std::int64_t(schedule.steps.size());
  stats.nodes = std::int64_t(weaver.num_calls());
  stats.execute_seconds = seconds_since(start);
  stats.backend = backend_counters() - counted_before;
  return result;
}

const RunStats& LoomResult::stats() const {
  // The lower bound is a pass over the whole weave: computed when the statistics are read,
  // not on every run.
  if (!bound_filled_ && weaver_ != nullptr) {
    const std::vector<std::int64_t> bound = min_batched_calls(*weaver_);
    for (std::size_t op = 0; op < bound.size(); ++op) {
      stats_.operations[op].min_batched_calls = bound[op];
      stats_.min_batched_calls += bound[op];
    }
    bound_filled_ = true;
  }
  return stats_;
}

Var LoomResult::gather(std::span<const Value> values) const {
  if (values.empty()) fail("loom", "gather of no values");
  const TypeId type = weaver_->type_of(values[0]);
  for (Value v : values)
    if (weaver_->type_of(v) != type)
      fail("loom", "gather mixes types ", weaver_->loom().type(type).to_string(), " and ",
           weaver_->loom().type(weaver_->type_of(v)).to_string());
  std::vector<ValueLocation> sources;
  for (Value v : values) sources.push_back(locations_[v]);
  const std::int64_t rows = std::int64_t(values.size());
  return gather_locations(chunks_, sources, rows, 1,
                          weaver_->loom().type(type).shape.prepend(rows));
}

Var LoomResult::outputs(TypeId type) const {
  std::vector<Value> selected;
  for (Value v : weaver_->outputs())
    if (weaver_->type_of(v) == type) selected.push_back(v);
  if (selected.empty())
    fail("loom", "the weave has no outputs of type ",
         type < weaver_->loom().num_types() ? weaver_->loom().type(type).to_string()
                                            : std::to_string(type));
  return gather(selected);
}

}  // namespace weft::loom
