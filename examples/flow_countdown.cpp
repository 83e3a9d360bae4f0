// The smallest program that decides as it goes (README, "Programs that decide as they go"):
// each example counts its own value down until it falls below zero, so the examples loop
// different numbers of times, yet every step batches the calls of all that are still going.
#include <cstdio>
#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/flow/flow.h"

using namespace weft;

// One example: reads its value (waiting for the step that computes it) to decide what next.
flow::Program count_down(flow::Context& ctx, loom::OpId decrement, flow::Val x, int& steps) {
  for (;;) {
    const float value = (co_await ctx.read(x)).data<float>()[0];
    if (value < 0) break;
    x = ctx.apply(decrement, {x});
    ++steps;
  }
}

int main() {
  loom::Loom loom;
  const loom::TypeShape scalar{DType::kFloat32, {1}, "scalar"};
  const loom::OpId decrement =
      loom.add_operation("decrement", {scalar}, {scalar}, [](std::span<const Var> in) {
        return std::vector<Var>{in[0] - 1.0f};  // batched: one call for every example
      });
  Tape tape;
  flow::Engine engine(loom, tape);
  const Tensor starts = Tensor::from_vector({3, 1}, std::vector<float>{2.5f, 0.5f, 4.5f});
  const std::vector<flow::Val> xs = engine.import(tape.variable(starts), loom.type_id(scalar));
  std::vector<int> steps(xs.size(), 0);
  for (std::size_t e = 0; e < xs.size(); ++e)
    engine.admit(
        [&, e](flow::Context& ctx) { return count_down(ctx, decrement, xs[e], steps[e]); });
  engine.run();
  for (std::size_t e = 0; e < xs.size(); ++e) std::printf("example %zu: %d steps\n", e, steps[e]);
  std::printf("engine: %lld steps, %lld calls\n", static_cast<long long>(engine.stats().steps),
              static_cast<long long>(engine.stats().calls));
  return 0;
}
