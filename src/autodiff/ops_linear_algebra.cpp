// Matrix products: matmul with optional transposes, its batched form (one product per batch
// item) and linear (x · W + b). Forward and
// backward are all GEMMs through the backend; the first gradient to reach a node is written
// with beta = 0, later ones added with beta = 1 (Tape::grad_target).
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/gemm_selection.h"

namespace weft {
namespace {

using backend::batch_gemm;
using backend::gemm;

// Whether dx = dy · wᵀ, the gradient of a product's other operand, should read w's transposed
// copy (Tape::transposed_value) untransposed: when w is a leaf (a weight: the same value all
// recording, so one copy serves every loom level) on the CPU, at a shape where the CPU's GEMM
// measured the untransposed product faster (gemm_prefers_untransposed_copy).
bool reads_transposed_copy(Tape& tape, std::uint32_t w, const Tensor& dy, float beta,
                           const Tensor& dx) {
  const TapeNode& node = tape.node(w);
  return node.is_leaf && node.value.device() == Device::kCpu &&
         gemm_prefers_untransposed_copy(
             GemmShape{dx.rows(), dx.row_size(), dy.row_size(), false, true, beta != 0.0f});
}

void check_matrix(const char* op, const char* role, const Tensor& t) {
  detail::require_float(op, role, t);
  detail::require_rank(op, role, t, 2);
}

}  // namespace

namespace detail {

// dx (beta) = dy · wᵀ, reading w's transposed copy where reads_transposed_copy says.
void times_transposed(Tape& tape, const Tensor& dy, std::uint32_t w, float beta, Tensor& dx) {
  if (reads_transposed_copy(tape, w, dy, beta, dx))
    gemm(dy, false, tape.transposed_value(w), false, 1.0f, beta, dx);
  else
    gemm(dy, false, tape.node(w).value, true, 1.0f, beta, dx);
}

// An x read where its rows lie (argument_rows) is a float32 matrix on the CPU by construction:
// only its shape is checked, so checking does not gather it.
void check_linear(const char* op, const Var& x, const Tensor& vw, const Tensor& vb) {
  const bool in_place = detail::reads_in_place(x.tape(), x.id());
  if (!in_place) check_matrix(op, "input", x.value());
  check_matrix(op, "weight", vw);
  detail::require_float(op, "bias", vb);
  if (in_place) {
    if (vw.device() != Device::kCpu || vb.device() != Device::kCpu)
      fail(op, "the input's rows are on the CPU but the weight is ", vw.describe(),
           " and the bias ", vb.describe(), "; move them with Tensor::to()");
  } else {
    detail::require_same_device(op, x.value(), vw);
    detail::require_same_device(op, x.value(), vb);
  }
  const Shape& xs = x.shape();
  if (xs[1] != vw.shape()[0])
    fail(op, "input features differ from weight rows: input ", xs, " vs weight ", vw.shape(),
         " (the weight is [in, out])");
  const std::int64_t out_features = vw.shape()[1];
  const bool bias_ok = (vb.rank() == 1 && vb.shape()[0] == out_features) ||
                       (vb.rank() == 2 && vb.shape()[0] == 1 && vb.shape()[1] == out_features);
  if (!bias_ok)
    fail(op, "bias ", vb.shape(), " does not match weight ", vw.shape(), ": expected [",
         out_features, "] or [1, ", out_features, "]");
}

}  // namespace detail

using detail::check_linear;
using detail::times_transposed;

namespace {

// y = op(a) · op(b), with `product` gemm or (per batch item) batch_gemm: dA' = dy · op(b)ᵀ and
// dB' = op(a)ᵀ · dy, transposed back when the operand was stored transposed.
using Product = void (*)(const Tensor&, bool, const Tensor&, bool, float, float, Tensor&);
template <Product product>
void product_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const bool ta = node.int_attrs[0] != 0, tb = node.int_attrs[1] != 0;
  const Tensor& dy = node.grad;
  // An operand the forward read where its rows lie (batch_matmul) is gathered now, once.
  const Tensor& a = Var(&tape, tape.input(id, 0)).value();
  const Tensor& b = Var(&tape, tape.input(id, 1)).value();
  // One target at a time: a product of a node with itself gets its second term added.
  if (const Tape::GradTarget da = tape.grad_target(tape.input(id, 0)); da.grad) {
    if (!ta && !tb && product == &gemm)
      times_transposed(tape, dy, tape.input(id, 1), da.beta, *da.grad);
    else if (!ta)
      product(dy, false, b, !tb, 1.0f, da.beta, *da.grad);
    else
      product(b, tb, dy, true, 1.0f, da.beta, *da.grad);
  }
  if (const Tape::GradTarget db = tape.grad_target(tape.input(id, 1)); db.grad) {
    if (!tb)
      product(a, !ta, dy, false, 1.0f, db.beta, *db.grad);
    else
      product(dy, true, a, ta, 1.0f, db.beta, *db.grad);
  }
}

}  // namespace

