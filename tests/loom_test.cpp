// The loom's guarantee: for random DAGs (several operations and types of every dtype, multiple
// outputs, shared sub-graphs, arguments from far-apart depths, parameters and fed batch rows),
// the batched strategies give the same outputs and gradients as unbatched execution. Plus the
// exact schedule shape of known inputs, merging, and every misuse by message.
#include "weft/loom/executor.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>

#include "op_test_util.h"

namespace weft::testing {
namespace {

using loom::Executor;
using loom::Loom;
using loom::OpId;
using loom::Strategy;
using loom::TypeId;
using loom::TypeShape;
using loom::Value;
using loom::ValueKind;
using loom::Weaver;

const TypeShape kHidden{DType::kFloat32, {4}, "hidden"};
const TypeShape kWord{DType::kFloat32, {3}, "word"};
const TypeShape kPair{DType::kFloat32, {2}, "pair"};
const TypeShape kCount{DType::kInt64, {4}, "count"};
const TypeShape kFlag{DType::kBool, {4}, "flag"};
const TypeShape kWide{DType::kFloat64, {4}, "wide"};
const TypeShape kId{DType::kInt32, {4}, "id"};

// A loom with ten operations over seven types (float32, int64, bool, float64 and int32), and
// the parameters their bodies use.
struct TestModel {
  Loom loom;
  TypeId hidden, word, pair, count, flag, wide, id;
  OpId embed, combine, combine_concat, split, mix, tally, measure, gate, widen, recount;
  Parameter we{"we", random_tensor({3, 4}, 101)}, be{"be", random_tensor({4}, 102)};
  Parameter wc{"wc", random_tensor({8, 4}, 103)}, bc{"bc", random_tensor({4}, 104)};
  Parameter wp{"wp", random_tensor({4, 2}, 105)}, bp{"bp", random_tensor({2}, 106)};
  Parameter wm{"wm", random_tensor({9, 4}, 107)}, bm{"bm", random_tensor({4}, 108)};
  Parameter h0{"h0", random_tensor({4}, 109)};

