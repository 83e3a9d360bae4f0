// LSTMCell and GRUCell: one linear over [x | h] for the gates (one GEMM per batched step);
// the LSTM's cell state and output through the fused lstm_cell_state and lstm_hidden ops.
#include "layer_util.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/nn/cells.h"
#include "weft/nn/mode.h"

namespace weft::nn {
LSTMCell::LSTMCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
                   std::int64_t hidden, CellOptions options)
    : name_(store.scoped(name)),
      where_(detail::layer_where("LSTMCell", name_)),
      input_size_(input_size),
      hidden_(hidden),
      options_(std::move(options)) {
  detail::check_cell_sizes(where_, input_size, hidden, options_.recurrent_dropout);
  auto scope = store.scope(name);
  weight_ = store.create("weight", {input_size + hidden, 4 * hidden},
                         detail::cell_weight_init(options_.weight_init));
  // Columns [f | i | g | o]: the forget bias goes to the first `hidden`.
  bias_ = store.create("bias", {4 * hidden}, detail::gate_bias(0, hidden, options_.forget_bias));
}

std::pair<Var, Var> LSTMCell::operator()(Var x, Var h, Var c) const {
  const std::string& where = where_;
  const detail::NamedVar h_state[] = {{"h", h}}, c_state[] = {{"c", c}};
  Var xh = detail::checked_gate_input(where, x, input_size_, h_state, c_state, hidden_);
  Tape& tape = h.tape();
  Var gates = linear(xh, tape.parameter(weight_), tape.parameter(bias_));
  Var c_new = detail::cell_state(gates, c, hidden_, options_.recurrent_dropout);
  return {lstm_hidden(gates, 3 * hidden_, c_new), c_new};
}

GRUCell::GRUCell(ParameterStore& store, const std::string& name, std::int64_t input_size,
                 std::int64_t hidden, CellOptions options)
    : name_(store.scoped(name)),
      where_(detail::layer_where("GRUCell", name_)),
      input_size_(input_size),
      hidden_(hidden),
      options_(std::move(options)) {
  detail::check_cell_sizes(where_, input_size, hidden, options_.recurrent_dropout);
  auto scope = store.scope(name);
  const Initializer init = detail::cell_weight_init(options_.weight_init);
  gates_weight_ = store.create("gates_weight", {input_size + hidden, 2 * hidden}, init);
  // Columns [r | z]: the forget bias goes to z, the gate that keeps the old state.
  gates_bias_ = store.create("gates_bias", {2 * hidden},
                             detail::gate_bias(hidden, hidden, options_.forget_bias));
  candidate_weight_ = store.create("candidate_weight", {input_size + hidden, hidden}, init);
  candidate_bias_ = store.create("candidate_bias", {hidden}, zeros());
}

Var GRUCell::operator()(Var x, Var h) const {
  const std::string& where = where_;
  const detail::NamedVar h_state[] = {{"h", h}};
  Var xh = detail::checked_gate_input(where, x, input_size_, h_state, {}, hidden_);
  Tape& tape = h.tape();
  Var rz = linear_sigmoid(xh, tape.parameter(gates_weight_), tape.parameter(gates_bias_));
  Var r = slice(rz, 1, 0, hidden_);
  Var z = slice(rz, 1, hidden_, hidden_);
  const detail::NamedVar rh_state[] = {{"r * h", r * h}};
  Var x_rh = detail::checked_gate_input(where, x, input_size_, rh_state, {}, hidden_);
  Var candidate =
      linear_tanh(x_rh, tape.parameter(candidate_weight_), tape.parameter(candidate_bias_));
  candidate = mode_dropout(candidate, options_.recurrent_dropout);
  return candidate + z * (h - candidate);  // z h + (1 - z) candidate
}

}  // namespace weft::nn
