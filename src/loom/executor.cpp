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
#include "weft/loom/batch_plan.h"

namespace weft::loom {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The plan's gather `index` over the run's chunks, its references read from `packed` (the
// batch's buffer on the run's device); widths[p] is position p's row size.
Var run_planned_gather(const BatchPlan& plan, const Tensor& packed, const std::vector<Var>& chunks,
                       std::size_t index, std::span<const std::int64_t> widths,
                       const Shape& shape) {
  const PlannedGather& g = plan.gathers[index];
  std::vector<Var> involved;
  involved.reserve(g.num_chunks);
  for (std::uint32_t k = g.first_chunk; k < g.first_chunk + g.num_chunks; ++k)
    involved.push_back(chunks[plan.gather_chunks[k]]);
  const std::int64_t refs = std::int64_t(g.rows) * g.positions;
  const Tensor view =
      BatchPlan::segment(packed, g.refs_word, std::uint64_t(2 * refs)).reshaped(Shape{refs, 2});
  return detail::gather_chunk_rows(involved, view, g.rows, widths, shape);
}

}  // namespace

std::string RunStats::to_string() const {
  std::ostringstream out;
  out << "levels " << levels << ", batched calls " << batched_calls << " (lower bound "
      << min_batched_calls << ")"
      << ", nodes " << nodes << ", gathered " << bytes_gathered << " bytes (" << gathers_skipped
      << " arguments passed as views), schedule " << schedule_seconds << " s, execute "
      << execute_seconds << " s, packed " << packed_bytes << " bytes for " << planned_gathers
      << " gathers\n"
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
  LoomResult result = run_kept(weaver, std::move(schedule), nullptr);
  result.stats_.schedule_seconds = schedule_seconds;
  return result;
}

namespace {

// Runs the steps of one planned schedule, recording the chunks into a LoomResult.
class StepRunner {
 public:
  StepRunner(const Loom& loom, const Weaver& weaver, const BatchPlan& plan, const Tensor& packed,
             std::vector<Var>& chunks, RunStats& stats)
      : loom_(loom),
        weaver_(weaver),
        plan_(plan),
        packed_(packed),
        chunks_(chunks),
        stats_(stats) {}

  // Constants, parameters, fed batches and imported chunks: the plan's depth-zero chunks.
  void place_depth_zero(Tape& tape, const std::vector<Var>& fed,
                        std::span<const Var> import_chunks);
  void run_step(const Schedule& schedule, std::size_t step_index);

 private:
  Var fetch_argument(const PlannedArgument& argument, const Operation& op, std::size_t position,
                     std::int64_t rows);
  // A ragged_rows step's three inputs: its rows, their segment ids, the calls' counts.
  std::vector<Var> ragged_inputs(const PlannedArgument& argument, const Operation& op,
                                 std::int64_t calls);

