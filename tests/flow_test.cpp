// The flow engine's guarantee: programs that decide as they go, run as one batch, give the
// outputs, reads and gradients they give run one example at a time (1,000 seeded random
// programs with data-dependent branches and loop lengths). Also: a static weave feeding
// programs on one tape (gradients against float64 finite differences), step and call bounds,
// one program's failure leaving the others whole, and admission between steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "flow_test_util.h"

namespace weft::flow::testing {
namespace {

using weft::testing::expect_error;
using weft::testing::random_tensor;

struct Trace {
  std::vector<float> reads;  // every value the program read, in order
  Val out;
};

// A random program: its plan comes from the seed, its branches and loop lengths from the
// values it reads.
Program random_program(Context& ctx, const FlowModel& m, Val x, std::uint64_t seed, Trace& trace) {
  std::mt19937_64 rng(seed);
  Val h = ctx.apply(m.cell, {x, x});
  const int parts = 1 + int(rng() % 5);
  for (int i = 0; i < parts; ++i) {
    switch (rng() % 4) {
      case 0: {  // a branch on a computed value; then an old value, read without waiting
        const Val score = ctx.apply(m.head, {h});
        const float s = scalar(co_await ctx.read(score));
        trace.reads.push_back(s);
        h = s > 0 ? ctx.apply(m.gate, {h}) : ctx.apply(m.cell, {h, x});
        trace.reads.push_back(scalar(co_await ctx.read(x)));
        break;
      }
      case 1: {  // two outputs, nothing read
        const auto outs = ctx.call(m.split, {h});
        h = ctx.apply(m.mix, {outs[0], x});
        break;
      }
      case 2: {  // a constant of the program's own
        const float k[3] = {float(rng() % 7) / 7, -0.5f, float(rng() % 3) / 3};
        h = ctx.apply(m.mix, {h, ctx.constant(m.hidden, k)});
        break;
      }
      default:  // a loop whose length the values decide
        for (int n = 0; n < 4; ++n) {
          const Val score = ctx.apply(m.head, {h});
          const float s = scalar(co_await ctx.read(score));
          trace.reads.push_back(s);
          if (s < -0.2f) break;
          h = ctx.apply(m.gate, {h});
        }
    }
  }
  trace.out = h;
}

struct Outcome {
  std::vector<Trace> traces;
  std::vector<float> outputs, input_grad;
  std::vector<std::vector<float>> parameter_grads;
  std::int64_t steps = 0, calls = 0;
};

// Runs programs [first, first + count) of `seeds` as one batch on one tape, with the loss
// sum(outputs * weights); parameter gradients accumulate into `out`.
void run_batch(FlowModel& m, const std::vector<std::uint64_t>& seeds, const Tensor& inputs,
               const Tensor& weights, std::size_t first, std::size_t count, Outcome& out) {
  Tape tape;
  Var x = tape.variable(inputs.rows_view(std::int64_t(first), std::int64_t(count)).clone());
  Engine engine(m.loom, tape);
  const std::vector<Val> xs = engine.import(x, m.hidden);
  std::vector<Trace> traces(count);
  for (std::size_t i = 0; i < count; ++i)
    engine.admit([&, i](Context& ctx) {
      return random_program(ctx, m, xs[i], seeds[first + i], traces[i]);
    });
  engine.run();
  std::vector<Val> outs;
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(engine.state(i), ProgramState::kDone) << engine.error(i);
    outs.push_back(traces[i].out);
  }
  Var y = engine.gather(outs);
  Var w = tape.constant(weights.rows_view(std::int64_t(first), std::int64_t(count)).clone());
  tape.backward(sum(y * w));
  const std::vector<float> ys = y.value().to_float_vector(), gs = x.grad().to_float_vector();
  out.outputs.insert(out.outputs.end(), ys.begin(), ys.end());
  out.input_grad.insert(out.input_grad.end(), gs.begin(), gs.end());
  for (Trace& t : traces) out.traces.push_back(std::move(t));
  out.steps = std::max(out.steps, engine.stats().steps);
  out.calls += engine.stats().calls;
}

Outcome run_all(FlowModel& m, const std::vector<std::uint64_t>& seeds, const Tensor& inputs,
                const Tensor& weights, std::size_t batch) {
  m.zero_grad();
  Outcome out;
  for (std::size_t first = 0; first < seeds.size(); first += batch)
    run_batch(m, seeds, inputs, weights, first, std::min(batch, seeds.size() - first), out);
  for (const Parameter& p : m.parameters())
    out.parameter_grads.push_back(p.grad().to_float_vector());
  return out;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, double tolerance,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tolerance * (1 + std::abs(b[i]))) << what << " element " << i;
}

