// weft_bench_ops: Google Benchmark microbenchmarks of Weft's ops at the shapes a batched
// Tree-LSTM level produces (256 nodes; N = 128 and 1024). Matrix products report GFLOP/s and
// their ratio to the raw sgemm at the same shapes, measured in this process (DESIGN.md §3);
// memory-bound ops report bytes/s. One thread (weft::set_num_threads(1)) unless
// WEFT_NUM_THREADS is set.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "treelstm/iclr_benchmark.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_ceiling.h"
#include "weft/core/rng.h"

namespace {

using weft::GemmShape;
using weft::Shape;
using weft::Tape;
using weft::Tensor;
using weft::Var;

constexpr std::int64_t kRows = 256;

Tensor uniform_tensor(const Shape& shape, std::uint64_t seed, float low = -1, float high = 1) {
  weft::Rng rng(seed);
  std::vector<float> values(std::size_t(shape.numel()));
  for (float& v : values) v = rng.uniform(low, high);
  return Tensor::from_vector(shape, values);
}

Tensor random_indices(std::int64_t count, std::int64_t limit, std::uint64_t seed) {
  weft::Rng rng(seed);
  std::vector<std::int32_t> values(static_cast<std::size_t>(count));
  for (auto& v : values) v = std::int32_t(rng.below(std::uint64_t(limit)));
  return Tensor::from_vector(Shape{count}, values);
}

// The raw sgemm rate of a product list, measured once per list in this process.
double raw_ceiling(const std::vector<GemmShape>& shapes) {
  static std::map<std::string, double> cache;
  std::string key;
  for (const GemmShape& s : shapes) key += weft::gemm_shape_label(s) + ";";
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, weft::sgemm_ceiling_gflops(shapes, 0.3)).first;
  return it->second;
}

double total_flops(const std::vector<GemmShape>& shapes) {
  double flops = 0;
  for (const GemmShape& s : shapes) flops += weft::gemm_flops(s);
  return flops;
}

// Layer 0 is the Tree-LSTM's hidden product ([l | r] · W0, W0 [2N, N]); layer 1 its gates
// product (hidden · W1, W1 [N, 4N]). Forward is one product; backward adds dX = dY · Wᵀ and
// dW = Xᵀ · dY, as tree_lstm_gemm_shapes defines them.
std::vector<GemmShape> layer_shapes(std::int64_t n, int layer, bool backward) {
  const auto all = weft::treelstm::tree_lstm_gemm_shapes(kRows, n, backward);
  if (!backward) return {all[std::size_t(layer)]};
  if (layer == 1) return {all[1], all[2], all[3]};
  return {all[0], all[4], all[5]};
}

// Sets GFLOP/s and the ratio to the raw sgemm at the same products.
void report_gemm_rate(benchmark::State& state, const std::vector<GemmShape>& shapes,
                      double seconds) {
  const double flops = total_flops(shapes);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  const double ours = flops * double(state.iterations()) / seconds / 1e9;
  const double raw = raw_ceiling(shapes);
  state.counters["raw_sgemm_GFLOPS"] = raw;
  state.counters["ratio_to_sgemm"] = ours / raw;
}

// args: N, layer (0 hidden, 1 gates), backward (0/1), use linear (0 matmul, 1 linear)
void BM_matrix_product(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int layer = int(state.range(1));
  const bool backward = state.range(2) != 0, use_linear = state.range(3) != 0;
  const std::int64_t in = layer == 0 ? 2 * n : n, out = layer == 0 ? n : 4 * n;
  const Tensor x = uniform_tensor(Shape{kRows, in}, 1);
  const Tensor w = uniform_tensor(Shape{in, out}, 2, -0.05f, 0.05f);
  const Tensor b = uniform_tensor(Shape{out}, 3);
  const Tensor cotangent = uniform_tensor(Shape{kRows, out}, 4);
  const auto shapes = layer_shapes(n, layer, backward);
  raw_ceiling(shapes);  // measured before the timed loop
  Tape tape;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    tape.clear();
    Var vx = backward ? tape.variable(x) : tape.constant(x);
    Var vw = backward ? tape.variable(w) : tape.constant(w);
    Var y = use_linear ? weft::linear(vx, vw, backward ? tape.variable(b) : tape.constant(b))
                       : weft::matmul(vx, vw);
    if (backward) tape.backward(y, cotangent);
    benchmark::DoNotOptimize(y.value().raw_data());
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  report_gemm_rate(state, shapes, elapsed.count());
}
BENCHMARK(BM_matrix_product)
    ->ArgNames({"N", "layer", "backward", "linear"})
    ->ArgsProduct({{128, 1024}, {0, 1}, {0, 1}, {0, 1}})
    ->UseRealTime()  // wall clock, like the raw sgemm figure it is divided by
    ->Unit(benchmark::kMicrosecond);

// Elementwise ops on [256, F] constants (forward only: nothing to differentiate).
enum class Elementwise { kSigmoid, kTanh, kMul, kAddRow };

