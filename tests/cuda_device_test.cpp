// The device setting on CUDA against the CPU: the optimizer kernels (every rule, both kinds of
// weight decay, a parameter of several thousand values, several steps) and clipping give the
// CPU's numbers; the whole pipeline of device_pipeline_test_util.h (a ParameterStore and a
// Compiler on CUDA, nn layers, inferred Function types, backward, clipping, optimizer steps)
// matches the same run on the CPU; checkpoints move between the devices exactly; the lazy
// update of a row-sparse gradient (repeated rows, clipping) gives the CPU's numbers. Skips with
// "no CUDA device" where none is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "device_pipeline_test_util.h"
#include "weft/backend/cuda.h"

namespace weft::testing {
namespace {

#define WEFT_REQUIRE_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")"

using train::OptimizerKind;
using train::OptimizerSpec;
using train::WeightDecayMode;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("weft_cuda_device_test_" + name)).string();
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
}

std::vector<OptimizerSpec> every_rule() {
  std::vector<OptimizerSpec> specs;
  OptimizerSpec s;
  specs.push_back(s);  // plain SGD
  s.momentum = 0.9;
  specs.push_back(s);
  s.nesterov = true;
  s.weight_decay = 0.1;  // L2
  specs.push_back(s);
  s = {};
  s.kind = OptimizerKind::kAdagrad;
  s.initial_accumulator = 0.1;
  s.weight_decay = 1e-3;
  specs.push_back(s);
  s = {};
  s.kind = OptimizerKind::kAdam;
  specs.push_back(s);
  s.weight_decay = 0.05;
  s.weight_decay_mode = WeightDecayMode::kDecoupled;  // AdamW
  s.learning_rate_scales = {{"w", 0.5}};
  specs.push_back(s);
  return specs;
}

// Five steps of `spec` on a 5,001-value parameter on `device`; the values and slots after.
std::vector<std::vector<float>> five_steps(const OptimizerSpec& spec, Device device) {
  Parameter w("w", random_tensor({3, 1667}, 5).to(device));
  auto optimizer = train::make_optimizer(spec, std::vector<Parameter>{w});
  for (int t = 0; t < 5; ++t) {
    w.grad() = random_tensor(w.shape(), 100 + std::uint64_t(t), -2.0f, 2.0f).to(device);
    optimizer->step(0.05 + 0.01 * t);
  }
  std::vector<std::vector<float>> out{host_floats(w.value())};
  for (const auto& [name, tensor] : optimizer->state()) {
    if (tensor.rank() == 0) continue;
    EXPECT_EQ(tensor.device(), device) << name;
    out.push_back(host_floats(tensor));
  }
  return out;
}

TEST(CudaDevice, OptimizerStepMatchesTheCpu) {
  WEFT_REQUIRE_CUDA();
  for (const OptimizerSpec& spec : every_rule()) {
    const auto cpu = five_steps(spec, Device::kCpu);
    const auto gpu = five_steps(spec, Device::kCuda);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (std::size_t k = 0; k < cpu.size(); ++k)
      expect_close(gpu[k], cpu[k], 1e-5f, spec.describe() + " tensor " + std::to_string(k));
  }
}

// Five lazy steps of `spec` on a 300 x 17 table with row-sparse gradients (repeated rows, a
// clip by global norm) on `device`; the values and slots after.
std::vector<std::vector<float>> five_sparse_steps(const OptimizerSpec& spec, Device device) {
  Parameter table("table", random_tensor({300, 17}, 6).to(device));
  table.set_sparse_grad(true);
  auto optimizer = train::make_optimizer(spec, std::vector<Parameter>{table});
  for (int t = 0; t < 5; ++t) {
    optimizer->zero_grad();
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back((t * 37 + i * i * 7) % 300);
    table.add_grad_rows(int_tensor({40}, ids).to(device),
                        random_tensor({40, 17}, 200 + std::uint64_t(t), -2.0f, 2.0f).to(device));
    train::clip_grad_norm(std::vector<Parameter>{table}, 5.0);
    optimizer->step(0.05 + 0.01 * t);
    EXPECT_TRUE(table.grad_is_row_sparse());
  }
  std::vector<std::vector<float>> out{host_floats(table.value())};
  for (const auto& [name, tensor] : optimizer->state())
    if (tensor.rank() > 0) out.push_back(host_floats(tensor));
  return out;
}