TEST(FlowProperty, BatchedProgramsEqualOneExampleAtATime) {
  FlowModel m;
  constexpr std::size_t kPrograms = 1000, kBatch = 125;
  std::vector<std::uint64_t> seeds;
  for (std::size_t i = 0; i < kPrograms; ++i) seeds.push_back(1000 + i);
  const Tensor inputs = random_tensor({std::int64_t(kPrograms), 3}, 5);
  const Tensor weights = random_tensor({std::int64_t(kPrograms), 3}, 6);
  const Outcome alone = run_all(m, seeds, inputs, weights, 1);
  const Outcome batched = run_all(m, seeds, inputs, weights, kBatch);
  std::size_t reads = 0;
  for (std::size_t i = 0; i < kPrograms; ++i) {
    reads += alone.traces[i].reads.size();
    expect_near_all(batched.traces[i].reads, alone.traces[i].reads, 1e-5,
                    "reads of program " + std::to_string(i));
  }
  expect_near_all(batched.outputs, alone.outputs, 1e-5, "outputs");
  expect_near_all(batched.input_grad, alone.input_grad, 1e-5, "input gradient");
  for (std::size_t p = 0; p < alone.parameter_grads.size(); ++p)
    expect_near_all(batched.parameter_grads[p], alone.parameter_grads[p], 1e-4,
                    "gradient of " + m.parameters()[p].name());
  EXPECT_EQ(batched.calls, alone.calls);
  // One step per read at most: a batch takes as many steps as its slowest program alone.
  EXPECT_EQ(batched.steps, alone.steps);
  EXPECT_GT(reads, kPrograms);  // the programs did decide as they went
}

// Host float64 reference of the encoder-decoder test below.
struct HostModel {
  std::vector<double> a, b, c, d;
  static std::vector<double> matvec(const std::vector<double>& h, const std::vector<double>& w,
                                    int cols) {
    std::vector<double> out(std::size_t(cols), 0.0);
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < 3; ++i) out[j] += h[i] * w[std::size_t(i * cols + j)];
    return out;
  }
  std::vector<double> cell(const std::vector<double>& h, const std::vector<double>& x) const {
    std::vector<double> u = matvec(h, a, 3), v = matvec(x, b, 3);
    for (int j = 0; j < 3; ++j) u[j] = std::tanh(u[j] + v[j]);
    return u;
  }
  std::vector<double> gate(const std::vector<double>& h) const {
    std::vector<double> u = matvec(h, c, 3);
    for (int j = 0; j < 3; ++j) u[j] = h[j] / (1 + std::exp(-u[j]));
    return u;
  }
  double head(const std::vector<double>& h) const { return matvec(h, d, 1)[0]; }
};

constexpr int kDecodeBound = 5;

// Decodes from an encoding until the head's score falls below zero (at most kDecodeBound).
Program decode(Context& ctx, const FlowModel& m, Val h, Val& out) {
  for (int n = 0; n < kDecodeBound; ++n) {
    const Val score = ctx.apply(m.head, {h});
    if (scalar(co_await ctx.read(score)) < 0) break;
    h = ctx.apply(m.gate, {h});
  }
  out = h;
}

// Trees over leaves: example e folds leaves [first, first + size) left to right with cell.
struct Forest {
  std::vector<int> first{0, 2, 5}, size{2, 3, 1};
  int leaves = 6;
};

// The loss of the encoder-decoder model in float64 on the host.
double host_loss(const HostModel& hm, const std::vector<double>& x, const Forest& f) {
  double loss = 0;
  for (std::size_t e = 0; e < f.first.size(); ++e) {
    auto leaf = [&](int i) {
      return std::vector<double>(&x[std::size_t(3 * i)], &x[std::size_t(3 * i + 3)]);
    };
    std::vector<double> h = leaf(f.first[e]);
    for (int k = 1; k < f.size[e]; ++k) h = hm.cell(h, leaf(f.first[e] + k));
    for (int n = 0; n < kDecodeBound && hm.head(h) >= 0; ++n) h = hm.gate(h);
    for (int j = 0; j < 3; ++j) loss += h[j] * double(e + 1) * (j + 1) / 4;
  }
  return loss;
}

