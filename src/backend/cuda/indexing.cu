// CUDA row indexing: gather_rows, scatter_add_rows (atomicAdd, so duplicated indices sum, in
// an order that may differ from run to run), find_bad_index (the one kernel here whose
// result the host reads back, so the op can throw), and the loom's gather of argument rows
// from many chunks and its scatter-add gradient. The loom's row references are already on the
// device (a segment of the batch's one packed upload, loom/batch_plan.h) and the table of
// chunks goes with the launch, as a kernel parameter: a gather copies nothing of its own.
// References still on the host travel with a table that is too long for a parameter in one
// staged upload.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../device_memory.h"
#include "../kernels.h"
#include "cuda_context.h"
#include "weft/core/error.h"

namespace weft::backend::cuda {
namespace {

// Words of a dtype's size (1, 4 or 8 bytes): gathers copy words whatever the dtype.
template <typename Word>
__global__ void gather_rows_kernel(const Word* x, const std::int32_t* idx, Word* y,
                                   std::int64_t row, std::int64_t n) {
  WEFT_GRID_STRIDE(e, n * row) {
    const std::int64_t i = e / row, j = e % row;
    y[e] = x[std::int64_t(idx[i]) * row + j];
  }
}

__global__ void scatter_add_rows_kernel(const float* x, const std::int32_t* idx, float* y,
                                        std::int64_t row, std::int64_t n) {
  WEFT_GRID_STRIDE(e, n * row) {
    const std::int64_t i = e / row, j = e % row;
    atomicAdd(y + std::int64_t(idx[i]) * row + j, x[e]);
  }
}

__global__ void find_bad_index_kernel(const std::int32_t* idx, std::int64_t n, std::int64_t limit,
                                      unsigned long long* first_bad) {
  WEFT_GRID_STRIDE(i, n) {
    if (idx[i] < 0 || idx[i] >= limit) atomicMin(first_bad, (unsigned long long)i);
  }
}

// A chunk as the kernels see it: its data and row width in elements.
struct ChunkEntry {
  void* data;
  std::int64_t width;
};

// The chunk table of a launch, passed by value: N entries at most (N * 16 bytes of the
// kernel's 4 KiB of parameters). __grid_constant__ keeps it in the parameter bank (no copy per
// thread); a warp's threads mostly read one entry (a row's elements), a broadcast.
template <int N>
struct InlineTable {
  ChunkEntry entries[N];
  __device__ const ChunkEntry& operator[](std::int32_t i) const { return entries[i]; }
};
constexpr int kSmallTable = 16;
constexpr int kLargeTable = 200;

// A table uploaded with the references (more chunks than kLargeTable, or host references).
struct DeviceTable {
  const ChunkEntry* entries;
  __device__ const ChunkEntry& operator[](std::int32_t i) const { return entries[i]; }
};

template <typename Word, typename Table>
__global__ void gather_chunk_rows_kernel(const __grid_constant__ Table chunks,
                                         const std::int32_t* refs, Word* dst, std::int64_t dst_row,
                                         std::int64_t column, std::int64_t max_width,
                                         std::int64_t n) {
  WEFT_GRID_STRIDE(e, n * max_width) {
    const std::int64_t i = e / max_width, j = e % max_width;
    const ChunkEntry chunk = chunks[refs[2 * i]];
    if (j >= chunk.width) continue;
    const auto* src = static_cast<const Word*>(chunk.data);
    dst[i * dst_row + column + j] = src[std::int64_t(refs[2 * i + 1]) * chunk.width + j];
  }
}

template <typename Table>
__global__ void scatter_add_chunk_rows_kernel(const float* src, std::int64_t src_row,
                                              std::int64_t column, const std::int32_t* refs,
                                              const __grid_constant__ Table grads,
                                              std::int64_t max_width, std::int64_t n) {
  WEFT_GRID_STRIDE(e, n * max_width) {
    const std::int64_t i = e / max_width, j = e % max_width;
    const ChunkEntry grad = grads[refs[2 * i]];
    if (grad.data == nullptr || j >= grad.width) continue;
    atomicAdd(static_cast<float*>(grad.data) + std::int64_t(refs[2 * i + 1]) * grad.width + j,
              src[i * src_row + column + j]);
  }
}

// The chunk table followed by the refs (when they are on the host), as one device upload;
// returns the device table and the device refs.
struct StagedRefs {
  Tensor storage;
  const ChunkEntry* table;
  const std::int32_t* refs;
};

StagedRefs stage(const std::vector<ChunkEntry>& table, const Tensor& refs) {
  const std::size_t table_bytes = table.size() * sizeof(ChunkEntry);
  const bool host_refs = refs.device() == Device::kCpu;
  std::vector<unsigned char> bytes(table_bytes + (host_refs ? refs.nbytes() : 0));
  std::memcpy(bytes.data(), table.data(), table_bytes);
  if (host_refs) std::memcpy(bytes.data() + table_bytes, refs.raw_data(), refs.nbytes());
  StagedRefs staged;
  staged.storage = upload(bytes.data(), bytes.size());
  auto* base = static_cast<unsigned char*>(staged.storage.raw_data());
  staged.table = reinterpret_cast<const ChunkEntry*>(base);
  staged.refs = host_refs ? reinterpret_cast<const std::int32_t*>(base + table_bytes)
                          : refs.data<std::int32_t>();
  return staged;
}

template <int N>
InlineTable<N> inline_table(const std::vector<ChunkEntry>& table) {
  InlineTable<N> out{};
  std::copy(table.begin(), table.end(), out.entries);
  return out;
}

// Calls launch(table, refs) with the table by value when the references are on the device and
// it fits in a parameter, else uploaded (with the references when they are on the host).
template <typename Launch>
void with_table(const std::vector<ChunkEntry>& table, const Tensor& refs, Launch&& launch) {
  if (refs.device() == Device::kCuda && table.size() <= std::size_t(kLargeTable)) {
    const auto* device_refs = refs.data<std::int32_t>();
    if (table.size() <= std::size_t(kSmallTable))
      return launch(inline_table<kSmallTable>(table), device_refs);
    return launch(inline_table<kLargeTable>(table), device_refs);
  }
  const StagedRefs staged = stage(table, refs);
  launch(DeviceTable{staged.table}, staged.refs);
}

// Calls fn(Word{}) with the unsigned word type of dtype's size.
template <typename Fn>
void with_word(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1:
      return fn(std::uint8_t{});
    case 8:
      return fn(std::uint64_t{});
    default:
      return fn(std::uint32_t{});
  }
}

}  // namespace

