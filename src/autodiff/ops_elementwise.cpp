// Elementwise ops: the unary functions (relu, sigmoid, tanh, exp, log, softplus, neg, abs),
// add / sub / mul / div / minimum / maximum with row broadcasting, the Var-with-number
// operators, and the dtype ops: cast, comparisons (giving bool) and where. Every dtype but bool
// does arithmetic; only float32 results are differentiable (the rest record no gradient).
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

using backend::BinaryOp;
using backend::CompareOp;
using backend::UnaryOp;

// Which dtypes an elementwise op takes.
enum class Accepts { kFloats, kNumbers };

void require_dtype(const char* op, const char* role, const Tensor& t, Accepts accepts) {
  const DType d = t.dtype();
  if (accepts == Accepts::kFloats && !is_floating(d))
    fail(op, role, " must be float32 or float64, got ", t.describe());
  if (accepts == Accepts::kNumbers && d == DType::kBool)
    fail(op, role, " must be a number dtype (float32, float64, int32, int64), got ", t.describe(),
         "; cast bool with cast()");
}

void require_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(op, "operands have different dtypes: lhs ", a.describe(), " vs rhs ", b.describe(),
         "; cast one with cast()");
}

// Gradients flow through float32 results only.
BackwardFn differentiable_if_float32(const Tensor& result, BackwardFn backward) {
  return result.dtype() == DType::kFloat32 ? backward : nullptr;
}

void unary_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t input = tape.input(id, 0);
  if (Tensor* dx = tape.grad_of(input))
    backend::unary_backward(UnaryOp(node.int_attrs[0]), tape.node(input).value, node.value,
                            node.grad, *dx);
}

Var unary_op(const char* name, UnaryOp op, Var x, Accepts accepts = Accepts::kFloats) {
  require_dtype(name, "input", x.value(), accepts);
  Tensor y = Tensor::empty(x.shape(), x.value().dtype(), x.value().device());
  backend::unary(op, x.value(), y);
  const BackwardFn backward = differentiable_if_float32(y, unary_backward);
  Var out = x.tape().record(std::move(y), {x}, backward);
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

// The shape of an elementwise result of a and b, as NumPy would give it for the pairs Weft
// accepts: the operand with more elements; on a tie (one element each, or a row with and
// without its leading 1) the one of higher rank, so `2.0 * x` and `x * 2.0` agree on x = [1].
// A one-element operand of higher rank still adds its leading 1s ([1, 1] * [3] is [1, 3]).
Shape broadcast_shape(const char* name, const Tensor& va, const Tensor& vb) {
  const bool a_is_full =
      va.numel() != vb.numel() ? va.numel() > vb.numel() : va.shape().rank() >= vb.shape().rank();
  Shape full = a_is_full ? va.shape() : vb.shape();
  const Shape& small = a_is_full ? vb.shape() : va.shape();
  if (va.shape() != vb.shape() && !broadcasts_over_rows(small, full))
    fail(name, "shapes do not broadcast: lhs ", va.describe(), " vs rhs ", vb.describe(),
         " (the smaller operand must equal the other, be one row of it — ", full.without_rows(),
         " or ", full.without_rows().prepend(1), " — or one number)");
  while (full.rank() < small.rank()) full = full.prepend(1);
  return full;
}

// An integer zero divisor is an error here (the kernel would otherwise have to trap).
void require_nonzero_divisor(const Tensor& divisor) {
  if (!is_integer(divisor.dtype())) return;
  const std::vector<double> values = divisor.to_double_vector();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] == 0)
      fail("div", "integer division by zero: element ", i, " of the divisor ", divisor.describe(),
           " is 0");
}

Var binary_op(const char* name, BinaryOp op, Var a, Var b) {
  const Tensor& va = a.value();
  const Tensor& vb = b.value();
  require_dtype(name, "lhs", va, Accepts::kNumbers);
  require_dtype(name, "rhs", vb, Accepts::kNumbers);
  require_same_dtype(name, va, vb);
  detail::require_same_device(name, va, vb);
  const Shape full = broadcast_shape(name, va, vb);
  if (op == BinaryOp::kDiv) require_nonzero_divisor(vb);
  Tensor y = Tensor::empty(full, va.dtype(), va.device());
  backend::binary(op, va, vb, y);
  const BackwardFn backward = differentiable_if_float32(y, binary_backward);
  Var out = a.tape().record(std::move(y), {a, b}, backward);
  out.tape().node(out.id()).int_attrs[0] = std::int64_t(op);
  return out;
}

