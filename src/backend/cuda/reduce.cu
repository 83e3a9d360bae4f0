// CUDA reductions and the softmax family: over rows (one thread per feature, rows in order,
// as the CPU adds them), over segments (atomicAdd for sums; for maxima an atomicMax on a
// 64-bit key of (ordered value, inverted row) so the first row wins ties, as on the CPU),
// every element to one number (one block, double accumulators, deterministic), and softmax,
// log-softmax and softmax cross-entropy with one block per row, shifted by the row maximum.
#include <cmath>
#include <cstdint>

#include "../kernels.h"
#include "cuda_context.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

constexpr int kRowThreads = 256;  // threads per row in the softmax kernels (a warp multiple)

// The reduction of v over the block (sum or max), returned to every thread. `scratch` holds
// one value per warp.
template <bool kMax, typename T>
__device__ T block_reduce(T v, T* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other = __shfl_down_sync(0xffffffffu, v, offset);
    v = kMax ? (other > v ? other : v) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < warps; ++w)
    total = kMax ? (scratch[w] > total ? scratch[w] : total) : total + scratch[w];
  return total;
}

__global__ void reduce_rows_kernel(bool max, const float* x, float* y, std::int32_t* argmax,
                                   std::int64_t rows, std::int64_t size) {
  WEFT_GRID_STRIDE(f, size) {
    float best = 0.0f;
    std::int32_t arg = -1;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float v = x[r * size + f];
      if (!max) {
        best += v;
      } else if (arg < 0 || v > best) {
        best = v;
        arg = std::int32_t(r);
      }
    }
    y[f] = best;
    if (max) argmax[f] = arg;
  }
}

__global__ void segment_sum_kernel(const float* x, const std::int32_t* ids, float* y,
                                   std::int64_t rows, std::int64_t size) {
  WEFT_GRID_STRIDE(e, rows * size) {
    const std::int64_t r = e / size, f = e % size;
    atomicAdd(y + std::int64_t(ids[r]) * size + f, x[e]);
  }
}

// Order-preserving map of a float to unsigned bits (larger float, larger key), and back.
__device__ inline std::uint32_t ordered_bits(float v) {
  const std::uint32_t bits = __float_as_uint(v);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ inline float from_ordered_bits(std::uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

// key = ordered value in the high half, 0xffffffff - row in the low half: the maximum key is
// the largest value, and among equal values the first row. 0 means "no row yet".
__global__ void segment_max_kernel(const float* x, const std::int32_t* ids,
                                   unsigned long long* keys, std::int64_t rows, std::int64_t size) {
  WEFT_GRID_STRIDE(e, rows * size) {
    const std::int64_t r = e / size, f = e % size;
    const unsigned long long key = (static_cast<unsigned long long>(ordered_bits(x[e])) << 32) |
                                   (0xffffffffull - static_cast<unsigned long long>(r));
    atomicMax(keys + std::int64_t(ids[r]) * size + f, key);
  }
}

__global__ void segment_max_finish_kernel(const unsigned long long* keys, float* y,
                                          std::int32_t* argmax, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) {
    const unsigned long long key = keys[i];
    y[i] = key == 0 ? 0.0f : from_ordered_bits(std::uint32_t(key >> 32));
    argmax[i] = key == 0 ? -1 : std::int32_t(0xffffffffull - (key & 0xffffffffull));
  }
}

__global__ void scatter_by_argmax_kernel(const float* dy, const std::int32_t* argmax, float* dx,
                                         std::int64_t size, std::int64_t n) {
  // Each row belongs to one segment, so no two threads add into the same element.
  WEFT_GRID_STRIDE(i, n) {
    const std::int32_t r = argmax[i];
    if (r >= 0) dx[std::int64_t(r) * size + i % size] += dy[i];
  }
}

__global__ void reduce_all_kernel(bool squares, const float* x, float* y, std::int64_t n) {
  __shared__ double scratch[32];
  double total = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = x[i];
    total += squares ? v * v : v;
  }
  total = block_reduce<false>(total, scratch);
  if (threadIdx.x == 0) y[0] = float(total);
}

