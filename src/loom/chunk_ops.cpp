// Forward and backward of the executor's argument ops (see chunk_ops.h); the gather is
// argument_rows (weft/autodiff/argument_rows.h), read where its rows lie where it can be.
#include "chunk_ops.h"

#include <algorithm>

#include "weft/autodiff/argument_rows.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"

namespace weft::loom::detail {
namespace {

// The chunks' gradients are taken with records of the rows written (Tape::grad_rows_target):
// in a tree each value has one consumer, so a chunk's gradient is assembled from the rows its
// consumers' gathers and views write, with no zero fill and no read of zeros before.
void view_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t input = tape.input(id, 0);
  const Tape::RowsTarget target = tape.grad_rows_target(input);
  if (target.grad == nullptr) return;
  const std::int64_t start = node.int_attrs[0], count = node.int_attrs[1];
  std::uint8_t* written = target.written;
  // The gradient as the chunk's rows (a view seen wider has the same elements).
  const Tensor grad = node.grad.reshaped(target.grad->shape().with_rows(count));
  if (written != nullptr && std::none_of(written + start, written + start + count,
                                         [](std::uint8_t w) { return w != 0; })) {
    Tensor rows = target.grad->rows_view(start, count);
    backend::copy_values(grad, rows);
    std::fill(written + start, written + start + count, std::uint8_t(1));
    return;
  }
  // Rows partly written already: grad_of closes the record, zeroing the unwritten ones.
  Tensor rows = tape.grad_of(input)->rows_view(start, count);
  backend::add_scaled(grad, 1.0f, rows);
}

}  // namespace

Var chunk_rows_view(Var chunk, std::int64_t start, std::int64_t count) {
  return chunk_rows_view(chunk, start, count, chunk.value().shape().with_rows(count));
}

Var chunk_rows_view(Var chunk, std::int64_t start, std::int64_t count, const Shape& shape) {
  Var out = chunk.tape().record(chunk.value().rows_view(start, count).reshaped(shape), {chunk},
                                view_backward);
  out.tape().node(out.id()).int_attrs[0] = start;
  out.tape().node(out.id()).int_attrs[1] = count;
  return out;
}

Var gather_chunk_rows(std::span<const Var> chunks, const Tensor& refs, std::int64_t rows,
                      std::span<const std::int64_t> widths, const Shape& result_shape) {
  return argument_rows(chunks, refs, rows, widths, result_shape);
}

Var gather_host_refs(std::span<const Var> chunks, const std::vector<std::int32_t>& refs,
                     const Shape& result_shape) {
  const std::int64_t rows = result_shape[0];
  const Tensor there = Tensor::from_vector(Shape{rows, 2}, refs).to(chunks[0].value().device());
  const std::int64_t width = result_shape.row_size();
  return gather_chunk_rows(chunks, there, rows, std::span<const std::int64_t>(&width, 1),
                           result_shape);
}

}  // namespace weft::loom::detail
