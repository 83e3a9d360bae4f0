// The loom's guarantee on CUDA: for random DAGs (shared sub-graphs, arguments from far-apart
// depths, concatenated inputs, parameters and fed rows), a batched run on the GPU gives the
// outputs and gradients of the same run on the CPU, for every scheduling strategy, and the
// unbatched CPU run; and a batch's forward and backward never wait for the device and copy to
// it once: the batch's packed buffer of constants and references (loom/batch_plan.h), with
// the chunk tables as kernel parameters. Skips with "no CUDA device" where none is usable.
#include "loom_device_model.h"
#include "op_test_util.h"
#include "weft/backend/counters.h"
#include "weft/backend/cuda.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

using loom::Executor;
using loom::Strategy;
using loom::Value;
using loom::Weaver;

// The same random example for any model, given equally seeded Rngs.
void weave_example(DeviceModel& m, Weaver& w, Rng& rng, std::int64_t batch_rows) {
  std::vector<Value> words, hiddens;
  for (int i = 0; i < 3; ++i) {
    float values[3] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
    words.push_back(w.constant(m.word, values));
  }
  words.push_back(w.batch_input(m.word, std::int64_t(rng.below(std::uint64_t(batch_rows)))));
  hiddens.push_back(w.parameter(m.hidden, m.h0));
  const int calls = 3 + int(rng.below(15));
  for (int c = 0; c < calls; ++c) {
    auto pick_h = [&] { return hiddens[rng.below(hiddens.size())]; };
    switch (rng.below(3)) {
      case 0:
        hiddens.push_back(w.call(m.embed, {words[rng.below(words.size())]})[0]);
        break;
      case 1:
        hiddens.push_back(w.call(m.combine, {pick_h(), pick_h()})[0]);
        break;
      default:
        hiddens.push_back(w.call(m.combine_concat, {pick_h(), pick_h()})[0]);
    }
  }
  w.add_output(hiddens.back());
  w.add_output(hiddens[rng.below(hiddens.size())]);
}

struct LoomOutcome {
  std::vector<float> outputs, batch_grad;
  std::vector<std::vector<float>> parameter_grads;
  loom::RunStats stats;              // of the forward
  BackendCounters forward_backward;  // the run and its backward, before any value is read
};

LoomOutcome run_seed(Device device, std::uint64_t seed, Strategy strategy) {
  DeviceModel m(device);
  Rng rng(seed);
  Weaver all(m.loom);
  const std::int64_t batch_rows = 5;
  const int examples = 1 + int(rng.below(8));
  for (int e = 0; e < examples; ++e) weave_example(m, all, rng, batch_rows);
  Tape tape;
  Executor executor(m.loom, tape, device);
  Var fed = tape.variable(random_tensor({batch_rows, 3}, seed + 1000).to(device));
  executor.feed(m.word, fed);
  const Var weights = tape.constant(
      random_tensor({std::int64_t(all.outputs().size()), 4}, 7).to(device));  // copied before
  const BackendCounters before = backend_counters();
  auto result = executor.run(all, strategy);
  Var h = result.outputs(m.hidden);
  tape.backward(sum(h * weights));
  LoomOutcome out;
  out.forward_backward = backend_counters() - before;
  out.stats = result.stats();
  out.outputs = h.value().to_float_vector();
  out.batch_grad = fed.grad().defined() ? fed.grad().to_float_vector()
                                        : std::vector<float>(std::size_t(batch_rows * 3), 0.0f);
  for (const Parameter& p : m.parameters())
    out.parameter_grads.push_back(p.grad().to_float_vector());
  return out;
}

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                  const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 5e-5 + 1e-4 * std::abs(expected[i]))
        << what << " element " << i;
}

TEST(CudaLoomProperty, TheCpuReferenceIsConsistent) {
  // Needs no device: the model and weaves of this file batch correctly on the CPU, so a
  // failure of the GPU test below is the GPU's.
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const LoomOutcome unbatched = run_seed(Device::kCpu, seed, Strategy::kNone);
    const LoomOutcome batched = run_seed(Device::kCpu, seed, Strategy::kByDepth);
    ASSERT_GE(unbatched.outputs.size(), 8u);  // two outputs of [4] per example
    expect_close(batched.outputs, unbatched.outputs, "outputs");
    expect_close(batched.batch_grad, unbatched.batch_grad, "fed batch gradient");
    for (std::size_t p = 0; p < unbatched.parameter_grads.size(); ++p)
      expect_close(batched.parameter_grads[p], unbatched.parameter_grads[p], "parameter gradient");
  }
}

