// A batched call's argument as rows of other values (issue 42's argument model): the loom's
// one way to hand an operation body rows from many chunks. On the CPU the value is recorded
// uncomputed: the ops that read rows where they lie (linear, linear_relu / tanh / sigmoid,
// linear_lstm_cell_state; batch_matmul reads each row as one item, a decoder's memory) read it
// by index and write its gradient straight into the chunks' gradients, so neither a gather nor a
// scatter runs; anything else computes it (one gather) when it first reads it (Var::value).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/backend/row_blocks.h"

namespace weft {

// The [rows, sum of widths] value (`shape`: that, or [rows, ...] for one position) whose column
// block p of row i is row refs[p * rows + i] = (index into sources, row) of that source; refs
// int32 [rows * positions, 2] on the sources' device, widths[p] position p's row size.
Var argument_rows(std::span<const Var> sources, const Tensor& refs, std::int64_t rows,
                  std::span<const std::int64_t> widths, const Shape& shape);

// When argument_rows leaves float32 values (matrices, or rows of any shape) on the CPU
// uncomputed (WEFT_READ_ROWS, or set_read_rows_in_place): kWithoutGradients (the default,
// WEFT_READ_ROWS=auto) on a tape that records no gradients (inference, evaluation, serving),
// where reading in place measured faster; kAlways (=1) in training too, where each consumer also
// writes its gradient into the rows' chunks (a quarter of the bytes moved, but measured slower on
// Zen 5: BENCHMARKS.md); kNever (=0) gathers every argument, as before. Never in batch-invariant
// mode: whether an argument is a view or rows of many chunks depends on the batch, and the rows'
// kernels round differently.
enum class ReadRows { kNever, kWithoutGradients, kAlways };
void set_read_rows_in_place(ReadRows when);
ReadRows read_rows_in_place();
// Whether argument_rows on `tape` now leaves its value uncomputed (on the CPU, float32).
bool reads_rows_in_place(const Tape& tape);

namespace detail {
// Whether node `id` is an argument_rows matrix ([rows, width]) not computed (yet): read it with
// rows_in_place.
bool reads_in_place(const Tape& tape, std::uint32_t id);
// The same for rows of any shape ([rows, ...]: each row an item, as batch_matmul reads them).
bool reads_items_in_place(const Tape& tape, std::uint32_t id);
// Its rows where they lie.
backend::RowBlocks rows_in_place(Tape& tape, std::uint32_t id);
// The rows of its sources' gradients its gradient goes to, each marked to be overwritten where
// no gradient reached the row yet (Tape::grad_rows_target); the rows of sources that need no
// gradient point into `discard`. Rows 0 when the node needs no gradient.
backend::RowBlocks gradient_rows_in_place(Tape& tape, std::uint32_t id,
                                          std::vector<float>& discard);
}  // namespace detail

}  // namespace weft
