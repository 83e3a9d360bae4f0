// A small loom for the loom's device and batch-plan tests (cuda_loom_test.cpp on CUDA against
// the CPU, loom_batch_plan_test.cpp on the CPU): three operations over two types, one of them
// with concatenated inputs, every parameter on the given device.
#pragma once

#include <vector>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/loom/weaver.h"

namespace weft::testing {

using loom::Loom;
using loom::OpId;
using loom::TypeId;
using loom::TypeShape;

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

// A chain of `calls` calls, each of the one before, every one an output: run one call per
// step, the outputs' gather reads a chunk per call.
inline void weave_chain(DeviceModel& m, loom::Weaver& w, int calls) {
  loom::Value h = w.parameter(m.hidden, m.h0);
  for (int c = 0; c < calls; ++c) {
    h = w.call(m.combine, {h, h})[0];
    w.add_output(h);
  }
}

}  // namespace weft::testing
