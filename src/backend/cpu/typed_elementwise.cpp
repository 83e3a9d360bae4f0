// CPU elementwise kernels over every dtype: cast, comparisons and where, and the float64 and
// integer paths of fill, unary and binary (float32 keeps its vectorized kernels in
// elementwise.cpp). The per-element math, shared with CUDA, is in ../elementwise_math.h:
// integers wrap on overflow, integer division floors, float to integer saturates.
#include "typed_elementwise.h"

#include <algorithm>
#include <type_traits>

#include "../elementwise_math.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {

using namespace math;  // the per-element functions (../elementwise_math.h)

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
      WEFT_ASSERT(!kIsInteger<T> || op == UnaryOp::kNeg || op == UnaryOp::kAbs ||
                  op == UnaryOp::kRelu);
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