  const Loom& loom_;
  const Weaver& weaver_;
  const BatchPlan& plan_;
  const Tensor& packed_;
  std::vector<Var>& chunks_;
  RunStats& stats_;
};

void StepRunner::place_depth_zero(Tape& tape, const std::vector<Var>& fed,
                                  std::span<const Var> import_chunks) {
  for (const PlannedConstants& c : plan_.constants) {
    const TypeShape& ts = loom_.type(c.type);
    chunks_.push_back(
        tape.constant(BatchPlan::view_as(packed_, c.word, ts.shape.prepend(c.rows), ts.dtype)));
  }
  for (const Parameter& p : weaver_.parameters())
    chunks_.push_back(reshape(tape.parameter(p), p.shape().prepend(1).dims()));
  for (TypeId type : plan_.fed_types) {
    if (type >= fed.size() || !fed[type].defined())
      fail("loom", "a batch_input of type ", loom_.type(type).to_string(),
           " was woven but no batch was fed for that type (Executor::feed)");
    if (plan_.fed_rows_used[type] > fed[type].shape()[0])
      fail("loom", "batch_input row ", plan_.fed_rows_used[type] - 1, " of type ",
           loom_.type(type).to_string(), " is beyond the fed batch ", fed[type].value().describe());
    chunks_.push_back(fed[type]);
  }
  if (plan_.uses_imports) chunks_.insert(chunks_.end(), import_chunks.begin(), import_chunks.end());
}

Var StepRunner::fetch_argument(const PlannedArgument& argument, const Operation& op,
                               std::size_t position, std::int64_t rows) {
  const TypeShape& ts = loom_.type(op.inputs[position]);
  if (argument.is_view) {
    const Var& chunk = chunks_[argument.chunk];
    if (argument.row == 0 && rows == chunk.shape()[0]) return chunk;
    return detail::chunk_rows_view(chunk, argument.row, rows);
  }
  const std::int64_t width = ts.shape.numel();
  return run_planned_gather(plan_, packed_, chunks_, argument.gather,
                            std::span<const std::int64_t>(&width, 1), ts.shape.prepend(rows));
}

std::vector<Var> StepRunner::ragged_inputs(const PlannedArgument& argument, const Operation& op,
                                           std::int64_t calls) {
  const std::int64_t total = argument.ragged_rows;
  Tape& tape = Tape::current();
  const Tensor ids = BatchPlan::segment(packed_, argument.ids_word, std::uint64_t(total));
  const Tensor counts =
      BatchPlan::segment(packed_, argument.ids_word + std::uint64_t(total), std::uint64_t(calls));
  return {fetch_argument(argument, op, 0, total), tape.constant(ids), tape.constant(counts)};
}

void StepRunner::run_step(const Schedule& schedule, std::size_t step_index) {
  const ScheduleStep& step = schedule.steps[step_index];
  const Operation& op = loom_.operation(step.op);
  const std::int64_t rows = std::int64_t(step.size());
  const PlannedArgument* arguments = &plan_.arguments[plan_.step_first_argument[step_index]];
  std::vector<Var> inputs;
  if (op.options.ragged_rows) {
    inputs = ragged_inputs(arguments[0], op, rows);
  } else if (op.options.concat_inputs && arguments[0].is_view) {
    const std::int64_t positions = std::int64_t(op.inputs.size());
    const std::int64_t width = positions * loom_.type(op.inputs[0]).shape.numel();
    inputs.push_back(detail::chunk_rows_view(chunks_[arguments[0].chunk], arguments[0].row,
                                             rows * positions, Shape{rows, width}));
  } else if (op.options.concat_inputs) {
    std::vector<std::int64_t> widths;
    std::int64_t width = 0;
    for (TypeId t : op.inputs) {
      widths.push_back(loom_.type(t).shape.numel());
      width += loom_.type(t).shape[0];
    }
    inputs.push_back(run_planned_gather(plan_, packed_, chunks_, arguments[0].gather, widths,
                                        Shape{rows, width}));
  } else {
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      inputs.push_back(fetch_argument(arguments[i], op, i, rows));
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
    chunks_.push_back(outputs[k]);
  }
  OperationStats& s = stats_.operations[step.op];
  ++s.batched_calls;
  s.rows += rows;
  s.max_rows = std::max(s.max_rows, rows);
}

}  // namespace

LoomResult Executor::run(const Weaver& weaver, const Schedule& schedule) {
  return run(weaver, schedule, nullptr);
}

LoomResult Executor::run(const Weaver& weaver, const Schedule& schedule, const BatchPlan* plan) {
  return run_kept(weaver, schedule, plan);
}

LoomResult Executor::run_kept(const Weaver& weaver, Schedule schedule, const BatchPlan* plan) {
  if (&weaver.loom() != loom_) fail("loom", "the weave was recorded for another loom");
  auto start = std::chrono::steady_clock::now();
  const BackendCounters counted_before = backend_counters();
  TapeScope scope(*tape_);
  const DenormalScope denormals;  // once for the run, not per kernel (denormals.h)
  LoomResult result;
  result.weaver_ = &weaver;
  result.schedule_ = std::move(schedule);
  const Schedule& kept = result.schedule_;
  if (plan == nullptr || plan->uses_imports) {
    result.owned_plan_ = std::make_shared<const BatchPlan>(
        make_batch_plan(weaver, kept, std::uint32_t(import_chunks_.size()), import_rows_));
    plan = result.owned_plan_.get();
  }
  if (plan->locations.size() != weaver.num_values() ||
      plan->step_first_argument.size() != kept.steps.size() + 1)
    fail("loom", "the batch plan was made for another weave or schedule (", plan->locations.size(),
         " values and ", plan->step_first_argument.size() - 1, " steps, against ",
         weaver.num_values(), " and ", kept.steps.size(), ")");
  result.plan_ = plan;
  result.packed_ = plan->packed.to(device_);  // the batch's one upload
  RunStats& stats = result.stats_;
  stats.operations.resize(loom_->num_operations());  // named when read (LoomResult::stats)
  StepRunner runner(*loom_, weaver, *plan, result.packed_, result.chunks_, stats);
  runner.place_depth_zero(*tape_, fed_, import_chunks_);
  for (std::size_t s = 0; s < kept.steps.size(); ++s) runner.run_step(kept, s);
  stats.levels = kept.num_levels;
  stats.batched_calls = std::int64_t(kept.steps.size());
  stats.nodes = std::int64_t(weaver.num_calls());
  stats.bytes_gathered = plan->bytes_gathered;
  stats.gathers_skipped = plan->gathers_skipped;
  stats.packed_bytes = std::int64_t(plan->packed.nbytes());
  stats.planned_gathers = std::int64_t(plan->gathers.size());
  stats.execute_seconds = seconds_since(start);
  stats.backend = backend_counters() - counted_before;
  return result;
}

const RunStats& LoomResult::stats() const {
  // The lower bound is a pass over the whole weave and the names are one string per operation
  // of the loom: both filled when the statistics are read, not on every run.
  if (!bound_filled_ && weaver_ != nullptr) {
    for (std::size_t op = 0; op < stats_.operations.size(); ++op)
      stats_.operations[op].name = weaver_->loom().operation(OpId(op)).name;
    const std::vector<std::int64_t> bound = min_batched_calls(*weaver_);
    for (std::size_t op = 0; op < bound.size(); ++op) {
      stats_.operations[op].min_batched_calls = bound[op];
      stats_.min_batched_calls += bound[op];
    }
    bound_filled_ = true;
  }
  return stats_;
}

ValueLocation LoomResult::location(Value value) const { return plan_->locations.at(value); }

Var LoomResult::gather(std::span<const Value> values) const {
  if (values.empty()) fail("loom", "gather of no values");
  const TypeId type = weaver_->type_of(values[0]);
  for (Value v : values)
    if (weaver_->type_of(v) != type)
      fail("loom", "gather mixes types ", weaver_->loom().type(type).to_string(), " and ",
           weaver_->loom().type(weaver_->type_of(v)).to_string());
  // Values no plan foresaw: their references travel in a copy of their own.
  std::vector<Var> involved;
  std::vector<std::uint32_t> local_of;  // chunk id -> index in `involved` + 1 (0 = not yet)
  std::vector<std::int32_t> refs;
  refs.reserve(2 * values.size());
  for (Value v : values) {
    const ValueLocation loc = location(v);
    if (loc.chunk >= local_of.size()) local_of.resize(loc.chunk + 1, 0);
    if (local_of[loc.chunk] == 0) {
      involved.push_back(chunks_[loc.chunk]);
      local_of[loc.chunk] = std::uint32_t(involved.size());
    }
    refs.push_back(std::int32_t(local_of[loc.chunk] - 1));
    refs.push_back(std::int32_t(loc.row));
  }
  return detail::gather_host_refs(
      involved, refs, weaver_->loom().type(type).shape.prepend(std::int64_t(values.size())));
}

Var LoomResult::planned_gather(std::size_t k) const {
  if (k >= plan_->result_gathers.size())
    fail("loom", "planned_gather: list ", k, " was not planned (", plan_->result_gathers.size(),
         " were)");
  const std::int64_t index = plan_->result_gathers[k];
  if (index < 0) return Var();
  const PlannedGather& g = plan_->gathers[std::size_t(index)];
  const TypeShape& ts = weaver_->loom().type(plan_->result_types[k]);
  const std::int64_t width = ts.shape.numel();
  return run_planned_gather(*plan_, packed_, chunks_, std::size_t(index),
                            std::span<const std::int64_t>(&width, 1),
                            ts.shape.prepend(std::int64_t(g.rows)));
}

Var LoomResult::outputs(TypeId type) const {
  if (type >= plan_->output_gathers.size() || plan_->output_gathers[type] < 0)
    fail("loom", "the weave has no outputs of type ",
         type < weaver_->loom().num_types() ? weaver_->loom().type(type).to_string()
                                            : std::to_string(type));
  const PlannedGather& g = plan_->gathers[std::size_t(plan_->output_gathers[type])];
  const TypeShape& ts = weaver_->loom().type(type);
  const std::int64_t width = ts.shape.numel();
  return run_planned_gather(*plan_, packed_, chunks_, std::size_t(plan_->output_gathers[type]),
                            std::span<const std::int64_t>(&width, 1),
                            ts.shape.prepend(std::int64_t(g.rows)));
}

}  // namespace weft::loom
