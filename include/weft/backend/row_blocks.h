// Rows read, or gradients written, where they lie (issue 42's argument model): a [rows, width]
// matrix whose column block p (widths[p] floats) of row i starts at pointers[p * rows + i], as a
// batched call's argument rows lie in the chunks of the loom steps that computed them. The
// kernels that take one (the row products and the LSTM cell, kernels.def) read their operand by
// index instead of from a gathered copy, and write gradients straight into the chunks'.
#pragma once

#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace weft::backend {

struct RowBlocks {
  std::int64_t rows = 0;
  std::vector<std::int64_t> widths;  // one per column block (the argument's positions)
  std::vector<float*> pointers;      // pointers[p * rows + i]: block p of row i
  // For a gradient written through the pointers, one byte per pointer: 1 adds into the row, 0
  // overwrites it (the first gradient to reach that row). Empty: every row is added into.
  std::vector<std::uint8_t> add;

  // Dense row-major [rows, width] matrices starting at `firsts`, side by side: row i is their
  // rows i, one block per matrix.
  static RowBlocks side_by_side(std::span<float* const> firsts, std::int64_t rows,
                                std::int64_t width) {
    RowBlocks blocks{rows, std::vector<std::int64_t>(firsts.size(), width), {}, {}};
    blocks.pointers.reserve(firsts.size() * std::size_t(rows));
    for (float* first : firsts)
      for (std::int64_t i = 0; i < rows; ++i) blocks.pointers.push_back(first + i * width);
    return blocks;
  }
  // The rows of a dense row-major [rows, width] matrix starting at `first`, as one block each.
  static RowBlocks of_dense(float* first, std::int64_t rows, std::int64_t width) {
    return side_by_side(std::span(&first, 1), rows, width);
  }

  std::int64_t width() const { return std::accumulate(widths.begin(), widths.end(), 0LL); }
  float* at(std::size_t position, std::int64_t row) const {
    return pointers[position * std::size_t(rows) + std::size_t(row)];
  }
  // Where column c of a row lies: its block and the column within that block.
  struct Column {
    std::size_t block;
    std::int64_t column;
  };
  Column locate(std::int64_t c) const {
    std::size_t p = 0;
    while (c >= widths[p]) c -= widths[p++];
    return {p, c};
  }
  bool adds(std::size_t position, std::int64_t row) const {
    return add.empty() || add[position * std::size_t(rows) + std::size_t(row)] != 0;
  }
  // Rows [start, start + count) alone, as a kernel working through a call in blocks reads them.
  RowBlocks rows_from(std::int64_t start, std::int64_t count) const {
    RowBlocks part{count, widths, {}, {}};
    for (std::size_t p = 0; p < widths.size(); ++p) {
      const std::size_t first = p * std::size_t(rows) + std::size_t(start);
      part.pointers.insert(part.pointers.end(), pointers.begin() + first,
                           pointers.begin() + first + count);
      if (!add.empty())
        part.add.insert(part.add.end(), add.begin() + first, add.begin() + first + count);
    }
    return part;
  }
};

}  // namespace weft::backend
