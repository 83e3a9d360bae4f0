// weft_bench_flow: the host cost of one flow step (issues 32, 33). B programs each read their
// value every step for L steps, over an operation on one float (so kernels cost next to nothing
// and the step's host work shows): flow_steps reports microseconds per step; static_weave runs
// the same calls as one static weave of L levels, the loom's cost per level, for the ratio.
// countdown_steps: a server's steady decoding load (the countdown model's step, three GEMMs of
// [live, 258], greedy programs of 5 to 50 steps replaced as they end), against
// countdown_kernels, the same step's body called on [live, ...] tensors with no engine: their
// difference is a step's host cost.
#include <benchmark/benchmark.h>

#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/core/rng.h"
#include "weft/flow/flow.h"
#include "weft/flow/search.h"

namespace {

using namespace weft;

constexpr int kLength = 32;

struct TinyLoom {
  loom::Loom loom;
  loom::TypeId scalar = 0;
  loom::OpId step = 0;
  TinyLoom() {
    const loom::TypeShape type{DType::kFloat32, {1}, "scalar"};
    step = loom.add_operation("step", {type}, {type}, [](std::span<const Var> in) {
      return std::vector<Var>{in[0] * 0.5f};
    });
    scalar = loom.type_id(type);
  }
};

flow::Program reader(flow::Context& ctx, loom::OpId step, flow::Val x) {
  for (int t = 0; t < kLength; ++t) {
    x = ctx.apply(step, {x});
    co_await ctx.read(x);
  }
}

void BM_flow_steps(benchmark::State& state) {
  TinyLoom m;
  const std::int64_t batch = state.range(0);
  const Tensor inputs = Tensor::full({batch, 1}, 1.0f);
  std::int64_t steps = 0;
  for (auto _ : state) {
    Tape tape;
    tape.set_grad_enabled(false);
    flow::Engine engine(m.loom, tape);
    const std::vector<flow::Val> xs = engine.import(tape.constant(inputs), m.scalar);
    for (std::int64_t e = 0; e < batch; ++e)
      engine.admit([&, e](flow::Context& ctx) { return reader(ctx, m.step, xs[std::size_t(e)]); });
    engine.run();
    steps += engine.stats().steps;
  }
  // CPU seconds per step (the main thread's: the machine's other load does not count).
  state.counters["per_step"] =
      benchmark::Counter(double(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_static_weave(benchmark::State& state) {
  TinyLoom m;
  const std::int64_t batch = state.range(0);
  const Tensor inputs = Tensor::full({batch, 1}, 1.0f);
  std::int64_t levels = 0;
  for (auto _ : state) {
    Tape tape;
    tape.set_grad_enabled(false);
    loom::Weaver weaver(m.loom);
    for (std::int64_t e = 0; e < batch; ++e) {
      loom::Value x = weaver.batch_input(m.scalar, e);
      for (int t = 0; t < kLength; ++t) x = weaver.call(m.step, {x})[0];
      weaver.add_output(x);
    }
    loom::Executor executor(m.loom, tape);
    executor.feed(m.scalar, tape.constant(inputs));
    benchmark::DoNotOptimize(executor.run(weaver).outputs(m.scalar));
    levels += kLength;
  }
  state.counters["per_level"] =
      benchmark::Counter(double(levels), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The countdown model's step (models/countdown.cpp) with seeded weights: state [258] (width 256),
// tokens [9].
struct CountdownLoom {
  static constexpr std::int64_t kDim = 258, kVocabulary = 9;
  loom::Loom loom;
  loom::TypeId state = 0, token = 0;
  loom::OpId step = 0;
  Parameter shift, gate, end, table, pair;
  CountdownLoom() {
    Rng rng(3);
    const auto random = [&](const char* name, std::int64_t rows, std::int64_t cols) {
      std::vector<float> v(std::size_t(rows * cols));
      for (float& x : v) x = rng.uniform(-0.1f, 0.1f);
      return Parameter(name, Tensor::from_vector({rows, cols}, v));
    };
    shift = random("shift", kDim, kDim), gate = random("gate", kDim, 1);
    end = random("end", 1, kVocabulary), table = random("table", kDim, kVocabulary);
    pair = random("pair", kVocabulary, kVocabulary);
    const loom::TypeShape state_type{DType::kFloat32, {kDim}, "state"};
    const loom::TypeShape token_type{DType::kFloat32, {kVocabulary}, "token"};
    step = loom.add_operation("step", {state_type, token_type}, {state_type, token_type},
                              [this](std::span<const Var> in) { return body(in[0], in[1]); });
    state = loom.type_id(state_type);
    token = loom.type_id(token_type);
  }
  std::vector<Var> body(Var state_rows, Var token_rows) const {
    Tape& t = Tape::current();
    const Var g = tanh(matmul(state_rows, t.parameter(gate)));
    const Var scores = matmul(g, t.parameter(end)) + matmul(state_rows, t.parameter(table)) +
                       matmul(token_rows, t.parameter(pair));
    return {matmul(state_rows, t.parameter(shift)), log_softmax(scores)};
  }
  flow::Decoder decoder() const {
    flow::Decoder d;
    d.step = [this](flow::Context& ctx, flow::Val s, std::int32_t previous) {
      std::vector<float> onehot(std::size_t(kVocabulary), 0.0f);
      onehot[std::size_t(previous)] = 1;
      const auto outs = ctx.call(step, {s, ctx.constant(token, onehot)});
      return flow::DecoderStep{outs[0], outs[1]};
    };
    d.end_token = -1;  // never chosen: a program runs its max_length steps
    return d;
  }
};

// Steps one engine as a server's generation does (kGenerationSteps, then a fresh tape), with
// `live` greedy programs of 5 to 50 steps, each replaced (encoded state imported) as it ends.
constexpr int kGenerationSteps = 256;

void BM_countdown_steps(benchmark::State& state) {
  set_num_threads(1);
  const CountdownLoom m;
  const std::size_t live = std::size_t(state.range(0));
  const Tensor encoded = Tensor::full({std::int64_t(live), CountdownLoom::kDim}, 0.01f);
  Rng rng(7);
  std::int64_t steps = 0;
  for (auto _ : state) {
    Tape tape;
    tape.set_grad_enabled(false);
    TapeScope scope(tape);
    flow::Engine engine(m.loom, tape);
    std::vector<flow::Decoder> decoders(live, m.decoder());
    std::vector<flow::Hypothesis> out(live);
    std::vector<std::size_t> example(live);
    std::vector<flow::Val> initial = engine.import(tape.constant(encoded), m.state);
    const auto start = [&](std::size_t k) {
      decoders[k].max_length = std::int32_t(5 + rng.below(46));
      example[k] = engine.admit([&, k](flow::Context& ctx) {
        return flow::greedy_program(ctx, decoders[k], initial[k], out[k]);
      });
    };
    for (std::size_t k = 0; k < live; ++k) start(k);
    for (int t = 0; t < kGenerationSteps; ++t) {
      engine.step();
      for (std::size_t k = 0; k < live; ++k)
        if (engine.state(example[k]) != flow::ProgramState::kRunning) {
          initial[k] =
              engine.import(tape.constant(encoded.rows_view(std::int64_t(k), 1)), m.state)[0];
          start(k);
        }
    }
    steps += kGenerationSteps;
  }
  state.counters["per_step"] =
      benchmark::Counter(double(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The same step's kernels alone: the body on [live, ...] rows, a fresh tape per generation.
void BM_countdown_kernels(benchmark::State& state) {
  set_num_threads(1);
  const CountdownLoom m;
  const std::int64_t live = state.range(0);
  std::int64_t steps = 0;
  for (auto _ : state) {
    Tape tape;
    tape.set_grad_enabled(false);
    TapeScope scope(tape);
    Var rows = tape.constant(Tensor::full({live, CountdownLoom::kDim}, 0.01f));
    const Var tokens = tape.constant(Tensor::full({live, CountdownLoom::kVocabulary}, 0.0f));
    for (int t = 0; t < kGenerationSteps; ++t) {
      const std::vector<Var> outs = m.body(rows, tokens);
      benchmark::DoNotOptimize(outs[1].value().raw_data());
      rows = outs[0];
    }
    steps += kGenerationSteps;
  }
  state.counters["per_step"] =
      benchmark::Counter(double(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_countdown_steps)->Arg(15)->Arg(30)->Arg(60)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_countdown_kernels)->Arg(15)->Arg(30)->Arg(60)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_flow_steps)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_static_weave)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
