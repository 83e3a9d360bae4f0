// The device setting on the CPU, explicitly through every path that takes one: a
// ParameterStore and a Compiler on Device::kCpu, the optimizer's slots beside the parameters,
// clipping, checkpoints; the defaults are Device::kCpu with the same values; asking for CUDA
// where there is none fails at once with one line saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "device_pipeline_test_util.h"
#include "weft/backend/cuda.h"

namespace weft::testing {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("weft_device_test_" + name)).string();
}

train::OptimizerSpec adam_spec() {
  train::OptimizerSpec spec;
  spec.kind = train::OptimizerKind::kAdam;
  spec.weight_decay = 0.01;
  spec.weight_decay_mode = train::WeightDecayMode::kDecoupled;
  spec.learning_rate_scales = {{"embedding/", 0.1}};
  return spec;
}

TEST(TrainDevice, StoreIsOnTheCpuByDefaultWithTheSameValues) {
  nn::ParameterStore implicit(9);
  nn::ParameterStore explicit_cpu(9, Device::kCpu);
  EXPECT_EQ(implicit.device(), Device::kCpu);
  EXPECT_EQ(explicit_cpu.device(), Device::kCpu);
  Parameter a = implicit.create("w", {3, 5}, nn::glorot_uniform());
  Parameter b = explicit_cpu.create("w", {3, 5}, nn::glorot_uniform());
  EXPECT_EQ(b.value().device(), Device::kCpu);
  EXPECT_EQ(b.grad().device(), Device::kCpu);
  EXPECT_EQ(a.value().to_float_vector(), b.value().to_float_vector());
  EXPECT_EQ(blocks::CompilerOptions{}.device, Device::kCpu);
}

TEST(TrainDevice, CudaWithoutCudaFailsInOneLine) {
  if (cuda_available()) GTEST_SKIP() << "CUDA is usable here";
  expect_error([] { nn::ParameterStore store(0, Device::kCuda); },
               {"[ParameterStore] the store's device is cuda but CUDA cannot be used: ",
                cuda_unavailable_reason()});
  blocks::CompilerOptions options;
  options.device = Device::kCuda;
  expect_error(
      [&] {
        blocks::Compiler compiler(
            blocks::Scalar() >> blocks::Function("neg", {blocks::Type::scalar()},
                                                 [](std::span<const Var> x) { return -x[0]; }),
            options);
      },
      {"[blocks] the compiler's device is cuda but CUDA cannot be used"});
}

TEST(TrainDevice, PipelineOnAnExplicitCpu) {
  const DeviceRun run = run_on_device(Device::kCpu, adam_spec(), 3, temp_path("cpu"), Device::kCpu);
  for (Device d : run.value_devices) EXPECT_EQ(d, Device::kCpu);
  ASSERT_EQ(run.values.size(), 5u);          // embedding table, two FCs' weights and biases
  ASSERT_EQ(run.state.size(), 10u);          // Adam's m and v of each
  EXPECT_EQ(run.first_outputs.size(), 12u);  // 4 trees x 3
  for (double norm : run.norms) EXPECT_TRUE(std::isfinite(norm) && norm > 0) << norm;
  // The checkpoint holds exactly the trained values and optimizer state.
  EXPECT_EQ(run.loaded_values, run.values);
  EXPECT_EQ(run.loaded_state, run.state);
  // Every parameter trained (a fresh model starts from the same seeded values).
  DeviceTreeModel fresh(Device::kCpu);
  for (std::size_t k = 0; k < run.values.size(); ++k)
    EXPECT_NE(host_floats(fresh.store.parameters()[k].value()), run.values[k]) << "parameter " << k;
  // Deterministic: the same run again gives the same bits.
  const DeviceRun again =
      run_on_device(Device::kCpu, adam_spec(), 3, temp_path("cpu2"), Device::kCpu);
  EXPECT_EQ(again.values, run.values);
  EXPECT_EQ(again.state, run.state);
}

}  // namespace
}  // namespace weft::testing