// y = op(a) · op(b)
Var matmul(Var a, Var b, bool transpose_a, bool transpose_b) {
  const Tensor& va = a.value();
  const Tensor& vb = b.value();
  check_matrix("matmul", "lhs", va);
  check_matrix("matmul", "rhs", vb);
  detail::require_same_device("matmul", va, vb);
  const std::int64_t m = transpose_a ? va.shape()[1] : va.shape()[0];
  const std::int64_t k = transpose_a ? va.shape()[0] : va.shape()[1];
  const std::int64_t kb = transpose_b ? vb.shape()[1] : vb.shape()[0];
  const std::int64_t n = transpose_b ? vb.shape()[0] : vb.shape()[1];
  if (k != kb)
    fail("matmul", "inner dimensions differ: lhs ", va.shape(), transpose_a ? "ᵀ" : "", " vs rhs ",
         vb.shape(), transpose_b ? "ᵀ" : "", " (", k, " vs ", kb, ")");
  Tensor y = Tensor::empty(Shape{m, n}, DType::kFloat32, va.device());
  gemm(va, transpose_a, vb, transpose_b, 1.0f, 0.0f, y);
  Var out = a.tape().record(std::move(y), {a, b}, product_backward<gemm>);
  out.tape().node(out.id()).int_attrs[0] = transpose_a;
  out.tape().node(out.id()).int_attrs[1] = transpose_b;
  return out;
}

namespace {

// A batch_matmul operand as its items' addresses: one per row where an argument's rows lie
// (argument_rows, read by index), else the items of its value one after another.
backend::RowBlocks items_of(const Var& x) {
  if (detail::reads_items_in_place(x.tape(), x.id()))
    return detail::rows_in_place(x.tape(), x.id());
  const Tensor& v = x.value();
  return backend::RowBlocks::of_dense(const_cast<float*>(v.data<float>()), v.shape()[0],
                                      v.row_size());
}

// An operand's checks; one read where its rows lie is float32 on the CPU by construction, so only
// its shape is checked (checking does not gather it).
void check_batch_operand(const char* role, const Var& x, Device device) {
  if (!detail::reads_items_in_place(x.tape(), x.id())) {
    detail::require_float("batch_matmul", role, x.value());
    detail::require_rank("batch_matmul", role, x.value(), 3);
    if (x.value().device() != device)
      fail("batch_matmul", "the operands are on different devices: ", role, " is ",
           x.value().describe(), ", the other on ", device_name(device));
  } else if (x.shape().rank() != 3 || device != Device::kCpu) {
    fail("batch_matmul", role, " ", x.shape(), " (rows read where they lie, on the CPU): expected ",
         "rank 3 on the CPU, the other operand being there too (it is on ", device_name(device),
         ")");
  }
}

Device operand_device(const Var& x) {
  return detail::reads_items_in_place(x.tape(), x.id()) ? Device::kCpu : x.value().device();
}

}  // namespace

Var batch_matmul(Var a, Var b, bool transpose_a, bool transpose_b) {
  const Device device = operand_device(a);
  check_batch_operand("lhs", a, device);
  check_batch_operand("rhs", b, device);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa[0] != sb[0])
    fail("batch_matmul", "batch sizes differ: lhs ", sa, " vs rhs ", sb, " (", sa[0], " vs ", sb[0],
         " matrices)");
  const std::int64_t batch = sa[0];
  const std::int64_t m = transpose_a ? sa[2] : sa[1];
  const std::int64_t k = transpose_a ? sa[1] : sa[2];
  const std::int64_t kb = transpose_b ? sb[2] : sb[1];
  const std::int64_t n = transpose_b ? sb[1] : sb[2];
  if (k != kb)
    fail("batch_matmul", "inner dimensions differ: lhs ", sa, transpose_a ? "ᵀ" : "", " vs rhs ",
         sb, transpose_b ? "ᵀ" : "", " (", k, " vs ", kb, ")");
  Tensor y = Tensor::empty(Shape{batch, m, n}, DType::kFloat32, device);
  // Either operand read where its items lie (a decoder's memories of the live examples): the
  // same product per item as batch_gemm, from the rows' own places instead of a gathered copy.
  if (detail::reads_items_in_place(a.tape(), a.id()) ||
      detail::reads_items_in_place(b.tape(), b.id()))
    backend::batch_gemm_read_rows(items_of(a), sa[1], transpose_a, items_of(b), sb[1], transpose_b,
                                  1.0f, 0.0f, y);
  else
    batch_gemm(a.value(), transpose_a, b.value(), transpose_b, 1.0f, 0.0f, y);
  Var out = a.tape().record(std::move(y), {a, b}, product_backward<batch_gemm>);
  out.tape().node(out.id()).int_attrs[0] = transpose_a;
  out.tape().node(out.id()).int_attrs[1] = transpose_b;
  return out;
}

