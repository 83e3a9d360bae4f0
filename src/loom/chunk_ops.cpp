// Forward and backward of the executor's argument ops (see chunk_ops.h).
#include "chunk_ops.h"

#include <algorithm>

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

void gather_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  std::vector<Tensor*> grads(node.num_inputs);
  std::vector<std::uint8_t*> written(node.num_inputs);
  bool any = false;
  for (std::uint32_t k = 0; k < node.num_inputs; ++k) {
    const Tape::RowsTarget target = tape.grad_rows_target(tape.input(id, k));
    grads[k] = target.grad;
    written[k] = target.written;
    any = any || grads[k] != nullptr;
  }
  if (!any) return;
  const std::int64_t rows = node.int_attrs[0];
  const int positions = int(node.int_attrs[1]);
  std::int64_t column = 0;
  for (int p = 0; p < positions; ++p) {
    Tensor refs = node.saved[0].rows_view(p * rows, rows);
    backend::scatter_add_argument_rows(node.grad, column, refs, grads, written);
    if (p + 1 < positions) column += node.saved[1].data<std::int64_t>()[p];
  }
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
  Tape& tape = chunks[0].tape();
  const Tensor& first = chunks[0].value();
  for (const Var& c : chunks)
    if (c.value().device() != first.device())
      fail("loom", "a gather reads values on different devices: ", device_name(first.device()),
           " and ", device_name(c.value().device()), " (", first.describe(), " vs ",
           c.value().describe(), "): parameters, fed batches and the Executor's device must agree");
  std::vector<Tensor> values;
  values.reserve(chunks.size());
  for (const Var& c : chunks) values.push_back(c.value());
  Tensor out = Tensor::empty(result_shape, first.dtype(), first.device());
  const int positions = int(widths.size());
  std::int64_t column = 0;
  for (int p = 0; p < positions; ++p) {
    backend::gather_argument_rows(values, refs.rows_view(p * rows, rows), out, column);
    column += widths[std::size_t(p)];
  }
  Var result = tape.record(std::move(out), chunks, gather_backward);
  TapeNode& node = tape.node(result.id());
  if (node.backward) {
    node.saved[0] = refs;
    if (positions > 1)
      node.saved[1] = Tensor::from_vector(Shape{positions},
                                          std::vector<std::int64_t>(widths.begin(), widths.end()));
  }
  node.int_attrs[0] = rows;
  node.int_attrs[1] = positions;
  return result;
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