void gather_rows(const Tensor& x, const Tensor& indices, Tensor& y) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32 && x.dtype() == y.dtype());
  WEFT_ASSERT(x.rank() >= 1 && y.rank() >= 1);
  const std::int64_t n = indices.numel(), row = x.row_size();
  WEFT_ASSERT(y.rows() == n && y.row_size() == row);
  if (n == 0 || row == 0) return;
  with_word(x.dtype(), [&](auto word) {
    using Word = decltype(word);
    gather_rows_kernel<<<grid_for(n * row), kThreads, 0, stream()>>>(
        static_cast<const Word*>(x.raw_data()), indices.data<std::int32_t>(),
        static_cast<Word*>(y.raw_data()), row, n);
  });
  check_launch("gather_rows");
}

void scatter_add_rows(const Tensor& x, const Tensor& indices, Tensor& y) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32 && x.rank() >= 1 && y.rank() >= 1);
  const std::int64_t n = indices.numel(), row = x.row_size();
  WEFT_ASSERT(x.rows() == n && y.row_size() == row);
  if (n == 0 || row == 0) return;
  scatter_add_rows_kernel<<<grid_for(n * row), kThreads, 0, stream()>>>(
      x.data<float>(), indices.data<std::int32_t>(), y.data<float>(), row, n);
  check_launch("scatter_add_rows");
}

void find_bad_index(const Tensor& indices, std::int64_t limit, std::int64_t& first_bad) {
  WEFT_ASSERT(indices.dtype() == DType::kInt32);
  first_bad = -1;
  const std::int64_t n = indices.numel();
  if (n == 0) return;
  Tensor result = Tensor::empty(Shape{2}, DType::kInt32, Device::kCuda);  // 8 bytes
  auto* flag = static_cast<unsigned long long*>(result.raw_data());
  check(cudaMemsetAsync(flag, 0xFF, sizeof(unsigned long long), stream()), "find_bad_index");
  find_bad_index_kernel<<<grid_for(n), kThreads, 0, stream()>>>(indices.data<std::int32_t>(), n,
                                                                limit, flag);
  check_launch("find_bad_index");
  unsigned long long host = 0;
  copy_bytes(&host, Device::kCpu, flag, Device::kCuda, sizeof host);  // waits: a read-back
  if (host != ~0ull) first_bad = std::int64_t(host);
}

void gather_chunk_rows(std::span<const Tensor> chunks, const Tensor& refs, Tensor& dst,
                       std::int64_t column) {
  const std::int64_t n = refs.rows();
  if (n == 0) return;
  std::vector<ChunkEntry> table;
  table.reserve(chunks.size());
  std::int64_t max_width = 0;
  for (const Tensor& chunk : chunks) {
    WEFT_ASSERT(chunk.device() == Device::kCuda && chunk.dtype() == dst.dtype());
    table.push_back({const_cast<void*>(chunk.raw_data()), chunk.row_size()});
    max_width = std::max(max_width, chunk.row_size());
  }
  if (max_width == 0) return;
  with_word(dst.dtype(), [&](auto word) {
    using Word = decltype(word);
    with_table(table, refs, [&](const auto& chunk_table, const std::int32_t* device_refs) {
      gather_chunk_rows_kernel<<<grid_for(n * max_width), kThreads, 0, stream()>>>(
          chunk_table, device_refs, static_cast<Word*>(dst.raw_data()), dst.row_size(), column,
          max_width, n);
    });
  });
  check_launch("gather_chunk_rows");
}

void scatter_add_chunk_rows(const Tensor& src, std::int64_t column, const Tensor& refs,
                            std::span<Tensor* const> grads,
                            std::span<std::uint8_t* const> written) {
  (void)written;  // records are the CPU's alone (scatter_add_argument_rows refuses them here)
  const std::int64_t n = refs.rows();
  if (n == 0) return;
  std::vector<ChunkEntry> table;
  table.reserve(grads.size());
  std::int64_t max_width = 0;
  for (Tensor* grad : grads) {
    if (grad == nullptr) {
      table.push_back({nullptr, 0});
      continue;
    }
    WEFT_ASSERT(grad->device() == Device::kCuda && grad->dtype() == DType::kFloat32);
    table.push_back({grad->raw_data(), grad->row_size()});
    max_width = std::max(max_width, grad->row_size());
  }
  if (max_width == 0) return;
  with_table(table, refs, [&](const auto& grad_table, const std::int32_t* device_refs) {
    scatter_add_chunk_rows_kernel<<<grid_for(n * max_width), kThreads, 0, stream()>>>(
        src.data<float>(), src.row_size(), column, device_refs, grad_table, max_width, n);
  });
  check_launch("scatter_add_chunk_rows");
}

}  // namespace weft::backend::cuda