TEST(CudaLoomProperty, GpuRunsEqualCpuRunsOnRandomDags) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")";
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const LoomOutcome reference = run_seed(Device::kCpu, seed, Strategy::kNone);
    EXPECT_EQ(reference.forward_backward.launches + reference.forward_backward.host_to_device +
                  reference.forward_backward.synchronizations,
              0);  // the CPU launches, copies and waits for nothing
    for (Strategy s : {Strategy::kNone, Strategy::kByDepth, Strategy::kAgenda}) {
      SCOPED_TRACE(std::string(loom::strategy_name(s)));
      const LoomOutcome gpu = run_seed(Device::kCuda, seed, s);
      // No wait for the device inside a batch, and one copy to it: the packed buffer, which
      // the outputs' gather and every gradient's scatter read too (their chunk tables are
      // kernel parameters: a batch here has fewer chunks than a parameter holds).
      EXPECT_EQ(gpu.forward_backward.synchronizations, 0);
      EXPECT_EQ(gpu.stats.backend.synchronizations, 0);
      EXPECT_EQ(gpu.stats.backend.host_to_device, 1);
      EXPECT_EQ(gpu.forward_backward.host_to_device, 1);
      EXPECT_GT(gpu.stats.packed_bytes, 0);
      EXPECT_GE(gpu.stats.backend.launches, gpu.stats.batched_calls);
      EXPECT_GE(gpu.stats.backend.kernel_calls, gpu.stats.batched_calls);
      expect_close(gpu.outputs, reference.outputs, "outputs");
      expect_close(gpu.batch_grad, reference.batch_grad, "fed batch gradient");
      for (std::size_t p = 0; p < reference.parameter_grads.size(); ++p)
        expect_close(gpu.parameter_grads[p], reference.parameter_grads[p], "parameter gradient");
    }
  }
}

TEST(CudaLoomProperty, ParametersOnAnotherDeviceAreNamedInTheError) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")";
  DeviceModel m(Device::kCpu);  // parameters on the CPU, run on the GPU
  Weaver w(m.loom);
  Rng rng(3);
  weave_example(m, w, rng, 2);
  Tape tape;
  Executor executor(m.loom, tape, Device::kCuda);
  executor.feed(m.word, tape.constant(random_tensor({2, 3}, 1).to(Device::kCuda)));
  expect_error([&] { executor.run(w); }, {"on different devices"});
}

// A chain of 300 calls run one call per step: the outputs' gather and its gradient read 301
// chunks, more than a kernel parameter's table holds, so their tables travel in a copy each.
std::vector<float> chain_outputs(Device device, BackendCounters& counted,
                                 std::vector<float>& h0_grad) {
  DeviceModel m(device);
  Weaver w(m.loom);
  weave_chain(m, w, 300);
  Tape tape;
  Executor executor(m.loom, tape, device);
  const BackendCounters before = backend_counters();
  auto result = executor.run(w, Strategy::kNone);
  Var outputs = result.outputs(m.hidden);
  tape.backward(sum(outputs));
  counted = backend_counters() - before;
  h0_grad = m.h0.grad().to_float_vector();
  return outputs.value().to_float_vector();
}

TEST(CudaLoomProperty, AGatherOfManyChunksUploadsItsTable) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")";
  BackendCounters cpu_counted, gpu_counted;
  std::vector<float> cpu_grad, gpu_grad;
  const std::vector<float> cpu = chain_outputs(Device::kCpu, cpu_counted, cpu_grad);
  const std::vector<float> gpu = chain_outputs(Device::kCuda, gpu_counted, gpu_grad);
  expect_close(gpu, cpu, "outputs");
  expect_close(gpu_grad, cpu_grad, "h0 gradient");
  EXPECT_EQ(gpu_counted.host_to_device, 3);  // the packed buffer, the two tables
  EXPECT_EQ(gpu_counted.synchronizations, 0);
}

}  // namespace
}  // namespace weft::testing
