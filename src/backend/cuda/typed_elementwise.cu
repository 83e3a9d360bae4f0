// CUDA elementwise kernels over every dtype: cast, comparisons and where, and the float64 and
// integer paths of fill, copy, unary and binary. The per-element math is the CPU's own
// (../elementwise_math.h): integers wrap on overflow, integer division floors, float to
// integer saturates, NaN to integer is 0. One thread per element in grid-stride loops.
#include <cstdint>
#include <type_traits>

#include "../elementwise_math.h"
#include "cuda_context.h"
#include "typed_elementwise.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

using namespace math;  // the per-element functions (../elementwise_math.h)

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
      out = accumulate ? add_of(out, v) : v;
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
    fill_kernel<<<grid_for(n), kThreads, 0, stream()>>>(y.data<T>(), converted<T>(value), n);
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
