// The row products of issue 42's argument model (kernels.def: pack_panels, product_read_rows,
// product_transposed_read_rows, product_write_rows): products whose operand rows are read, or
// whose result rows are written, where they lie (weft/backend/row_blocks.h), so a batched
// call's arguments are never gathered into a copy nor its gradients scattered out of one.
// One micro-kernel: a tile of up to six rows by one panel of columns (four AVX-512 vectors or
// two AVX2 ones), its accumulators in registers, over a weight packed once per recording into
// panels. A row's sums run in one order whatever the number of rows, their places or their
// companions (k is never split), so its result does not depend on the batch.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../kernels.h"
#include "weft/backend/cpu.h"
#include "weft/backend/row_blocks.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16, kVectors = 4;
#else
constexpr int kLanes = 8, kVectors = 2;  // AVX2: 6 x 16 tiles, 12 of the 16 registers
#endif
constexpr std::int64_t kPanel = kLanes * kVectors;  // columns per panel
constexpr int kTileRows = 6;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

// Up to six rows of sums over one panel of columns, held in registers.
template <int R>
struct Tile {
  Vec acc[R][kVectors] = {};

  // acc[r] += a[r] * b, for one step of the sum.
  void add(const float* b, const float (&a)[R]) {
    Vec bv[kVectors];
#pragma GCC unroll 8
    for (int j = 0; j < kVectors; ++j) std::memcpy(&bv[j], b + j * kLanes, sizeof(Vec));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kVectors; ++j) acc[r][j] += bv[j] * a[r];
  }
  // acc[r] += sum_t rows[r][t] * panel row t, for t < width.
  void add_rows(const float* const (&rows)[R], std::int64_t width, const float* panel) {
    for (std::int64_t t = 0; t < width; ++t) {
      float a[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[r] = rows[r][t];
      add(panel + t * kPanel, a);
    }
  }
  const float* sums(int r) const { return reinterpret_cast<const float*>(&acc[r][0]); }
};

std::int64_t panels_for(std::int64_t columns) { return (columns + kPanel - 1) / kPanel; }

// Threads for `panels` independent panels of `flops` work in all: one below ~1 MFLOP, where
// waking the pool costs more than it saves.
int threads_for(std::int64_t panels, double flops) {
  if (flops < 1e6) return 1;
  return int(std::clamp<std::int64_t>(panels, 1, num_threads()));
}

// For panel q of `packed` and each tile of a's rows, in order: the tile's sums over all of a's
// blocks, handed to emit(q, row, sums) row by row. Rows tiles of six, then one of the rest.
template <int R, typename Emit>
void tile_of_rows(const RowBlocks& a, std::int64_t first, const float* panel, std::int64_t q,
                  Emit& emit) {
  Tile<R> tile;
  std::int64_t offset = 0;
  for (std::size_t p = 0; p < a.widths.size(); ++p) {
    const float* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = a.at(p, first + r);
    tile.add_rows(rows, a.widths[p], panel + offset * kPanel);
    offset += a.widths[p];
  }
  for (int r = 0; r < R; ++r) emit(q, first + r, tile.sums(r));
}

template <typename Emit>
void panel_times_rows(const RowBlocks& a, const float* panel, std::int64_t q, Emit& emit) {
  std::int64_t i = 0;
  for (; i + kTileRows <= a.rows; i += kTileRows) tile_of_rows<kTileRows>(a, i, panel, q, emit);
  switch (a.rows - i) {
    case 1:
      return tile_of_rows<1>(a, i, panel, q, emit);
    case 2:
      return tile_of_rows<2>(a, i, panel, q, emit);
    case 3:
      return tile_of_rows<3>(a, i, panel, q, emit);
    case 4:
      return tile_of_rows<4>(a, i, panel, q, emit);
    case 5:
      return tile_of_rows<5>(a, i, panel, q, emit);
    default:
      return;
  }
}

// a · B for B packed ([panels, k, kPanel]), each output row handed to emit as its panels finish.
template <typename Emit>
void rows_times_packed(const RowBlocks& a, const Tensor& packed, int threads, Emit emit) {
  const std::int64_t panels = packed.shape()[0], k = packed.shape()[1];
  WEFT_ASSERT(packed.shape()[2] == kPanel && k == a.width());
  const float* base = packed.data<float>();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t q = 0; q < panels; ++q) panel_times_rows(a, base + q * k * kPanel, q, emit);
}

}  // namespace

void pack_panels(const Tensor& b, bool transpose, Tensor& packed) {
  const std::int64_t k = transpose ? b.row_size() : b.rows();
  const std::int64_t n = transpose ? b.rows() : b.row_size();
  const std::int64_t panels = panels_for(n);
  packed = Tensor::empty(Shape{panels, k, kPanel}, DType::kFloat32, Device::kCpu);
  const float* in = b.data<float>();
  float* out = packed.data<float>();
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t t = 0; t < k; ++t) {
      float* row = out + (q * k + t) * kPanel;
      for (std::int64_t j = 0; j < kPanel; ++j) {
        const std::int64_t c = q * kPanel + j;
        row[j] = c >= n ? 0.0f : transpose ? in[c * k + t] : in[t * n + c];
      }
    }
}

void product_read_rows(const RowBlocks& x, const Tensor& packed, Tensor& y) {
  const std::int64_t n = y.row_size();
  float* out = y.data<float>();
  auto store = [&](std::int64_t q, std::int64_t row, const float* sums) {
    std::memcpy(out + row * n + q * kPanel, sums,
                std::size_t(std::min(kPanel, n - q * kPanel)) * sizeof(float));
  };
  rows_times_packed(x, packed,
                    threads_for(packed.shape()[0], 2.0 * double(y.numel()) * double(x.width())),
                    store);
}