  TestModel() {
    embed = loom.add_operation("embed", {kWord}, {kHidden}, [this](std::span<const Var> in) {
      return std::vector<Var>{tanh(linear(in[0], we, be))};
    });
    combine = loom.add_operation(
        "combine", {kHidden, kHidden}, {kHidden}, [this](std::span<const Var> in) {
          return std::vector<Var>{tanh(linear(concat({in[0], in[1]}), wc, bc))};
        });
    loom::OperationOptions concat_inputs;
    concat_inputs.concat_inputs = true;
    combine_concat = loom.add_operation(
        "combine_concat", {kHidden, kHidden}, {kHidden},
        [this](std::span<const Var> in) { return std::vector<Var>{tanh(linear(in[0], wc, bc))}; },
        concat_inputs);
    split =
        loom.add_operation("split", {kHidden}, {kHidden, kPair}, [this](std::span<const Var> in) {
          return std::vector<Var>{sigmoid(in[0]), linear(in[0], wp, bp)};
        });
    mix = loom.add_operation(
        "mix", {kPair, kHidden, kWord}, {kHidden}, [this](std::span<const Var> in) {
          return std::vector<Var>{tanh(linear(concat({in[0], in[1], in[2]}), wm, bm))};
        });
    // int64 arithmetic that wraps, a comparison giving bool, a where differentiable in
    // float32, and float64 arithmetic from float32 values.
    tally = loom.add_operation("tally", {kCount, kCount}, {kCount}, [](std::span<const Var> in) {
      return std::vector<Var>{in[0] * 3.0f - in[1]};
    });
    measure =
        loom.add_operation("measure", {kHidden, kCount}, {kFlag}, [](std::span<const Var> in) {
          return std::vector<Var>{greater(in[0], cast(in[1], DType::kFloat32) * 0.25f)};
        });
    gate = loom.add_operation(
        "gate", {kFlag, kHidden, kHidden}, {kHidden},
        [](std::span<const Var> in) { return std::vector<Var>{where(in[0], in[1], tanh(in[2]))}; });
    widen = loom.add_operation("widen", {kHidden, kWide}, {kWide}, [](std::span<const Var> in) {
      return std::vector<Var>{cast(in[0], DType::kFloat64) * 2.0f + in[1]};
    });
    // int64 narrowed to int32 (wrapping) and back, beside a second, int32 result.
    recount = loom.add_operation("recount", {kCount}, {kId, kCount}, [](std::span<const Var> in) {
      Var narrow = cast(in[0], DType::kInt32);
      return std::vector<Var>{narrow * 2.0f, cast(narrow, DType::kInt64) - in[0]};
    });
    hidden = loom.type_id(kHidden);
    word = loom.type_id(kWord);
    pair = loom.type_id(kPair);
    id = loom.type_id(kId);
    count = loom.type_id(kCount);
    flag = loom.type_id(kFlag);
    wide = loom.type_id(kWide);
  }
  std::vector<Parameter> parameters() const { return {we, be, wc, bc, wp, bp, wm, bm, h0}; }
};

// A random DAG, recorded so that a failing one can be shrunk and printed. Each example is a
// list of steps; every step makes values (numbered in order within the example): a word
// constant, a fed row, the shared parameter h0, or a call of an operation on earlier values
// (any earlier value of the right type: far-apart arguments and shared sub-graphs).
struct DagStep {
  enum Kind { kConstant, kFed, kParameter, kCall, kCountConstant, kFlagConstant, kWideConstant };
  Kind kind = kConstant;
  float values[3] = {0, 0, 0};            // a word constant
  std::int64_t counts[4] = {0, 0, 0, 0};  // a count constant (a flag constant: 0 / 1)
  double wides[4] = {0, 0, 0, 0};         // a wide constant
  std::int64_t row = 0;
  OpId op = 0;
  std::vector<int> args;
};
struct DagExample {
  std::vector<DagStep> steps;
  std::vector<int> outputs;  // value numbers
};
struct Dag {
  std::uint64_t seed = 0;
  std::int64_t batch_rows = 5;
  std::vector<DagExample> examples;
};

// The number of values a step makes.
int values_of(const TestModel& m, const DagStep& s) {
  return s.kind == DagStep::kCall && (s.op == m.split || s.op == m.recount) ? 2 : 1;
}

DagExample random_example(TestModel& m, Rng& rng, std::int64_t batch_rows) {
  DagExample ex;
  std::vector<std::vector<int>> by_type(m.loom.num_types());
  int next = 0;
  auto add = [&](DagStep step, std::initializer_list<TypeId> types) {
    ex.steps.push_back(std::move(step));
    for (TypeId t : types) by_type[t].push_back(next++);
  };
  auto pick = [&](TypeId t) { return by_type[t][rng.below(by_type[t].size())]; };
  const int constants = 1 + int(rng.below(3));
  for (int i = 0; i < constants; ++i) {
    DagStep s;
    for (float& v : s.values) v = rng.uniform(-1, 1);
    add(s, {m.word});
  }
  DagStep fed;
  fed.kind = DagStep::kFed;
  fed.row = std::int64_t(rng.below(std::uint64_t(batch_rows)));
  add(fed, {m.word});
  DagStep h0;
  h0.kind = DagStep::kParameter;
  add(h0, {m.hidden});
  // Counts small or huge (so that tally's arithmetic wraps), flags, wide values.
  DagStep count;
  count.kind = DagStep::kCountConstant;
  for (std::int64_t& v : count.counts)
    v = rng.below(4) ? std::int64_t(rng.below(9)) - 4
                     : std::int64_t(rng.next_u64() >> 1) * (rng.below(2) ? 1 : -1);
  add(count, {m.count});
  DagStep flag;
  flag.kind = DagStep::kFlagConstant;
  for (std::int64_t& v : flag.counts) v = std::int64_t(rng.below(2));
  add(flag, {m.flag});
  DagStep wide;
  wide.kind = DagStep::kWideConstant;
  for (double& v : wide.wides) v = double(rng.uniform(-1, 1)) * 1e10 + double(rng.uniform(-1, 1));
  add(wide, {m.wide});
  const int calls = 1 + int(rng.below(10));
  for (int c = 0; c < calls; ++c) {
    DagStep s;
    s.kind = DagStep::kCall;
    switch (rng.below(10)) {
      case 0:
        s.op = m.embed;
        s.args = {pick(m.word)};
        break;
      case 1:
        s.op = m.combine;
        s.args = {pick(m.hidden), pick(m.hidden)};
        break;
      case 2:
        s.op = m.combine_concat;
        s.args = {pick(m.hidden), pick(m.hidden)};
        break;
      case 3:
        s.op = m.split;
        s.args = {pick(m.hidden)};
        add(s, {m.hidden, m.pair});
        continue;
      case 4:
        if (by_type[m.pair].empty()) continue;
        s.op = m.mix;
        s.args = {pick(m.pair), pick(m.hidden), pick(m.word)};
        break;
      case 5:
        s.op = m.tally;
        s.args = {pick(m.count), pick(m.count)};
        add(s, {m.count});
        continue;
      case 6:
        s.op = m.measure;
        s.args = {pick(m.hidden), pick(m.count)};
        add(s, {m.flag});
        continue;
      case 7:
        s.op = m.gate;
        s.args = {pick(m.flag), pick(m.hidden), pick(m.hidden)};
        break;
      case 8:
        s.op = m.widen;
        s.args = {pick(m.hidden), pick(m.wide)};
        add(s, {m.wide});
        continue;
      default:
        s.op = m.recount;
        s.args = {pick(m.count)};
        add(s, {m.id, m.count});
        continue;
    }
    add(s, {m.hidden});
  }
  ex.outputs.push_back(by_type[m.hidden].back());
  const int more = int(rng.below(3));
  for (int k = 0; k < more; ++k) ex.outputs.push_back(pick(m.hidden));
  if (!by_type[m.pair].empty() && rng.below(2)) ex.outputs.push_back(pick(m.pair));
  for (TypeId t : {m.count, m.flag, m.wide, m.id})
    if (!by_type[t].empty() && rng.below(2)) ex.outputs.push_back(pick(t));
  return ex;
}

Dag random_dag(TestModel& m, std::uint64_t seed) {
  Rng rng(seed);
  Dag dag;
  dag.seed = seed;
  const int examples = 1 + int(rng.below(4));
  for (int e = 0; e < examples; ++e) dag.examples.push_back(random_example(m, rng, dag.batch_rows));
  return dag;
}

// Weaves each example on its own weaver and merges them (as threads do).
void weave_dag(TestModel& m, const Dag& dag, Weaver& all) {
  for (const DagExample& ex : dag.examples) {
    Weaver w(m.loom);
    std::vector<Value> values;
    for (const DagStep& s : ex.steps) {
      switch (s.kind) {
        case DagStep::kConstant:
          values.push_back(w.constant(m.word, s.values));
          break;
        case DagStep::kFed:
          values.push_back(w.batch_input(m.word, s.row));
          break;
        case DagStep::kParameter:
          values.push_back(w.parameter(m.hidden, m.h0));
          break;
        case DagStep::kCountConstant:
          values.push_back(w.constant(m.count, std::span<const std::int64_t>(s.counts)));
          break;
        case DagStep::kFlagConstant: {
          const std::uint8_t bits[4] = {std::uint8_t(s.counts[0]), std::uint8_t(s.counts[1]),
                                        std::uint8_t(s.counts[2]), std::uint8_t(s.counts[3])};
          values.push_back(w.bool_constant(m.flag, bits));
          break;
        }
        case DagStep::kWideConstant:
          values.push_back(w.constant(m.wide, std::span<const double>(s.wides)));
          break;
        case DagStep::kCall: {
          std::vector<Value> args;
          for (int a : s.args) args.push_back(values[std::size_t(a)]);
          for (Value v : w.call(s.op, args)) values.push_back(v);
        }
      }
    }
    for (int o : ex.outputs) w.add_output(values[std::size_t(o)]);
    all.append(w);
  }
}

// One random example woven into w.
void weave_random_example(TestModel& m, Weaver& w, Rng& rng, std::int64_t batch_rows) {
  Dag dag;
  dag.batch_rows = batch_rows;
  dag.examples.push_back(random_example(m, rng, batch_rows));
  weave_dag(m, dag, w);
}

// A DAG as C++-like text: the minimal reproduction a failure prints.
std::string describe_dag(const TestModel& m, const Dag& dag) {
  std::ostringstream out;
  out << "seed " << dag.seed << ", " << dag.examples.size() << " example(s), fed batch of "
      << dag.batch_rows << " rows:\n";
  for (std::size_t e = 0; e < dag.examples.size(); ++e) {
    const DagExample& ex = dag.examples[e];
    out << "  example " << e << ":\n";
    int next = 0;
    for (const DagStep& s : ex.steps) {
      out << "    v" << next;
      if (values_of(m, s) == 2) out << ", v" << next + 1;
      next += values_of(m, s);
      switch (s.kind) {
        case DagStep::kConstant:
          out << " = constant(word, {" << s.values[0] << ", " << s.values[1] << ", " << s.values[2]
              << "})";
          break;
        case DagStep::kFed:
          out << " = batch_input(word, " << s.row << ")";
          break;
        case DagStep::kParameter:
          out << " = parameter(hidden, h0)";
          break;
        case DagStep::kCountConstant:
        case DagStep::kFlagConstant:
          out << " = constant(" << (s.kind == DagStep::kFlagConstant ? "flag" : "count") << ", {"
              << s.counts[0] << ", " << s.counts[1] << ", " << s.counts[2] << ", " << s.counts[3]
              << "})";
          break;
        case DagStep::kWideConstant:
          out << " = constant(wide, {" << s.wides[0] << ", " << s.wides[1] << ", " << s.wides[2]
              << ", " << s.wides[3] << "})";
          break;
        case DagStep::kCall:
          out << " = " << m.loom.operation(s.op).name << "(";
          for (std::size_t a = 0; a < s.args.size(); ++a) out << (a ? ", v" : "v") << s.args[a];
          out << ")";
      }
      out << "\n";
    }
    out << "    outputs:";
    for (int o : ex.outputs) out << " v" << o;
    out << "\n";
  }
  return out.str();
}

struct RunOutcome {
  std::vector<float> hidden_out, pair_out, batch_grad;
  std::vector<double> count_out, flag_out, wide_out, id_out;  // outputs of the other dtypes
  std::vector<std::vector<float>> parameter_grads;
  std::uint32_t levels = 0;
  std::int64_t batched_calls = 0;
};

// max_step_rows > 0: the strategy's steps split into batched calls of at most that many rows.
RunOutcome run_strategy(TestModel& m, const Weaver& w, const Tensor& batch, Strategy strategy,
                        std::uint32_t max_step_rows = 0) {
  for (Parameter p : m.parameters()) p.zero_grad();
  Tape tape;
  Executor executor(m.loom, tape);
  Var fed = tape.variable(batch);
  executor.feed(m.word, fed);
  loom::Schedule schedule = loom::make_schedule(w, strategy);
  loom::limit_step_rows(schedule, max_step_rows);
  auto result = executor.run(w, schedule);
  Var h = result.outputs(m.hidden);
  Var loss = sum(h * tape.constant(random_tensor(h.shape(), 7)));
  RunOutcome outcome;
  bool has_pair = false;
  for (Value v : w.outputs()) has_pair = has_pair || w.type_of(v) == m.pair;
  if (has_pair) {
    Var p = result.outputs(m.pair);
    loss = loss + sum(p * tape.constant(random_tensor(p.shape(), 8)));
    outcome.pair_out = p.value().to_float_vector();
  }
  for (auto [type, out] :
       {std::pair{m.count, &outcome.count_out}, std::pair{m.flag, &outcome.flag_out},
        std::pair{m.wide, &outcome.wide_out}}) {
    bool has = false;
    for (Value v : w.outputs()) has = has || w.type_of(v) == type;
    if (has) *out = result.outputs(type).value().to_double_vector();
  }
  tape.backward(loss);
  outcome.hidden_out = h.value().to_float_vector();
  // A fed row that reaches no output has no gradient (none) or a zero one (a gather touched it).
  outcome.batch_grad = fed.grad().defined() ? fed.grad().to_float_vector()
                                            : std::vector<float>(std::size_t(batch.numel()), 0.0f);
  for (const Parameter& p : m.parameters())
    outcome.parameter_grads.push_back(p.grad().to_float_vector());
  outcome.levels = result.stats().levels;
  outcome.batched_calls = result.stats().batched_calls;
  return outcome;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 2e-5) << what << " element " << i;
}

// "" when every strategy matches unbatched execution on the DAG, else the first difference.
std::string first_mismatch(TestModel& m, const Dag& dag) {
  Weaver all(m.loom);
  weave_dag(m, dag, all);
  Tensor batch = random_tensor({dag.batch_rows, 3}, dag.seed + 1000);
  const RunOutcome reference = run_strategy(m, all, batch, Strategy::kNone);
  auto differs = [](const std::vector<float>& a, const std::vector<float>& b) -> std::string {
    if (a.size() != b.size())
      return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(std::abs(a[i] - b[i]) <= 2e-5f))
        return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
               std::to_string(b[i]) + " unbatched";
    return "";
  };
  auto differs_wide = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size())
      return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(std::abs(a[i] - b[i]) <= 1e-4 + 1e-12 * std::abs(b[i])))
        return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
               std::to_string(b[i]) + " unbatched";
    return std::string();
  };
  // by_depth, sinks_last and agenda, and by_depth with its steps cut to at most 2 rows.
  for (const auto& [s, max_rows] :
       {std::pair{Strategy::kByDepth, 0u}, std::pair{Strategy::kSinksLast, 0u},
        std::pair{Strategy::kAgenda, 0u}, std::pair{Strategy::kByDepth, 2u}}) {
    const RunOutcome batched = run_strategy(m, all, batch, s, max_rows);
    const std::string where = "strategy " + std::string(loom::strategy_name(s)) +
                              (max_rows ? ", at most 2 rows a step" : "") + ", ";
    if (auto d = differs(batched.hidden_out, reference.hidden_out); !d.empty())
      return where + "hidden outputs, " + d;
    if (auto d = differs(batched.pair_out, reference.pair_out); !d.empty())
      return where + "pair outputs, " + d;
    // int64 and bool exactly; float64 (computed from float32 values) to float32's tolerance.
    if (batched.count_out != reference.count_out) return where + "count (int64) outputs differ";
    if (batched.flag_out != reference.flag_out) return where + "flag (bool) outputs differ";
    if (batched.id_out != reference.id_out) return where + "id (int32) outputs differ";
    if (auto d = differs_wide(batched.wide_out, reference.wide_out); !d.empty())
      return where + "wide (float64) outputs, " + d;
    if (auto d = differs(batched.batch_grad, reference.batch_grad); !d.empty())
      return where + "fed batch gradient, " + d;
    for (std::size_t p = 0; p < reference.parameter_grads.size(); ++p)
      if (auto d = differs(batched.parameter_grads[p], reference.parameter_grads[p]); !d.empty())
        return where + "gradient of " + m.parameters()[p].name() + ", " + d;
    if (batched.batched_calls > reference.batched_calls)
      return where + "more batched calls than unbatched";
  }
  return "";
}

