// CUDA elementwise kernels over every dtype: cast, comparisons and where, and the float64 and
// integer paths of fill, copy, unary and binary, with the CPU's semantics exactly (integers
// wrap on overflow, integer division floors, float to integer saturates, NaN to integer is 0).
// One thread per element in grid-stride loops.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda_context.h"
#include "typed_elementwise.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
__device__ T wrapped(BinaryOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return T(U(a) + U(b));
    case BinaryOp::kSub:
      return T(U(a) - U(b));
    case BinaryOp::kMul:
      return T(U(a) * U(b));
    default:
      return T(0);
  }
}

template <typename T>
__device__ T binary_of(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kMinimum:
      return a < b ? a : b;
    case BinaryOp::kMaximum:
      return a < b ? b : a;
    default:
      break;
  }
  if constexpr (kIsInteger<T>) {
    if (op != BinaryOp::kDiv) return wrapped(op, a, b);
    if (b == 0) return T(0);
    if (b == -1) return wrapped(BinaryOp::kSub, T(0), a);
    T q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    switch (op) {
      case BinaryOp::kAdd:
        return a + b;
      case BinaryOp::kSub:
        return a - b;
      case BinaryOp::kMul:
        return a * b;
      default:
        return a / b;
    }
  }
}

template <typename T>
__device__ T unary_of(UnaryOp op, T x) {
  if constexpr (kIsInteger<T>) {
    const T negated = wrapped(BinaryOp::kSub, T(0), x);
    switch (op) {
      case UnaryOp::kNeg:
        return negated;
      case UnaryOp::kAbs:
        return x < 0 ? negated : x;
      case UnaryOp::kRelu:
        return x > 0 ? x : T(0);
      default:
        return T(0);
    }
  } else {
    switch (op) {
      case UnaryOp::kNeg:
        return -x;
      case UnaryOp::kAbs:
        return x < T(0) ? -x : x;
      case UnaryOp::kRelu:
        return x > T(0) ? x : T(0);
      case UnaryOp::kSigmoid:
        return T(1) / (T(1) + exp(-x));
      case UnaryOp::kTanh:
        return tanh(x);
      case UnaryOp::kExp:
        return exp(x);
      case UnaryOp::kLog:
        return log(x);
      case UnaryOp::kSoftplus:
        return (x > T(0) ? x : T(0)) + log1p(exp(x < T(0) ? x : -x));
    }
    return T(0);
  }
}

template <typename T>
__device__ bool compare_of(CompareOp op, T a, T b) {
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
__device__ To converted(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (kIsInteger<To> && std::is_floating_point_v<From>) {
    if (v != v) return To(0);
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    return To(v);
  } else {
    return To(v);
  }
}

__device__ inline std::int64_t periodic(std::int64_t i, std::int64_t size, std::int64_t n) {
  return size == n ? i : i % size;
}

template <typename T>
__global__ void fill_kernel(T* y, T value, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = value;
}

template <typename T>
__global__ void copy_blocks_kernel(const T* src, std::int64_t src_stride, T* dst,
                                   std::int64_t dst_stride, std::int64_t block_size, std::int64_t n,
                                   bool accumulate) {
  WEFT_GRID_STRIDE(i, n) {
    const std::int64_t blk = i / block_size, j = i % block_size;
    const T v = src[blk * src_stride + j];
    T& out = dst[blk * dst_stride + j];
    if constexpr (kIsInteger<T>)
      out = accumulate ? wrapped(BinaryOp::kAdd, out, v) : v;
    else if constexpr (std::is_same_v<T, bool>)
      out = v;
    else
      out = accumulate ? out + v : v;
  }
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, const T* x, T* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = unary_of(op, x[i]);
}

template <typename T>
__global__ void binary_kernel(BinaryOp op, const T* a, std::int64_t na, const T* b, std::int64_t nb,
                              T* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = binary_of(op, a[periodic(i, na, n)], b[periodic(i, nb, n)]);
}

template <typename To, typename From>
__global__ void cast_kernel(const From* x, To* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = converted<To>(x[i]);
}

template <typename T>
__global__ void compare_kernel(CompareOp op, const T* a, std::int64_t na, const T* b,
                               std::int64_t nb, bool* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = compare_of(op, a[periodic(i, na, n)], b[periodic(i, nb, n)]);
}

template <typename T>
__global__ void where_kernel(const bool* cond, const T* a, std::int64_t na, const T* b,
                             std::int64_t nb, T* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = cond[i] ? a[periodic(i, na, n)] : b[periodic(i, nb, n)];
}

// Sums into an operand that may be periodic (several elements of dy onto one), atomically.
__global__ void where_backward_kernel(const bool* cond, const float* dy, float* d, std::int64_t nd,
                                      bool when, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) {
    if (cond[i] == when) atomicAdd(d + periodic(i, nd, n), dy[i]);
  }
}

}  // namespace

