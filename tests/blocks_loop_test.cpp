// The Loop block: a loop whose length the model decides, run on the flow engine. A batch of
// examples whose loops run for different numbers of steps equals each example run alone
// (outputs, rows per example, parameter gradients); gradients through the iterations match
// float64 finite differences of a hand-written loop; teacher forcing weaves statically; a loop
// that reaches its bound fails naming the example, or stops there when asked.
#include <map>
#include <set>

#include "blocks_test_util.h"
#include "nn_test_util.h"
#include "weft/core/rng.h"

namespace weft::testing {
namespace {

// state = (h [3], clock [1]); step: h' = tanh(h·W), clock' = clock + sigmoid(h'·R), y = h'·V.
// The loop ends once clock > 1, so its length is the model's: R decides how fast time runs.
struct ClockModel {
  Parameter w{"W", random_tensor({3, 3}, 21, -1.2f, 1.2f)};
  Parameter r{"R", random_tensor({3, 1}, 22, -2.0f, 2.0f)};
  Parameter v{"V", random_tensor({3, 1}, 23)};

  Block step() const {
    Parameter w_ = w, r_ = r, v_ = v;
    return Function(
        "step", {Type::vector(3), Type::vector(1)},
        [w_, r_, v_](std::span<const Var> x) {
          Tape& tape = Tape::current();
          Var h = tanh(matmul(x[0], tape.parameter(w_)));
          return std::vector<Var>{h, x[1] + sigmoid(matmul(h, tape.parameter(r_))),
                                  matmul(h, tape.parameter(v_))};
        },
        std::nullopt,
        [](const std::vector<Type>& t) {
          return Type::tuple({Type::tuple({t[0], t[1]}), t[2]});
        });
  }
  // Input {"h": [3 numbers], "clock": [c]} -> Tuple(Tuple(h, clock), Sequence(y)).
  Block root(LoopOptions options = {}) const {
    options.emits = true;
    options.threshold = 1.0;
    return Record({{"h", Vector(3)}, {"clock", Vector(1)}}) >> Loop(step(), GetItem(1), options);
  }
};

std::vector<Input> examples(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Input> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({{"h", {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)}},
                   {"clock", {rng.uniform(-1.5f, 0.9f)}}});
  return out;
}

// An output's values (none when no example gave it a row).
std::vector<float> values(const Var& v) {
  return v.defined() ? v.value().to_float_vector() : std::vector<float>{};
}

// Output k of each example run alone, concatenated; also its rows per example.
std::vector<float> one_at_a_time(const Compiler& compiler, const std::vector<Input>& inputs,
                                 std::size_t k, std::vector<std::int32_t>* rows) {
  std::vector<float> out;
  for (std::size_t e = 0; e < inputs.size(); ++e) {
    Tape tape;
    BatchResult result = compiler.forward(std::span<const Input>(&inputs[e], 1), tape);
    const std::vector<float> mine = values(result.output(k));
    out.insert(out.end(), mine.begin(), mine.end());
    if (rows) rows->insert(rows->end(), result.output_examples(k).size(), std::int32_t(e));
  }
  return out;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "element " << i;
}

TEST(BlocksLoop, BatchedLoopsOfDifferentLengthsEqualOneAtATime) {
  ClockModel model;
  const Compiler compiler(model.root({.max_steps = 60}));
  EXPECT_TRUE(compiler.needs_flow());
  const std::vector<Input> inputs = examples(40, 5);
  Tape tape;
  BatchResult batch = compiler.forward(inputs, tape);
  // Outputs: h [3], clock [1], then the emitted y rows.
  ASSERT_EQ(batch.num_outputs(), 3u);
  std::vector<std::int32_t> rows;
  for (std::size_t k = 0; k < 3; ++k)
    expect_near_all(values(batch.output(k)),
                    one_at_a_time(compiler, inputs, k, k == 2 ? &rows : nullptr));
  EXPECT_EQ(batch.output_examples(2), rows);
  std::vector<int> lengths(inputs.size(), 0);
  for (std::int32_t e : rows) ++lengths[std::size_t(e)];
  EXPECT_GE(std::set<int>(lengths.begin(), lengths.end()).size(), 4u)
      << "the examples should stop after different numbers of steps";
  for (float clock : values(batch.output(1))) EXPECT_GT(clock, 1.0f);  // each stopped by choice

  // One backward over the batch gives the sum of the per-example gradients.
  auto grads = [&](const std::function<void()>& backward) {
    for (Parameter p : {model.w, model.r, model.v}) p.zero_grad();
    backward();
    return std::vector<float>(model.w.grad().to_float_vector());
  };
  const std::vector<float> batched = grads([&] { tape.backward(sum(batch.output(2))); });
  const std::vector<float> alone = grads([&] {
    for (const Input& input : inputs) {
      Tape t;
      BatchResult r = compiler.forward(std::span<const Input>(&input, 1), t);
      t.backward(sum(r.output(2)));
    }
  });
  expect_near_all(batched, alone);
}

// The loop in float64, deciding as the model does: final h (out = 0) or every y (out = 1).
// params: W and V (R only decides when to stop: its gradient through the outputs is zero).
HostArray reference_loop(const std::vector<Input>& inputs, const std::vector<HostArray>& params,
                         const HostArray& r, int out) {
  const HostArray &w = params[0], &v = params[1];
  std::vector<double> result;
  for (const Input& in : inputs) {
    std::vector<double> h = in["h"].get<std::vector<double>>();
    double clock = in["clock"][0].get<double>();
    while (clock <= 1.0) {
      std::vector<double> next(3, 0.0);
      for (int j = 0; j < 3; ++j) {
        for (int i = 0; i < 3; ++i) next[j] += h[i] * w[std::size_t(i * 3 + j)];
        next[j] = std::tanh(next[j]);
      }
      double rate = 0, y = 0;
      for (int i = 0; i < 3; ++i)
        rate += next[i] * r[std::size_t(i)], y += next[i] * v[std::size_t(i)];
      clock += sigmoid64(rate);
      h = next;
      if (out == 1) result.push_back(y);
    }
    if (out == 0) result.insert(result.end(), h.begin(), h.end());
  }
  const auto rows = std::int64_t(out == 0 ? inputs.size() : result.size());
  return HostArray(out == 0 ? Shape{rows, 3} : Shape{rows, 1}, result);
}

TEST(BlocksLoop, GradientsThroughModelDecidedIterationsMatchFiniteDifferences) {
  ClockModel model;
  const Compiler compiler(model.root({.max_steps = 60}));
  const std::vector<Input> inputs = examples(6, 9);
  Tolerance tolerance;
  tolerance.forward_abs = tolerance.forward_rel = 1e-4;
  tolerance.grad_abs = tolerance.grad_rel = 2e-3;
  for (int out : {0, 1}) {
    SCOPED_TRACE(out == 0 ? "final state" : "emitted outputs");
    check_layer(
        {model.w, model.v},
        [&](const std::vector<Var>&) {
          return compiler.forward(inputs, Tape::current()).output(out == 0 ? 0 : 2);
        },
        [&](const std::vector<HostArray>&, const std::vector<HostArray>& params) {
          return reference_loop(inputs, params, HostArray(model.r.value()), out);
        },
        {}, tolerance);
  }
}

TEST(BlocksLoop, TeacherForcedLoopsWeaveStaticallyAndCollectTheirStops) {
  ClockModel model;
  Block forced =
      Record({{"state", Record({{"h", Vector(3)}, {"clock", Vector(1)}})},
              {"n", InputTransform([](const Input& x) { return x; })}}) >>
      Loop(model.step(), GetItem(1),
           {.max_steps = 8, .emits = true, .collect_stops = true, .teacher_forced = true});
  const Compiler compiler(forced);
  EXPECT_FALSE(compiler.needs_flow());
  std::vector<Input> inputs;
  const std::vector<Input> states = examples(5, 3);
  for (int e = 0; e < 5; ++e) inputs.push_back({{"state", states[std::size_t(e)]}, {"n", 2 * e}});
  Tape tape;
  BatchResult batch = compiler.forward(inputs, tape);
  ASSERT_EQ(batch.num_outputs(), 4u);  // h, clock, y, stop values
  std::vector<std::int32_t> rows, stops;
  expect_near_all(values(batch.output(2)), one_at_a_time(compiler, inputs, 2, &rows));
  expect_near_all(values(batch.output(3)), one_at_a_time(compiler, inputs, 3, &stops));
  std::vector<int> y_count(5), stop_count(5);
  for (std::int32_t e : batch.output_examples(2)) ++y_count[std::size_t(e)];
  for (std::int32_t e : batch.output_examples(3)) ++stop_count[std::size_t(e)];
  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(y_count[std::size_t(e)], 2 * e) << "example " << e;
    EXPECT_EQ(stop_count[std::size_t(e)], 2 * e + 1) << "example " << e;
  }
  const std::string error = error_of([&] {
    Tape t;
    std::vector<Input> bad{{{"state", states[0]}, {"n", 9}}};
    compiler.forward(bad, t);
  });
  EXPECT_THAT(error, HasSubstr("[0, 8]"));
  EXPECT_THAT(error, HasSubstr("example 0"));
}