// Removes step k of example e when nothing reads its values; false otherwise.
bool drop_step(const TestModel& m, DagExample& ex, std::size_t k) {
  int first = 0;
  for (std::size_t i = 0; i < k; ++i) first += values_of(m, ex.steps[i]);
  const int count = values_of(m, ex.steps[k]);
  auto used = [&](int v) { return v >= first && v < first + count; };
  for (std::size_t i = k + 1; i < ex.steps.size(); ++i)
    for (int a : ex.steps[i].args)
      if (used(a)) return false;
  for (int o : ex.outputs)
    if (used(o)) return false;
  ex.steps.erase(ex.steps.begin() + std::ptrdiff_t(k));
  auto renumber = [&](int& v) {
    if (v >= first + count) v -= count;
  };
  for (DagStep& s : ex.steps)
    for (int& a : s.args) renumber(a);
  for (int& o : ex.outputs) renumber(o);
  return true;
}

// Shrinks a failing DAG: drops examples, outputs (keeping a hidden one) and unread steps while
// it still fails.
Dag shrink(TestModel& m, Dag dag, const std::function<bool(const Dag&)>& fails) {
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t e = 0; dag.examples.size() > 1 && e < dag.examples.size(); ++e) {
      Dag smaller = dag;
      smaller.examples.erase(smaller.examples.begin() + std::ptrdiff_t(e));
      if (fails(smaller)) {
        dag = std::move(smaller);
        progress = true;
        --e;
      }
    }
    for (std::size_t e = 0; e < dag.examples.size(); ++e) {
      for (std::size_t o = 1; o < dag.examples[e].outputs.size(); ++o) {
        Dag smaller = dag;
        auto& outs = smaller.examples[e].outputs;
        outs.erase(outs.begin() + std::ptrdiff_t(o));
        if (fails(smaller)) {
          dag = std::move(smaller);
          progress = true;
          --o;
        }
      }
      for (std::size_t k = dag.examples[e].steps.size(); k-- > 0;) {
        Dag smaller = dag;
        if (drop_step(m, smaller.examples[e], k) && fails(smaller)) {
          dag = std::move(smaller);
          progress = true;
        }
      }
    }
  }
  return dag;
}

