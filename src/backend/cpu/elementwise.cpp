// CPU elementwise kernels: fill, axpy, the unary functions and the binary arithmetic with
// periodic (row / scalar) broadcasting, each with its gradient. Transcendentals go through
// Eigen's vectorized array functions (measured faster than std:: loops: BENCHMARKS.md);
// the rest are plain loops the compiler vectorizes. Formulas shared with CUDA (softplus, the
// derivatives) come from ../elementwise_math.h, applied to Eigen arrays.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics when
// Eigen's packet math is inlined (and a false -Wuninitialized in its fixed-size blocks); the
// warnings are about the compiler's header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../elementwise_math.h"
#include "../kernels.h"
#include "fixed_blocks.h"
#include "typed_elementwise.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

ConstArrayMap array_of(const Tensor& t) { return {t.data<float>(), Eigen::Index(t.numel())}; }
ArrayMap array_of(Tensor& t) { return {t.data<float>(), Eigen::Index(t.numel())}; }

// Applies fn(full[i], periodic[i % p]) over n elements, with the periodic operand's index
// advancing in an inner loop the compiler can vectorize.
template <typename Fn>
void for_each_period(std::int64_t n, std::int64_t p, Fn fn) {
  for (std::int64_t start = 0; start < n; start += p)
    for (std::int64_t j = 0; j < p; ++j) fn(start + j, j);
}

}  // namespace

void fill(Tensor& y, float value) {
  if (y.dtype() != DType::kFloat32) return typed::fill(y, value);
  std::fill_n(y.data<float>(), y.numel(), value);
}

void add_into(const Tensor& x, float scale, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel());
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const std::int64_t n = y.numel();
  if (scale == 1.0f) {
    for (std::int64_t i = 0; i < n; ++i) py[i] += px[i];
  } else {
    for (std::int64_t i = 0; i < n; ++i) py[i] += scale * px[i];
  }
}

void bias_activation(const Tensor& bias, UnaryOp op, Tensor& y) {
  const std::int64_t width = bias.numel();
  WEFT_ASSERT(y.dtype() == DType::kFloat32 && (y.numel() == 0 || y.row_size() == width));
  const float* b = bias.data<float>();
  // Row by row in fixed blocks, so a row's values do not depend on its place (fixed_blocks.h).
  for (std::int64_t r = 0; r < y.rows(); ++r) {
    float* row = y.data<float>() + r * width;
    switch (op) {
      case UnaryOp::kRelu:
        for_fixed_blocks(
            width, row, [](auto& o, const auto& v, const auto& c) { o = (v + c).max(0.0f); }, row,
            b);
        break;
      case UnaryOp::kSigmoid:
        for_fixed_blocks(
            width, row, [](auto& o, const auto& v, const auto& c) { o = (v + c).logistic(); }, row,
            b);
        break;
      case UnaryOp::kTanh:
        for_fixed_blocks(
            width, row, [](auto& o, const auto& v, const auto& c) { o = (v + c).tanh(); }, row, b);
        break;
      default:
        WEFT_ASSERT(false && "bias_activation takes relu, sigmoid or tanh");
    }
  }
}

void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel());
  if (x.dtype() != DType::kFloat32) return typed::unary(op, x, y);
  auto in = array_of(x);
  auto out = array_of(y);
  switch (op) {
    case UnaryOp::kNeg:
      out = -in;
      break;
    case UnaryOp::kRelu:
      out = in.max(0.0f);
      break;
    // The transcendentals in fixed blocks, so an element's value does not depend on where it
    // lies in the batch (fixed_blocks.h).
    case UnaryOp::kSigmoid:
      return for_fixed_blocks(
          x.numel(), out.data(), [](auto& o, const auto& i) { o = i.logistic(); }, in.data());
    case UnaryOp::kTanh:
      return for_fixed_blocks(
          x.numel(), out.data(), [](auto& o, const auto& i) { o = i.tanh(); }, in.data());
    case UnaryOp::kExp:
      return for_fixed_blocks(
          x.numel(), out.data(), [](auto& o, const auto& i) { o = i.exp(); }, in.data());
    case UnaryOp::kLog:
      return for_fixed_blocks(
          x.numel(), out.data(), [](auto& o, const auto& i) { o = i.log(); }, in.data());
    case UnaryOp::kSoftplus:
      out = in.unaryExpr([](float v) { return math::softplus_of(v); });
      break;
    case UnaryOp::kAbs:
      out = in.abs();
      break;
  }
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  WEFT_ASSERT(x.numel() == dx.numel() && dy.numel() == dx.numel());
  auto in = array_of(x);
  auto out = array_of(y);
  auto grad_out = array_of(dy);
  auto grad_in = array_of(dx);
  switch (op) {
    case UnaryOp::kNeg:
      grad_in -= grad_out;
      break;
    case UnaryOp::kRelu:
      grad_in += (in > 0.0f).select(grad_out, 0.0f);
      break;
    case UnaryOp::kSigmoid:
      grad_in += math::sigmoid_backward(grad_out, out);
      break;
    case UnaryOp::kTanh:
      grad_in += math::tanh_backward(grad_out, out);
      break;
    case UnaryOp::kExp:
      grad_in += grad_out * out;
      break;
    case UnaryOp::kLog:
      grad_in += grad_out / in;
      break;
    case UnaryOp::kSoftplus:
      grad_in += grad_out * in.logistic();
      break;
    case UnaryOp::kAbs:  // sign(x), 0 at 0
      grad_in += (in > 0.0f).select(grad_out, (in < 0.0f).select(-grad_out, 0.0f));
      break;
  }
}

