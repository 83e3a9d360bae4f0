// Fused recurrent-cell ops. lstm_cell_state is the cell-state update shared by the LSTM (one
// child: the previous state) and the N-ary Tree-LSTM (K children), with recurrent dropout on
// the candidate; lstm_hidden is the output h = sigmoid(o) * tanh(c). Both read their gates in
// place from the cell's one pre-activation matrix, so a cell makes no slices of it.
// linear_lstm_cell_state computes that matrix itself, so it may overwrite it with the gates'
// activations for its backward.
#include <utility>
#include <vector>

#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

// saved[0]: the candidate's dropout mask, undefined without dropout.
void lstm_cell_state_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t gates = tape.input(id, 0), children = tape.input(id, 1);
  const Tensor* mask = node.saved[0].defined() ? &node.saved[0] : nullptr;
  const auto [dgates, dchildren] = tape.grad_targets(gates, children);
  backend::lstm_cell_state_backward(tape.node(gates).value, tape.node(children).value, mask,
                                    node.grad, dgates.grad, dgates.fresh(), dchildren.grad,
                                    dchildren.fresh());
}

// int_attrs[0]: the output gate's first column.
void lstm_hidden_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t gates = tape.input(id, 0), c = tape.input(id, 1);
  const auto [dgates, dc] = tape.grad_targets(gates, c);  // lstm_hidden(x, 0, x) reads x twice
  backend::lstm_hidden_backward(tape.node(gates).value, node.int_attrs[0], tape.node(c).value,
                                node.grad, dgates.grad, dgates.fresh(), dc.grad, dc.fresh());
}

// saved[0]: the candidate's dropout mask, undefined without dropout. Inputs: the gates (the
// op's own linear layer, holding their activations; its backward does x, W and b), children,
// read where their rows lie when they are (argument_rows: their gradient written there too).
void linear_lstm_cell_state_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t gates = tape.input(id, 0), children = tape.input(id, 1);
  const Tensor* mask = node.saved[0].defined() ? &node.saved[0] : nullptr;
  if (detail::reads_in_place(tape, children)) {
    const Tape::GradTarget dgates = tape.grad_target(gates);
    std::vector<float> discard;
    const backend::RowBlocks dchildren = detail::gradient_rows_in_place(tape, children, discard);
    backend::lstm_cell_state_backward_activated_rows(
        tape.node(gates).value, detail::rows_in_place(tape, children), mask, node.grad, dgates.grad,
        dgates.fresh(), dchildren.rows > 0 ? &dchildren : nullptr);
    return;
  }
  const auto [dgates, dchildren] = tape.grad_targets(gates, children);
  backend::lstm_cell_state_backward_activated(tape.node(gates).value, tape.node(children).value,
                                              mask, node.grad, dgates.grad, dgates.fresh(),
                                              dchildren.grad, dchildren.fresh());
}

void check_cell_inputs(const char* op, const Tensor& gates, const Tensor& other,
                       const char* other_name) {
  detail::require_float(op, "gates", gates);
  detail::require_float(op, other_name, other);
  detail::require_rank(op, "gates", gates, 2);
  detail::require_rank(op, other_name, other, 2);
  detail::require_same_device(op, gates, other);
}

// The candidate's recurrent-dropout mask for a [rows, n] state (undefined without dropout),
// drawn as dropout(tanh(g), p, rng) draws its mask: the same seed gives the same mask.
Tensor candidate_mask(const char* op, float candidate_drop_prob, Rng* rng, const Shape& state,
                      Device device) {
  if (!(candidate_drop_prob >= 0.0f && candidate_drop_prob < 1.0f))  // also rejects NaN
    fail(op, "candidate_drop_prob ", candidate_drop_prob,
         " is outside [0, 1): it is the probability of zeroing an element of tanh(g)");
  if (candidate_drop_prob > 0.0f && rng == nullptr)
    fail(op, "candidate_drop_prob ", candidate_drop_prob,
         " needs an Rng for the dropout mask; pass one, or 0 for no dropout");
  Tensor mask;
  if (candidate_drop_prob > 0.0f) {
    mask = Tensor::empty(state, DType::kFloat32, device);
    backend::dropout_mask(1.0f - candidate_drop_prob, rng->next_u64(), mask);
  }
  return mask;
}

// Records a cell state computed from gates and children, keeping the dropout mask for backward.
template <typename Backward>
Var record_cell_state(Var gates, Var children, Tensor c, Tensor mask, Backward backward) {
  Var out = gates.tape().record(std::move(c), {gates, children}, backward);
  TapeNode& node = out.tape().node(out.id());
  if (node.backward != nullptr) node.saved[0] = std::move(mask);
  return out;
}

}  // namespace

// c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * tanh(g)
Var lstm_cell_state(Var gates, Var children) {
  const Tensor& vg = gates.value();
  const Tensor& vx = children.value();
  check_cell_inputs("lstm_cell_state", vg, vx, "children");
  const std::int64_t gw = vg.shape()[1], xw = vx.shape()[1];
  const std::int64_t n = (gw - xw) / 2;
  if (vg.shape()[0] != vx.shape()[0] || gw <= xw || (gw - xw) % 2 != 0 || n == 0 || xw % n != 0)
    fail("lstm_cell_state", "gates ", vg.describe(), " do not fit children ", vx.describe(),
         ": expected gates [B, (K+2)N] for children [B, KN] (K forget gates, input, candidate)");
  return lstm_cell_state(gates, children, n);
}

