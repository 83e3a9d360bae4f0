// CUDA elementwise kernels: fill, axpy, the unary functions and broadcasting binary
// arithmetic with their gradients, the strided block copy (its kernel, for every dtype, is in
// typed_elementwise.cu), the dropout mask and the fused LSTM cell state. One thread per element
// in grid-stride loops; a gradient that sums many elements into few (a broadcast operand) is
// reduced per thread first, then atomically.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../elementwise_math.h"
#include "../kernels.h"
#include "cuda_context.h"
#include "typed_elementwise.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::backend::cuda {
namespace {

using math::sigmoid_of;
using math::unary_backward_of;
using math::unary_of;

__global__ void fill_kernel(std::uint32_t* y, std::int64_t n, std::uint32_t bits) {
  WEFT_GRID_STRIDE(i, n) y[i] = bits;
}

__global__ void add_into_kernel(const float* x, float scale, float* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] += scale * x[i];
}

__global__ void unary_kernel(UnaryOp op, const float* x, float* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) y[i] = unary_of(op, x[i]);
}

__global__ void unary_backward_kernel(UnaryOp op, const float* x, const float* y, const float* dy,
                                      float* dx, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) dx[i] += unary_backward_of(op, x[i], y[i], dy[i]);
}

__device__ inline float binary_of(BinaryOp op, float u, float v) {
  switch (op) {
    case BinaryOp::kAdd:
      return u + v;
    case BinaryOp::kSub:
      return u - v;
    case BinaryOp::kMul:
      return u * v;
    case BinaryOp::kDiv:
      return u / v;
    case BinaryOp::kMinimum:
      return fminf(u, v);
    case BinaryOp::kMaximum:
      return fmaxf(u, v);
  }
  return 0.0f;
}

// (df/du, df/dv) at (u, v).
__device__ inline float2 binary_partials(BinaryOp op, float u, float v) {
  switch (op) {
    case BinaryOp::kAdd:
      return {1.0f, 1.0f};
    case BinaryOp::kSub:
      return {1.0f, -1.0f};
    case BinaryOp::kMul:
      return {v, u};
    case BinaryOp::kDiv:
      return {1.0f / v, -u / (v * v)};
    // Ties send the gradient to u, as on the CPU.
    case BinaryOp::kMinimum:
      return u <= v ? float2{1.0f, 0.0f} : float2{0.0f, 1.0f};
    case BinaryOp::kMaximum:
      return u >= v ? float2{1.0f, 0.0f} : float2{0.0f, 1.0f};
  }
  return {0.0f, 0.0f};
}

// y may alias a or b: each element is read before it is written, by the same thread.
__global__ void binary_kernel(BinaryOp op, const float* a, std::int64_t na, const float* b,
                              std::int64_t nb, float* y, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) {
    const float u = a[na == n ? i : i % na], v = b[nb == n ? i : i % nb];
    y[i] = binary_of(op, u, v);
  }
}

// The gradient of the operand(s) with n elements: one contribution per element.
__global__ void binary_backward_full_kernel(BinaryOp op, const float* a, std::int64_t na,
                                            const float* b, std::int64_t nb, const float* dy,
                                            float* da, float* db, std::int64_t n) {
  WEFT_GRID_STRIDE(i, n) {
    const float2 g = binary_partials(op, a[na == n ? i : i % na], b[nb == n ? i : i % nb]);
    if (da) da[i] += g.x * dy[i];
    if (db) db[i] += g.y * dy[i];
  }
}

// The gradient of the broadcast operand (p < n elements, the other has n): thread (j, group)
// sums the periods [group * per_group, ...) for element j, then adds atomically.
__global__ void binary_backward_small_kernel(BinaryOp op, const float* full, const float* small,
                                             bool small_is_a, const float* dy, float* dsmall,
                                             std::int64_t p, std::int64_t periods,
                                             std::int64_t per_group) {
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t j = t % p, group = t / p;
  const std::int64_t first = group * per_group;
  if (first >= periods) return;
  const std::int64_t last = first + per_group < periods ? first + per_group : periods;
  const float s = small[j];
  float total = 0.0f;
  for (std::int64_t r = first; r < last; ++r) {
    const std::int64_t i = r * p + j;
    const float2 g = small_is_a ? binary_partials(op, s, full[i]) : binary_partials(op, full[i], s);
    total += (small_is_a ? g.x : g.y) * dy[i];
  }
  atomicAdd(dsmall + j, total);
}

__global__ void dropout_mask_kernel(float keep_prob, std::uint64_t seed, float* mask,
                                    std::int64_t n) {
  const float kept = 1.0f / keep_prob;
  WEFT_GRID_STRIDE(i, n) {
    // The CPU's draw exactly: the top 24 bits of mix64(seed, i), scaled into [0, 1).
    const float u = float(mix64(seed, std::uint64_t(i)) >> 40) * 0x1.0p-24f;
    mask[i] = u < keep_prob ? kept : 0.0f;
  }
}