// WEFT_LOOM_PROPERTY_DAGS overrides the count (e.g. for a long soak run).
std::uint64_t property_dags() {
  if (const char* n = std::getenv("WEFT_LOOM_PROPERTY_DAGS")) return std::stoull(n);
  return 1000;
}

TEST(LoomProperty, BatchedStrategiesEqualUnbatchedOnRandomDags) {
  TestModel m;
  const std::uint64_t dags = property_dags();
  int failures = 0;
  for (std::uint64_t seed = 1; seed <= dags && failures < 3; ++seed) {
    const Dag dag = random_dag(m, seed);
    const std::string mismatch = first_mismatch(m, dag);
    if (mismatch.empty()) continue;
    ++failures;
    const Dag minimal = shrink(m, dag, [&](const Dag& d) { return !first_mismatch(m, d).empty(); });
    ADD_FAILURE() << "seed " << seed << ": " << mismatch << "\nminimal reproduction ("
                  << first_mismatch(m, minimal) << "):\n"
                  << describe_dag(m, minimal);
  }
}

// The schedule lower bound (loom::min_batched_calls) against a reference that follows every
// dependency path from every call (exponential, fine for these small DAGs), and against every
// strategy's schedule: no strategy has fewer steps of an operation than its bound.
std::int64_t longest_chain_from(const Weaver& w, std::uint32_t call, OpId op) {
  std::int64_t longest = 0;
  for (const Value arg : w.call_args(call)) {
    if (w.kind_of(arg) != ValueKind::kCallOutput) continue;
    longest = std::max(longest, longest_chain_from(w, w.info(arg).index, op));
  }
  return longest + (w.calls()[call].op == op ? 1 : 0);
}

TEST(LoomProperty, NoScheduleBeatsTheLowerBoundOnRandomDags) {
  TestModel m;
  int tighter_than_by_depth = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Weaver w(m.loom);
    weave_dag(m, random_dag(m, seed), w);
    const std::vector<std::int64_t> bound = loom::min_batched_calls(w);
    ASSERT_EQ(bound.size(), m.loom.num_operations());
    for (OpId op = 0; op < m.loom.num_operations(); ++op) {
      std::int64_t reference = 0;
      for (std::uint32_t c = 0; c < w.num_calls(); ++c)
        reference = std::max(reference, longest_chain_from(w, c, op));
      ASSERT_EQ(bound[op], reference) << m.loom.operation(op).name;
    }
    for (Strategy strategy :
         {Strategy::kByDepth, Strategy::kSinksLast, Strategy::kAgenda, Strategy::kNone}) {
      const loom::Schedule s = loom::make_schedule(w, strategy);
      std::vector<std::int64_t> steps(m.loom.num_operations(), 0);
      for (const auto& step : s.steps) ++steps[step.op];
      for (OpId op = 0; op < m.loom.num_operations(); ++op)
        EXPECT_GE(steps[op], bound[op])
            << loom::strategy_name(strategy) << ", " << m.loom.operation(op).name;
      if (strategy == Strategy::kByDepth &&
          std::int64_t(s.steps.size()) >
              std::accumulate(bound.begin(), bound.end(), std::int64_t(0)))
        ++tighter_than_by_depth;
    }
  }
  // The random DAGs mix operations across depths, so by_depth misses the bound on some.
  EXPECT_GT(tighter_than_by_depth, 0);
}

