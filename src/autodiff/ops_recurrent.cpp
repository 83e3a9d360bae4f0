// Fused recurrent-cell ops. lstm_cell_state is the cell-state update shared by the LSTM
// (one child: the previous state) and the N-ary Tree-LSTM (K children), without the output
// gate, which callers apply themselves where their model has one.
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

void lstm_cell_state_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t gates = tape.input(id, 0), children = tape.input(id, 1);
  backend::lstm_cell_state_backward(tape.node(gates).value, tape.node(children).value, node.grad,
                                    tape.grad_of(gates), tape.grad_of(children));
}

}  // namespace

// c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * tanh(g)
Var lstm_cell_state(Var gates, Var children) {
  const Tensor& vg = gates.value();
  const Tensor& vx = children.value();
  detail::require_float("lstm_cell_state", "gates", vg);
  detail::require_float("lstm_cell_state", "children", vx);
  detail::require_rank("lstm_cell_state", "gates", vg, 2);
  detail::require_rank("lstm_cell_state", "children", vx, 2);
  detail::require_same_device("lstm_cell_state", vg, vx);
  const std::int64_t gw = vg.shape()[1], xw = vx.shape()[1];
  const std::int64_t n = (gw - xw) / 2;
  if (vg.shape()[0] != vx.shape()[0] || gw <= xw || (gw - xw) % 2 != 0 || n == 0 || xw % n != 0)
    fail("lstm_cell_state", "gates ", vg.describe(), " do not fit children ", vx.describe(),
         ": expected gates [B, (K+2)N] for children [B, KN] (K forget gates, input, candidate)");
  Tensor c = Tensor::empty(Shape{vg.shape()[0], n}, DType::kFloat32, vg.device());
  backend::lstm_cell_state(vg, vx, c);
  return gates.tape().record(std::move(c), {gates, children}, lstm_cell_state_backward);
}

}  // namespace weft