// One thread per (row, unit): gates row = [f_1..f_K | i | g], children row = [x_1..x_K].
// With `activated` (the gates themselves, for lstm_cell_state_activating) the thread writes its
// unit's K + 2 activations over its gates: no two threads touch one element.
__global__ void lstm_cell_state_kernel(const float* gates, float* activated, const float* children,
                                       const float* mask, float* c, std::int64_t rows,
                                       std::int64_t n, std::int64_t k, std::int64_t stride) {
  WEFT_GRID_STRIDE(e, rows * n) {
    const std::int64_t r = e / n, u = e % n;
    const std::int64_t gate0 = r * stride + u;
    const float* g = gates + gate0;
    const float* x = children + r * k * n + u;
    const float candidate = tanhf(g[(k + 1) * n]);
    const float input = sigmoid_of(g[k * n]);
    float total = input * (mask ? candidate * mask[e] : candidate);
    for (std::int64_t child = 0; child < k; ++child) {
      const float f = sigmoid_of(g[child * n]);
      if (activated) activated[gate0 + child * n] = f;
      total += f * x[child * n];
    }
    if (activated) {
      activated[gate0 + k * n] = input;
      activated[gate0 + (k + 1) * n] = candidate;
    }
    c[e] = total;
  }
}

// `activated`: gates holds the activations lstm_cell_state_kernel wrote over them.
__global__ void lstm_cell_state_backward_kernel(const float* gates, const float* children,
                                                const float* mask, const float* dc, float* dgates,
                                                float* dchildren, std::int64_t rows, std::int64_t n,
                                                std::int64_t k, std::int64_t stride,
                                                bool activated) {
  WEFT_GRID_STRIDE(e, rows * n) {
    const std::int64_t r = e / n, u = e % n;
    const std::int64_t gate0 = r * stride + u, child0 = r * k * n + u;
    const float d = dc[e];
    for (std::int64_t child = 0; child < k; ++child) {
      const float raw = gates[gate0 + child * n];
      const float f = activated ? raw : sigmoid_of(raw);
      if (dgates)
        dgates[gate0 + child * n] +=
            math::lstm_forget_gate_grad(d, children[child0 + child * n], f);
      if (dchildren) dchildren[child0 + child * n] += math::lstm_child_state_grad(d, f);
    }
    if (!dgates) continue;
    const float dm = mask ? d * mask[e] : d;
    const float i = activated ? gates[gate0 + k * n] : sigmoid_of(gates[gate0 + k * n]);
    const float t = activated ? gates[gate0 + (k + 1) * n] : tanhf(gates[gate0 + (k + 1) * n]);
    dgates[gate0 + k * n] += math::lstm_input_gate_grad(dm, t, i);
    dgates[gate0 + (k + 1) * n] += math::lstm_candidate_grad(dm, i, t);
  }
}

__global__ void lstm_hidden_kernel(const float* gates, const float* c, float* h, std::int64_t rows,
                                   std::int64_t n, std::int64_t stride, std::int64_t offset) {
  WEFT_GRID_STRIDE(e, rows * n) {
    const std::int64_t r = e / n, u = e % n;
    h[e] = sigmoid_of(gates[r * stride + offset + u]) * tanhf(c[e]);
  }
}

__global__ void lstm_hidden_backward_kernel(const float* gates, const float* c, const float* dh,
                                            float* dgates, float* dc, std::int64_t rows,
                                            std::int64_t n, std::int64_t stride,
                                            std::int64_t offset) {
  WEFT_GRID_STRIDE(e, rows * n) {
    const std::int64_t r = e / n, u = e % n;
    const float o = sigmoid_of(gates[r * stride + offset + u]);
    const float t = tanhf(c[e]);
    if (dgates) dgates[r * stride + offset + u] += math::lstm_output_gate_grad(dh[e], t, o);
    if (dc) dc[e] += math::lstm_hidden_cell_grad(dh[e], o, t);
  }
}

}  // namespace

void fill(Tensor& y, float value) {
  if (y.dtype() != DType::kFloat32) return typed::fill(y, value);
  const std::int64_t n = y.numel();
  if (n == 0) return;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  fill_kernel<<<grid_for(n), kThreads, 0, stream()>>>(static_cast<std::uint32_t*>(y.raw_data()), n,
                                                      bits);
  check_launch("fill");
}

void add_into(const Tensor& x, float scale, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel());
  const std::int64_t n = y.numel();
  if (n == 0) return;
  add_into_kernel<<<grid_for(n), kThreads, 0, stream()>>>(x.data<float>(), scale, y.data<float>(),
                                                          n);
  check_launch("add_into");
}