TEST(BlocksLoop, ALoopAtItsBoundFailsNamingTheExampleOrStopsThere) {
  ClockModel model;
  std::vector<Input> inputs = examples(4, 5);
  inputs[2]["clock"] = {-1000.0};  // never reaches 1 within the bound
  const std::string error = error_of([&] {
    Tape tape;
    Compiler(model.root({.max_steps = 30})).forward(inputs, tape);
  });
  EXPECT_THAT(error, HasSubstr("example 2"));
  EXPECT_THAT(error, HasSubstr("did not stop within its bound of 30 steps"));
  EXPECT_THAT(error, Not(HasSubstr("more examples failed")));

  const Compiler stopping(model.root({.max_steps = 30, .at_bound = LoopBound::kStop}));
  Tape tape;
  BatchResult batch = stopping.forward(inputs, tape);
  std::vector<int> lengths(inputs.size(), 0);
  for (std::int32_t e : batch.output_examples(2)) ++lengths[std::size_t(e)];
  EXPECT_EQ(lengths[2], 30);
  for (std::size_t e : {0u, 1u, 3u}) EXPECT_LT(lengths[e], 30) << "example " << e;
}

// Each example is woven once, resuming where its Loop read a value: the weavers' calls (every
// call woven, counted again by any re-weave) are the engine's calls, one step call per
// iteration, so host work grows linearly with the iterations. Loops inside a Map run one after
// the other in an example (each resumed at its own reads) and still equal one at a time.
TEST(BlocksLoop, EachExampleIsWovenOnceEvenWithLoopsInsideAMap) {
  ClockModel model;
  const Compiler single(model.root({.max_steps = 60}));
  const std::vector<Input> inputs = examples(12, 9);
  std::int64_t iterations = 0;
  for (const Input& input : inputs) {
    Tape tape;
    BatchResult alone = single.forward(std::span<const Input>(&input, 1), tape);
    const auto n = std::int64_t(alone.output_examples(2).size());
    EXPECT_GE(n, 1);
    EXPECT_EQ(alone.flow_woven_calls(), n) << describe_input(input);
    EXPECT_EQ(alone.stats().nodes, n);
    iterations += n;
  }
  Tape tape;
  BatchResult batch = single.forward(inputs, tape);
  EXPECT_EQ(batch.flow_woven_calls(), iterations);

  // Three loops per example inside a Map: their final h rows, batched and one at a time.
  const Compiler mapped(Map(model.root({.max_steps = 60}) >> GetItem(0) >> GetItem(0)));
  std::vector<Input> lists;
  for (std::size_t e = 0; e + 3 <= inputs.size(); e += 3)
    lists.push_back(Input::array({inputs[e], inputs[e + 1], inputs[e + 2]}));
  Tape mapped_tape;
  BatchResult nested = mapped.forward(lists, mapped_tape);
  EXPECT_EQ(nested.flow_woven_calls(), iterations);
  EXPECT_EQ(nested.stats().nodes, iterations);
  expect_near_all(values(nested.output(0)), values(batch.output(0)));
  expect_near_all(values(nested.output(0)), one_at_a_time(mapped, lists, 0, nullptr));
}