TEST(LoomProperty, AFailingDagShrinksToAMinimalReproduction) {
  TestModel m;
  // A stand-in failure: "any example calls mix". The first seed whose DAG has one.
  auto calls_mix = [&](const Dag& d) {
    for (const DagExample& ex : d.examples)
      for (const DagStep& s : ex.steps)
        if (s.kind == DagStep::kCall && s.op == m.mix) return true;
    return false;
  };
  std::uint64_t seed = 1;
  while (!calls_mix(random_dag(m, seed))) ++seed;
  const Dag dag = random_dag(m, seed);
  const Dag minimal = shrink(m, dag, calls_mix);
  ASSERT_EQ(minimal.examples.size(), 1u);
  const DagExample& ex = minimal.examples[0];
  EXPECT_EQ(ex.outputs.size(), 1u);
  ASSERT_FALSE(ex.steps.empty());
  EXPECT_TRUE(calls_mix(minimal));
  // Only what the output reads is left: no step can be dropped any more.
  for (std::size_t k = 0; k < ex.steps.size(); ++k) {
    DagExample copy = ex;
    if (drop_step(m, copy, k)) {
      Dag smaller = minimal;
      smaller.examples[0] = copy;
      EXPECT_FALSE(calls_mix(smaller)) << "step " << k << " was left but is not needed";
    }
  }
  const std::string text = describe_dag(m, minimal);
  EXPECT_THAT(text, ::testing::HasSubstr("seed " + std::to_string(seed) + ", 1 example(s)"));
  EXPECT_THAT(text, ::testing::HasSubstr(" = mix(v"));
  EXPECT_THAT(text, ::testing::HasSubstr("outputs: v"));
  EXPECT_TRUE(first_mismatch(m, minimal).empty());
}

// A balanced binary tree over `leaves` consecutive word constants: embed at the leaves,
// combine inside. Returns the root.
Value weave_balanced(TestModel& m, Weaver& w, int leaves) {
  std::vector<Value> level;
  for (int i = 0; i < leaves; ++i) {
    float values[3] = {float(i), 0.5f, -0.25f};
    level.push_back(w.call(m.embed, {w.constant(m.word, values)})[0]);
  }
  while (level.size() > 1) {
    std::vector<Value> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(w.call(m.combine, {level[i], level[i + 1]})[0]);
    if (level.size() % 2) next.push_back(level.back());
    level = next;
  }
  return level[0];
}

TEST(LoomSchedule, BalancedTreeOfEightLeavesHasFourLevels) {
  TestModel m;
  Weaver w(m.loom);
  w.add_output(weave_balanced(m, w, 8));
  loom::Schedule s = loom::make_schedule(w, Strategy::kByDepth);
  ASSERT_EQ(s.steps.size(), 4u);
  EXPECT_EQ(s.num_levels, 4u);
  const std::uint32_t rows[] = {8, 4, 2, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.steps[i].size(), rows[i]);
    EXPECT_EQ(s.steps[i].level, std::uint32_t(i));
    EXPECT_EQ(s.steps[i].op, i == 0 ? m.embed : m.combine);
  }
  EXPECT_NE(loom::schedule_text(w, s).find("level 1  combine x4"), std::string::npos);
  EXPECT_NE(loom::schedule_dot(w, s).find("digraph weave"), std::string::npos);
}

TEST(LoomSchedule, DifferentTreesShareOneCallPerLevelAndOperation) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {8, 3, 5, 1}) w.add_output(weave_balanced(m, w, leaves));
  loom::Schedule s = loom::make_schedule(w, Strategy::kByDepth);
  // Depth 1: 17 embeds; then combines at depths 2..4 (8 leaves: 4,2,1; 5: 2,1,1; 3: 1,1).
  ASSERT_EQ(s.steps.size(), 4u);
  EXPECT_EQ(s.steps[0].size(), 17u);
  EXPECT_EQ(s.steps[1].size(), 4u + 2 + 1);
  EXPECT_EQ(s.steps[2].size(), 2u + 1 + 1);
  EXPECT_EQ(s.steps[3].size(), 1u + 1);
  loom::Schedule none = loom::make_schedule(w, Strategy::kNone);
  EXPECT_EQ(none.steps.size(), w.num_calls());
}

// Two examples whose combines sit at different depths (one on a parameter, one on an embed):
// by depth runs combine at depths 1 and 2; the bound is one step per operation, which the
// agenda (embed first, then every ready combine) reaches. A balanced tree has no such slack.
TEST(LoomSchedule, TheLowerBoundIsTheLongestChainOfEachOperation) {
  TestModel m;
  Weaver w(m.loom);
  const float word[3] = {0.5f, -1.0f, 2.0f};
  const Value embedded = w.call(m.embed, {w.constant(m.word, word)})[0];
  w.add_output(w.call(m.combine, {embedded, embedded})[0]);
  const Value h0 = w.parameter(m.hidden, m.h0);
  w.add_output(w.call(m.combine, {h0, h0})[0]);
  const std::vector<std::int64_t> bound = loom::min_batched_calls(w);
  EXPECT_EQ(bound[m.embed], 1);
  EXPECT_EQ(bound[m.combine], 1);
  EXPECT_EQ(bound[m.mix], 0);
  EXPECT_EQ(loom::make_schedule(w, Strategy::kByDepth).steps.size(), 3u);
  EXPECT_EQ(loom::make_schedule(w, Strategy::kAgenda).steps.size(), 2u);
  Tape tape;
  Executor executor(m.loom, tape);
  const auto result = executor.run(w, Strategy::kByDepth);
  EXPECT_EQ(result.stats().min_batched_calls, 2);
  EXPECT_EQ(result.stats().operations[m.combine].min_batched_calls, 1);
  EXPECT_THAT(result.stats().to_string(), ::testing::HasSubstr("batched calls 3 (lower bound 2)"));

  Weaver tree(m.loom);
  tree.add_output(weave_balanced(m, tree, 8));
  const std::vector<std::int64_t> tree_bound = loom::min_batched_calls(tree);
  EXPECT_EQ(tree_bound[m.embed], 1);
  EXPECT_EQ(tree_bound[m.combine], 3);
  EXPECT_EQ(loom::make_schedule(tree, Strategy::kByDepth).steps.size(), 4u);
}