void unary(UnaryOp op, const Tensor& x, Tensor& y) {
  WEFT_ASSERT(x.numel() == y.numel());
  if (x.dtype() != DType::kFloat32) return typed::unary(op, x, y);
  const std::int64_t n = y.numel();
  if (n == 0) return;
  unary_kernel<<<grid_for(n), kThreads, 0, stream()>>>(op, x.data<float>(), y.data<float>(), n);
  check_launch("unary");
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  WEFT_ASSERT(x.numel() == dx.numel() && dy.numel() == dx.numel());
  const std::int64_t n = dx.numel();
  if (n == 0) return;
  unary_backward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      op, x.data<float>(), y.data<float>(), dy.data<float>(), dx.data<float>(), n);
  check_launch("unary_backward");
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  if (y.dtype() != DType::kFloat32) return typed::binary(op, a, b, y);
  const std::int64_t n = y.numel();
  if (n == 0) return;
  WEFT_ASSERT(a.numel() == n || b.numel() == n);
  binary_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      op, a.data<float>(), a.numel(), b.data<float>(), b.numel(), y.data<float>(), n);
  check_launch("binary");
}

void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                     Tensor* db) {
  const std::int64_t n = dy.numel(), na = a.numel(), nb = b.numel();
  WEFT_ASSERT(na == n || nb == n);
  if (n == 0) return;
  float* pda = da ? da->data<float>() : nullptr;
  float* pdb = db ? db->data<float>() : nullptr;
  // Full-size gradients first (one contribution per element) ...
  float* full_da = na == n ? pda : nullptr;
  float* full_db = nb == n ? pdb : nullptr;
  if (full_da || full_db) {
    binary_backward_full_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
        op, a.data<float>(), na, b.data<float>(), nb, dy.data<float>(), full_da, full_db, n);
    check_launch("binary_backward");
  }
  // ... then the broadcast operand's, summed over the periods it was used in.
  const bool small_is_a = na < n;
  float* dsmall = small_is_a ? pda : (nb < n ? pdb : nullptr);
  if (dsmall == nullptr) return;
  const std::int64_t p = small_is_a ? na : nb, periods = n / p;
  const std::int64_t groups = std::max<std::int64_t>(
      1, std::min<std::int64_t>(periods, (std::int64_t(1) << 16) / std::max<std::int64_t>(p, 1)));
  const std::int64_t per_group = (periods + groups - 1) / groups;
  const std::int64_t threads = p * groups;
  binary_backward_small_kernel<<<unsigned((threads + kThreads - 1) / kThreads), kThreads, 0,
                                 stream()>>>(op, small_is_a ? b.data<float>() : a.data<float>(),
                                             small_is_a ? a.data<float>() : b.data<float>(),
                                             small_is_a, dy.data<float>(), dsmall, p, periods,
                                             per_group);
  check_launch("binary_backward (broadcast operand)");
}

void copy_blocks(const Tensor& src, std::int64_t src_offset, std::int64_t src_stride, Tensor& dst,
                 std::int64_t dst_offset, std::int64_t dst_stride, std::int64_t blocks,
                 std::int64_t block_size, bool accumulate) {
  WEFT_ASSERT(src.dtype() == dst.dtype() && blocks >= 0 && block_size >= 0);
  const std::int64_t n = blocks * block_size;
  if (n == 0) return;
  WEFT_ASSERT(src_offset + (blocks - 1) * src_stride + block_size <= src.numel());
  WEFT_ASSERT(dst_offset + (blocks - 1) * dst_stride + block_size <= dst.numel());
  typed::copy_blocks(src, src_offset, src_stride, dst, dst_offset, dst_stride, blocks, block_size,
                     accumulate);  // every dtype, float32 included
}

void dropout_mask(float keep_prob, std::uint64_t seed, Tensor& mask) {
  WEFT_ASSERT(keep_prob > 0.0f && keep_prob <= 1.0f);
  const std::int64_t n = mask.numel();
  if (n == 0) return;
  dropout_mask_kernel<<<grid_for(n), kThreads, 0, stream()>>>(keep_prob, seed, mask.data<float>(),
                                                              n);
  check_launch("dropout_mask");
}

namespace {
const float* data_or_null(const Tensor* t) { return t ? t->data<float>() : nullptr; }
float* data_or_null(Tensor* t) { return t ? t->data<float>() : nullptr; }

void cell_state(const Tensor& gates, Tensor* activated, const Tensor& children,
                const Tensor* candidate_mask, Tensor& c, const char* name) {
  const auto [rows, n, k, stride] = math::lstm_cell_shape(gates, children, c.row_size());
  if (rows == 0) return;
  lstm_cell_state_kernel<<<grid_for(rows * n), kThreads, 0, stream()>>>(
      gates.data<float>(), data_or_null(activated), children.data<float>(),
      data_or_null(candidate_mask), c.data<float>(), rows, n, k, stride);
  check_launch(name);
}

}  // namespace

