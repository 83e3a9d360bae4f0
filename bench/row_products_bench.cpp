// Issue 42's row products against what they replace, at the ICLR Tree-LSTM's shapes (rows
// gathered from 4x as many chunk rows, in random order): the forward product x · W (a gather,
// then sgemm / product_read_rows), the weight gradient xᵀ · dy (the gathered copy's sgemm /
// product_transposed_read_rows) and the input gradient dy · Wᵀ (sgemm, then a scatter-add /
// product_write_rows). Arguments: rows, k (the argument's width), n (the product's width).
#include <cstdint>
#include <vector>

#include "backend/kernels.h"
#include "benchmark/benchmark.h"
#include "weft/core/rng.h"

namespace {

using weft::DType;
using weft::Shape;
using weft::Tensor;
namespace backend = weft::backend;

struct Operands {
  Tensor source, x, w, packed, packed_t, dy, dw, dx_source;
  std::vector<std::int32_t> order;
  backend::RowBlocks rows, grad_rows;
};

Operands operands(std::int64_t rows, std::int64_t k, std::int64_t n) {
  weft::Rng rng(7);
  Operands o;
  auto uniform = [&](Shape shape) {
    Tensor t = Tensor::empty(shape, DType::kFloat32, weft::Device::kCpu);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform()) - 0.5f;
    return t;
  };
  o.source = uniform(Shape{4 * rows, k});
  o.dx_source = uniform(Shape{4 * rows, k});
  o.w = uniform(Shape{k, n});
  o.dy = uniform(Shape{rows, n});
  o.x = Tensor::empty(Shape{rows, k}, DType::kFloat32, weft::Device::kCpu);
  o.dw = Tensor::empty(Shape{k, n}, DType::kFloat32, weft::Device::kCpu);
  backend::pack_panels(o.w, false, o.packed);
  backend::pack_panels(o.w, true, o.packed_t);
  o.rows.rows = o.grad_rows.rows = rows;
  o.rows.widths = o.grad_rows.widths = {k};
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto r = std::int32_t(rng.below(std::uint64_t(4 * rows)));
    o.order.push_back(r);
    o.rows.pointers.push_back(o.source.data<float>() + r * k);
    o.grad_rows.pointers.push_back(o.dx_source.data<float>() + r * k);
  }
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy_n(o.rows.pointers[std::size_t(i)], k, o.x.data<float>() + i * k);
  return o;
}

void set_rate(benchmark::State& state) {
  const double flops = 2.0 * double(state.range(0) * state.range(1) * state.range(2));
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Forward_GatherThenSgemm(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  Tensor y =
      Tensor::empty(Shape{state.range(0), state.range(2)}, DType::kFloat32, weft::Device::kCpu);
  for (auto _ : state) {
    for (std::int64_t i = 0; i < state.range(0); ++i)
      std::copy_n(o.rows.pointers[std::size_t(i)], state.range(1),
                  o.x.data<float>() + i * state.range(1));
    backend::gemm(o.x, false, o.w, false, 1.0f, 0.0f, y);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_rate(state);
}

void BM_Forward_ReadRows(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  Tensor y =
      Tensor::empty(Shape{state.range(0), state.range(2)}, DType::kFloat32, weft::Device::kCpu);
  for (auto _ : state) {
    backend::product_read_rows(o.rows, o.packed, y);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_rate(state);
}

void BM_WeightGrad_Sgemm(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    backend::gemm(o.x, true, o.dy, false, 1.0f, 1.0f, o.dw);
    benchmark::DoNotOptimize(o.dw.data<float>());
  }
  set_rate(state);
}

void BM_WeightGrad_ReadRows(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    backend::product_transposed_read_rows(o.rows, o.dy, 1.0f, o.dw);
    benchmark::DoNotOptimize(o.dw.data<float>());
  }
  set_rate(state);
}

void BM_InputGrad_SgemmThenScatter(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  const std::int64_t k = state.range(1);
  for (auto _ : state) {
    backend::gemm(o.dy, false, o.w, true, 1.0f, 0.0f, o.x);
    for (std::int64_t i = 0; i < state.range(0); ++i) {
      float* to = o.grad_rows.pointers[std::size_t(i)];
      const float* from = o.x.data<float>() + i * k;
      for (std::int64_t j = 0; j < k; ++j) to[j] += from[j];
    }
    benchmark::DoNotOptimize(o.dx_source.data<float>());
  }
  set_rate(state);
}

void BM_InputGrad_WriteRows(benchmark::State& state) {
  Operands o = operands(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    backend::product_write_rows(o.dy, o.packed_t, o.grad_rows);
    benchmark::DoNotOptimize(o.dx_source.data<float>());
  }
  set_rate(state);
}

// The ICLR cell's two products at N = 128 and 1024 (x [rows, 2N] · W0 [2N, N]), B = 256's rows
// per step (~600 at N = 128), a small step (8 rows) and the gates' product (h0 · W1 [N, 4N]).
void Shapes(benchmark::internal::Benchmark* b) {
  for (auto [rows, k, n] : {std::array<std::int64_t, 3>{600, 256, 128},
                            {600, 128, 512},
                            {8, 256, 128},
                            {64, 2048, 1024},
                            {8192, 256, 128}})
    b->Args({rows, k, n});
}

BENCHMARK(BM_Forward_GatherThenSgemm)->Apply(Shapes);
BENCHMARK(BM_Forward_ReadRows)->Apply(Shapes);
BENCHMARK(BM_WeightGrad_Sgemm)->Apply(Shapes);
BENCHMARK(BM_WeightGrad_ReadRows)->Apply(Shapes);
BENCHMARK(BM_InputGrad_SgemmThenScatter)->Apply(Shapes);
BENCHMARK(BM_InputGrad_WriteRows)->Apply(Shapes);

}  // namespace