// A per-node head (split's pair, read by nothing but the caller) on every node of trees of
// 8 and 5 leaves: by depth runs it at every depth (5 steps), sinks_last once at the last
// depth, which is the bound; the other operations keep their steps, and every output equals
// by_depth's.
TEST(LoomSchedule, SinksLastRunsAPerNodeHeadOnceAtTheLastDepth) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {8, 5}) {
    std::vector<Value> level;
    for (int i = 0; i < leaves; ++i) {
      float values[3] = {float(i), 0.5f, -0.25f * float(leaves)};
      level.push_back(w.call(m.embed, {w.constant(m.word, values)})[0]);
    }
    for (Value v : level) w.add_output(w.call(m.split, {v})[1]);
    while (level.size() > 1) {
      std::vector<Value> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
        next.push_back(w.call(m.combine, {level[i], level[i + 1]})[0]);
        w.add_output(w.call(m.split, {next.back()})[1]);
      }
      if (level.size() % 2) next.push_back(level.back());
      level = next;
    }
    w.add_output(level[0]);
  }
  const std::vector<std::int64_t> bound = loom::min_batched_calls(w);
  ASSERT_EQ(bound[m.split], 1);
  auto steps_of = [&](const loom::Schedule& s, OpId op) {
    return std::count_if(s.steps.begin(), s.steps.end(),
                         [&](const loom::ScheduleStep& step) { return step.op == op; });
  };
  const loom::Schedule by_depth = loom::make_schedule(w, Strategy::kByDepth);
  const loom::Schedule sinks_last = loom::make_schedule(w, Strategy::kSinksLast);
  EXPECT_EQ(steps_of(by_depth, m.split), 4);  // depths 2..5: after the embeds and 3 combines
  EXPECT_EQ(steps_of(sinks_last, m.split), 1);
  EXPECT_EQ(steps_of(sinks_last, m.combine), steps_of(by_depth, m.combine));
  EXPECT_EQ(steps_of(sinks_last, m.embed), 1);
  EXPECT_EQ(sinks_last.steps.back().op, m.split);
  EXPECT_EQ(sinks_last.steps.back().size(), 13u + 4 + 2 + 1 + 2 + 1 + 1);
  EXPECT_EQ(sinks_last.num_levels, by_depth.num_levels);

  auto outputs = [&](Strategy strategy) {
    Tape tape;
    Executor executor(m.loom, tape);
    const auto result = executor.run(w, strategy);
    return std::pair{result.outputs(m.pair).value().to_float_vector(),
                     result.outputs(m.hidden).value().to_float_vector()};
  };
  const auto expected = outputs(Strategy::kByDepth), got = outputs(Strategy::kSinksLast);
  ASSERT_EQ(got.first.size(), expected.first.size());
  ASSERT_EQ(got.second.size(), expected.second.size());
  for (std::size_t i = 0; i < got.first.size(); ++i)
    EXPECT_NEAR(got.first[i], expected.first[i], 1e-6) << "pair output element " << i;
  for (std::size_t i = 0; i < got.second.size(); ++i)
    EXPECT_NEAR(got.second[i], expected.second[i], 1e-6) << "hidden output element " << i;
  EXPECT_EQ(loom::parse_strategy("sinks_last"), Strategy::kSinksLast);
}

// limit_step_rows keeps the calls, their order and their levels, in steps of at most the limit.
TEST(LoomSchedule, LimitingStepRowsSplitsStepsInOrder) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {8, 5, 8}) w.add_output(weave_balanced(m, w, leaves));
  const loom::Schedule whole = loom::make_schedule(w, Strategy::kByDepth);
  for (const std::uint32_t limit : {1u, 3u, 7u, 100u}) {
    loom::Schedule split = whole;
    loom::limit_step_rows(split, limit);
    EXPECT_EQ(split.calls, whole.calls);
    std::size_t expected_steps = 0;
    for (const auto& step : whole.steps) expected_steps += (step.size() + limit - 1) / limit;
    EXPECT_EQ(split.steps.size(), expected_steps) << "limit " << limit;
    std::uint32_t next = 0;
    for (const auto& step : split.steps) {
      EXPECT_LE(step.size(), limit);
      EXPECT_GT(step.size(), 0u);
      EXPECT_EQ(step.begin, next);  // consecutive, in order
      next = step.end;
      for (std::uint32_t call : split.step_calls(step)) EXPECT_EQ(w.calls()[call].op, step.op);
    }
    EXPECT_EQ(next, whole.calls.size());
  }
  loom::Schedule unlimited = whole;
  loom::limit_step_rows(unlimited, 0);
  EXPECT_EQ(unlimited.steps.size(), whole.steps.size());
}

// Every call in exactly one step of its operation; the order within a step is the layout's
// (order_calls_for_views, loom_layout_test.cpp), the same on every schedule of one weave.
TEST(LoomSchedule, StepsHoldEveryCallOnceInTheLayoutsOrder) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {4, 6, 2}) w.add_output(weave_balanced(m, w, leaves));
  for (Strategy strategy : {Strategy::kByDepth, Strategy::kSinksLast, Strategy::kAgenda}) {
    loom::Schedule s = loom::make_schedule(w, strategy);
    std::vector<std::uint32_t> seen;
    for (const auto& step : s.steps)
      for (std::uint32_t call : s.step_calls(step)) {
        EXPECT_EQ(w.calls()[call].op, step.op);
        seen.push_back(call);
      }
    std::sort(seen.begin(), seen.end());
    std::vector<std::uint32_t> every(w.num_calls());
    std::iota(every.begin(), every.end(), 0u);
    EXPECT_EQ(seen, every);
    EXPECT_EQ(loom::make_schedule(w, strategy).calls, s.calls);  // deterministic
  }
}