void lstm_cell_state(const Tensor& gates, const Tensor& children, const Tensor* candidate_mask,
                     Tensor& c) {
  cell_state(gates, nullptr, children, candidate_mask, c, "lstm_cell_state");
}

void lstm_cell_state_activating(Tensor& gates, const Tensor* bias, const Tensor& children,
                                const Tensor* candidate_mask, Tensor& c) {
  if (bias) cuda::binary(BinaryOp::kAdd, gates, *bias, gates);  // a pass of its own on the device
  cell_state(gates, &gates, children, candidate_mask, c, "lstm_cell_state_activating");
}

// The bias, then the activation, in place: two passes on the device.
void bias_activation(const Tensor& bias, UnaryOp op, Tensor& y) {
  cuda::binary(BinaryOp::kAdd, y, bias, y);
  cuda::unary(op, y, y);
}

namespace {

void cell_state_backward(const Tensor& gates, const Tensor& children, const Tensor* candidate_mask,
                         const Tensor& dc, Tensor* dgates, bool dgates_fresh, Tensor* dchildren,
                         bool dchildren_fresh, bool activated, const char* name) {
  const auto [rows, n, k, stride] = math::lstm_cell_shape(gates, children, dc.row_size());
  if (rows == 0 || (!dgates && !dchildren)) return;
  // Fresh buffers are cleared, then added into, as the others are.
  if (dgates && dgates_fresh) fill(*dgates, 0.0f);
  if (dchildren && dchildren_fresh) fill(*dchildren, 0.0f);
  lstm_cell_state_backward_kernel<<<grid_for(rows * n), kThreads, 0, stream()>>>(
      gates.data<float>(), children.data<float>(), data_or_null(candidate_mask), dc.data<float>(),
      data_or_null(dgates), data_or_null(dchildren), rows, n, k, stride, activated);
  check_launch(name);
}

}  // namespace

void lstm_cell_state_backward(const Tensor& gates, const Tensor& children,
                              const Tensor* candidate_mask, const Tensor& dc, Tensor* dgates,
                              bool dgates_fresh, Tensor* dchildren, bool dchildren_fresh) {
  cell_state_backward(gates, children, candidate_mask, dc, dgates, dgates_fresh, dchildren,
                      dchildren_fresh, false, "lstm_cell_state_backward");
}

void lstm_cell_state_backward_activated(const Tensor& activations, const Tensor& children,
                                        const Tensor* candidate_mask, const Tensor& dc,
                                        Tensor* dgates, bool dgates_fresh, Tensor* dchildren,
                                        bool dchildren_fresh) {
  cell_state_backward(activations, children, candidate_mask, dc, dgates, dgates_fresh, dchildren,
                      dchildren_fresh, true, "lstm_cell_state_backward_activated");
}

void lstm_hidden(const Tensor& gates, std::int64_t offset, const Tensor& c, Tensor& h) {
  const std::int64_t rows = c.rows(), n = c.row_size(), stride = gates.row_size();
  WEFT_ASSERT(gates.rows() == rows && offset >= 0 && offset + n <= stride);
  if (rows * n == 0) return;
  lstm_hidden_kernel<<<grid_for(rows * n), kThreads, 0, stream()>>>(
      gates.data<float>(), c.data<float>(), h.data<float>(), rows, n, stride, offset);
  check_launch("lstm_hidden");
}

void lstm_hidden_backward(const Tensor& gates, std::int64_t offset, const Tensor& c,
                          const Tensor& dh, Tensor* dgates, bool dgates_fresh, Tensor* dc,
                          bool dc_fresh) {
  const std::int64_t rows = c.rows(), n = c.row_size(), stride = gates.row_size();
  WEFT_ASSERT(gates.rows() == rows && offset >= 0 && offset + n <= stride);
  if (rows * n == 0 || (!dgates && !dc)) return;
  // Fresh buffers are cleared, then added into, as the others are.
  if (dgates && dgates_fresh) fill(*dgates, 0.0f);
  if (dc && dc_fresh) fill(*dc, 0.0f);
  lstm_hidden_backward_kernel<<<grid_for(rows * n), kThreads, 0, stream()>>>(
      gates.data<float>(), c.data<float>(), dh.data<float>(), data_or_null(dgates),
      data_or_null(dc), rows, n, stride, offset);
  check_launch("lstm_hidden_backward");
}

}  // namespace weft::backend::cuda