TEST(Flow, AStaticWeaveFeedsProgramsOnOneTapeAndGradientsReachIt) {
  FlowModel m;
  const Forest forest;
  const Tensor x_value = random_tensor({forest.leaves, 3}, 21);
  m.zero_grad();
  Tape tape;
  Var x = tape.variable(x_value);
  loom::Weaver weaver(m.loom);
  std::vector<loom::Value> roots;
  for (std::size_t e = 0; e < forest.first.size(); ++e) {
    loom::Value h = weaver.batch_input(m.hidden, forest.first[e]);
    for (int k = 1; k < forest.size[e]; ++k)
      h = weaver.call(m.cell, {h, weaver.batch_input(m.hidden, forest.first[e] + k)})[0];
    roots.push_back(h);
  }
  loom::Executor executor(m.loom, tape);
  executor.feed(m.hidden, x);
  const loom::LoomResult encoded = executor.run(weaver);
  Engine engine(m.loom, tape);
  const std::vector<Val> encodings = engine.import(encoded, roots);
  std::vector<Val> outs(encodings.size());
  for (std::size_t e = 0; e < encodings.size(); ++e)
    engine.admit([&, e](Context& ctx) { return decode(ctx, m, encodings[e], outs[e]); });
  engine.run();
  Var y = engine.gather(outs);
  std::vector<float> w;
  for (std::size_t e = 0; e < outs.size(); ++e)
    for (int j = 0; j < 3; ++j) w.push_back(float(e + 1) * float(j + 1) / 4);
  Var loss = sum(y * tape.constant(Tensor::from_vector(y.shape(), w)));
  tape.backward(loss);

  HostModel hm;
  for (auto [host, p] : {std::pair{&hm.a, &m.a}, std::pair{&hm.b, &m.b}, std::pair{&hm.c, &m.c},
                         std::pair{&hm.d, &m.d}})
    *host = p->value().to_double_vector();
  std::vector<double> xs = x_value.to_double_vector();
  EXPECT_NEAR(loss.value().item(), host_loss(hm, xs, forest), 1e-5);
  // Central differences in float64 of every leaf input and every weight.
  auto check = [&](std::vector<double>& values, const std::vector<float>& grad, const char* what) {
    ASSERT_EQ(values.size(), grad.size()) << what;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double keep = values[i];
      values[i] = keep + 1e-6;
      const double up = host_loss(hm, xs, forest);
      values[i] = keep - 1e-6;
      const double down = host_loss(hm, xs, forest);
      values[i] = keep;
      EXPECT_NEAR(grad[i], (up - down) / 2e-6, 1e-4) << what << " element " << i;
    }
  };
  check(xs, x.grad().to_float_vector(), "leaf inputs (through the static weave)");
  check(hm.a, m.a.grad().to_float_vector(), "a (the encoder's cell)");
  check(hm.c, m.c.grad().to_float_vector(), "c (the decoder's gate)");
  check(hm.d, m.d.grad().to_float_vector(), "d (the stop head)");
  EXPECT_GT(engine.stats().steps, 1);  // the decoders did read as they went
}

// A model, a tape and an engine with `rows` random inputs imported as xs.
struct EngineWithInputs {
  EngineWithInputs(std::int64_t rows, std::uint64_t seed, EngineOptions options = {})
      : engine(m.loom, tape, options),
        xs(engine.import(tape.variable(random_tensor({rows, 3}, seed)), m.hidden)) {}
  FlowModel m;
  Tape tape;
  Engine engine;
  std::vector<Val> xs;
};

Program forever(Context& ctx, const FlowModel& m, Val h) {
  for (;;) {
    h = ctx.apply(m.gate, {h});
    co_await ctx.read(h);
  }
}

Program never_reads(Context& ctx, const FlowModel& m, Val h) {
  co_await ctx.read(h);  // computed already: no wait (and it makes this a coroutine)
  for (;;) h = ctx.apply(m.gate, {h});
}

Program throws_after_a_read(Context& ctx, const FlowModel& m, Val h) {
  const Val score = ctx.apply(m.head, {h});
  co_await ctx.read(score);
  throw std::runtime_error("the program's own error");
}

Program mistyped_call(Context& ctx, const FlowModel& m, Val h) {
  const Val s = ctx.apply(m.head, {h});
  co_await ctx.read(s);
  ctx.apply(m.gate, {s});  // a score where a hidden state belongs
}

Program suspends_on_nothing(Context&) { co_await std::suspend_always{}; }