void BM_elementwise(benchmark::State& state, Elementwise kind, std::int64_t features) {
  const Tensor a = uniform_tensor(Shape{kRows, features}, 5);
  const Tensor b = kind == Elementwise::kAddRow ? uniform_tensor(Shape{features}, 6)
                                                : uniform_tensor(Shape{kRows, features}, 6);
  Tape tape;
  for (auto _ : state) {
    tape.clear();
    Var va = tape.constant(a), vb = tape.constant(b);
    Var y;
    switch (kind) {
      case Elementwise::kSigmoid:
        y = weft::sigmoid(va);
        break;
      case Elementwise::kTanh:
        y = weft::tanh(va);
        break;
      case Elementwise::kMul:
        y = va * vb;
        break;
      case Elementwise::kAddRow:
        y = va + vb;
        break;
    }
    benchmark::DoNotOptimize(y.value().raw_data());
  }
  const bool binary = kind == Elementwise::kMul || kind == Elementwise::kAddRow;
  // bytes read and written once each: inputs plus the output
  const std::int64_t bytes = (2 * a.numel() + (binary ? b.numel() : 0)) * 4;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations() * a.numel());
}

// Registered as elementwise/<op>/F:<features>.
const bool elementwise_registered = [] {
  const char* names[] = {"sigmoid", "tanh", "mul", "add_row_broadcast"};
  for (int op = 0; op < 4; ++op)
    for (std::int64_t features : {1024, 128}) {
      const std::string name =
          std::string("elementwise/") + names[op] + "/F:" + std::to_string(features);
      benchmark::RegisterBenchmark(name.c_str(), BM_elementwise, Elementwise(op), features)
          ->Unit(benchmark::kMicrosecond);
    }
  return true;
}();

// y = x[indices]: 256 rows of 1024 gathered from a 1024-row buffer (the loom's argument
// gather); bytes = rows read + rows written.
void BM_gather_rows(benchmark::State& state) {
  const Tensor x = uniform_tensor(Shape{1024, 1024}, 7);
  const Tensor indices = random_indices(kRows, 1024, 8);
  Tape tape;
  for (auto _ : state) {
    tape.clear();
    Var y = weft::gather_rows(tape.constant(x), indices);
    benchmark::DoNotOptimize(y.value().raw_data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kRows * 1024 * 4);
}
BENCHMARK(BM_gather_rows)->Unit(benchmark::kMicrosecond);

// y[indices[i]] += x[i]: 256 rows of 1024 into a zeroed 1024-row result (the gather's
// gradient); bytes = rows read + the whole result written.
void BM_scatter_add_rows(benchmark::State& state) {
  const Tensor x = uniform_tensor(Shape{kRows, 1024}, 9);
  const Tensor indices = random_indices(kRows, 1024, 10);
  Tape tape;
  for (auto _ : state) {
    tape.clear();
    Var y = weft::scatter_add_rows(tape.constant(x), indices, 1024);
    benchmark::DoNotOptimize(y.value().raw_data());
  }
  state.SetBytesProcessed(state.iterations() * (kRows + 1024) * 1024 * 4);
}
BENCHMARK(BM_scatter_add_rows)->Unit(benchmark::kMicrosecond);

// [l | r] of two [256, 1024]: the Tree-LSTM's input concat; bytes = read + written.
void BM_concat(benchmark::State& state) {
  const Tensor l = uniform_tensor(Shape{kRows, 1024}, 11);
  const Tensor r = uniform_tensor(Shape{kRows, 1024}, 12);
  Tape tape;
  for (auto _ : state) {
    tape.clear();
    Var y = weft::concat({tape.constant(l), tape.constant(r)});
    benchmark::DoNotOptimize(y.value().raw_data());
  }
  state.SetBytesProcessed(state.iterations() * 4 * kRows * 1024 * 4);
}
BENCHMARK(BM_concat)->Unit(benchmark::kMicrosecond);

// The SST classifier's loss: 256 rows of 5 logits, forward (arg 0) or forward and backward
// through the mean (arg 1).
void BM_softmax_cross_entropy(benchmark::State& state) {
  const bool backward = state.range(0) != 0;
  const Tensor logits = uniform_tensor(Shape{kRows, 5}, 13);
  const Tensor labels = random_indices(kRows, 5, 14);
  Tape tape;
  for (auto _ : state) {
    tape.clear();
    Var x = backward ? tape.variable(logits) : tape.constant(logits);
    Var losses = weft::softmax_cross_entropy(x, labels);
    if (backward) tape.backward(weft::mean(losses));
    benchmark::DoNotOptimize(losses.value().raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * kRows * 5 * 4 * 2);
}
BENCHMARK(BM_softmax_cross_entropy)->ArgName("backward")->Arg(0)->Arg(1);

}  // namespace

int main(int argc, char** argv) {
  // One thread unless WEFT_NUM_THREADS says otherwise (the backend reads and checks it).
  if (const char* n = std::getenv("WEFT_NUM_THREADS"); n == nullptr || *n == '\0')
    weft::set_num_threads(1);
  benchmark::AddCustomContext("weft_cpu_backend", std::string(weft::cpu_backend_summary()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
