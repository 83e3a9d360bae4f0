// The loom's guarantee: for random DAGs (several operations and types, multiple outputs,
// shared sub-graphs, arguments from far-apart depths, parameters and fed batch rows), the
// batched strategies give the same outputs and gradients as unbatched execution. Plus the
// exact schedule shape of known inputs, merging, and every misuse by message.
#include "weft/loom/executor.h"

#include <thread>

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
using loom::Weaver;

const TypeShape kHidden{DType::kFloat32, {4}, "hidden"};
const TypeShape kWord{DType::kFloat32, {3}, "word"};
const TypeShape kPair{DType::kFloat32, {2}, "pair"};

// A loom with five operations over three types, and the parameters their bodies use.
struct TestModel {
  Loom loom;
  TypeId hidden, word, pair;
  OpId embed, combine, combine_concat, split, mix;
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
    hidden = loom.type_id(kHidden);
    word = loom.type_id(kWord);
    pair = loom.type_id(kPair);
  }
  std::vector<Parameter> parameters() const { return {we, be, wc, bc, wp, bp, wm, bm, h0}; }
};

// One random example: leaves (constants, fed rows, the shared h0), then random calls whose
// arguments are any earlier values of the right type, then a few outputs.
void weave_random_example(TestModel& m, Weaver& w, Rng& rng, std::int64_t batch_rows) {
  std::vector<Value> by_type[3];
  auto pick = [&](TypeId t) { return by_type[t][rng.below(by_type[t].size())]; };
  for (int i = 0; i < 3; ++i) {
    float values[3] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
    by_type[m.word].push_back(w.constant(m.word, values));
  }
  by_type[m.word].push_back(
      w.batch_input(m.word, std::int64_t(rng.below(std::uint64_t(batch_rows)))));
  by_type[m.hidden].push_back(w.parameter(m.hidden, m.h0));
  const int calls = 3 + int(rng.below(12));
  for (int c = 0; c < calls; ++c) {
    switch (rng.below(5)) {
      case 0:
        by_type[m.hidden].push_back(w.call(m.embed, {pick(m.word)})[0]);
        break;
      case 1:
        by_type[m.hidden].push_back(w.call(m.combine, {pick(m.hidden), pick(m.hidden)})[0]);
        break;
      case 2:
        by_type[m.hidden].push_back(w.call(m.combine_concat, {pick(m.hidden), pick(m.hidden)})[0]);
        break;
      case 3: {
        auto out = w.call(m.split, {pick(m.hidden)});
        Value h = out[0], p = out[1];
        by_type[m.hidden].push_back(h);
        by_type[m.pair].push_back(p);
        break;
      }
      default:
        if (by_type[m.pair].empty()) break;
        by_type[m.hidden].push_back(w.call(m.mix, {pick(m.pair), pick(m.hidden), pick(m.word)})[0]);
    }
  }
  w.add_output(by_type[m.hidden].back());
  w.add_output(pick(m.hidden));
  if (!by_type[m.pair].empty()) w.add_output(pick(m.pair));
}

struct RunOutcome {
  std::vector<float> hidden_out, pair_out, batch_grad;
  std::vector<std::vector<float>> parameter_grads;
  std::uint32_t levels = 0;
  std::int64_t batched_calls = 0;
};

RunOutcome run_strategy(TestModel& m, const Weaver& w, const Tensor& batch, Strategy strategy) {
  for (Parameter p : m.parameters()) p.zero_grad();
  Tape tape;
  Executor executor(m.loom, tape);
  Var fed = tape.variable(batch);
  executor.feed(m.word, fed);
  auto result = executor.run(w, strategy);
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

TEST(LoomProperty, BatchedStrategiesEqualUnbatchedOnRandomDags) {
  TestModel m;
  for (std::uint64_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    Weaver all(m.loom);
    const std::int64_t batch_rows = 5;
    const int examples = 1 + int(rng.below(6));
    for (int e = 0; e < examples; ++e) {
      Weaver one(m.loom);  // built independently, then merged
      weave_random_example(m, one, rng, batch_rows);
      all.append(one);
    }
    Tensor batch = random_tensor({batch_rows, 3}, seed + 1000);
    RunOutcome reference = run_strategy(m, all, batch, Strategy::kNone);
    for (Strategy s : {Strategy::kByDepth, Strategy::kAgenda}) {
      SCOPED_TRACE(std::string(loom::strategy_name(s)));
      RunOutcome batched = run_strategy(m, all, batch, s);
      expect_close(batched.hidden_out, reference.hidden_out, "hidden outputs");
      expect_close(batched.pair_out, reference.pair_out, "pair outputs");
      expect_close(batched.batch_grad, reference.batch_grad, "fed batch gradient");
      for (std::size_t p = 0; p < reference.parameter_grads.size(); ++p)
        expect_close(batched.parameter_grads[p], reference.parameter_grads[p],
                     m.parameters()[p].name().c_str());
      EXPECT_LE(batched.batched_calls, reference.batched_calls);
    }
  }
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

TEST(LoomSchedule, StepsListCallsInIdOrder) {
  TestModel m;
  Weaver w(m.loom);
  for (int leaves : {4, 6, 2}) w.add_output(weave_balanced(m, w, leaves));
  for (Strategy strategy : {Strategy::kByDepth, Strategy::kAgenda}) {
    loom::Schedule s = loom::make_schedule(w, strategy);
    std::size_t total = 0;
    for (const auto& step : s.steps) {
      auto calls = s.step_calls(step);
      EXPECT_TRUE(std::is_sorted(calls.begin(), calls.end()));
      total += calls.size();
    }
    EXPECT_EQ(total, w.num_calls());
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
  expect_error([] { loom::parse_strategy("greedy"); },
               {"[schedule] unknown strategy 'greedy'; expected by_depth, agenda or none"});
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
  EXPECT_NE(stats.to_string().find("combine: 3 calls, 14 rows"), std::string::npos);
  EXPECT_EQ(result.schedule().steps.size(), 4u);
}

}  // namespace
}  // namespace weft::testing
