// The two tape ops through which the executor hands arguments to operation bodies: a
// zero-copy view of consecutive rows of one chunk, and a gather of rows from many chunks
// (into column blocks, for concatenated inputs). Both scatter their gradient back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/autodiff/tape.h"

namespace weft::loom::detail {

// Rows [start, start + count) of `chunk`, sharing its storage; seen as `shape` when given
// (the same elements: a concat_inputs batch is its interleaved argument rows seen wider).
Var chunk_rows_view(Var chunk, std::int64_t start, std::int64_t count);
Var chunk_rows_view(Var chunk, std::int64_t start, std::int64_t count, const Shape& shape);

// For each position p (a column block of the result, widths[p] wide) and row i: the row
// refs[p * rows + i] = (index into `chunks`, row), refs int32 [rows * positions, 2] on the
// chunks' device (a segment of the batch's packed buffer, batch_plan.h). The result is [rows,
// sum of widths], or [rows, ...row_shape] when there is one position. On the CPU its rows are
// read where they lie by the ops that can, and gathered only for the others (argument_rows).
Var gather_chunk_rows(std::span<const Var> chunks, const Tensor& refs, std::int64_t rows,
                      std::span<const std::int64_t> widths, const Shape& result_shape);
// One position's gather with references made on the host after the run (no plan foresaw
// them): they travel to the chunks' device in a copy of their own. result_shape [rows, ...].
Var gather_host_refs(std::span<const Var> chunks, const std::vector<std::int32_t>& refs,
                     const Shape& result_shape);

}  // namespace weft::loom::detail
