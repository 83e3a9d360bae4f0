// CPU elementwise kernels over every dtype: cast, comparisons and where, and the float64 and
// integer paths of fill, unary and binary (float32 keeps its vectorized kernels in
// elementwise.cpp). Integer arithmetic wraps around on overflow (two's complement, as NumPy
// and TensorFlow do) instead of being undefined; integer division floors, like Python's //.
#include "typed_elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Wrapping integer arithmetic through the unsigned type; plain arithmetic for floats.
template <typename T>
T add_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}
template <typename T>
T sub_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) - U(b));
  } else {
    return a - b;
  }
}
template <typename T>
T mul_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) * U(b));
  } else {
    return a * b;
  }
}
template <typename T>
T neg_of(T a) {
  return sub_of(T(0), a);
}
// Floor division; the minimum value divided by -1 wraps to itself; a zero divisor (which the
// ops reject first) gives 0 rather than a trap.
template <typename T>
T div_of(T a, T b) {
  if constexpr (kIsInteger<T>) {
    if (b == 0) return 0;
    if (b == -1) return neg_of(a);
    T q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}

template <typename T>
T binary_of(BinaryOp op, T a, T b) {
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
      return std::min(a, b);
    case BinaryOp::kMaximum:
      return std::max(a, b);
  }
  return T(0);
}

template <typename T>
T unary_of(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::kNeg:
      return neg_of(x);
    case UnaryOp::kAbs:
      return x < T(0) ? neg_of(x) : x;
    case UnaryOp::kRelu:
      return x > T(0) ? x : T(0);
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::kSigmoid:
        return T(1) / (T(1) + std::exp(-x));
      case UnaryOp::kTanh:
        return std::tanh(x);
      case UnaryOp::kExp:
        return std::exp(x);
      case UnaryOp::kLog:
        return std::log(x);
      case UnaryOp::kSoftplus:
        return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
      default:
        break;
    }
  }
  WEFT_ASSERT(false && "unary op not defined for this dtype");
  return T(0);
}

template <typename T>
bool compare_of(CompareOp op, T a, T b) {
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

template <typename To, typename From>
To converted(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (kIsInteger<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    // From(max) may round up past max (2^63 for int64), so >= saturates exactly there.
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    return To(v);
  } else {
    return To(v);  // integer narrowing wraps (defined since C++20); the rest is exact or rounds
  }
}

// Index of element i in an operand of `size` elements used periodically over n.
inline std::int64_t periodic(std::int64_t i, std::int64_t size, std::int64_t n) {
  return size == n ? i : i % size;
}

}  // namespace

namespace typed {

void fill(Tensor& y, float value) {
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    std::fill_n(y.data<T>(), y.numel(), converted<T>(value));
  });
}

void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel() && x.dtype() == y.dtype());
  visit_dtype(x.dtype(), [&](auto type) {
    using T = decltype(type);
    if constexpr (std::is_same_v<T, bool>) {
      WEFT_ASSERT(false && "no unary arithmetic on bool");
    } else {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (std::int64_t i = 0; i < y.numel(); ++i) out[i] = unary_of(op, in[i]);
    }
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  WEFT_ASSERT(a.dtype() == y.dtype() && b.dtype() == y.dtype());
  const std::int64_t n = y.numel(), na = a.numel(), nb = b.numel();
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    if constexpr (std::is_same_v<T, bool>) {
      WEFT_ASSERT(false && "no binary arithmetic on bool");
    } else {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* out = y.data<T>();
      for (std::int64_t i = 0; i < n; ++i)
        out[i] = binary_of(op, pa[periodic(i, na, n)], pb[periodic(i, nb, n)]);
    }
  });
}

}  // namespace typed

void cast(const Tensor& x, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel());
  const std::int64_t n = y.numel();
  visit_dtype(x.dtype(), [&](auto from_type) {
    using From = decltype(from_type);
    visit_dtype(y.dtype(), [&](auto to_type) {
      using To = decltype(to_type);
      const From* in = x.data<From>();
      To* out = y.data<To>();
      for (std::int64_t i = 0; i < n; ++i) out[i] = converted<To>(in[i]);
    });
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  WEFT_ASSERT(a.dtype() == b.dtype() && y.dtype() == DType::kBool);
  const std::int64_t n = y.numel(), na = a.numel(), nb = b.numel();
  bool* out = y.data<bool>();
  visit_dtype(a.dtype(), [&](auto type) {
    using T = decltype(type);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = compare_of(op, pa[periodic(i, na, n)], pb[periodic(i, nb, n)]);
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y) {
  WEFT_ASSERT(cond.dtype() == DType::kBool && cond.numel() == y.numel());
  WEFT_ASSERT(a.dtype() == y.dtype() && b.dtype() == y.dtype());
  const std::int64_t n = y.numel(), na = a.numel(), nb = b.numel();
  const bool* c = cond.data<bool>();
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* out = y.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = c[i] ? pa[periodic(i, na, n)] : pb[periodic(i, nb, n)];
  });
}

void where_backward(const Tensor& cond, const Tensor& dy, Tensor* da, Tensor* db) {
  WEFT_ASSERT(cond.numel() == dy.numel());
  const std::int64_t n = dy.numel();
  const bool* c = cond.data<bool>();
  const float* g = dy.data<float>();
  if (da) {
    float* out = da->data<float>();
    const std::int64_t na = da->numel();
    for (std::int64_t i = 0; i < n; ++i)
      if (c[i]) out[periodic(i, na, n)] += g[i];
  }
  if (db) {
    float* out = db->data<float>();
    const std::int64_t nb = db->numel();
    for (std::int64_t i = 0; i < n; ++i)
      if (!c[i]) out[periodic(i, nb, n)] += g[i];
  }
}

}  // namespace weft::backend::cpu