namespace typed {

void fill(Tensor& y, float value) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    T v;
    if constexpr (std::is_same_v<T, bool>)
      v = value != 0.0f;
    else if constexpr (kIsInteger<T>)
      v = value != value ? T(0) : T(value);
    else
      v = T(value);
    fill_kernel<<<grid_for(n), kThreads, 0, stream()>>>(y.data<T>(), v, n);
  });
  check_launch("fill");
}

void copy_blocks(const Tensor& src, std::int64_t src_offset, std::int64_t src_stride, Tensor& dst,
                 std::int64_t dst_offset, std::int64_t dst_stride, std::int64_t blocks,
                 std::int64_t block_size, bool accumulate) {
  const std::int64_t n = blocks * block_size;
  if (n == 0) return;
  visit_dtype(src.dtype(), [&](auto type) {
    using T = decltype(type);
    copy_blocks_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
        src.data<T>() + src_offset, src_stride, dst.data<T>() + dst_offset, dst_stride, block_size,
        n, accumulate);
  });
  check_launch("copy_blocks");
}

void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(x.dtype(), [&](auto type) {
    using T = decltype(type);
    if constexpr (!std::is_same_v<T, bool>)
      unary_kernel<<<grid_for(n), kThreads, 0, stream()>>>(op, x.data<T>(), y.data<T>(), n);
  });
  check_launch("unary");
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    if constexpr (!std::is_same_v<T, bool>)
      binary_kernel<<<grid_for(n), kThreads, 0, stream()>>>(op, a.data<T>(), a.numel(), b.data<T>(),
                                                            b.numel(), y.data<T>(), n);
  });
  check_launch("binary");
}

}  // namespace typed

void cast(const Tensor& x, Tensor& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(x.dtype(), [&](auto from_type) {
    using From = decltype(from_type);
    visit_dtype(y.dtype(), [&](auto to_type) {
      using To = decltype(to_type);
      cast_kernel<To, From>
          <<<grid_for(n), kThreads, 0, stream()>>>(x.data<From>(), y.data<To>(), n);
    });
  });
  check_launch("cast");
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(a.dtype(), [&](auto type) {
    using T = decltype(type);
    compare_kernel<<<grid_for(n), kThreads, 0, stream()>>>(op, a.data<T>(), a.numel(), b.data<T>(),
                                                           b.numel(), y.data<bool>(), n);
  });
  check_launch("compare");
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype(y.dtype(), [&](auto type) {
    using T = decltype(type);
    where_kernel<<<grid_for(n), kThreads, 0, stream()>>>(cond.data<bool>(), a.data<T>(), a.numel(),
                                                         b.data<T>(), b.numel(), y.data<T>(), n);
  });
  check_launch("where");
}

void where_backward(const Tensor& cond, const Tensor& dy, Tensor* da, Tensor* db) {
  const std::int64_t n = dy.numel();
  if (n == 0) return;
  if (da)
    where_backward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
        cond.data<bool>(), dy.data<float>(), da->data<float>(), da->numel(), true, n);
  if (db)
    where_backward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
        cond.data<bool>(), dy.data<float>(), db->data<float>(), db->numel(), false, n);
  check_launch("where_backward");
}

}  // namespace weft::backend::cuda