// Per row (one block): the row maximum and Σ exp(x - max).
__device__ inline float2 row_max_and_sum(const float* x, std::int64_t size, float* scratch) {
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < size; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_reduce<true>(m, scratch);
  float s = 0.0f;
  for (std::int64_t j = threadIdx.x; j < size; j += blockDim.x) s += expf(x[j] - m);
  s = block_reduce<false>(s, scratch);
  return {m, s};
}

__global__ void softmax_kernel(const float* x, bool log, float* y, std::int64_t rows,
                               std::int64_t size) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * size;
    float* out = y + r * size;
    const float2 ms = row_max_and_sum(in, size, scratch);
    const float shift = ms.x + logf(ms.y), inverse = 1.0f / ms.y;
    for (std::int64_t j = threadIdx.x; j < size; j += blockDim.x)
      out[j] = log ? in[j] - shift : expf(in[j] - ms.x) * inverse;
  }
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, bool log, float* dx,
                                        std::int64_t rows, std::int64_t size) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* out = y + r * size;
    const float* grad_out = dy + r * size;
    float* grad_in = dx + r * size;
    float s = 0.0f;  // Σ dy (log) or Σ y dy (softmax)
    for (std::int64_t j = threadIdx.x; j < size; j += blockDim.x)
      s += log ? grad_out[j] : out[j] * grad_out[j];
    s = block_reduce<false>(s, scratch);
    for (std::int64_t j = threadIdx.x; j < size; j += blockDim.x)
      grad_in[j] += log ? grad_out[j] - expf(out[j]) * s : out[j] * (grad_out[j] - s);
  }
}

__global__ void cross_entropy_kernel(const float* logits, const std::int32_t* labels, float* losses,
                                     float* probs, std::int64_t rows, std::int64_t classes) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = logits + r * classes;
    float* p = probs + r * classes;
    const float2 ms = row_max_and_sum(in, classes, scratch);
    const float inverse = 1.0f / ms.y;
    for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      p[j] = expf(in[j] - ms.x) * inverse;
    // -log softmax(x)[l] = log Σ exp(x - max) - (x[l] - max)
    if (threadIdx.x == 0) losses[r] = logf(ms.y) - (in[labels[r]] - ms.x);
  }
}

__global__ void cross_entropy_backward_kernel(const float* probs, const std::int32_t* labels,
                                              const float* dlosses, float* dlogits,
                                              std::int64_t classes, std::int64_t n) {
  WEFT_GRID_STRIDE(e, n) {
    const std::int64_t r = e / classes, j = e % classes;
    dlogits[e] += (probs[e] - (j == labels[r] ? 1.0f : 0.0f)) * dlosses[r];
  }
}

unsigned row_grid(std::int64_t rows) {
  return unsigned(rows < 1 ? 1 : (rows > (1 << 20) ? (1 << 20) : rows));
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& x, Tensor& y, Tensor* argmax) {
  const std::int64_t rows = x.rows(), size = x.row_size();
  WEFT_ASSERT(x.rank() >= 1 && y.numel() == size);
  const bool max = op == ReduceOp::kMax;
  WEFT_ASSERT(!max || (argmax != nullptr && argmax->numel() == size));
  if (size == 0) return;
  reduce_rows_kernel<<<grid_for(size), kThreads, 0, stream()>>>(
      max, x.data<float>(), y.data<float>(), max ? argmax->data<std::int32_t>() : nullptr, rows,
      size);
  check_launch("reduce_rows");
}

