// The batch-invariant mode's product kernel (fixed_order_sgemm, src/backend/cpu/sgemm.h) against
// one plain call of the same product to the first provider built in (oneDNN when it is), at the
// weight shapes of the Tree-LSTM benchmark (k 256, n 640: V = 128) and of the SST server (k 300, n
// 750: hidden 150), for 1 to 256 rows: a lone example's tree levels have 1-16. Part of
// weft_bench_ops; --benchmark_filter= invariant_gemm selects these; items_per_second counts
// floating-point operations.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/sgemm.h"
#include "weft/backend/cpu.h"
#include "weft/core/rng.h"

namespace {

struct Operands {
  std::int64_t m, n, k;
  std::vector<float> a, b, c;
};

Operands operands(const benchmark::State& state) {
  Operands o{state.range(0), state.range(1), state.range(2), {}, {}, {}};
  weft::Rng rng(7);
  auto fill = [&](std::vector<float>& v, std::int64_t size) {
    v.resize(std::size_t(size));
    for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  };
  fill(o.a, o.m * o.k);
  fill(o.b, o.k * o.n);
  fill(o.c, o.m * o.n);
  return o;
}

void count_flops(benchmark::State& state, const Operands& o) {
  state.SetItemsProcessed(std::int64_t(state.iterations()) * 2 * o.m * o.n * o.k);
}

void invariant_gemm_fixed_order(benchmark::State& state) {
  Operands o = operands(state);
  if (!weft::backend::cpu::fixed_order_sgemm_built()) return state.SkipWithError("not built");
  for (auto _ : state) {
    weft::backend::cpu::fixed_order_sgemm(o.m, o.n, o.k, 1.0f, o.a.data(), o.k, o.b.data(), o.n,
                                          0.0f, o.c.data(), o.n);
    benchmark::DoNotOptimize(o.c.data());
  }
  count_flops(state, o);
}

void invariant_gemm_library_call(benchmark::State& state) {
  Operands o = operands(state);
  const weft::GemmProvider provider = weft::available_gemm_providers()[0];
  for (auto _ : state) {
    weft::backend::cpu::sgemm_with(provider, false, false, o.m, o.n, o.k, 1.0f, o.a.data(), o.k,
                                   o.b.data(), o.n, 0.0f, o.c.data(), o.n);
    benchmark::DoNotOptimize(o.c.data());
  }
  count_flops(state, o);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [k, n] : {std::pair{256, 640}, {300, 750}})
    for (int m : {1, 2, 4, 16, 256}) b->Args({m, n, k});
  b->ArgNames({"m", "n", "k"});
}

BENCHMARK(invariant_gemm_fixed_order)->Apply(shapes);
BENCHMARK(invariant_gemm_library_call)->Apply(shapes);

}  // namespace
