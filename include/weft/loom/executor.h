// The executor runs a scheduled weave on a tape: per step ONE gather per argument (none when
// the rows are already contiguous and in order; straight into the concatenated layout for
// concat_inputs operations), ONE call of the body, and the outputs kept as that step's chunk
// of the type's values — every value is stored once. The gathers are tape ops whose backward
// scatter-adds, so tape.backward() runs the schedule in reverse and a value used by several
// consumers gets the sum of their gradients; gradients reach parameters and fed batches.
// What the host works out for a run (where values live, the gathers' row references, the
// constants) is its BatchPlan (batch_plan.h), sent to the run's device in one copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/backend/counters.h"
#include "weft/core/export.h"
#include "weft/loom/schedule.h"

WEFT_API_BEGIN
namespace weft::loom {

struct OperationStats {
  std::string name;
  std::int64_t batched_calls = 0;      // steps of this operation
  std::int64_t rows = 0;               // calls of this operation, summed over steps
  std::int64_t max_rows = 0;           // the largest step
  std::int64_t min_batched_calls = 0;  // the fewest steps any schedule could have (schedule.h)
  double mean_rows() const { return batched_calls ? double(rows) / double(batched_calls) : 0; }
};

struct RunStats {
  std::uint32_t levels = 0;
  std::int64_t batched_calls = 0;
  std::int64_t min_batched_calls = 0;  // the lower bound, summed over operations (schedule.h)
  std::int64_t nodes = 0;              // calls woven
  std::int64_t bytes_gathered = 0;
  std::int64_t gathers_skipped = 0;  // arguments passed as views (already contiguous)
  // The batch's packed buffer (its constants and every gather's row references, batch_plan.h),
  // sent to the run's device in one copy, and the gathers reading it (the steps' and the ones
  // planned for after the run).
  std::int64_t packed_bytes = 0;
  std::int64_t planned_gathers = 0;
  double schedule_seconds = 0;
  double execute_seconds = 0;
  // What the run asked of the backend (the running thread's counters over Executor::run):
  // kernels on any device; on CUDA, launches, host-to-device copies and waits for the device.
  BackendCounters backend;
  std::vector<OperationStats> operations;
  // A multi-line human-readable report.
  std::string to_string() const;
};

class LoomResult;
struct BatchPlan;

// Where a value lives after a run: row `row` of chunk `chunk` (a step's output, or a
// depth-0 block of constants, a parameter or a fed batch).
struct ValueLocation {
  std::uint32_t chunk;
  std::uint32_t row;
};

class Executor {
 public:
  // `device` holds the run's values: the weave's constants are copied there, and parameters
  // and fed batches must already live there (a mismatch is a weft::Error naming both).
  Executor(const Loom& loom, Tape& tape, Device device = Device::kCpu);
  // The batch tensor whose rows Weaver::batch_input(type, row) refers to: [rows, ...shape].
  void feed(TypeId type, Var batch);
  // The values Weaver::imported(type, slot) refers to in the next runs: row rows[slot].row of
  // chunks[rows[slot].chunk], Vars of this tape computed earlier (an earlier run's chunks).
  void import(std::span<const Var> chunks, std::span<const ValueLocation> rows);
  // Schedules and runs; record further ops (a loss) on the same tape, then backward(). The
  // weaver must outlive the result.
  // max_step_rows > 0 cuts larger steps into batched calls of at most that many rows
  // (limit_step_rows).
  LoomResult run(const Weaver& weaver, Strategy strategy = Strategy::kByDepth,
                 std::uint32_t max_step_rows = 0);
  LoomResult run(const Weaver& weaver, const Schedule& schedule);
  // Runs with a plan made ahead for this weave and schedule (make_batch_plan, e.g. on the
  // thread that wove the batch); planned again here when null or when it depends on imports.
  // The plan must outlive the result.
  LoomResult run(const Weaver& weaver, const Schedule& schedule, const BatchPlan* plan);

 private:
  // run(weaver, schedule, plan) keeping `schedule` in the result by moving it (a schedule made
  // for this run alone, once per engine step for a decoder, is not copied).
  LoomResult run_kept(const Weaver& weaver, Schedule schedule, const BatchPlan* plan);

  const Loom* loom_;
  Tape* tape_;
  Device device_;
  std::vector<Var> fed_;  // per type
  std::vector<Var> import_chunks_;
  std::vector<ValueLocation> import_rows_;
};

// The outcome of Executor::run: where every value of the weave lives on the tape. It refers
// to the weave (keep the Weaver alive while using it) and to Vars of the run's tape.
class LoomResult {
 public:
  // The weave's outputs of one type, in the order they were added: [n, ...shape].
  Var outputs(TypeId type) const;
  // Any values of the weave gathered into one [n, ...shape] Var (all of one type).
  Var gather(std::span<const Value> values) const;
  // The run's statistics; the schedule's lower bound in them is computed on the first call.
  const RunStats& stats() const;
  // The schedule that ran (for schedule_text / schedule_dot).
  const Schedule& schedule() const { return schedule_; }
  // The values of result list k of the plan (make_batch_plan's result_lists) as one [n, ...]
  // Var, gathered with the references the batch's one upload brought; undefined for an empty
  // list.
  Var planned_gather(std::size_t k) const;
  // Where the values live, for a later weave to import them (Executor::import).
  std::span<const Var> chunks() const { return chunks_; }
  ValueLocation location(Value value) const;
  const Weaver& weaver() const { return *weaver_; }

 private:
  friend class Executor;
  const Weaver* weaver_ = nullptr;
  std::vector<Var> chunks_;
  std::shared_ptr<const BatchPlan> owned_plan_;  // when the run planned it
  const BatchPlan* plan_ = nullptr;              // where every value lives
  Tensor packed_;                                // the plan's buffer on the run's device
  Schedule schedule_;
  mutable RunStats stats_;
  mutable bool bound_filled_ = false;  // stats_'s lower bound
};

}  // namespace weft::loom
WEFT_API_END