void segment_reduce(ReduceOp op, const Tensor& x, const Tensor& segment_ids, Tensor& y,
                    Tensor* argmax) {
  const std::int64_t rows = x.rows(), size = x.row_size(), segments = y.rows();
  WEFT_ASSERT(x.rank() >= 1 && y.rank() >= 1 && y.row_size() == size);
  WEFT_ASSERT(segment_ids.dtype() == DType::kInt32 && segment_ids.numel() == rows);
  const std::int64_t outputs = segments * size, inputs = rows * size;
  if (op == ReduceOp::kSum) {
    fill(y, 0.0f);
    if (inputs == 0) return;
    segment_sum_kernel<<<grid_for(inputs), kThreads, 0, stream()>>>(
        x.data<float>(), segment_ids.data<std::int32_t>(), y.data<float>(), rows, size);
    check_launch("segment_reduce (sum)");
    return;
  }
  WEFT_ASSERT(argmax != nullptr && argmax->numel() == outputs);
  if (outputs == 0) return;
  Tensor keys = Tensor::zeros(Shape{2 * outputs}, DType::kInt32, Device::kCuda);
  auto* pkeys = static_cast<unsigned long long*>(keys.raw_data());
  if (inputs > 0) {
    segment_max_kernel<<<grid_for(inputs), kThreads, 0, stream()>>>(
        x.data<float>(), segment_ids.data<std::int32_t>(), pkeys, rows, size);
    check_launch("segment_reduce (max)");
  }
  segment_max_finish_kernel<<<grid_for(outputs), kThreads, 0, stream()>>>(
      pkeys, y.data<float>(), argmax->data<std::int32_t>(), outputs);
  check_launch("segment_reduce (max, finish)");
}

void scatter_by_argmax(const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  const std::int64_t size = dx.row_size(), n = dy.numel();
  WEFT_ASSERT(n == argmax.numel() && argmax.dtype() == DType::kInt32);
  if (n == 0 || size == 0) return;
  scatter_by_argmax_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      dy.data<float>(), argmax.data<std::int32_t>(), dx.data<float>(), size, n);
  check_launch("scatter_by_argmax");
}

void reduce_all(ReduceAllOp op, const Tensor& x, Tensor& y) {
  WEFT_ASSERT(y.numel() == 1);
  reduce_all_kernel<<<1, 1024, 0, stream()>>>(op == ReduceAllOp::kSumSquares, x.data<float>(),
                                              y.data<float>(), x.numel());
  check_launch("reduce_all");
}

void softmax(const Tensor& x, bool log, Tensor& y) {
  WEFT_ASSERT(x.shape() == y.shape());
  if (x.row_size() == 0 || x.rows() == 0) return;
  softmax_kernel<<<row_grid(x.rows()), kRowThreads, 0, stream()>>>(
      x.data<float>(), log, y.data<float>(), x.rows(), x.row_size());
  check_launch("softmax");
}

void softmax_backward(const Tensor& y, const Tensor& dy, bool log, Tensor& dx) {
  WEFT_ASSERT(y.shape() == dy.shape() && y.shape() == dx.shape());
  if (y.row_size() == 0 || y.rows() == 0) return;
  softmax_backward_kernel<<<row_grid(y.rows()), kRowThreads, 0, stream()>>>(
      y.data<float>(), dy.data<float>(), log, dx.data<float>(), y.rows(), y.row_size());
  check_launch("softmax_backward");
}

void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& losses,
                           Tensor& probs) {
  WEFT_ASSERT(logits.rank() == 2 && logits.shape() == probs.shape());
  WEFT_ASSERT(labels.numel() == logits.rows() && losses.numel() == logits.rows());
  if (logits.rows() == 0) return;
  cross_entropy_kernel<<<row_grid(logits.rows()), kRowThreads, 0, stream()>>>(
      logits.data<float>(), labels.data<std::int32_t>(), losses.data<float>(), probs.data<float>(),
      logits.rows(), logits.row_size());
  check_launch("softmax_cross_entropy");
}

void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                    const Tensor& dlosses, Tensor& dlogits) {
  WEFT_ASSERT(probs.shape() == dlogits.shape());
  WEFT_ASSERT(labels.numel() == probs.rows() && dlosses.numel() == probs.rows());
  const std::int64_t n = probs.numel();
  if (n == 0) return;
  cross_entropy_backward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      probs.data<float>(), labels.data<std::int32_t>(), dlosses.data<float>(),
      dlogits.data<float>(), probs.row_size(), n);
  check_launch("softmax_cross_entropy_backward");
}

}  // namespace weft::backend::cuda