TEST(LoomExecutor, ConcatenatedInputsEqualSeparateInputs) {
  TestModel m;
  Weaver a(m.loom), b(m.loom);
  Value la = a.parameter(m.hidden, m.h0), ra = a.call(m.embed, {a.batch_input(m.word, 1)})[0];
  a.add_output(a.call(m.combine, {ra, la})[0]);
  Value lb = b.parameter(m.hidden, m.h0), rb = b.call(m.embed, {b.batch_input(m.word, 1)})[0];
  b.add_output(b.call(m.combine_concat, {rb, lb})[0]);
  Tensor batch = random_tensor({2, 3}, 5);
  RunOutcome x = run_strategy(m, a, batch, Strategy::kByDepth);
  RunOutcome y = run_strategy(m, b, batch, Strategy::kByDepth);
  expect_close(x.hidden_out, y.hidden_out, "outputs");
  expect_close(x.batch_grad, y.batch_grad, "batch gradient");
  for (std::size_t p = 0; p < x.parameter_grads.size(); ++p)
    expect_close(x.parameter_grads[p], y.parameter_grads[p], "parameter gradient");
}

// Per-example matrices ([2, 3] and [3, 4] TypeShapes): the loom batches them to [n, 2, 3] and
// [n, 3, 4], and batch_matmul is then each example's own product, gradients included.
TEST(LoomExecutor, PerExampleMatrixProductsBatchThroughBatchMatmul) {
  const TypeShape left{DType::kFloat32, {2, 3}, "left"}, right{DType::kFloat32, {3, 4}, "right"};
  const TypeShape product{DType::kFloat32, {2, 4}, "product"};
  Parameter scale{"scale", random_tensor({3, 4}, 7)};
  Loom loom;
  const OpId times = loom.add_operation(
      "times", {left, right}, {product},
      [](std::span<const Var> in) { return std::vector<Var>{batch_matmul(in[0], in[1])}; });
  const OpId scaled =
      loom.add_operation("scaled", {left}, {product}, [&scale](std::span<const Var> in) {
        const std::int64_t n = in[0].shape()[0];
        const std::vector<Var> copies(static_cast<std::size_t>(n), Var(scale));
        return std::vector<Var>{batch_matmul(in[0], reshape(concat(copies, 0), {n, 3, 4}))};
      });
  const TypeId left_id = loom.type_id(left), right_id = loom.type_id(right);
  const TypeId product_id = loom.type_id(product);
  constexpr int kExamples = 5;
  std::vector<Tensor> lhs, rhs;
  Weaver weaver(loom);
  for (int e = 0; e < kExamples; ++e) {
    lhs.push_back(random_tensor({2, 3}, 100 + e));
    rhs.push_back(random_tensor({3, 4}, 200 + e));
    Value l = weaver.constant(left_id, lhs.back());
    weaver.add_output(weaver.call(times, {l, weaver.constant(right_id, rhs.back())})[0]);
    weaver.add_output(weaver.call(scaled, {l})[0]);
  }
  Tape tape;
  Executor executor(loom, tape);
  Var out = executor.run(weaver).outputs(product_id);
  ASSERT_EQ(out.shape(), (Shape{2 * kExamples, 2, 4}));
  tape.backward(sum(out));
  Tape reference;
  Var reference_scale = reference.constant(scale.value());
  std::vector<Var> expected;
  for (int e = 0; e < kExamples; ++e) {
    Var l = reference.constant(lhs[std::size_t(e)]);
    expected.push_back(matmul(l, reference.constant(rhs[std::size_t(e)])));
    expected.push_back(matmul(l, reference_scale));
  }
  expect_close(out.value().to_float_vector(), concat(expected, 0).value().to_float_vector(),
               "per-example products");
  // d(sum)/d(scale) = sum over examples of leftᵀ · ones.
  Tensor ones = Tensor::full({2, 4}, 1.0f);
  Var expected_grad = reference.constant(Tensor::zeros({3, 4}));
  for (int e = 0; e < kExamples; ++e)
    expected_grad = expected_grad + matmul(reference.constant(lhs[std::size_t(e)]),
                                           reference.constant(ones), true, false);
  expect_close(scale.grad().to_float_vector(), expected_grad.value().to_float_vector(),
               "parameter gradient");
}

TEST(LoomExecutor, InferenceModeKeepsNoBackward) {
  TestModel m;
  Weaver w(m.loom);
  w.add_output(weave_balanced(m, w, 4));
  Tape tape;
  tape.set_grad_enabled(false);
  Executor executor(m.loom, tape);
  Var out = executor.run(w).outputs(m.hidden);
  EXPECT_FALSE(out.requires_grad());
  EXPECT_EQ(out.shape(), (Shape{1, 4}));
}

TEST(LoomWeaver, WeavesBuiltOnThreadsMergeIntoTheSameBatch) {
  TestModel m;
  constexpr int kExamples = 8;
  Weaver sequential(m.loom);
  for (int e = 0; e < kExamples; ++e) {
    Rng rng(500 + std::uint64_t(e));
    weave_random_example(m, sequential, rng, 4);
  }
  std::vector<Weaver> parts(kExamples, Weaver(m.loom));
  std::vector<std::thread> threads;
  for (int e = 0; e < kExamples; ++e)
    threads.emplace_back([&, e] {
      Rng rng(500 + std::uint64_t(e));
      weave_random_example(m, parts[std::size_t(e)], rng, 4);
    });
  for (auto& t : threads) t.join();
  Weaver merged(m.loom);
  for (const Weaver& part : parts) merged.append(part);
  ASSERT_EQ(merged.num_calls(), sequential.num_calls());
  Tensor batch = random_tensor({4, 3}, 9);
  RunOutcome a = run_strategy(m, sequential, batch, Strategy::kByDepth);
  RunOutcome b = run_strategy(m, merged, batch, Strategy::kByDepth);
  EXPECT_EQ(a.hidden_out, b.hidden_out);
  EXPECT_EQ(a.pair_out, b.pair_out);
  EXPECT_EQ(a.batch_grad, b.batch_grad);
}

