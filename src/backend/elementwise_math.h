// The per-element math the CPU and CUDA backends share, written once: integer and float
// arithmetic with the backends' common semantics (integers wrap, integer division floors,
// float to integer saturates, NaN to integer is 0), comparisons, the unary functions and their
// derivatives, and the LSTM cell's gradient formulas. nvcc compiles these for the device
// (__host__ __device__, its math library in the global namespace); GCC and Clang see plain
// inline C++ with <cmath>. The formulas that take any type also run on Eigen arrays, which is
// how the vectorized float32 CPU kernels use them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels.h"
#include "weft/core/error.h"

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

namespace weft::backend::math {

// exp_of, log_of, ...: the float or double function of the compiler at hand.
#if defined(__CUDACC__)
#define WEFT_MATH_FUNCTION(name)                \
  template <typename T>                         \
  __host__ __device__ inline T name##_of(T x) { \
    return ::name(x);                           \
  }
#else
#define WEFT_MATH_FUNCTION(name) \
  template <typename T>          \
  inline T name##_of(T x) {      \
    return std::name(x);         \
  }
#endif
WEFT_MATH_FUNCTION(exp)
WEFT_MATH_FUNCTION(log)
WEFT_MATH_FUNCTION(log1p)
WEFT_MATH_FUNCTION(tanh)
WEFT_MATH_FUNCTION(fabs)
#undef WEFT_MATH_FUNCTION

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integer arithmetic wraps around through the unsigned type (two's complement, as NumPy and
// TensorFlow do) instead of being undefined; floats use plain arithmetic.
template <typename T>
WEFT_HOST_DEVICE inline T add_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}
template <typename T>
WEFT_HOST_DEVICE inline T sub_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) - U(b));
  } else {
    return a - b;
  }
}
template <typename T>
WEFT_HOST_DEVICE inline T mul_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) * U(b));
  } else {
    return a * b;
  }
}
template <typename T>
WEFT_HOST_DEVICE inline T neg_of(T a) {
  if constexpr (kIsInteger<T>) {
    return sub_of(T(0), a);
  } else {
    return -a;
  }
}
// Integer division floors, like Python's //; the minimum value divided by -1 wraps to itself;
// a zero divisor (which the ops reject first) gives 0 rather than a trap.
template <typename T>
WEFT_HOST_DEVICE inline T div_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    if (b == 0) return T(0);
    if (b == T(-1)) return neg_of(a);
    T q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}

// Minimum and maximum as std::min and std::max pick (a NaN in the first operand is kept).
template <typename T>
WEFT_HOST_DEVICE inline T binary_of(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kAdd:
      return add_of(a, b);
    case BinaryOp::kSub:
      return sub_of(a, b);
    case BinaryOp::kMul:
      return mul_of(a, b);
    case BinaryOp::kDiv:
      return div_of(a, b);
    case BinaryOp::kMinimum:
      return b < a ? b : a;
    case BinaryOp::kMaximum:
      return a < b ? b : a;
  }
  return T(0);
}

template <typename T>
WEFT_HOST_DEVICE inline T sigmoid_of(T x) {
  return T(1) / (T(1) + exp_of(-x));
}
// log(1 + exp(x)), written so that neither side overflows.
template <typename T>
WEFT_HOST_DEVICE inline T softplus_of(T x) {
  return (x > T(0) ? x : T(0)) + log1p_of(exp_of(-fabs_of(x)));
}

// The unary ops; on integers only kNeg, kAbs and kRelu are defined (the ops check first).
template <typename T>
WEFT_HOST_DEVICE inline T unary_of(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::kNeg:
      return neg_of(x);
    case UnaryOp::kAbs:
      if constexpr (kIsInteger<T>) {
        return x < T(0) ? neg_of(x) : x;
      } else {
        return fabs_of(x);
      }
    case UnaryOp::kRelu:
      return x > T(0) ? x : T(0);
    default:
      break;
  }
  if constexpr (!kIsInteger<T>) {
    switch (op) {
      case UnaryOp::kSigmoid:
        return sigmoid_of(x);
      case UnaryOp::kTanh:
        return tanh_of(x);
      case UnaryOp::kExp:
        return exp_of(x);
      case UnaryOp::kLog:
        return log_of(x);
      case UnaryOp::kSoftplus:
        return softplus_of(x);
      default:
        break;
    }
  }
  return T(0);
}

// The backward of the smooth unary functions from their output y: dy f'(x), multiplied in the
// order the CPU always has (results stay bit-identical to the fused kernels' on the CPU); on a
// float or an Eigen array.
template <typename D, typename Y>
WEFT_HOST_DEVICE inline auto sigmoid_backward(const D& dy, const Y& y) {
  return dy * y * (1 - y);
}
template <typename Y>
WEFT_HOST_DEVICE inline auto tanh_derivative(const Y& y) {
  return 1 - y * y;
}
template <typename D, typename Y>
WEFT_HOST_DEVICE inline auto tanh_backward(const D& dy, const Y& y) {
  return dy * tanh_derivative(y);
}