// Programs that fail, beside healthy ones (decode) that must finish as if alone.
TEST(Flow, AFailingProgramFailsAloneAndNamesItsExample) {
  EngineOptions options;
  options.max_steps = 7;
  options.max_calls = 50;
  EngineWithInputs batch(6, 31, options);
  const FlowModel& m = batch.m;
  Engine& engine = batch.engine;
  const std::vector<Val>& xs = batch.xs;
  std::vector<Val> outs(6);
  engine.admit([&](Context& ctx) { return decode(ctx, m, xs[0], outs[0]); }, "healthy");
  engine.admit([&](Context& ctx) { return forever(ctx, m, xs[1]); }, "forever");
  engine.admit([&](Context& ctx) { return never_reads(ctx, m, xs[2]); }, "never reads");
  engine.admit([&](Context& ctx) { return throws_after_a_read(ctx, m, xs[3]); }, "throws");
  engine.admit([&](Context& ctx) { return mistyped_call(ctx, m, xs[4]); }, "mistyped");
  engine.admit([&](Context& ctx) { return decode(ctx, m, xs[5], outs[5]); }, "healthy too");
  engine.admit([](Context&) -> Program { throw std::runtime_error("no program made"); }, "unmade");
  engine.admit([](Context& ctx) { return suspends_on_nothing(ctx); }, "nothing");
  engine.run();
  EXPECT_EQ(engine.state(0), ProgramState::kDone);
  EXPECT_EQ(engine.state(5), ProgramState::kDone);
  for (std::size_t e : {1, 2, 3, 4, 6, 7}) EXPECT_EQ(engine.state(e), ProgramState::kFailed) << e;
  auto expect_text = [&](std::size_t e, std::vector<std::string> fragments) {
    for (const std::string& f : fragments)
      EXPECT_NE(engine.error(e).find(f), std::string::npos) << engine.error(e) << " lacks " << f;
  };
  expect_text(1, {"example 1 ('forever')", "bound of 7 steps", "max_steps"});
  expect_text(2, {"example 2 ('never reads')", "more than 50 calls", "max_calls"});
  expect_text(3, {"example 3 ('throws')", "the program's own error"});
  expect_text(4, {"example 4 ('mistyped')", "[weaver] operation 'gate' argument 0 expects"});
  expect_text(6, {"example 6 ('unmade')", "no program made"});
  expect_text(7, {"example 7 ('nothing')", "suspended without reading a value"});
  EXPECT_EQ(engine.stats().programs_done, 2);
  EXPECT_EQ(engine.stats().programs_failed, 6);
  // The healthy programs' results equal theirs alone.
  for (std::size_t e : {0, 5}) {
    Tape alone_tape;
    Engine alone(m.loom, alone_tape);
    const Tensor input = engine.value(xs[e]).reshaped({1, 3}).clone();
    const Val x = alone.import(alone_tape.variable(input), m.hidden)[0];
    Val out;
    alone.admit([&](Context& ctx) { return decode(ctx, m, x, out); });
    alone.run();
    expect_near_all(engine.value(outs[e]).to_float_vector(), alone.value(out).to_float_vector(),
                    1e-6, "healthy example " + std::to_string(e));
  }
}

Program count_down(Context& ctx, const FlowModel& m, Val h, int reads, Val& out) {
  for (int n = 0; n < reads; ++n) {
    h = ctx.apply(m.gate, {h});
    co_await ctx.read(h);
  }
  out = h;
}

// Values of a tape's nodes that are still defined.
std::size_t defined_values(const Tape& tape) {
  std::size_t n = 0;
  for (std::uint32_t id = 0; id < tape.size(); ++id) n += tape.node(id).value.defined();
  return n;
}

