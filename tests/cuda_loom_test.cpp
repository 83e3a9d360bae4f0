// The loom's guarantee on CUDA: for random DAGs (shared sub-graphs, arguments from far-apart
// depths, concatenated inputs, parameters and fed rows), a batched run on the GPU gives the
// outputs and gradients of the same run on the CPU, for every scheduling strategy, and the
// unbatched CPU run; and a batch's forward and backward never wait for the device, with one
// host-to-device copy per gather at most. Skips with "no CUDA device" where none is usable.
#include "op_test_util.h"
#include "weft/backend/counters.h"
#include "weft/backend/cuda.h"
#include "weft/loom/executor.h"

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

// Three operations over two types, with every parameter on `device`.
struct DeviceModel {
  Loom loom;
  TypeId hidden, word;
  OpId embed, combine, combine_concat;
  Parameter we, be, wc, bc, h0;

  explicit DeviceModel(Device device)
      : we("we", random_tensor({3, 4}, 101).to(device)),
        be("be", random_tensor({4}, 102).to(device)),
        wc("wc", random_tensor({8, 4}, 103).to(device)),
        bc("bc", random_tensor({4}, 104).to(device)),
        h0("h0", random_tensor({4}, 105).to(device)) {
    const TypeShape kHidden{DType::kFloat32, {4}, "hidden"}, kWord{DType::kFloat32, {3}, "word"};
    embed = loom.add_operation("embed", {kWord}, {kHidden}, [this](std::span<const Var> in) {
      return std::vector<Var>{tanh(linear(in[0], we, be))};
    });
    combine = loom.add_operation(
        "combine", {kHidden, kHidden}, {kHidden}, [this](std::span<const Var> in) {
          return std::vector<Var>{lstm_cell_state(concat({in[0], in[1], in[0]}), in[1]) +
                                  tanh(linear(concat({in[0], in[1]}), wc, bc))};
        });
    loom::OperationOptions concat_inputs;
    concat_inputs.concat_inputs = true;
    combine_concat = loom.add_operation(
        "combine_concat", {kHidden, kHidden}, {kHidden},
        [this](std::span<const Var> in) {
          return std::vector<Var>{sigmoid(linear(in[0], wc, bc))};
        },
        concat_inputs);
    hidden = loom.type_id(kHidden);
    word = loom.type_id(kWord);
  }
  std::vector<Parameter> parameters() const { return {we, be, wc, bc, h0}; }
};

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
  const BackendCounters before = backend_counters();
  auto result = executor.run(all, strategy);
  Var h = result.outputs(m.hidden);
  tape.backward(sum(h * tape.constant(random_tensor(h.shape(), 7).to(device))));
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
      // No wait for the device inside a batch; a copy for the constants of each of the two
      // types, then one per gather at most (a step gathers each of its two arguments at most).
      EXPECT_EQ(gpu.forward_backward.synchronizations, 0);
      EXPECT_EQ(gpu.stats.backend.synchronizations, 0);
      EXPECT_LE(gpu.stats.backend.host_to_device, 2 + 2 * gpu.stats.batched_calls + 1);
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

}  // namespace
}  // namespace weft::testing
