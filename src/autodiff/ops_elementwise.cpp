// Elementwise ops: the unary functions (relu, sigmoid, tanh, exp, log, softplus, neg) and
// add / sub / mul / div with row broadcasting, plus the Var-with-number operators.
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

using backend::BinaryOp;
using backend::UnaryOp;

void unary_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t input = tape.input(id, 0);
  if (Tensor* dx = tape.grad_of(input))
    backend::unary_backward(UnaryOp(node.int_attrs[0]), tape.node(input).value, node.value,
                            node.grad, *dx);
}

Var unary_op(const char* name, UnaryOp op, Var x) {
  detail::require_float(name, "input", x.value());
  Tensor y = Tensor::empty(x.shape(), DType::kFloat32, x.value().device());
  backend::unary(op, x.value(), y);
  Var out = x.tape().record(std::move(y), {x}, unary_backward);
  out.tape().node(out.id()).int_attrs[0] = std::int64_t(op);
  return out;
}

void binary_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t a = tape.input(id, 0), b = tape.input(id, 1);
  Tensor* da = tape.grad_of(a);
  Tensor* db = tape.grad_of(b);
  backend::binary_backward(BinaryOp(node.int_attrs[0]), tape.node(a).value, tape.node(b).value,
                           node.grad, da, db);
}

// True when `small` can stand for every row of `full`: one element, the per-row shape, or
// the per-row shape with a leading 1.
bool broadcasts_over_rows(const Shape& small, const Shape& full) {
  if (small.numel() == 1) return true;
  if (full.rank() == 0) return false;
  const Shape row = full.without_rows();
  return small == row || small == row.prepend(1);
}

Var binary_op(const char* name, BinaryOp op, Var a, Var b) {
  const Tensor& va = a.value();
  const Tensor& vb = b.value();
  detail::require_float(name, "lhs", va);
  detail::require_float(name, "rhs", vb);
  detail::require_same_device(name, va, vb);
  const bool a_is_full = va.numel() >= vb.numel();
  const Shape& full = a_is_full ? va.shape() : vb.shape();
  const Shape& small = a_is_full ? vb.shape() : va.shape();
  if (va.shape() != vb.shape() && !broadcasts_over_rows(small, full))
    fail(name, "shapes do not broadcast: lhs ", va.describe(), " vs rhs ", vb.describe(),
         " (the smaller operand must equal the other, be one row of it — ", full.without_rows(),
         " or ", full.without_rows().prepend(1), " — or one number)");
  Tensor y = Tensor::empty(full, DType::kFloat32, va.device());
  backend::binary(op, va, vb, y);
  Var out = a.tape().record(std::move(y), {a, b}, binary_backward);
  out.tape().node(out.id()).int_attrs[0] = std::int64_t(op);
  return out;
}

Var number_like(Var x, float value) {
  return x.tape().constant(Tensor::scalar(value, x.value().device()));
}

}  // namespace

// y = a + b
Var add(Var a, Var b) { return binary_op("add", BinaryOp::kAdd, a, b); }
// y = a - b
Var sub(Var a, Var b) { return binary_op("sub", BinaryOp::kSub, a, b); }
// y = a * b
Var mul(Var a, Var b) { return binary_op("mul", BinaryOp::kMul, a, b); }
// y = a / b
Var div(Var a, Var b) { return binary_op("div", BinaryOp::kDiv, a, b); }

Var operator+(Var a, float b) { return add(a, number_like(a, b)); }
Var operator-(Var a, float b) { return sub(a, number_like(a, b)); }
Var operator*(Var a, float b) { return mul(a, number_like(a, b)); }
Var operator/(Var a, float b) { return div(a, number_like(a, b)); }
Var operator+(float a, Var b) { return add(number_like(b, a), b); }
Var operator-(float a, Var b) { return sub(number_like(b, a), b); }
Var operator*(float a, Var b) { return mul(number_like(b, a), b); }

// y = -x
Var neg(Var x) { return unary_op("neg", UnaryOp::kNeg, x); }
// y = max(x, 0)
Var relu(Var x) { return unary_op("relu", UnaryOp::kRelu, x); }
// y = 1 / (1 + exp(-x))
Var sigmoid(Var x) { return unary_op("sigmoid", UnaryOp::kSigmoid, x); }
// y = tanh(x)
Var tanh(Var x) { return unary_op("tanh", UnaryOp::kTanh, x); }
// y = exp(x)
Var exp(Var x) { return unary_op("exp", UnaryOp::kExp, x); }
// y = log(x)
Var log(Var x) { return unary_op("log", UnaryOp::kLog, x); }
// y = log(1 + exp(x))
Var softplus(Var x) { return unary_op("softplus", UnaryOp::kSoftplus, x); }

}  // namespace weft