Var compare_op(const char* name, CompareOp op, Var a, Var b) {
  const Tensor& va = a.value();
  const Tensor& vb = b.value();
  require_same_dtype(name, va, vb);
  detail::require_same_device(name, va, vb);
  Tensor y = Tensor::empty(broadcast_shape(name, va, vb), DType::kBool, va.device());
  backend::compare(op, va, vb, y);
  return a.tape().record(std::move(y), {a, b}, nullptr);
}

void where_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t cond = tape.input(id, 0);
  backend::where_backward(tape.node(cond).value, node.grad, tape.grad_of(tape.input(id, 1)),
                          tape.grad_of(tape.input(id, 2)));
}

// A one-element constant of x's dtype (a float32 number cast, so 2.0f * an int64 Var works).
Var number_like(Var x, float value) {
  Tensor number = Tensor::empty(Shape{}, x.value().dtype(), x.value().device());
  backend::fill(number, value);
  return x.tape().constant(std::move(number));
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

// y = min(a, b)
Var minimum(Var a, Var b) { return binary_op("minimum", BinaryOp::kMinimum, a, b); }
// y = max(a, b)
Var maximum(Var a, Var b) { return binary_op("maximum", BinaryOp::kMaximum, a, b); }

// y = -x
Var neg(Var x) { return unary_op("neg", UnaryOp::kNeg, x, Accepts::kNumbers); }
// y = |x|
Var abs(Var x) { return unary_op("abs", UnaryOp::kAbs, x, Accepts::kNumbers); }
// y = max(x, 0)
Var relu(Var x) { return unary_op("relu", UnaryOp::kRelu, x, Accepts::kNumbers); }
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

Var equal(Var a, Var b) { return compare_op("equal", CompareOp::kEqual, a, b); }
Var not_equal(Var a, Var b) { return compare_op("not_equal", CompareOp::kNotEqual, a, b); }
Var less(Var a, Var b) { return compare_op("less", CompareOp::kLess, a, b); }
Var less_equal(Var a, Var b) { return compare_op("less_equal", CompareOp::kLessEqual, a, b); }
Var greater(Var a, Var b) { return compare_op("greater", CompareOp::kGreater, a, b); }
Var greater_equal(Var a, Var b) {
  return compare_op("greater_equal", CompareOp::kGreaterEqual, a, b);
}

// y = cond ? a : b
Var where(Var cond, Var a, Var b) {
  const Tensor& c = cond.value();
  if (c.dtype() != DType::kBool)
    fail("where", "the condition must be bool, got ", c.describe(),
         "; make one with a comparison or cast()");
  require_same_dtype("where", a.value(), b.value());
  detail::require_same_device("where", a.value(), b.value());
  detail::require_same_device("where", c, a.value());
  for (const Tensor* operand : {&a.value(), &b.value()})
    if (operand->shape() != c.shape() && !broadcasts_over_rows(operand->shape(), c.shape()))
      fail("where", "operand ", operand->describe(), " does not broadcast to the condition ",
           c.describe(), " (it must equal it, be one row of it or one number)");
  Tensor y = Tensor::empty(c.shape(), a.value().dtype(), c.device());
  backend::where(c, a.value(), b.value(), y);
  const BackwardFn backward = differentiable_if_float32(y, where_backward);
  return cond.tape().record(std::move(y), {cond, a, b}, backward);
}

// y = x as `dtype`
Var cast(Var x, DType dtype) {
  if (x.value().dtype() == dtype) return x;
  Tensor y = Tensor::empty(x.shape(), dtype, x.value().device());
  backend::cast(x.value(), y);
  // float32 to float32 is the identity above; no other cast carries a gradient.
  return x.tape().record(std::move(y), {x}, nullptr);
}

}  // namespace weft
