// The Tree-LSTM cells of Tai et al. 2015: N-ary (one linear over [x | h_1..h_K] to
// [f_1..f_K | i | u | o], cell state and output by the fused ops) and Child-Sum (a per-child forget
// piece and a node piece, so blocks can batch children with Map and Sum).
#include "layer_util.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/nn/cells.h"
#include "weft/nn/mode.h"

namespace weft::nn {
NaryTreeLSTMCell::NaryTreeLSTMCell(ParameterStore& store, const std::string& name,
                                   std::int64_t input_size, std::int64_t hidden, int arity,
                                   CellOptions options)
    : name_(store.scoped(name)),
      where_(detail::layer_where("NaryTreeLSTMCell", name_)),
      input_size_(input_size),
      hidden_(hidden),
      arity_(arity),
      options_(std::move(options)) {
  const std::string& where = where_;
  detail::check_cell_sizes(where, input_size, hidden, options_.recurrent_dropout);
  detail::require_extent(where, "arity", arity);
  const std::int64_t k = arity;
  auto scope = store.scope(name);
  weight_ = store.create("weight", {input_size + k * hidden, (k + 3) * hidden},
                         detail::cell_weight_init(options_.weight_init));
  // Columns [f_1..f_K | i | u | o]: the forget bias goes to the first K * hidden.
  bias_ = store.create("bias", {(k + 3) * hidden},
                       detail::gate_bias(0, k * hidden, options_.forget_bias));
}

std::pair<Var, Var> NaryTreeLSTMCell::operator()(Var x, std::span<const Var> child_h,
                                                 std::span<const Var> child_c) const {
  const std::string& where = where_;
  if (child_h.size() != std::size_t(arity_) || child_c.size() != std::size_t(arity_))
    fail(where, "got ", child_h.size(), " child h and ", child_c.size(),
         " child c states for a cell of arity ", arity_);
  Var xh = detail::checked_gate_input(where, x, input_size_, detail::named("child_h", child_h),
                                      detail::named("child_c", child_c), hidden_);
  Tape& tape = child_h[0].tape();
  const std::int64_t k = arity_;
  Var gates = linear(xh, tape.parameter(weight_), tape.parameter(bias_));
  // The children's states read where each lies: no [c_1 .. c_K] copy, nor its split in backward.
  Var c = detail::cell_state(gates, child_c, hidden_, options_.recurrent_dropout);
  return {lstm_hidden(gates, (k + 2) * hidden_, c), c};
}

ChildSumTreeLSTMCell::ChildSumTreeLSTMCell(ParameterStore& store, const std::string& name,
                                           std::int64_t input_size, std::int64_t hidden,
                                           CellOptions options)
    : name_(store.scoped(name)),
      where_(detail::layer_where("ChildSumTreeLSTMCell", name_)),
      input_size_(input_size),
      hidden_(hidden),
      options_(std::move(options)) {
  detail::check_cell_sizes(where_, input_size, hidden, options_.recurrent_dropout);
  auto scope = store.scope(name);
  const Initializer init = detail::cell_weight_init(options_.weight_init);
  forget_weight_ = store.create("forget_weight", {input_size + hidden, hidden}, init);
  forget_bias_ = store.create("forget_bias", {hidden}, constant(options_.forget_bias));
  iou_weight_ = store.create("iou_weight", {input_size + hidden, 3 * hidden}, init);
  iou_bias_ = store.create("iou_bias", {3 * hidden}, zeros());
}

Var ChildSumTreeLSTMCell::forget_times_cell(Var x, Var child_h, Var child_c) const {
  const std::string& where = where_;
  const detail::NamedVar h_state[] = {{"child_h", child_h}}, c_state[] = {{"child_c", child_c}};
  Var xh = detail::checked_gate_input(where, x, input_size_, h_state, c_state, hidden_);
  Tape& tape = child_h.tape();
  return sigmoid(linear(xh, tape.parameter(forget_weight_), tape.parameter(forget_bias_))) *
         child_c;
}

std::pair<Var, Var> ChildSumTreeLSTMCell::node(Var x, Var h_sum, Var fc_sum) const {
  const std::string& where = where_;
  const detail::NamedVar h_state[] = {{"h_sum", h_sum}}, fc_state[] = {{"fc_sum", fc_sum}};
  Var xh = detail::checked_gate_input(where, x, input_size_, h_state, fc_state, hidden_);
  Tape& tape = h_sum.tape();
  Var iou = linear(xh, tape.parameter(iou_weight_), tape.parameter(iou_bias_));
  Var i = slice(iou, 1, 0, hidden_), u = slice(iou, 1, hidden_, hidden_);
  Var c = sigmoid(i) * mode_dropout(tanh(u), options_.recurrent_dropout) + fc_sum;
  return {lstm_hidden(iou, 2 * hidden_, c), c};
}

}  // namespace weft::nn