TEST(LoomWeaver, DepthsFollowTheRule) {
  TestModel m;
  Weaver w(m.loom);
  float values[3] = {1, 2, 3};
  Value c = w.constant(m.word, values);
  Value p = w.parameter(m.hidden, m.h0);
  Value e = w.call(m.embed, {c})[0];
  Value top = w.call(m.combine, {e, p})[0];
  EXPECT_EQ(w.depth(c), 0);
  EXPECT_EQ(w.depth(p), 0);
  EXPECT_EQ(w.depth(e), 1);
  EXPECT_EQ(w.depth(top), 2);
  EXPECT_EQ(w.deepest(), 2);
}

TEST(LoomWeaver, MisuseIsReportedByMessage) {
  TestModel m;
  Weaver w(m.loom);
  float values[3] = {1, 2, 3};
  Value word = w.constant(m.word, values);
  expect_error(
      [&] {
        w.call(m.combine, {word, word});
      },
      {"[weaver] operation 'combine' argument 0 expects float32 [4] 'hidden' but got "
       "float32 [3] 'word'"});
  expect_error(
      [&] {
        w.call(m.embed, {word, word});
      },
      {"[weaver] operation 'embed' takes 1 arguments, got 2"});
  expect_error([&] { w.call(m.embed, {Value(999)}); }, {"[weaver] value 999 does not exist"});
  float two[2] = {1, 2};
  expect_error([&] { w.constant(m.word, two); },
               {"[weaver] constant of 2 float32 values does not match type float32 [3] 'word'"});
  expect_error([&] { w.parameter(m.word, m.h0); },
               {"[weaver] parameter 'h0' float32 [4] does not match type float32 [3] 'word'"});
  Loom shallow(2);
  OpId id = shallow.add_operation("step", {kHidden}, {kHidden},
                                  [](std::span<const Var> in) { return std::vector<Var>{in[0]}; });
  Weaver deep(shallow);
  Value h = deep.parameter(shallow.type_id(kHidden), m.h0);
  h = deep.call(id, {h})[0];
  h = deep.call(id, {h})[0];
  expect_error([&] { deep.call(id, {h}); },
               {"[weaver] maximum depth 2 exceeded by a call of 'step' (its deepest argument is "
                "at depth 2)"});
  Weaver other(shallow);
  expect_error([&] { w.append(other); },
               {"[weaver] cannot append a weave recorded for another loom"});
}

TEST(LoomExecutor, MisuseIsReportedByMessage) {
  TestModel m;
  Weaver w(m.loom);
  w.add_output(w.call(m.embed, {w.batch_input(m.word, 3)})[0]);
  Tape tape;
  Executor executor(m.loom, tape);
  expect_error([&] { executor.run(w); }, {"[loom] a batch_input of type float32 [3] 'word' was "
                                          "woven but no batch was fed"});
  executor.feed(m.word, tape.constant(random_tensor({2, 3}, 1)));
  expect_error([&] { executor.run(w); },
               {"[loom] batch_input row 3 of type float32 [3] 'word' is beyond the fed batch "
                "float32 [2, 3]"});
  expect_error(
      [&] {
        executor.feed(m.word, tape.constant(random_tensor({2, 4}, 1)));
      },
      {"[loom] feed: batch float32 [2, 4] does not hold rows of type float32 [3] 'word'"});
  Loom bad;
  OpId wrong = bad.add_operation("wrong", {kHidden}, {kPair},
                                 [](std::span<const Var> in) { return std::vector<Var>{in[0]}; });
  Weaver bw(bad);
  bw.call(wrong, {bw.parameter(bad.type_id(kHidden), m.h0)});
  Executor bad_executor(bad, tape);
  expect_error([&] { bad_executor.run(bw); },
               {"[loom] operation 'wrong' returned float32 [1, 4] for output 0, expected float32 "
                "[1, 2]"});
  expect_error(
      [] {
        Loom l;
        l.add_operation("none", {}, {kHidden},
                        [](std::span<const Var>) { return std::vector<Var>{}; });
      },
      {"[loom] operation 'none' needs at least one input and one output"});
  expect_error(
      [] { loom::parse_strategy("greedy"); },
      {"[schedule] unknown strategy 'greedy'; expected by_depth, sinks_last, agenda or none"});
}

TEST(LoomExecutor, AFedBatchOnAnotherDeviceIsNamed) {
  // Runs without a GPU: the check happens before any CUDA memory is touched.
  TestModel m;
  Tape tape;
  Executor executor(m.loom, tape, Device::kCuda);
  expect_error(
      [&] {
        executor.feed(m.word, tape.constant(random_tensor({2, 3}, 1)));
      },
      {"[loom] feed: batch float32 [2, 3] is on cpu but the executor runs on cuda"});
}

TEST(LoomExecutor, StatisticsDescribeTheRun) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {8, 8}) w.add_output(weave_balanced(m, w, leaves));
  Tape tape;
  Executor executor(m.loom, tape);
  auto result = executor.run(w);
  const auto& stats = result.stats();
  EXPECT_EQ(stats.levels, 4u);
  EXPECT_EQ(stats.batched_calls, 4);
  EXPECT_EQ(stats.nodes, 2 * 15);
  EXPECT_EQ(stats.operations[m.embed].rows, 16);
  EXPECT_EQ(stats.operations[m.combine].max_rows, 8);
  EXPECT_EQ(stats.operations[m.combine].batched_calls, 3);
  EXPECT_GT(stats.bytes_gathered, 0);
  EXPECT_EQ(stats.min_batched_calls, 4);
  EXPECT_NE(stats.to_string().find("combine: 3 calls (lower bound 3), 14 rows"), std::string::npos);
  EXPECT_EQ(result.schedule().steps.size(), 4u);
}

}  // namespace
}  // namespace weft::testing
