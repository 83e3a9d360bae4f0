// Fused recurrent-cell ops. lstm_cell_state is the cell-state update shared by the LSTM (one
// child: the previous state) and the N-ary Tree-LSTM (K children, in one tensor or apart, each
// read where it lies), with recurrent dropout on the candidate; lstm_hidden is the output h =
// sigmoid(o) * tanh(c). Both read their gates in place from the cell's one pre-activation matrix,
// so a cell makes no slices of it. linear_lstm_cell_state computes that matrix itself, so it may
// overwrite it with the gates' activations for its backward.
#include <algorithm>
#include <atomic>
#include <tuple>
#include <utility>
#include <vector>

#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/autodiff/ops.h"
#include "weft/core/environment.h"

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

// linear_lstm_cell_state's blocks: on the CPU, rows enough for a block's gates to stay in the
// cache between the product that writes them and the cell pass that reads them (512 KiB of
// gates, at least 64 rows), when the weight is small enough to stay there too (1 MiB); else,
// and on a device, the whole call at once. WEFT_CELL_BLOCK_ROWS or set_linear_cell_block_rows
// force a number of rows (a huge one: whole calls).
std::int64_t block_rows_from_environment() {
  return integer_from_environment("WEFT_CELL_BLOCK_ROWS", 0, "linear_lstm_cell_state",
                                  "a number of rows (0: chosen from the cache)")
      .value_or(0);
}

std::atomic<std::int64_t> forced_block_rows{-1};  // -1: not read from the environment yet

std::int64_t cell_block_rows(std::int64_t rows, const Tensor& weight) {
  if (forced_block_rows < 0) forced_block_rows = block_rows_from_environment();
  if (forced_block_rows > 0) return forced_block_rows;
  const std::int64_t gate_row_bytes = weight.row_size() * std::int64_t(sizeof(float));
  if (weight.device() != Device::kCpu || weight.numel() * std::int64_t(sizeof(float)) > (1 << 20))
    return std::max<std::int64_t>(rows, 1);
  return std::max<std::int64_t>(64, (std::int64_t(512) << 10) / gate_row_bytes);
}

// The operands of a linear cell's product and cell pass: dense, or read where their rows lie.
struct CellOperand {
  const Tensor* dense = nullptr;
  backend::RowBlocks rows;  // when not dense
  CellOperand(Tape& tape, std::uint32_t id, bool need)
      : dense(detail::reads_in_place(tape, id) ? nullptr : &tape.node(id).value) {
    if (!dense && need) rows = detail::rows_in_place(tape, id);
  }
};

// Whether node `source` is one of argument_rows node `rows`'s sources, or that node itself.
bool feeds(const Tape& tape, std::uint32_t source, std::uint32_t rows) {
  if (source == rows) return true;
  for (std::uint32_t k = 0; k < tape.node(rows).num_inputs; ++k)
    if (tape.input(rows, k) == source) return true;
  return false;
}

// A dense gradient that rows written in place may also add into: made whole (zeroed when fresh)
// first, so every later write adds, in whatever order the blocks come.
Tape::GradTarget added_into(Tape& tape, std::uint32_t id) {
  Tape::GradTarget target = tape.grad_target(id);
  if (target.grad && target.fresh()) {
    backend::fill(*target.grad, 0.0);
    target.beta = 1.0f;
  }
  return target;
}

// Where the gradients of x and the children go: dense targets, or rows in place (at most one of
// the two is in place: linear_lstm_cell_state gathers x otherwise).
struct CellGradients {
  Tape::GradTarget dx, dchildren;
  backend::RowBlocks dx_rows, dchildren_rows;
  std::vector<float> discard;
  CellGradients(Tape& tape, std::uint32_t x, std::uint32_t children) {
    const bool x_rows = detail::reads_in_place(tape, x);
    const bool children_rows = detail::reads_in_place(tape, children);
    if (!x_rows && !children_rows) {
      std::tie(dx, dchildren) = tape.grad_targets(x, children);
    } else if (children_rows) {
      dx = feeds(tape, x, children) ? added_into(tape, x) : tape.grad_target(x);
      dchildren_rows = detail::gradient_rows_in_place(tape, children, discard);
    } else {
      dchildren =
          feeds(tape, children, x) ? added_into(tape, children) : tape.grad_target(children);
      dx_rows = detail::gradient_rows_in_place(tape, x, discard);
    }
  }
};