namespace {

template <typename Fn>
void binary_with(const Tensor& a, const Tensor& b, Tensor& y, Fn fn) {
  const std::int64_t n = y.numel();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  if (n == 0) return;
  if (a.numel() == n && b.numel() == n) {
    for (std::int64_t i = 0; i < n; ++i) py[i] = fn(pa[i], pb[i]);
  } else if (a.numel() == n) {
    for_each_period(n, b.numel(),
                    [&](std::int64_t i, std::int64_t j) { py[i] = fn(pa[i], pb[j]); });
  } else {
    WEFT_ASSERT(b.numel() == n);
    for_each_period(n, a.numel(),
                    [&](std::int64_t i, std::int64_t j) { py[i] = fn(pa[j], pb[i]); });
  }
}

// Accumulates grad_a(a, b) * dy into da and grad_b(a, b) * dy into db, each reduced over
// its operand's period (a broadcast operand receives the sum over the rows it was used in,
// row after row). One branch-free loop per wanted gradient, so that each vectorizes (a
// single loop testing which gradients are wanted at every element stayed scalar at -O2).
template <typename GradA, typename GradB>
void binary_backward_with(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                          Tensor* db, GradA grad_a, GradB grad_b) {
  const std::int64_t n = dy.numel();
  const std::int64_t na = a.numel(), nb = b.numel();
  const std::int64_t period = std::min(na, nb);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* pdy = dy.data<float>();
  float* pda = da ? da->data<float>() : nullptr;
  float* pdb = db ? db->data<float>() : nullptr;
  for (std::int64_t start = 0; start < n; start += period) {
    const std::int64_t ia = na == n ? start : 0, ib = nb == n ? start : 0;
    if (pda)
      for (std::int64_t j = 0; j < period; ++j)
        pda[ia + j] += grad_a(pa[ia + j], pb[ib + j]) * pdy[start + j];
    if (pdb)
      for (std::int64_t j = 0; j < period; ++j)
        pdb[ib + j] += grad_b(pa[ia + j], pb[ib + j]) * pdy[start + j];
  }
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  if (y.dtype() != DType::kFloat32) return typed::binary(op, a, b, y);
  switch (op) {
    case BinaryOp::kAdd:
      return binary_with(a, b, y, [](float u, float v) { return u + v; });
    case BinaryOp::kSub:
      return binary_with(a, b, y, [](float u, float v) { return u - v; });
    case BinaryOp::kMul:
      return binary_with(a, b, y, [](float u, float v) { return u * v; });
    case BinaryOp::kDiv:
      return binary_with(a, b, y, [](float u, float v) { return u / v; });
    case BinaryOp::kMinimum:
      return binary_with(a, b, y, [](float u, float v) { return std::min(u, v); });
    case BinaryOp::kMaximum:
      return binary_with(a, b, y, [](float u, float v) { return std::max(u, v); });
  }
}

void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                     Tensor* db) {
  WEFT_ASSERT(a.numel() == dy.numel() || b.numel() == dy.numel());
  if (dy.numel() == 0) return;
  auto one = [](float, float) { return 1.0f; };
  switch (op) {
    case BinaryOp::kAdd:
      return binary_backward_with(a, b, dy, da, db, one, one);
    case BinaryOp::kSub:
      return binary_backward_with(a, b, dy, da, db, one, [](float, float) { return -1.0f; });
    case BinaryOp::kMul:
      return binary_backward_with(
          a, b, dy, da, db, [](float, float v) { return v; }, [](float u, float) { return u; });
    case BinaryOp::kDiv:
      return binary_backward_with(
          a, b, dy, da, db, [](float, float v) { return 1.0f / v; },
          [](float u, float v) { return -u / (v * v); });
    // Ties send the gradient to a, as TensorFlow's Minimum and Maximum do.
    case BinaryOp::kMinimum:
      return binary_backward_with(
          a, b, dy, da, db, [](float u, float v) { return u <= v ? 1.0f : 0.0f; },
          [](float u, float v) { return u <= v ? 0.0f : 1.0f; });
    case BinaryOp::kMaximum:
      return binary_backward_with(
          a, b, dy, da, db, [](float u, float v) { return u >= v ? 1.0f : 0.0f; },
          [](float u, float v) { return u >= v ? 0.0f : 1.0f; });
  }
}

}  // namespace weft::backend::cpu