namespace {

// The gradients of y = x · W + b given dy (for a fused activation: d(x · W + b)):
// dx += dy · Wᵀ, dW += xᵀ · dy, db += column sums of dy. An x read where its rows lie
// (argument_rows) gets dx written straight into those rows' gradients, and dW reads its rows
// there.
void linear_backward_from(Tape& tape, std::uint32_t id, const Tensor& dy) {
  const std::uint32_t x = tape.input(id, 0), w = tape.input(id, 1);
  const Tensor& b = tape.node(tape.input(id, 2)).value;
  if (detail::reads_in_place(tape, x)) {
    std::vector<float> discard;
    const backend::RowBlocks dx = detail::gradient_rows_in_place(tape, x, discard);
    if (dx.rows > 0) backend::product_write_rows(dy, tape.panels(w, true), dx);
    if (const Tape::GradTarget dw = tape.grad_target(w); dw.grad)
      backend::product_transposed_read_rows(detail::rows_in_place(tape, x), dy, dw.beta, *dw.grad);
  } else {
    if (const Tape::GradTarget dx = tape.grad_target(x); dx.grad)
      times_transposed(tape, dy, w, dx.beta, *dx.grad);
    if (const Tape::GradTarget dw = tape.grad_target(w); dw.grad)
      gemm(tape.node(x).value, true, dy, false, 1.0f, dw.beta, *dw.grad);
  }
  if (Tensor* db = tape.grad_of(tape.input(id, 2)))
    backend::binary_backward(backend::BinaryOp::kAdd, dy, b, dy, nullptr, db);
}

void linear_backward(Tape& tape, std::uint32_t id) {
  linear_backward_from(tape, id, tape.node(id).grad);
}

// y = f(x · W + b): f'(x · W + b) from y (relu: y > 0; sigmoid, tanh: their outputs), then as
// linear.
void linear_activation_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const auto f = backend::UnaryOp(node.int_attrs[0]);
  Tensor dpre = Tensor::zeros(node.value.shape(), DType::kFloat32, node.value.device());
  backend::unary_backward(f, node.value, node.value, node.grad, dpre);
  linear_backward_from(tape, id, dpre);
}

// x · W alone (beta 0: the product clears y), for a caller that adds the bias in a pass it
// makes anyway; x's rows read where they lie when they are (argument_rows).
Tensor product_without_bias(Var x, Var weight) {
  const Tensor& vw = weight.value();
  Tensor y = Tensor::empty(Shape{x.shape()[0], vw.shape()[1]}, DType::kFloat32, vw.device());
  Tape& tape = x.tape();
  if (detail::reads_in_place(tape, x.id()))
    backend::product_read_rows(detail::rows_in_place(tape, x.id()), tape.panels(weight.id(), false),
                               y);
  else
    gemm(x.value(), false, vw, false, 1.0f, 0.0f, y);
  return y;
}

Var linear_activation(const char* op, Var x, Var weight, Var bias, backend::UnaryOp f) {
  check_linear(op, x, weight.value(), bias.value());
  Tensor y = product_without_bias(x, weight);
  backend::bias_activation(bias.value().reshaped(Shape{bias.value().numel()}), f, y);
  Var out = x.tape().record(std::move(y), {x, weight, bias}, linear_activation_backward);
  out.tape().node(out.id()).int_attrs[0] = std::int64_t(f);
  return out;
}

}  // namespace

// y = x · W + b
Var linear(Var x, Var weight, Var bias) {
  const Tensor& vw = weight.value();
  const Tensor& vb = bias.value();
  check_linear("linear", x, vw, vb);
  const std::int64_t rows = x.shape()[0], out_features = vw.shape()[1];
  if (detail::reads_in_place(x.tape(), x.id())) {  // the product from the rows, then the bias
    Tensor y = product_without_bias(x, weight);
    backend::binary(backend::BinaryOp::kAdd, y, vb.reshaped(Shape{out_features}), y);
    return x.tape().record(std::move(y), {x, weight, bias}, linear_backward);
  }
  // The bias rows first, then the product added onto them: one pass over y fewer than a
  // product followed by a bias add (a product with beta 0 clears y itself).
  Tensor y = Tensor::empty(Shape{rows, out_features}, DType::kFloat32, vw.device());
  backend::copy_blocks(vb, 0, 0, y, 0, out_features, rows, out_features, false);
  gemm(x.value(), false, vw, false, 1.0f, 1.0f, y);
  return x.tape().record(std::move(y), {x, weight, bias}, linear_backward);
}

// y = relu(x · W + b), tanh(...), sigmoid(...): the bias added as the activation runs
Var linear_relu(Var x, Var weight, Var bias) {
  return linear_activation("linear_relu", x, weight, bias, backend::UnaryOp::kRelu);
}
Var linear_tanh(Var x, Var weight, Var bias) {
  return linear_activation("linear_tanh", x, weight, bias, backend::UnaryOp::kTanh);
}
Var linear_sigmoid(Var x, Var weight, Var bias) {
  return linear_activation("linear_sigmoid", x, weight, bias, backend::UnaryOp::kSigmoid);
}

}  // namespace weft