// saved[0]: the candidate's dropout mask, undefined without dropout; saved[1]: the gates'
// activations. Inputs x, W, b, children. Block by block: the cell's backward gives the gates'
// gradient (a block of scratch), then dx, dW and db are read from it while it is in the cache.
void linear_lstm_cell_state_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t x = tape.input(id, 0), w = tape.input(id, 1), b = tape.input(id, 2);
  const std::uint32_t children = tape.input(id, 3);
  const Tensor& activations = node.saved[1];
  const Tensor* mask = node.saved[0].defined() ? &node.saved[0] : nullptr;
  const std::int64_t rows = activations.rows(), block = cell_block_rows(rows, tape.node(w).value);
  CellGradients to(tape, x, children);
  const Tape::GradTarget dw = tape.grad_target(w);
  Tensor* db = tape.grad_of(b);
  const CellOperand in(tape, x, dw.grad != nullptr), kids(tape, children, true);
  const Tensor transposed_panels = to.dx_rows.rows > 0 ? tape.panels(w, true) : Tensor();
  Tensor scratch = Tensor::empty(Shape{std::min(block, rows), activations.row_size()},
                                 DType::kFloat32, activations.device());
  float dw_beta = dw.beta;
  for (std::int64_t start = 0; start < rows; start += block) {
    const std::int64_t count = std::min(block, rows - start);
    Tensor dgates = scratch.rows_view(0, count);
    const Tensor act = activations.rows_view(start, count), dc = node.grad.rows_view(start, count);
    const Tensor m = mask ? mask->rows_view(start, count) : Tensor();
    if (kids.dense) {
      Tensor dchildren = to.dchildren.grad ? to.dchildren.grad->rows_view(start, count) : Tensor();
      backend::lstm_cell_state_backward_activated(
          act, kids.dense->rows_view(start, count), mask ? &m : nullptr, dc, &dgates, true,
          to.dchildren.grad ? &dchildren : nullptr, to.dchildren.fresh());
    } else {
      const backend::RowBlocks dchildren = to.dchildren_rows.rows > 0
                                               ? to.dchildren_rows.rows_from(start, count)
                                               : backend::RowBlocks{};
      backend::lstm_cell_state_backward_activated_rows(act, kids.rows.rows_from(start, count),
                                                       mask ? &m : nullptr, dc, &dgates, true,
                                                       dchildren.rows > 0 ? &dchildren : nullptr);
    }
    if (to.dx_rows.rows > 0) {
      backend::product_write_rows(dgates, transposed_panels, to.dx_rows.rows_from(start, count));
    } else if (to.dx.grad) {
      Tensor dx = to.dx.grad->rows_view(start, count);
      detail::times_transposed(tape, dgates, w, to.dx.beta, dx);
    }
    if (dw.grad) {
      if (in.dense)
        backend::gemm(in.dense->rows_view(start, count), true, dgates, false, 1.0f, dw_beta,
                      *dw.grad);
      else
        backend::product_transposed_read_rows(in.rows.rows_from(start, count), dgates, dw_beta,
                                              *dw.grad);
      dw_beta = 1.0f;
    }
    if (db)
      backend::binary_backward(backend::BinaryOp::kAdd, dgates, tape.node(b).value, dgates, nullptr,
                               db);
  }
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

// Records a cell state computed from `inputs` (the gates, then the children: one tensor or each
// child's), keeping the dropout mask for backward.
template <typename Backward>
Var record_cell_state(std::vector<Var> inputs, Tensor c, Tensor mask, Backward backward) {
  Tape& tape = inputs[0].tape();
  Var out = tape.record(std::move(c), inputs, backward);
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
  return record_cell_state({gates, children}, std::move(c), std::move(mask),
                           lstm_cell_state_backward);
}