// A Loop in another Loop's body: each outer iteration runs the clock loop until clock > 1, then
// rewinds the clock to (clock - 1) * 4 and emits h; the outer loop stops once the rewound clock
// passes 0.5 (both lengths are the model's). Batched equals one at a time, woven once.
TEST(BlocksLoop, NestedLoopsEqualOneAtATimeAndWeaveOnce) {
  ClockModel model;
  const Block rewind = Function(
      "rewind", {Type::vector(3), Type::vector(1)},
      [](std::span<const Var> x) {
        return std::vector<Var>{x[0], (x[1] - 1.0f) * 4.0f, x[0]};
      },
      std::nullopt,
      [](const std::vector<Type>& t) {
        return Type::tuple({Type::tuple({t[0], t[1]}), t[0]});
      });
  const Block inner =
      Loop(model.step() >> GetItem(0), GetItem(1), {.max_steps = 60, .threshold = 1.0});
  const Compiler nested(
      Record({{"h", Vector(3)}, {"clock", Vector(1)}}) >>
      Loop(inner >> rewind, GetItem(1),
           {.max_steps = 5, .threshold = 0.5, .at_bound = LoopBound::kStop, .emits = true}));
  const std::vector<Input> inputs = examples(16, 13);
  Tape tape;
  BatchResult batch = nested.forward(inputs, tape);
  expect_near_all(values(batch.output(0)), one_at_a_time(nested, inputs, 0, nullptr));
  expect_near_all(values(batch.output(1)), one_at_a_time(nested, inputs, 1, nullptr));
  std::vector<std::int32_t> rows;  // one per outer iteration
  expect_near_all(values(batch.output(2)), one_at_a_time(nested, inputs, 2, &rows));
  EXPECT_EQ(batch.output_examples(2), rows);
  std::map<std::int32_t, int> outer_lengths;
  for (std::int32_t e : rows) ++outer_lengths[e];
  std::set<int> distinct;
  for (const auto& [e, n] : outer_lengths) distinct.insert(n);
  EXPECT_GE(distinct.size(), 2u) << "the outer loops should run different numbers of times";
  EXPECT_EQ(batch.flow_woven_calls(), batch.stats().nodes);
}

TEST(BlocksLoop, EvalRunsALoopAndMisuseIsReported) {
  ClockModel model;
  const std::vector<Input> inputs = examples(3, 7);
  Tape tape;
  BatchResult batch = Compiler(model.root()).forward(inputs, tape);
  EvalValue alone = eval(model.root(), inputs[1]);
  const std::vector<float> h = values(batch.output(0));
  expect_near_all(floats(alone[0][0]), std::vector<float>(h.begin() + 3, h.begin() + 6));
  EXPECT_THAT(error_of([&] { max_depth(model.root(), inputs[1]); }), HasSubstr("step by step"));
  EXPECT_THAT(error_of([&] { Loop(model.step(), Block()); }), HasSubstr("stop block is empty"));
  EXPECT_THAT(error_of([&] { Compiler(Vector(3) >> Loop(Identity(), Identity())); }),
              HasSubstr("one float32 or float64 number"));
}

}  // namespace
}  // namespace weft::testing