void product_write_rows(const Tensor& dy, const Tensor& packed, const RowBlocks& dx) {
  // dy's rows as blocks of their own, so one tile serves both products.
  const RowBlocks a =
      RowBlocks::of_dense(const_cast<float*>(dy.data<float>()), dy.rows(), dy.row_size());
  const std::int64_t n = dx.width();
  auto write = [&](std::int64_t q, std::int64_t row, const float* sums) {
    const std::int64_t end = std::min(n, (q + 1) * kPanel);
    for (std::int64_t c = q * kPanel; c < end;) {
      const auto [p, column] = dx.locate(c);
      const std::int64_t count = std::min(end - c, dx.widths[p] - column);
      float* to = dx.at(p, row) + column;
      const float* from = sums + (c - q * kPanel);
      if (dx.adds(p, row))
        for (std::int64_t j = 0; j < count; ++j) to[j] += from[j];
      else
        std::memcpy(to, from, std::size_t(count) * sizeof(float));
      c += count;
    }
  };
  // One thread: two blocks of a row may be one chunk row (a value that is both children of a
  // node), whose panels must then be written in order.
  rows_times_packed(a, packed, 1, write);
}

namespace {

// Rows of x summed over per pass over dw: their blocks stay in L1/L2 while every tile of dw's
// panel takes their share (a pass over all rows per tile left x's rows in memory).
constexpr std::int64_t kSummedRows = 64;

struct RowRange {
  std::int64_t begin, end;
};

// dw rows [first, first + R) of block p, panel q: sum over i in `rows` of
// x.at(p, i)[first + r] * dy_i.
template <int R>
void transposed_tile(const RowBlocks& x, RowRange rows, std::size_t p, std::int64_t first,
                     const float* dy, std::int64_t ld, float beta, float* dw, std::int64_t ldw,
                     std::int64_t columns) {
  Tile<R> tile;
  for (std::int64_t i = rows.begin; i < rows.end; ++i) {
    const float* row = x.at(p, i) + first;
    float a[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r] = row[r];
    tile.add(dy + i * ld, a);
  }
  for (int r = 0; r < R; ++r) {
    float* out = dw + (first + r) * ldw;
    const float* sums = tile.sums(r);
    if (beta == 0.0f)
      std::memcpy(out, sums, std::size_t(columns) * sizeof(float));
    else if (beta == 1.0f)
      for (std::int64_t j = 0; j < columns; ++j) out[j] += sums[j];
    else
      for (std::int64_t j = 0; j < columns; ++j) out[j] = beta * out[j] + sums[j];
  }
}

void transposed_block(const RowBlocks& x, RowRange rows, std::size_t p, std::int64_t offset,
                      const float* dy, std::int64_t ld, float beta, float* dw, std::int64_t ldw,
                      std::int64_t columns) {
  const std::int64_t width = x.widths[p];
  float* out = dw + offset * ldw;
  std::int64_t t = 0;
  for (; t + kTileRows <= width; t += kTileRows)
    transposed_tile<kTileRows>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
  switch (width - t) {
    case 1:
      return transposed_tile<1>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
    case 2:
      return transposed_tile<2>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
    case 3:
      return transposed_tile<3>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
    case 4:
      return transposed_tile<4>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
    case 5:
      return transposed_tile<5>(x, rows, p, t, dy, ld, beta, out, ldw, columns);
    default:
      return;
  }
}

}  // namespace

// Below this many rows a tile's sums are too short to pay for its read-modify-write of dw: the
// rows are copied into one small matrix first, as a product's own packing, for sgemm.
constexpr std::int64_t kFewRows = 16;

void product_transposed_read_rows(const RowBlocks& x, const Tensor& dy, float beta, Tensor& dw) {
  if (x.rows < kFewRows) {
    Tensor packed = Tensor::empty(Shape{x.rows, x.width()}, DType::kFloat32, Device::kCpu);
    float* to = packed.data<float>();
    for (std::int64_t i = 0; i < x.rows; ++i)
      for (std::size_t p = 0; p < x.widths.size(); ++p) {
        std::memcpy(to, x.at(p, i), std::size_t(x.widths[p]) * sizeof(float));
        to += x.widths[p];
      }
    return gemm(packed, true, dy, false, 1.0f, beta, dw);
  }
  const std::int64_t n = dy.row_size(), panels = panels_for(n);
  // The last panel's columns past n read from a zero-padded copy of dy's last columns.
  std::vector<float> tail;
  if (n % kPanel != 0) {
    const std::int64_t start = (panels - 1) * kPanel, count = n - start;
    tail.assign(std::size_t(x.rows * kPanel), 0.0f);
    for (std::int64_t i = 0; i < x.rows; ++i)
      std::memcpy(tail.data() + i * kPanel, dy.data<float>() + i * n + start,
                  std::size_t(count) * sizeof(float));
  }
  const int threads = threads_for(panels, 2.0 * double(dw.numel()) * double(x.rows));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t q = 0; q < panels; ++q) {
    const bool padded = q == panels - 1 && !tail.empty();
    const float* panel = padded ? tail.data() : dy.data<float>() + q * kPanel;
    const std::int64_t ld = padded ? kPanel : n, columns = std::min(kPanel, n - q * kPanel);
    for (std::int64_t begin = 0; begin < x.rows; begin += kSummedRows) {
      const RowRange rows{begin, std::min(x.rows, begin + kSummedRows)};
      std::int64_t offset = 0;
      for (std::size_t p = 0; p < x.widths.size(); ++p) {
        transposed_block(x, rows, p, offset, panel, ld, begin == 0 ? beta : 1.0f,
                         dw.data<float>() + q * kPanel, n, columns);
        offset += x.widths[p];
      }
    }
  }
}

}  // namespace weft::backend::cpu
