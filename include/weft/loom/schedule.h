// Scheduling: the order in which a weave's calls run, as steps of one operation each, every
// step one batched call of the operation's body. Strategies are named and swappable:
//   by_depth — the paper's: one step per (depth, operation), depths in order;
//   agenda   — DyNet's: repeatedly run every ready call of the operation type with the
//              lowest average depth (batches better when operations interleave);
//   none     — one step per call: the unbatched baseline.
// Orders are deterministic: by call id, never by pointer or hash order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/loom/weaver.h"

WEFT_API_BEGIN
namespace weft::loom {

// kByDepth: one step per (depth, operation), TensorFlow Fold's schedule. kSinksLast: the same,
// except that every call whose output no call consumes (a per-node classifier, a loss term)
// runs at the last depth, so such an operation is one step however deep its calls are.
// kAgenda: DyNet's (below). kNone: one call per step.
#define WEFT_LOOM_STRATEGIES(X) \
  X(kByDepth, "by_depth")       \
  X(kSinksLast, "sinks_last")   \
  X(kAgenda, "agenda")          \
  X(kNone, "none")
enum class Strategy { WEFT_LOOM_STRATEGIES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(Strategy, WEFT_LOOM_STRATEGIES, strategy_name, parse_strategy, "schedule",
                "strategy")

struct ScheduleStep {
  OpId op;
  std::uint32_t level;  // by_depth, sinks_last: depth - 1 (run depth); otherwise the step's index
  std::uint32_t begin;  // calls()[begin, end) are this step's call ids (order_calls_for_views)
  std::uint32_t end;
  std::uint32_t size() const { return end - begin; }
};

struct Schedule {
  Strategy strategy = Strategy::kByDepth;
  std::vector<ScheduleStep> steps;
  std::vector<std::uint32_t> calls;  // call ids, step after step
  std::uint32_t num_levels = 0;

  std::span<const std::uint32_t> step_calls(const ScheduleStep& step) const {
    return std::span<const std::uint32_t>(calls).subspan(step.begin, step.size());
  }
};

// The schedule of `strategy`, its steps' calls laid out by order_calls_for_views (none: one
// call per step, nothing to lay out).
Schedule make_schedule(const Weaver& weaver, Strategy strategy);
// Layout planning: a step's rows may come in any order, and that order is where its outputs
// land in its chunks. Orders every step's calls so that later steps read their arguments
// where they lie: each step takes its calls in the order its consumers (laid out before it,
// from the last step back) read them, position by position, or interleaved for a
// concat_inputs operation, whose [l | r] rows are then its producer's [l0 r0 l1 r1 ..] rows
// seen two at a time. A consumer whose arguments all come from one step then reads them as a
// view (RunStats::gathers_skipped) instead of a gather. Deterministic: the order depends only
// on the weave. A step nobody reads from keeps its ascending call ids.
void order_calls_for_views(const Weaver& weaver, Schedule& schedule);
// Splits every step of more than max_rows calls into steps of at most max_rows (0: none), in
// order: the same calls and levels in more, smaller batched calls.
void limit_step_rows(Schedule& schedule, std::uint32_t max_rows);

// The fewest batched calls of each operation (indexed by OpId) that any schedule of this weave
// can make: the longest chain of that operation's calls along one dependency path, since a
// call and the calls it depends on never share a step. Their sum bounds every strategy's
// batched calls from below; by_depth meets it when no operation's calls skip depths that
// other operations fill.
std::vector<std::int64_t> min_batched_calls(const Weaver& weaver);

// A readable summary: one line per step (level, operation, rows), then per-operation totals.
std::string schedule_text(const Weaver& weaver, const Schedule& schedule);
// Graphviz DOT of the weave, nodes coloured by level (for small batches).
std::string schedule_dot(const Weaver& weaver, const Schedule& schedule);

}  // namespace weft::loom
WEFT_API_END
