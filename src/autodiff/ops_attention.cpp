// ragged_attention: dot-product attention where each item's queries attend over the first
// lengths[i] rows of its own memory only (a decoder's encoder states, padded to a loom type's
// fixed size). One tape node: on the CPU one fused kernel per direction that never reads the
// padding; the memory may be read where its rows lie (argument_rows), as batch_matmul reads it.
#include <vector>

#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

constexpr const char* kOp = "ragged_attention";

// saved[0]: the forward's weights [n, beams, size]; saved[1]: the lengths (int32 [n], CPU).
void ragged_attention_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const std::uint32_t queries = tape.input(id, 0), memory = tape.input(id, 1);
  // A memory the forward read where its rows lie is gathered now, once (as batch_matmul's).
  const Tensor& memory_value = Var(&tape, memory).value();
  const auto [dqueries, dmemory] = tape.grad_targets(queries, memory);
  backend::ragged_attention_backward(tape.node(queries).value, memory_value, node.saved[1],
                                     node.saved[0], node.grad, dqueries.grad, dqueries.fresh(),
                                     dmemory.grad, dmemory.fresh());
}

// The lengths on the CPU, checked: int32 [items], each in [1, size].
Tensor checked_lengths(const Tensor& lengths, std::int64_t items, std::int64_t size) {
  if (lengths.dtype() != DType::kInt32)
    fail(kOp, "lengths must be int32, got ", lengths.describe());
  if (lengths.rank() != 1 || lengths.shape()[0] != items)
    fail(kOp, "lengths must be [", items, "] (one per memory), got ", lengths.describe());
  Tensor host = lengths.to(Device::kCpu);
  const std::int32_t* length = host.data<std::int32_t>();
  for (std::int64_t i = 0; i < items; ++i)
    if (length[i] < 1 || length[i] > size)
      fail(kOp, "lengths[", i, "] = ", length[i], " is outside [1, ", size, "] (a memory of ", size,
           " rows attends over 1 to ", size, " of them)");
  return host;
}

// The shapes' checks; a memory read where its rows lie is float32 on the CPU by construction, so
// only its shape is checked (checking does not gather it).
void check_operands(const Var& queries, const Var& memory, bool memory_in_place) {
  detail::require_float(kOp, "queries", queries.value());
  detail::require_rank(kOp, "queries", queries.value(), 3);
  if (!memory_in_place) {
    detail::require_float(kOp, "memory", memory.value());
    detail::require_rank(kOp, "memory", memory.value(), 3);
    detail::require_same_device(kOp, queries.value(), memory.value());
  } else if (memory.shape().rank() != 3 || queries.value().device() != Device::kCpu) {
    fail(kOp, "memory ", memory.shape(), " (rows read where they lie, on the CPU): expected rank ",
         "3, the queries on the CPU too (they are on ", device_name(queries.value().device()), ")");
  }
  const Shape& q = queries.shape();
  const Shape& m = memory.shape();
  if (q[0] != m[0] || q[2] != m[2])
    fail(kOp, "queries ", q, " do not fit memory ", m,
         ": expected queries [n, beams, hidden] and memory [n, size, hidden]");
}

// Off the CPU: the same attention composed from batch_matmul, a mask (-1e9 on the padding) and
// softmax, which reads the padding; there is no CUDA kernel of its own yet.
Var composed_attention(Var queries, Var memory, const Tensor& lengths) {
  const std::int64_t n = queries.shape()[0], beams = queries.shape()[1];
  const std::int64_t size = memory.shape()[1];
  std::vector<float> mask(std::size_t(n * beams * size), 0.0f);
  const std::int32_t* length = lengths.data<std::int32_t>();
  for (std::int64_t r = 0; r < n * beams; ++r)
    for (std::int64_t t = length[r / beams]; t < size; ++t) mask[std::size_t(r * size + t)] = -1e9f;
  const Var scores = batch_matmul(queries, memory, false, true) +
                     queries.tape().constant(
                         Tensor::from_vector({n, beams, size}, mask, queries.value().device()));
  const Var weights = reshape(softmax(reshape(scores, {n * beams, size})), {n, beams, size});
  return batch_matmul(weights, memory);
}

}  // namespace

Var ragged_attention(Var queries, Var memory, const Tensor& lengths) {
  const bool in_place = detail::reads_items_in_place(memory.tape(), memory.id());
  check_operands(queries, memory, in_place);
  const Shape& q = queries.shape();
  const std::int64_t size = memory.shape()[1];
  Tensor host_lengths = checked_lengths(lengths, q[0], size);
  const Device device = queries.value().device();
  if (device != Device::kCpu) return composed_attention(queries, memory, host_lengths);
  Tensor weights = Tensor::empty(Shape{q[0], q[1], size}, DType::kFloat32, device);
  Tensor context = Tensor::empty(q, DType::kFloat32, device);
  const backend::RowBlocks items =
      in_place ? detail::rows_in_place(memory.tape(), memory.id())
               : backend::RowBlocks::of_dense(const_cast<float*>(memory.value().data<float>()),
                                              q[0], size * q[2]);
  backend::ragged_attention(queries.value(), items, host_lengths, weights, context);
  Var out = queries.tape().record(std::move(context), {queries, memory}, ragged_attention_backward);
  TapeNode& node = out.tape().node(out.id());
  if (node.backward) {
    node.saved[0] = std::move(weights);
    node.saved[1] = std::move(host_lengths);
  }
  return out;
}

}  // namespace weft