// With gradients off, drop_step_intermediates leaves an engine the values its programs can
// read (each step's outputs) and frees the rest (argument gathers, the ops' intermediates):
// the programs read what an engine that keeps everything gives them, to the bit, with far
// fewer values held. With gradients on nothing is dropped (backward needs it).
TEST(Flow, DroppingStepIntermediatesKeepsWhatProgramsRead) {
  const auto run = [](bool drop, bool grad, std::vector<float>& read, std::size_t& held) {
    EngineWithInputs batch(6, 43, EngineOptions{.drop_step_intermediates = drop});
    batch.tape.set_grad_enabled(grad);
    std::vector<Val> outs(6);
    for (std::size_t e = 0; e < 6; ++e)
      batch.engine.admit([&, e](Context& ctx) {
        return count_down(ctx, batch.m, batch.xs[e], 5 + int(e) * 7, outs[e]);
      });
    batch.engine.run();
    for (std::size_t e = 0; e < 6; ++e) {
      ASSERT_EQ(batch.engine.state(e), ProgramState::kDone) << batch.engine.error(e);
      for (float v : batch.engine.value(outs[e]).to_float_vector()) read.push_back(v);
    }
    held = defined_values(batch.tape);
  };
  std::vector<float> kept, dropped, trained;
  std::size_t held_kept = 0, held_dropped = 0, held_trained = 0, held_trained_kept = 0;
  std::vector<float> unused;
  run(false, false, kept, held_kept);
  run(true, false, dropped, held_dropped);
  run(true, true, trained, held_trained);
  run(false, true, unused, held_trained_kept);
  EXPECT_EQ(dropped, kept);
  EXPECT_EQ(trained, kept);
  EXPECT_LT(3 * held_dropped, held_kept) << "intermediates were not dropped";
  EXPECT_EQ(held_trained, held_trained_kept) << "a tape with gradients on lost values";
}

TEST(Flow, ProgramsJoinAndLeaveAtStepBoundaries) {
  EngineWithInputs batch(3, 41);
  const FlowModel& m = batch.m;
  Engine& engine = batch.engine;
  const std::vector<Val>& xs = batch.xs;
  std::vector<Val> outs(3);
  engine.admit([&](Context& ctx) { return count_down(ctx, m, xs[0], 3, outs[0]); });
  engine.admit([&](Context& ctx) { return count_down(ctx, m, xs[1], 1, outs[1]); });
  ASSERT_TRUE(engine.step());  // both start; their first calls run
  EXPECT_EQ(engine.stats().calls_per_step.back(), 2);
  ASSERT_TRUE(engine.step());  // example 1 finishes; example 0 reads again
  EXPECT_EQ(engine.state(1), ProgramState::kDone);
  EXPECT_EQ(engine.num_live(), 1u);
  engine.admit([&](Context& ctx) { return count_down(ctx, m, xs[2], 2, outs[2]); });
  EXPECT_EQ(engine.state(2), ProgramState::kAdmitted);
  ASSERT_TRUE(engine.step());  // the newcomer's first call joins example 0's third
  EXPECT_EQ(engine.stats().calls_per_step.back(), 2);
  engine.run();
  EXPECT_FALSE(engine.step());
  EXPECT_EQ(engine.stats().programs_done, 3);
  // gate applied n times to the input, on the host.
  for (auto [e, n] : {std::pair{0, 3}, std::pair{1, 1}, std::pair{2, 2}}) {
    Tape t;
    TapeScope scope(t);
    Var h = t.constant(engine.value(xs[std::size_t(e)]).reshaped({1, 3}));
    for (int k = 0; k < n; ++k) h = h * sigmoid(matmul(h, t.parameter(m.c)));
    expect_near_all(engine.value(outs[std::size_t(e)]).to_float_vector(),
                    h.value().to_float_vector(), 1e-6, "example " + std::to_string(e));
  }
}

// Sets `destroyed` when the program's frame is destroyed (its locals' destructors run).
struct FrameGuard {
  bool* destroyed;
  ~FrameGuard() { *destroyed = true; }
};

Program guarded_count_down(Context& ctx, const FlowModel& m, Val h, bool& destroyed, Val& out) {
  const FrameGuard guard{&destroyed};
  for (int n = 0; n < 50; ++n) {
    h = ctx.apply(m.gate, {h});
    co_await ctx.read(h);
  }
  out = h;
}

