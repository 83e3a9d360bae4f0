// CPU kernels of the loom's gather: copying argument rows out of the per-step value chunks
// into one contiguous batch (optionally at a column offset, for concatenated inputs), and
// scatter-adding the gradient rows back (writing the rows a gradient does not hold yet); and
// copying a column range of rows that lie where they were computed (RowBlocks).
#include <algorithm>
#include <cstring>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {

void gather_chunk_rows(std::span<const Tensor> chunks, const Tensor& refs, Tensor& dst,
                       std::int64_t column) {
  const std::int32_t* r = refs.data<std::int32_t>();
  const std::int64_t n = refs.rows();
  const std::int64_t dst_row = dst.row_size();
  char* out = static_cast<char*>(dst.raw_data());
  const std::int64_t bytes = std::int64_t(dtype_size(dst.dtype()));
  std::int64_t moved = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const Tensor& chunk = chunks[std::size_t(r[2 * i])];
    const std::int64_t width = chunk.row_size();
    moved += width * bytes;
    WEFT_ASSERT(r[2 * i + 1] < chunk.rows() && column + width <= dst_row);
    WEFT_ASSERT(chunk.dtype() == dst.dtype());
    std::memcpy(
        out + (i * dst_row + column) * bytes,
        static_cast<const char*>(chunk.raw_data()) + std::int64_t(r[2 * i + 1]) * width * bytes,
        std::size_t(width * bytes));
  }
  detail::record_moved_bytes(moved);
}

void scatter_add_chunk_rows(const Tensor& src, std::int64_t column, const Tensor& refs,
                            std::span<Tensor* const> grads,
                            std::span<std::uint8_t* const> written) {
  const std::int32_t* r = refs.data<std::int32_t>();
  const std::int64_t n = refs.rows();
  const std::int64_t src_row = src.row_size();
  const float* in = src.data<float>();
  std::int64_t moved = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t chunk = std::size_t(r[2 * i]);
    Tensor* grad = grads[chunk];
    if (grad == nullptr) continue;
    const std::int64_t width = grad->row_size(), row = r[2 * i + 1];
    float* target = grad->data<float>() + row * width;
    const float* source = in + i * src_row + column;
    std::uint8_t* record = written.empty() ? nullptr : written[chunk];
    moved += width * std::int64_t(sizeof(float));
    if (record != nullptr && !record[row]) {
      std::memcpy(target, source, std::size_t(width) * sizeof(float));
      record[row] = 1;
    } else {
      for (std::int64_t j = 0; j < width; ++j) target[j] += source[j];
    }
  }
  detail::record_moved_bytes(moved);
}

void gather_row_columns(const RowBlocks& x, std::int64_t column, Tensor& y) {
  const std::int64_t width = y.row_size();
  WEFT_ASSERT(y.rows() == x.rows && column >= 0 && column + width <= x.width());
  float* out = y.data<float>();
  for (std::int64_t i = 0; i < x.rows; ++i) {
    // The range may run over several of the row's blocks.
    for (std::int64_t done = 0; done < width;) {
      const RowBlocks::Column at = x.locate(column + done);
      const std::int64_t count = std::min(width - done, x.widths[at.block] - at.column);
      std::memcpy(out + i * width + done, x.at(at.block, i) + at.column,
                  std::size_t(count) * sizeof(float));
      done += count;
    }
  }
  detail::record_moved_bytes(x.rows * width * std::int64_t(sizeof(float)));
}

}  // namespace weft::backend::cpu
