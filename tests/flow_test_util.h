// A small model for the flow tests: hidden states and scores over five loom operations whose
// weights are Parameters read from the tape of the run, so their gradients accumulate in the
// Parameters whichever tape (one batch, or one example at a time) recorded the calls.
#pragma once

#include <vector>

#include "op_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/flow/flow.h"

namespace weft::flow::testing {

inline const loom::TypeShape kHidden{DType::kFloat32, {3}, "hidden"};
inline const loom::TypeShape kScore{DType::kFloat32, {1}, "score"};

struct FlowModel {
  Parameter a{"a", weft::testing::random_tensor({3, 3}, 11)};
  Parameter b{"b", weft::testing::random_tensor({3, 3}, 12)};
  Parameter c{"c", weft::testing::random_tensor({3, 3}, 13)};
  Parameter d{"d", weft::testing::random_tensor({3, 1}, 14)};
  loom::Loom loom;
  TypeId hidden = 0, score = 0;
  OpId cell = 0, gate = 0, mix = 0, head = 0, split = 0;

  FlowModel() {
    auto p = [](const Parameter& w) { return Tape::current().parameter(w); };
    // cell(h, x) = tanh(h·a + x·b)
    cell = loom.add_operation("cell", {kHidden, kHidden}, {kHidden}, [this, p](auto in) {
      return std::vector<Var>{tanh(matmul(in[0], p(a)) + matmul(in[1], p(b)))};
    });
    // gate(h) = h * sigmoid(h·c)
    gate = loom.add_operation("gate", {kHidden}, {kHidden}, [this, p](auto in) {
      return std::vector<Var>{in[0] * sigmoid(matmul(in[0], p(c)))};
    });
    // mix(h, g) = h + g / 2
    mix = loom.add_operation("mix", {kHidden, kHidden}, {kHidden},
                             [](auto in) { return std::vector<Var>{in[0] + in[1] * 0.5f}; });
    // head(h) = h·d
    head = loom.add_operation("head", {kHidden}, {kScore},
                              [this, p](auto in) { return std::vector<Var>{matmul(in[0], p(d))}; });
    // split(h) = (tanh(h) * 0.9, h·d): two outputs of two types
    split = loom.add_operation("split", {kHidden}, {kHidden, kScore}, [this, p](auto in) {
      return std::vector<Var>{tanh(in[0]) * 0.9f, matmul(in[0], p(d))};
    });
    hidden = loom.type_id(kHidden);
    score = loom.type_id(kScore);
  }
  std::vector<Parameter> parameters() const { return {a, b, c, d}; }
  void zero_grad() {
    for (Parameter w : parameters()) w.zero_grad();
  }
};

inline float scalar(const Tensor& row) { return row.data<float>()[0]; }

}  // namespace weft::flow::testing