// dy f'(x) of each unary op from x and y = f(x), whichever is cheaper (0 for |x| at 0).
WEFT_HOST_DEVICE inline float unary_backward_of(UnaryOp op, float x, float y, float dy) {
  switch (op) {
    case UnaryOp::kNeg:
      return -dy;
    case UnaryOp::kRelu:
      return x > 0.0f ? dy : 0.0f;
    case UnaryOp::kSigmoid:
      return sigmoid_backward(dy, y);
    case UnaryOp::kTanh:
      return tanh_backward(dy, y);
    case UnaryOp::kExp:
      return dy * y;
    case UnaryOp::kLog:
      return dy / x;
    case UnaryOp::kSoftplus:
      return dy * sigmoid_of(x);
    case UnaryOp::kAbs:
      return x > 0.0f ? dy : (x < 0.0f ? -dy : 0.0f);
  }
  return 0.0f;
}

template <typename T>
WEFT_HOST_DEVICE inline bool compare_of(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::kEqual:
      return a == b;
    case CompareOp::kNotEqual:
      return a != b;
    case CompareOp::kLess:
      return a < b;
    case CompareOp::kLessEqual:
      return a <= b;
    case CompareOp::kGreater:
      return a > b;
    case CompareOp::kGreaterEqual:
      return a >= b;
  }
  return false;
}

// A value cast to another dtype: to bool is "not zero"; float to integer saturates at the
// integer's range and sends NaN to 0; integer narrowing wraps (defined since C++20); the rest
// is exact or rounds.
template <typename To, typename From>
WEFT_HOST_DEVICE inline To converted(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (kIsInteger<To> && std::is_floating_point_v<From>) {
    if (v != v) return To(0);
    // From(max) may round up past max (2^63 for int64), so >= saturates exactly there.
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    return To(v);
  } else {
    return To(v);
  }
}

// The index of element i in an operand of `size` elements used periodically over n.
WEFT_HOST_DEVICE inline std::int64_t periodic(std::int64_t i, std::int64_t size, std::int64_t n) {
  return size == n ? i : i % size;
}

// The LSTM cell kernels' layout (host side): rows, hidden size n, children k, and the gates' row
// stride (at least (k + 2) n: gates row = [f_1..f_K | i | g | ...], children row = [x_1..x_K]).
struct LstmCellShape {
  std::int64_t rows, n, k, stride;
};
inline LstmCellShape lstm_cell_shape(const Tensor& gates, const Tensor& children, std::int64_t n) {
  WEFT_ASSERT(n > 0 && children.row_size() % n == 0 && gates.rows() == children.rows());
  const std::int64_t k = children.row_size() / n;
  WEFT_ASSERT(gates.row_size() >= (k + 2) * n);
  return {gates.rows(), n, k, gates.row_size()};
}

// The LSTM cell's gradients (kernels.def: lstm_cell_state, lstm_hidden), per unit, on floats
// (CUDA: one thread per unit) or on Eigen arrays (CPU: a row at a time). Gates: forget f_k,
// input i, candidate t = tanh(g), output o; x_k the children's cell states; dm = dc times the
// candidate's dropout mask (dc without one).
// c = i t m + sum_k f_k x_k:  dL/d(raw f_k), dL/dx_k, dL/d(raw i), dL/d(raw g).
template <typename D, typename X, typename F>
WEFT_HOST_DEVICE inline auto lstm_forget_gate_grad(const D& dc, const X& x, const F& f) {
  return dc * x * f * (1 - f);
}
template <typename D, typename F>
WEFT_HOST_DEVICE inline auto lstm_child_state_grad(const D& dc, const F& f) {
  return dc * f;
}
template <typename D, typename T, typename I>
WEFT_HOST_DEVICE inline auto lstm_input_gate_grad(const D& dm, const T& t, const I& i) {
  return dm * t * i * (1 - i);
}
template <typename D, typename I, typename T>
WEFT_HOST_DEVICE inline auto lstm_candidate_grad(const D& dm, const I& i, const T& t) {
  return dm * i * tanh_derivative(t);
}
// h = o tanh(c), with t = tanh(c):  dL/d(raw o), dL/dc.
template <typename D, typename T, typename O>
WEFT_HOST_DEVICE inline auto lstm_output_gate_grad(const D& dh, const T& t, const O& o) {
  return dh * t * o * (1 - o);
}
template <typename D, typename O, typename T>
WEFT_HOST_DEVICE inline auto lstm_hidden_cell_grad(const D& dh, const O& o, const T& t) {
  return dh * o * tanh_derivative(t);
}

}  // namespace weft::backend::math