TEST(Flow, ACancelledProgramIsRetiredAtOnceAndTheOthersAreUntouched) {
  EngineWithInputs batch(3, 43);
  const FlowModel& m = batch.m;
  Engine& engine = batch.engine;
  std::vector<Val> outs(3);
  bool destroyed = false;
  engine.admit([&](Context& ctx) { return count_down(ctx, m, batch.xs[0], 4, outs[0]); });
  engine.admit(
      [&](Context& ctx) { return guarded_count_down(ctx, m, batch.xs[1], destroyed, outs[1]); },
      "abandoned");
  engine.admit([&](Context& ctx) { return count_down(ctx, m, batch.xs[2], 4, outs[2]); });
  ASSERT_TRUE(engine.step());
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(engine.num_live(), 3u);
  EXPECT_TRUE(engine.cancel(1, "the client went away"));
  EXPECT_TRUE(destroyed);  // the frame is gone now, not at the engine's end
  EXPECT_EQ(engine.state(1), ProgramState::kFailed);
  EXPECT_NE(engine.error(1).find("example 1 ('abandoned') failed: the client went away"),
            std::string::npos)
      << engine.error(1);
  EXPECT_EQ(engine.num_live(), 2u);
  EXPECT_FALSE(engine.cancel(1, "twice"));
  // The call it issued before (in the pending weave) runs once more; then only the two left.
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(engine.stats().calls_per_step.back(), 3);
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(engine.stats().calls_per_step.back(), 2);
  engine.run();
  EXPECT_EQ(engine.state(0), ProgramState::kDone);
  EXPECT_EQ(engine.state(2), ProgramState::kDone);
  EXPECT_FALSE(engine.cancel(0, "after the end"));
  // A program admitted but not started yet is cancelled too.
  engine.admit([&](Context& ctx) { return count_down(ctx, m, batch.xs[0], 2, outs[0]); });
  EXPECT_TRUE(engine.cancel(3, "gone before it started"));
  EXPECT_FALSE(engine.step());
}

// cell applied `times` times; nothing read.
Program fold_cells(Context& ctx, const FlowModel& m, Val x, std::size_t times, Val& out) {
  Val h = x;
  for (std::size_t k = 0; k < times; ++k) h = ctx.apply(m.cell, {h, x});
  out = h;
  co_return;
}

TEST(Flow, AProgramThatReadsNothingRunsInOneStep) {
  EngineWithInputs batch(4, 51);
  const FlowModel& m = batch.m;
  Engine& engine = batch.engine;
  const std::vector<Val>& xs = batch.xs;
  std::vector<Val> outs(4);
  for (std::size_t e = 0; e < 4; ++e)
    engine.admit([&, e](Context& ctx) { return fold_cells(ctx, m, xs[e], e + 1, outs[e]); });
  engine.run();
  EXPECT_EQ(engine.stats().steps, 1);
  EXPECT_EQ(engine.stats().calls, 1 + 2 + 3 + 4);
  // By depth: four levels of cell, the first shared by all four programs.
  EXPECT_EQ(engine.stats().batched_calls, 4);
  EXPECT_TRUE(engine.computed(outs[3]));
}

Program split_once(Context& ctx, const FlowModel& m, Val x, Val& score) {
  score = ctx.call(m.split, {x})[1];
  co_return;
}

TEST(Flow, MisuseIsReportedByMessage) {
  EngineWithInputs batch(1, 1);
  const FlowModel& m = batch.m;
  Tape& tape = batch.tape;
  Engine& engine = batch.engine;
  const std::vector<Val>& xs = batch.xs;
  expect_error(
      [&] {
        engine.import(tape.variable(random_tensor({2, 4}, 1)), m.hidden);
      },
      {"[flow] import", "float32 [2, 4]", "float32 [3] 'hidden'"});
  Val pending, score;
  engine.admit([&](Context& ctx) { return fold_cells(ctx, m, xs[0], 1, pending); });
  engine.admit([&](Context& ctx) { return split_once(ctx, m, xs[0], score); });
  engine.step();
  expect_error([&] { engine.gather({}); }, {"[flow] gather of no values"});
  expect_error(
      [&] {
        engine.gather(std::vector<Val>{pending, score});
      },
      {"[flow] gather mixes types", "'hidden'", "'score'"});
  expect_error([&] { engine.value(Val{999}); }, {"[flow] value", "not a value of this engine"});
  expect_error([&] { engine.state(9); }, {"[flow] example 9 was never admitted"});
  expect_error([&] { Engine(m.loom, tape, EngineOptions{0}); }, {"max_steps must be positive"});
  // The loom's imports: a location outside the chunks given, a slot never imported.
  loom::Executor executor(m.loom, tape);
  const std::vector<Var> chunks{tape.variable(random_tensor({2, 3}, 2))};
  const std::vector<loom::ValueLocation> beyond{{0, 2}};
  expect_error([&] { executor.import(chunks, beyond); },
               {"[loom] import: row 2 of chunk 0 is not among the 1 chunks given"});
  loom::Weaver weaver(m.loom);
  weaver.call(m.gate, {weaver.imported(m.hidden, 3)});
  expect_error([&] { executor.run(weaver); },
               {"[loom] imported value 0 refers to slot 3 but 0 rows were imported"});
}

}  // namespace
}  // namespace weft::flow::testing