namespace {

// The children's states [B, N] side by side as one row block each, where they lie.
backend::RowBlocks children_rows(const std::vector<const Tensor*>& children, std::int64_t rows,
                                 std::int64_t n) {
  std::vector<float*> firsts;
  for (const Tensor* child : children) firsts.push_back(const_cast<float*>(child->data<float>()));
  return backend::RowBlocks::side_by_side(firsts, rows, n);
}

// Inputs gates, then the K children. Each child's gradient goes to its own buffer where it lies;
// a child that needs none writes into a scratch buffer. The targets are all taken first, so a child
// given twice is written by its first block and added into by the second, row by row.
void separate_children_cell_state_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t gates = tape.input(id, 0);
  const std::int64_t rows = node.value.rows(), n = node.value.row_size();
  const Tensor* mask = node.saved[0].defined() ? &node.saved[0] : nullptr;
  const Tape::GradTarget dgates = tape.grad_target(gates);
  std::vector<const Tensor*> values, grads;
  std::vector<std::uint8_t> adds;
  bool wanted = false;
  for (std::uint32_t k = 1; k < node.num_inputs; ++k) {
    const std::uint32_t child = tape.input(id, k);
    values.push_back(&tape.node(child).value);
    const Tape::GradTarget target = tape.grad_target(child);
    wanted = wanted || target.grad != nullptr;
    grads.push_back(target.grad);
    adds.push_back(target.grad && !target.fresh() ? 1 : 0);
  }
  Tensor scratch;
  for (const Tensor*& grad : grads)
    if (grad == nullptr) {
      if (!scratch.defined())
        scratch = Tensor::empty(Shape{rows, n}, DType::kFloat32, Device::kCpu);
      grad = &scratch;
    }
  const backend::RowBlocks children = children_rows(values, rows, n);
  backend::RowBlocks dchildren = children_rows(grads, rows, n);
  for (std::uint8_t add : adds) dchildren.add.insert(dchildren.add.end(), std::size_t(rows), add);
  backend::lstm_cell_state_backward_rows(tape.node(gates).value, children, mask, node.grad,
                                         dgates.grad, dgates.fresh(),
                                         wanted ? &dchildren : nullptr);
}

}  // namespace

// c = sum_k sigmoid(f_k) * c_k + sigmoid(i) * dropout(tanh(g)) with the children apart: on the
// CPU read where they lie (one block each), elsewhere concatenated first.
Var lstm_cell_state(Var gates, std::span<const Var> children, std::int64_t hidden,
                    float candidate_drop_prob, Rng* rng) {
  const char* op = "lstm_cell_state";
  if (children.empty()) fail(op, "no children: give the K children's states, at least one");
  const Tensor& vg = gates.value();
  for (std::size_t k = 0; k < children.size(); ++k) {
    const Tensor& v = children[k].value();
    check_cell_inputs(op, vg, v, "child");
    if (v.shape() != Shape{vg.shape()[0], hidden})
      fail(op, "child ", k, " is ", v.describe(), ", expected [", vg.shape()[0], ", ", hidden,
           "] (a state of the hidden size, one row per row of the gates ", vg.describe(), ")");
  }
  if (children.size() == 1 || vg.device() != Device::kCpu)
    return lstm_cell_state(gates, children.size() == 1 ? children[0] : concat(children), hidden,
                           candidate_drop_prob, rng);
  const std::int64_t k = std::int64_t(children.size()), rows = vg.shape()[0];
  if (hidden <= 0 || vg.shape()[1] < (k + 2) * hidden)
    fail(op, "gates ", vg.describe(), " do not fit ", k, " children of hidden size ", hidden,
         ": expected gates [B, W >= (K+2)N] starting with K forget gates, input and candidate");
  const Shape state{rows, hidden};
  Tensor mask = candidate_mask(op, candidate_drop_prob, rng, state, vg.device());
  Tensor c = Tensor::empty(state, DType::kFloat32, vg.device());
  std::vector<const Tensor*> values;
  for (const Var& child : children) values.push_back(&child.value());
  backend::lstm_cell_state_rows(vg, children_rows(values, rows, hidden),
                                mask.defined() ? &mask : nullptr, c);
  std::vector<Var> inputs{gates};
  inputs.insert(inputs.end(), children.begin(), children.end());
  return record_cell_state(std::move(inputs), std::move(c), std::move(mask),
                           separate_children_cell_state_backward);
}

