// The scheduling strategies (by_depth, sinks_last, agenda, none) and the schedule's text and
// DOT views.
#include "weft/loom/schedule.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "weft/core/error.h"

namespace weft::loom {

namespace {

// The calls whose output no call consumes (sinks_last runs them at the deepest depth: their
// arguments are all computed by then, and nothing waits for them).
std::vector<bool> sink_calls(const Weaver& weaver) {
  std::vector<bool> sink(weaver.num_calls(), true);
  for (std::uint32_t id = 0; id < weaver.num_calls(); ++id)
    for (Value a : weaver.call_args(id))
      if (weaver.kind_of(a) == ValueKind::kCallOutput) sink[weaver.info(a).index] = false;
  return sink;
}

// One step per (depth, operation): a counting sort of the calls by that key, stable, so
// every step lists its calls in id order.
Schedule schedule_by_depth(const Weaver& weaver, bool sinks_last) {
  Schedule schedule;
  const auto calls = weaver.calls();
  const std::vector<bool> sink = sinks_last ? sink_calls(weaver) : std::vector<bool>();
  const auto depth_of = [&](std::uint32_t id) {
    return sinks_last && sink[id] ? weaver.deepest() : calls[id].depth;
  };
  const std::size_t num_ops = weaver.loom().num_operations();
  const std::size_t keys = std::size_t(weaver.deepest() + 1) * num_ops;
  std::vector<std::uint32_t> start(keys + 1, 0);
  for (std::uint32_t id = 0; id < calls.size(); ++id)
    ++start[std::size_t(depth_of(id)) * num_ops + calls[id].op + 1];
  for (std::size_t k = 0; k < keys; ++k) start[k + 1] += start[k];
  schedule.calls.resize(calls.size());
  std::vector<std::uint32_t> cursor(start.begin(), start.end() - 1);
  for (std::uint32_t id = 0; id < calls.size(); ++id)
    schedule.calls[cursor[std::size_t(depth_of(id)) * num_ops + calls[id].op]++] = id;
  for (std::size_t k = 0; k < keys; ++k)
    if (start[k + 1] > start[k])
      schedule.steps.push_back(
          ScheduleStep{OpId(k % num_ops), std::uint32_t(k / num_ops - 1), start[k], start[k + 1]});
  schedule.num_levels = schedule.steps.empty() ? 0 : schedule.steps.back().level + 1;
  return schedule;
}

// DyNet's agenda: every call whose arguments are computed is ready; each step runs all the
// ready calls of the operation whose calls have the lowest average depth over the weave.
Schedule schedule_agenda(const Weaver& weaver) {
  Schedule schedule;
  const auto calls = weaver.calls();
  const std::size_t num_ops = weaver.loom().num_operations();
  std::vector<double> depth_sum(num_ops, 0), count(num_ops, 0);
  for (const auto& c : calls) depth_sum[c.op] += c.depth, count[c.op] += 1;
  // Consumers of each call (CSR) and the number of call-produced arguments still pending.
  std::vector<std::uint32_t> pending(calls.size(), 0), first(calls.size() + 1, 0);
  for (std::uint32_t id = 0; id < calls.size(); ++id)
    for (Value a : weaver.call_args(id))
      if (weaver.kind_of(a) == ValueKind::kCallOutput)
        ++first[weaver.info(a).index + 1], ++pending[id];
  for (std::size_t i = 0; i < calls.size(); ++i) first[i + 1] += first[i];
  std::vector<std::uint32_t> consumers(first.back()), fill(first.begin(), first.end() - 1);
  for (std::uint32_t id = 0; id < calls.size(); ++id)
    for (Value a : weaver.call_args(id))
      if (weaver.kind_of(a) == ValueKind::kCallOutput) consumers[fill[weaver.info(a).index]++] = id;
  std::vector<std::vector<std::uint32_t>> ready(num_ops);
  for (std::uint32_t id = 0; id < calls.size(); ++id)
    if (pending[id] == 0) ready[calls[id].op].push_back(id);
  while (schedule.calls.size() < calls.size()) {
    OpId best = 0;
    double best_depth = std::numeric_limits<double>::infinity();
    for (OpId op = 0; op < num_ops; ++op)
      if (!ready[op].empty() && depth_sum[op] / count[op] < best_depth)
        best = op, best_depth = depth_sum[op] / count[op];
    std::vector<std::uint32_t> step = std::move(ready[best]);
    ready[best].clear();
    std::sort(step.begin(), step.end());
    const auto begin = std::uint32_t(schedule.calls.size());
    schedule.calls.insert(schedule.calls.end(), step.begin(), step.end());
    const auto level = std::uint32_t(schedule.steps.size());
    schedule.steps.push_back(
        ScheduleStep{best, level, begin, std::uint32_t(schedule.calls.size())});
    for (std::uint32_t id : step)
      for (std::uint32_t k = first[id]; k < first[id + 1]; ++k)
        if (--pending[consumers[k]] == 0) ready[calls[consumers[k]].op].push_back(consumers[k]);
  }
  schedule.num_levels = std::uint32_t(schedule.steps.size());
  return schedule;
}

Schedule schedule_none(const Weaver& weaver) {
  Schedule schedule;
  const auto calls = weaver.calls();
  for (std::uint32_t id = 0; id < calls.size(); ++id) {
    schedule.calls.push_back(id);
    schedule.steps.push_back(ScheduleStep{calls[id].op, id, id, id + 1});
  }
  schedule.num_levels = std::uint32_t(calls.size());
  return schedule;
}

}  // namespace

Schedule make_schedule(const Weaver& weaver, Strategy strategy) {
  Schedule schedule;
  switch (strategy) {
    case Strategy::kByDepth:
    case Strategy::kSinksLast:
      schedule = schedule_by_depth(weaver, strategy == Strategy::kSinksLast);
      break;
    case Strategy::kAgenda:
      schedule = schedule_agenda(weaver);
      break;
    case Strategy::kNone:
      schedule = schedule_none(weaver);
      break;
  }
  schedule.strategy = strategy;
  if (strategy != Strategy::kNone) order_calls_for_views(weaver, schedule);
  return schedule;
}

void limit_step_rows(Schedule& schedule, std::uint32_t max_rows) {
  if (max_rows == 0) return;
  std::vector<ScheduleStep> steps;
  steps.reserve(schedule.steps.size());
  for (const ScheduleStep& step : schedule.steps) {
    for (std::uint32_t begin = step.begin; begin < step.end; begin += max_rows)
      steps.push_back(
          ScheduleStep{step.op, step.level, begin, std::min(step.end, begin + max_rows)});
  }
  schedule.steps = std::move(steps);
}

std::string schedule_text(const Weaver& weaver, const Schedule& schedule) {
  std::ostringstream out;
  const Loom& loom = weaver.loom();
  out << "schedule " << strategy_name(schedule.strategy) << ": " << weaver.num_calls()
      << " calls in " << schedule.steps.size() << " batched calls over " << schedule.num_levels
      << " levels\n";
  for (const ScheduleStep& step : schedule.steps)
    out << "  level " << step.level << "  " << loom.operation(step.op).name << " x" << step.size()
        << "\n";
  return out.str();
}

std::string schedule_dot(const Weaver& weaver, const Schedule& schedule) {
  static const char* kColors[] = {"#e6f2ff", "#cce5ff", "#99ccff", "#66b2ff",
                                  "#3399ff", "#0080ff", "#0066cc", "#004c99"};
  const Loom& loom = weaver.loom();
  std::vector<std::uint32_t> level_of(weaver.num_calls(), 0);
  for (const ScheduleStep& step : schedule.steps)
    for (std::uint32_t id : schedule.step_calls(step)) level_of[id] = step.level;
  std::ostringstream out;
  out << "digraph weave {\n  rankdir=BT;\n  node [style=filled, fontname=\"monospace\"];\n";
  for (Value v = 0; v < weaver.num_values(); ++v) {
    const auto& info = weaver.info(v);
    if (info.kind == ValueKind::kCallOutput) continue;
    const char* kind = info.kind == ValueKind::kConstant    ? "const"
                       : info.kind == ValueKind::kParameter ? "param"
                       : info.kind == ValueKind::kImported  ? "import"
                                                            : "batch";
    out << "  v" << v << " [shape=box, fillcolor=\"#eeeeee\", label=\"" << kind << " "
        << loom.type(info.type).to_string() << "\"];\n";
  }
  for (std::uint32_t id = 0; id < weaver.num_calls(); ++id) {
    const auto& call = weaver.calls()[id];
    out << "  c" << id << " [fillcolor=\"" << kColors[level_of[id] % 8] << "\", label=\""
        << loom.operation(call.op).name << "\\nlevel " << level_of[id] << "\"];\n";
    for (Value a : weaver.call_args(id)) {
      const auto& info = weaver.info(a);
      if (info.kind == ValueKind::kCallOutput)
        out << "  c" << info.index << " -> c" << id << ";\n";
      else
        out << "  v" << a << " -> c" << id << ";\n";
    }
  }
  out << "}\n";
  return out.str();
}

std::vector<std::int64_t> min_batched_calls(const Weaver& weaver) {
  const std::size_t ops = weaver.loom().num_operations();
  std::vector<std::int64_t> bound(ops, 0);
  if (ops == 0 || weaver.num_calls() == 0) return bound;
  // chain[c * ops + o]: the most calls of operation o on one dependency path ending at call c.
  // Calls are recorded after their arguments, so one pass in call order sees every argument's
  // chain first.
  std::vector<std::uint32_t> chain(weaver.num_calls() * ops, 0);
  const std::span<const Weaver::CallInfo> calls = weaver.calls();
  for (std::uint32_t c = 0; c < calls.size(); ++c) {
    std::uint32_t* mine = &chain[std::size_t(c) * ops];
    for (const Value arg : weaver.call_args(c)) {
      const Weaver::ValueInfo& info = weaver.info(arg);
      if (info.kind != ValueKind::kCallOutput) continue;
      const std::uint32_t* theirs = &chain[std::size_t(info.index) * ops];
      for (std::size_t o = 0; o < ops; ++o) mine[o] = std::max(mine[o], theirs[o]);
    }
    const OpId op = calls[c].op;
    ++mine[op];
    bound[op] = std::max<std::int64_t>(bound[op], mine[op]);
  }
  return bound;
}

}  // namespace weft::loom
