// Recurrent cells over batched rows: LSTM, GRU, the N-ary Tree-LSTM and the Child-Sum
// Tree-LSTM of Tai et al. 2015. Each cell is one linear over [x | h...] for its gates, so a
// batch of B steps is one GEMM; LSTM-style cell states use the fused lstm_cell_state op.
// States are [B, hidden]. Recurrent dropout (Semeniuta et al. 2016, as TF Fold's sentiment
// model) drops only the candidate (g / u), in a training ForwardMode.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/nn/initializers.h"
#include "weft/nn/parameter_store.h"

WEFT_API_BEGIN
namespace weft::nn {

struct CellOptions {
  // Added to the initial bias of the forget gates (the GRU's update gate z), so a fresh cell
  // keeps its state; it is part of the trainable bias, not a constant added at every step.
  float forget_bias = 1.0f;
  // Drop probability of the candidate (g in the LSTM, u in the Tree-LSTMs, the GRU's h~).
  float recurrent_dropout = 0.f;
  Initializer weight_init{};  // empty: glorot_uniform(); biases start at zero (+ forget_bias)
};

// (x, h, c) -> (h', c'):  [f | i | g | o] = [x | h] W + b;
// c' = sigmoid(f) c + sigmoid(i) tanh(g);  h' = sigmoid(o) tanh(c').
// Parameters "name/weight" [input_size + hidden, 4 hidden], "name/bias" [4 hidden].
// With input_size == 0, x must be an undefined Var.
class LSTMCell {
 public:
  LSTMCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
           std::int64_t hidden, CellOptions options = {});
  std::pair<Var, Var> operator()(Var x, Var h, Var c) const;

  std::int64_t hidden() const { return hidden_; }
  std::int64_t input_size() const { return input_size_; }
  const std::string& name() const { return name_; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  std::vector<Parameter> parameters() const { return {weight_, bias_}; }

 private:
  std::string name_;
  std::string where_;  // what its errors name (layer_where: kind and scoped name)
  std::int64_t input_size_, hidden_;
  CellOptions options_;
  Parameter weight_, bias_;
};

// (x, h) -> h':  [r | z] = sigmoid([x | h] W_g + b_g);  h~ = tanh([x | r h] W_c + b_c);
// h' = z h + (1 - z) h~  (z near 1 keeps the state; forget_bias goes to z's bias).
// Parameters "name/gates_weight" [input_size + hidden, 2 hidden], "name/gates_bias",
// "name/candidate_weight" [input_size + hidden, hidden], "name/candidate_bias".
class GRUCell {
 public:
  GRUCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
          std::int64_t hidden, CellOptions options = {});
  Var operator()(Var x, Var h) const;

  std::int64_t hidden() const { return hidden_; }
  std::int64_t input_size() const { return input_size_; }
  const std::string& name() const { return name_; }
  std::vector<Parameter> parameters() const {
    return {gates_weight_, gates_bias_, candidate_weight_, candidate_bias_};
  }

 private:
  std::string name_;
  std::string where_;  // what its errors name (layer_where: kind and scoped name)
  std::int64_t input_size_, hidden_;
  CellOptions options_;
  Parameter gates_weight_, gates_bias_, candidate_weight_, candidate_bias_;
};

// N-ary Tree-LSTM of Tai et al. 2015 (binary when arity = 2), K = arity children:
// [f_1..f_K | i | u | o] = [x | h_1 .. h_K] W + b   (each f_k sees every child's h);
// c = sigmoid(i) tanh(u) + sum_k sigmoid(f_k) c_k;  h = sigmoid(o) tanh(c).
// Parameters "name/weight" [input_size + K hidden, (K + 3) hidden], "name/bias".
// x may be an undefined Var (no input at internal nodes) when input_size == 0.
class NaryTreeLSTMCell {
 public:
  NaryTreeLSTMCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
                   std::int64_t hidden, int arity, CellOptions options = {});
  // child_h and child_c hold `arity` Vars each, [B, hidden]; returns (h, c).
  std::pair<Var, Var> operator()(Var x, std::span<const Var> child_h,
                                 std::span<const Var> child_c) const;
  std::pair<Var, Var> operator()(Var x, std::initializer_list<Var> child_h,
                                 std::initializer_list<Var> child_c) const {
    return (*this)(x, std::span<const Var>(child_h.begin(), child_h.size()),
                   std::span<const Var>(child_c.begin(), child_c.size()));
  }

  std::int64_t hidden() const { return hidden_; }
  int arity() const { return arity_; }
  std::int64_t input_size() const { return input_size_; }
  const std::string& name() const { return name_; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  std::vector<Parameter> parameters() const { return {weight_, bias_}; }

 private:
  std::string name_;
  std::string where_;  // what its errors name (layer_where: kind and scoped name)
  std::int64_t input_size_, hidden_;
  int arity_;
  CellOptions options_;
  Parameter weight_, bias_;
};

// Child-Sum Tree-LSTM (Tai et al. 2015) for any number of children, in two pieces so that
// blocks can batch it with Map (one row per (node, child) pair) and Sum:
//   forget_times_cell: f_k c_k = sigmoid([x | h_k] W_f + b_f) * c_k
//   node: [i | u | o] = [x | h_sum] W_iou + b_iou;
//         c = sigmoid(i) tanh(u) + fc_sum;  h = sigmoid(o) tanh(c)
// with h_sum = sum_k h_k and fc_sum = sum_k f_k c_k (zeros for a leaf).
// Parameters "name/forget_weight" [input_size + hidden, hidden], "name/forget_bias",
// "name/iou_weight" [input_size + hidden, 3 hidden], "name/iou_bias".
// x may be an undefined Var when input_size == 0.
class ChildSumTreeLSTMCell {
 public:
  ChildSumTreeLSTMCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
                       std::int64_t hidden, CellOptions options = {});
  Var forget_times_cell(Var x, Var child_h, Var child_c) const;
  std::pair<Var, Var> node(Var x, Var h_sum, Var fc_sum) const;  // (h, c)

  std::int64_t hidden() const { return hidden_; }
  std::int64_t input_size() const { return input_size_; }
  const std::string& name() const { return name_; }
  std::vector<Parameter> parameters() const {
    return {forget_weight_, forget_bias_, iou_weight_, iou_bias_};
  }

 private:
  std::string name_;
  std::string where_;  // what its errors name (layer_where: kind and scoped name)
  std::int64_t input_size_, hidden_;
  CellOptions options_;
  Parameter forget_weight_, forget_bias_, iou_weight_, iou_bias_;
};

}  // namespace weft::nn
WEFT_API_END
