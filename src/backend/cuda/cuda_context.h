// Shared by the CUDA backend's sources: the library's stream, error checks that turn CUDA
// failures into weft::Error, and pinned staging for small host tables that kernels read
// (the loom's row references). Everything runs on one stream, so the caching pool may hand a
// freed block to the next op at once: stream order puts the old readers first.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "weft/tensor/tensor.h"

namespace weft::backend::cuda {

// The stream every kernel, copy and cuBLAS call of this process is queued on (device 0;
// created on first use, after checking that a device exists).
cudaStream_t stream();

// Throws weft::Error("[cuda] <what>: <CUDA's message>") unless status is cudaSuccess.
void check(cudaError_t status, const char* what);
// After a kernel launch: reports a bad launch configuration (not asynchronous faults, which
// surface at the next synchronising call).
void check_launch(const char* kernel);

// A device copy of `bytes` of host data, queued on stream() through a pinned staging ring so
// the call returns without waiting for the device. The result is a CUDA tensor of int32 words
// (bytes rounded up to 4) that kernels queued afterwards may read.
Tensor upload(const void* host, std::size_t bytes);

// Threads per block for the simple kernels, and a grid covering n elements with
// grid-stride loops (capped so huge tensors reuse blocks instead of overflowing the grid).
constexpr int kThreads = 256;
inline unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

}  // namespace weft::backend::cuda

// for (i over [0, n)) spread over the grid's threads: the loop of the elementwise kernels (a
// grid from grid_for may be smaller than n).
#define WEFT_GRID_STRIDE(i, n)                                                        \
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t(gridDim.x) * blockDim.x)