// c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * dropout(tanh(g)), gates' first (K+2)N columns
Var lstm_cell_state(Var gates, Var children, std::int64_t hidden, float candidate_drop_prob,
                    Rng* rng) {
  const Tensor& vg = gates.value();
  const Tensor& vx = children.value();
  check_cell_inputs("lstm_cell_state", vg, vx, "children");
  const std::int64_t gw = vg.shape()[1], xw = vx.shape()[1];
  if (hidden <= 0 || vg.shape()[0] != vx.shape()[0] || xw == 0 || xw % hidden != 0 ||
      gw < xw + 2 * hidden)
    fail("lstm_cell_state", "gates ", vg.describe(), " do not fit children ", vx.describe(),
         " with hidden size ", hidden,
         ": expected gates [B, W >= (K+2)N] starting with K forget gates, input and candidate, "
         "for children [B, KN]");
  const Shape state{vg.shape()[0], hidden};
  Tensor mask = candidate_mask("lstm_cell_state", candidate_drop_prob, rng, state, vg.device());
  Tensor c = Tensor::empty(state, DType::kFloat32, vg.device());
  backend::lstm_cell_state(vg, vx, mask.defined() ? &mask : nullptr, c);
  return record_cell_state(gates, children, std::move(c), std::move(mask),
                           lstm_cell_state_backward);
}

// lstm_cell_state(linear(x, W, b), children) with the gates the op's own: activated in place.
// Children read where their rows lie (argument_rows) are float32 on the CPU by construction:
// only their shape is checked.
Var linear_lstm_cell_state(Var x, Var weight, Var bias, Var children, float candidate_drop_prob,
                           Rng* rng) {
  const char* op = "linear_lstm_cell_state";
  const Tensor& vx = x.value();
  const Tensor& vw = weight.value();
  const bool in_place = detail::reads_in_place(children.tape(), children.id());
  for (const auto& [role, value] :
       {std::pair<const char*, const Tensor*>{"input", &vx}, {"weight", &vw}}) {
    detail::require_float(op, role, *value);
    detail::require_rank(op, role, *value, 2);
    detail::require_same_device(op, vx, *value);
  }
  if (!in_place) {
    detail::require_float(op, "children", children.value());
    detail::require_rank(op, "children", children.value(), 2);
    detail::require_same_device(op, vx, children.value());
  } else if (vx.device() != Device::kCpu) {
    fail(op, "the children's rows are on the CPU but the input is ", vx.describe());
  }
  const Shape& cs = children.shape();
  const std::int64_t rows = vx.shape()[0], width = vw.shape()[1], xw = cs[1];
  const std::int64_t n = (width - xw) / 2;
  if (cs[0] != rows || width <= xw || (width - xw) % 2 != 0 || xw == 0 || xw % n != 0)
    fail(op, "weight ", vw.shape(), " does not give the gates of children float32 ", cs,
         " for input ", vx.describe(),
         ": expected weight [in, (K+2)N] for children [B, KN] (K forget gates, input, candidate)");
  const Shape state{rows, n};
  Tensor mask = candidate_mask(op, candidate_drop_prob, rng, state, vx.device());
  // The product alone (linear's checks and backward, which reads x and W, not its output, so
  // the activations may take the output's place); the bias is added as the gates activate.
  Var gates = detail::linear_without_bias(x, weight, bias, op);
  Tensor& activations = gates.tape().node(gates.id()).value;
  Tensor c = Tensor::empty(state, DType::kFloat32, vx.device());
  const Tensor bias_row = bias.value().reshaped(Shape{bias.value().numel()});
  const Tensor* m = mask.defined() ? &mask : nullptr;
  if (in_place)
    backend::lstm_cell_state_activating_rows(
        activations, &bias_row, detail::rows_in_place(children.tape(), children.id()), m, c);
  else
    backend::lstm_cell_state_activating(activations, &bias_row, children.value(), m, c);
  return record_cell_state(gates, children, std::move(c), std::move(mask),
                           linear_lstm_cell_state_backward);
}

// h = sigmoid(gates[:, offset : offset + N]) * tanh(c)
Var lstm_hidden(Var gates, std::int64_t offset, Var c) {
  const Tensor& vg = gates.value();
  const Tensor& vc = c.value();
  check_cell_inputs("lstm_hidden", vg, vc, "c");
  const std::int64_t n = vc.shape()[1];
  if (vg.shape()[0] != vc.shape()[0] || offset < 0 || offset + n > vg.shape()[1])
    fail("lstm_hidden", "gates ", vg.describe(), " have no output gate at columns [", offset, ", ",
         offset + n, ") for c ", vc.describe(), ": expected gates [B, W >= offset + N]");
  Tensor h = Tensor::empty(vc.shape(), DType::kFloat32, vc.device());
  backend::lstm_hidden(vg, offset, vc, h);
  Var out = gates.tape().record(std::move(h), {gates, c}, lstm_hidden_backward);
  out.tape().node(out.id()).int_attrs[0] = offset;
  return out;
}

}  // namespace weft
