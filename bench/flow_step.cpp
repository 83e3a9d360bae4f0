// weft_bench_flow: the host cost of one flow step (issue 32). B programs each read their value
// every step for L steps, over an operation on one float (so kernels cost next to nothing and
// the step's host work shows): flow_steps reports microseconds per step; static_weave runs the
// same calls as one static weave of L levels, the loom's cost per level, for the ratio.
#include <benchmark/benchmark.h>

#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/flow/flow.h"

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

BENCHMARK(BM_flow_steps)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_static_weave)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