// lstm_cell_state(linear(x, W, b), children) with the gates the op's own: activated in place,
// kept for backward. Children read where their rows lie (argument_rows) are float32 on the CPU
// by construction: only their shape is checked. x is read in place too, unless both would need
// their gradients written into rows in place (then x is gathered: CellGradients).
Var linear_lstm_cell_state(Var x, Var weight, Var bias, Var children, float candidate_drop_prob,
                           Rng* rng) {
  const char* op = "linear_lstm_cell_state";
  Tape& tape = x.tape();
  if (detail::reads_in_place(tape, x.id()) && detail::reads_in_place(tape, children.id()) &&
      tape.node(x.id()).requires_grad && tape.node(children.id()).requires_grad)
    x.value();
  const Tensor& vw = weight.value();
  detail::check_linear(op, x, vw, bias.value());
  const bool children_in_place = detail::reads_in_place(tape, children.id());
  if (!children_in_place) {
    detail::require_float(op, "children", children.value());
    detail::require_rank(op, "children", children.value(), 2);
    detail::require_same_device(op, vw, children.value());
  } else if (vw.device() != Device::kCpu) {
    fail(op, "the children's rows are on the CPU but the weight is ", vw.describe());
  }
  const Shape& cs = children.shape();
  const std::int64_t rows = x.shape()[0], width = vw.shape()[1], xw = cs[1];
  const std::int64_t n = (width - xw) / 2;
  if (cs[0] != rows || width <= xw || (width - xw) % 2 != 0 || xw == 0 || xw % n != 0)
    fail(op, "weight ", vw.shape(), " does not give the gates of children float32 ", cs,
         " for input float32 ", x.shape(),
         ": expected weight [in, (K+2)N] for children [B, KN] (K forget gates, input, candidate)");
  Tensor mask = candidate_mask(op, candidate_drop_prob, rng, Shape{rows, n}, vw.device());
  Tensor activations = Tensor::empty(Shape{rows, width}, DType::kFloat32, vw.device());
  Tensor c = Tensor::empty(Shape{rows, n}, DType::kFloat32, vw.device());
  const Tensor bias_row = bias.value().reshaped(Shape{bias.value().numel()});
  const CellOperand in(tape, x.id(), true), kids(tape, children.id(), true);
  const Tensor panels = in.dense ? Tensor() : tape.panels(weight.id(), false);
  const std::int64_t block = cell_block_rows(rows, vw);
  for (std::int64_t start = 0; start < rows; start += block) {
    const std::int64_t count = std::min(block, rows - start);
    Tensor gates = activations.rows_view(start, count), cell = c.rows_view(start, count);
    const Tensor m = mask.defined() ? mask.rows_view(start, count) : Tensor();
    if (in.dense)
      backend::gemm(in.dense->rows_view(start, count), false, vw, false, 1.0f, 0.0f, gates);
    else
      backend::product_read_rows(in.rows.rows_from(start, count), panels, gates);
    if (kids.dense)
      backend::lstm_cell_state_activating(gates, &bias_row, kids.dense->rows_view(start, count),
                                          m.defined() ? &m : nullptr, cell);
    else
      backend::lstm_cell_state_activating_rows(gates, &bias_row, kids.rows.rows_from(start, count),
                                               m.defined() ? &m : nullptr, cell);
  }
  Var out = tape.record(std::move(c), {x, weight, bias, children}, linear_lstm_cell_state_backward);
  TapeNode& node = tape.node(out.id());
  if (node.backward != nullptr) {
    node.saved[0] = std::move(mask);
    node.saved[1] = std::move(activations);
  }
  return out;
}

void set_linear_cell_block_rows(std::int64_t rows) {
  forced_block_rows = std::max<std::int64_t>(rows, 0);
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