TEST(CudaDevice, LazySparseStepMatchesTheCpu) {
  WEFT_REQUIRE_CUDA();
  for (const OptimizerSpec& spec : every_rule()) {
    const auto cpu = five_sparse_steps(spec, Device::kCpu);
    const auto gpu = five_sparse_steps(spec, Device::kCuda);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (std::size_t k = 0; k < cpu.size(); ++k)
      expect_close(gpu[k], cpu[k], 1e-5f, spec.describe() + " tensor " + std::to_string(k));
  }
}

TEST(CudaDevice, ClippingMatchesTheCpu) {
  WEFT_REQUIRE_CUDA();
  std::vector<std::vector<float>> results[2];
  double norms[2];
  for (int d = 0; d < 2; ++d) {
    const Device device = d == 0 ? Device::kCpu : Device::kCuda;
    Parameter a("a", Tensor::zeros({40, 50}, DType::kFloat32, device));
    Parameter b("b", Tensor::zeros({7}, DType::kFloat32, device));
    a.grad() = random_tensor(a.shape(), 1, -3.0f, 3.0f).to(device);
    b.grad() = random_tensor(b.shape(), 2, -3.0f, 3.0f).to(device);
    const std::vector<Parameter> both{a, b};
    norms[d] = train::clip_grad_norm(both, 1.0);
    train::clip_grad_value(both, 0.02);
    results[d] = {host_floats(a.grad()), host_floats(b.grad())};
  }
  EXPECT_NEAR(norms[1], norms[0], 1e-5 * norms[0]);
  for (std::size_t k = 0; k < 2; ++k) expect_close(results[1][k], results[0][k], 1e-6f, "grad");
}

TEST(CudaDevice, CompilerAndTrainingMatchTheCpu) {
  WEFT_REQUIRE_CUDA();
  for (const OptimizerSpec& spec : every_rule()) {
    const DeviceRun cpu = run_on_device(Device::kCpu, spec, 3, temp_path("cpu"), Device::kCuda);
    const DeviceRun gpu = run_on_device(Device::kCuda, spec, 3, temp_path("gpu"), Device::kCpu);
    for (Device d : gpu.value_devices) EXPECT_EQ(d, Device::kCuda);
    expect_close(gpu.first_outputs, cpu.first_outputs, 1e-5f, "outputs");
    for (std::size_t k = 0; k < cpu.first_grads.size(); ++k)
      expect_close(gpu.first_grads[k], cpu.first_grads[k], 1e-4f, "gradient");
    for (std::size_t k = 0; k < cpu.norms.size(); ++k)
      EXPECT_NEAR(gpu.norms[k], cpu.norms[k], 1e-4 * cpu.norms[k]);
    for (std::size_t k = 0; k < cpu.values.size(); ++k)
      expect_close(gpu.values[k], cpu.values[k], 1e-4f, spec.describe() + " value");
    for (std::size_t k = 0; k < cpu.state.size(); ++k)
      expect_close(gpu.state[k], cpu.state[k], 1e-3f, spec.describe() + " state");
    // Checkpoints cross devices exactly: CUDA -> CPU and CPU -> CUDA.
    EXPECT_EQ(gpu.loaded_values, gpu.values);
    EXPECT_EQ(gpu.loaded_state, gpu.state);
    EXPECT_EQ(cpu.loaded_values, cpu.values);
    EXPECT_EQ(cpu.loaded_state, cpu.state);
  }
}

}  // namespace
}  // namespace weft::testing
