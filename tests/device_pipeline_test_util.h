// The device setting end to end, shared by the CPU suite (train_device_test.cpp, device =
// Device::kCpu explicitly) and the CUDA suite (cuda_device_test.cpp, CUDA against CPU): a
// ParameterStore on the device with nn layers (a pretrained Embedding, two FCs), a recursive
// blocks model whose Functions infer their output types from those layers, a Compiler on the
// device, backward, clipping by norm and value, several optimizer steps, and a checkpoint
// written from the device and loaded into a model and optimizer on another device.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/blocks/blocks.h"
#include "weft/blocks/compiler.h"
#include "weft/blocks/layers.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/parameter_store.h"
#include "weft/train/checkpoint.h"
#include "weft/train/optimizer.h"

namespace weft::testing {

// What a run leaves, all read back to the host.
struct DeviceRun {
  std::vector<float> first_outputs;               // the first batch's outputs
  std::vector<std::vector<float>> first_grads;    // and its gradients, before clipping
  std::vector<double> norms;                      // each step's gradient norm before clipping
  std::vector<std::vector<float>> values;         // every parameter after the steps
  std::vector<std::vector<float>> state;          // the optimizer's slot tensors, by name
  std::vector<std::vector<float>> loaded_values;  // the checkpoint loaded on load_device
  std::vector<std::vector<float>> loaded_state;
  std::vector<Device> value_devices;  // where the parameters and slots lived
};

// The model: leaves {"word": i} embed (pretrained table), nodes {"children": [l, r]} combine
// through an FC inside a Function whose output type is inferred, the root through a second FC.
struct DeviceTreeModel {
  nn::ParameterStore store;
  nn::Embedding embedding;
  nn::FC combine;
  nn::FC readout;
  blocks::ForwardDeclaration fwd{blocks::Type::input(), blocks::Type::vector(4)};
  blocks::Block root;

  explicit DeviceTreeModel(Device device)
      : store(21, device),
        embedding(store, "embedding", 6, 4,
                  nn::EmbeddingOptions{.init = nn::from_tensor(random_tensor({6, 4}, 3))}),
        combine(store, "combine", 8, 4, nn::FCOptions{.activation = nn::Activation::kTanh}),
        readout(store, "readout", 4, 3, nn::FCOptions{.activation = nn::Activation::kNone}) {
    using namespace weft::blocks;  // NOLINT: reads like a model
    Block leaf = GetItem("word") >> Scalar(DType::kInt32) >> EmbeddingBlock(embedding);
    Block node =
        GetItem("children") >> Record({fwd(), fwd()}) >>
        Function("node", {Type::vector(4), Type::vector(4)}, [this](std::span<const Var> x) {
          return combine(concat({x[0], x[1]}));
        });
    Block tree = OneOf([](const Input& x) { return Input(x.contains("word") ? "leaf" : "node"); },
                       {{"leaf", leaf}, {"node", node}});
    fwd.resolve_to(tree);
    root = tree >> Function("readout", {Type::vector(4)},
                            [this](std::span<const Var> x) { return readout(x[0]); });
  }
};

inline blocks::Input device_leaf(int word) { return {{"word", word}}; }
inline blocks::Input device_node(blocks::Input l, blocks::Input r) {
  return {{"children", {std::move(l), std::move(r)}}};
}

inline std::vector<blocks::Input> device_trees(int step) {
  using I = blocks::Input;
  std::vector<I> trees = {
      device_node(device_leaf(0), device_leaf(1)), device_leaf(2 + step % 3),
      device_node(device_node(device_leaf(3), device_leaf(4)), device_leaf(5)),
      device_node(device_leaf(step % 6), device_node(device_leaf(1), device_leaf(2)))};
  return trees;
}

inline std::vector<float> host_floats(const Tensor& t) {
  return t.to(Device::kCpu).to_float_vector();
}

// Trains `steps` steps of `spec` on `device`, saves a checkpoint to `path` and loads it into a
// fresh model and optimizer on `load_device`.
inline DeviceRun run_on_device(Device device, const train::OptimizerSpec& spec, int steps,
                               const std::string& path, Device load_device) {
  DeviceRun run;
  DeviceTreeModel model(device);
  blocks::CompilerOptions options;
  options.device = device;
  options.threads = 1;
  const blocks::Compiler compiler(model.root, options);
  const std::vector<Parameter> parameters = model.store.parameters();
  auto optimizer = train::make_optimizer(spec, parameters);
  for (int step = 0; step < steps; ++step) {
    model.store.zero_grad();
    Tape tape;
    TapeScope scope(tape);
    blocks::BatchResult result = compiler.forward(device_trees(step), tape);
    Var out = result.output();
    const Tensor weights = random_tensor(out.shape(), 50 + std::uint64_t(step)).to(device);
    tape.backward(sum(tanh(out) * tape.constant(weights)));
    if (step == 0) {
      run.first_outputs = host_floats(out.value());
      for (const Parameter& p : parameters) run.first_grads.push_back(host_floats(p.grad()));
    }
    run.norms.push_back(train::clip_grad_norm(parameters, 0.5));
    train::clip_grad_value(parameters, 0.05);
    optimizer->step(0.1);
  }
  for (const Parameter& p : parameters) {
    run.values.push_back(host_floats(p.value()));
    run.value_devices.push_back(p.value().device());
  }
  for (const auto& [name, tensor] : optimizer->state()) {
    if (tensor.rank() == 0) continue;  // the step count
    run.state.push_back(host_floats(tensor));
    run.value_devices.push_back(tensor.device());
  }
  train::TrainingState state;
  state.step = steps;
  train::save_checkpoint(path, parameters, optimizer.get(), state, {"device_model"});
  DeviceTreeModel loaded(load_device);
  const std::vector<Parameter> loaded_parameters = loaded.store.parameters();
  auto loaded_optimizer = train::make_optimizer(spec, loaded_parameters);
  train::load_checkpoint(path, loaded_parameters, loaded_optimizer.get());
  for (const Parameter& p : loaded_parameters) run.loaded_values.push_back(host_floats(p.value()));
  for (const auto& [name, tensor] : loaded_optimizer->state())
    if (tensor.rank() > 0) run.loaded_state.push_back(host_floats(tensor));
  std::remove(path.c_str());
  return run;
}

}  // namespace weft::testing
