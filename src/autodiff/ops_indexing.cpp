// Row indexing ops: gather_rows and embedding_lookup (the same gather, named for its use) and
// scatter_add_rows. Each is the other's gradient: gathered rows scatter-add their gradients
// back, so a row read twice receives the sum (or, for a table with row-sparse gradients, are
// recorded as rows: Parameter::set_sparse_grad). Index tensors are saved on the tape node.
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

void require_rows(const char* op, const char* role, const Tensor& t) {
  if (t.rank() == 0) fail(op, role, " must have a leading (row) axis, got ", t.describe());
}

// y[i] = x[indices[i]]: dx[indices[i]] += dy[i] (kept as rows for a table with row-sparse
// gradients; dy is spent after this, so the table may keep it without a copy).
void gather_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  tape.accumulate_rows(tape.input(id, 0), node.saved[0], node.grad);
}

Var gather_impl(const char* op, const char* table_role, const char* index_role, Var x,
                const Tensor& given_indices) {
  const Tensor& v = x.value();
  require_rows(op, table_role, v);
  detail::require_same_device(op, v, given_indices);
  const Tensor indices = detail::row_indices(op, index_role, given_indices, v.rows());
  Tensor y = Tensor::empty(v.shape().with_rows(indices.numel()), v.dtype(), v.device());
  backend::gather_rows(v, indices, y);
  Var out = x.tape().record(std::move(y), {x}, gather_backward);
  out.tape().node(out.id()).saved[0] = indices;
  return out;
}

// y[indices[i]] += x[i]: dx[i] += dy[indices[i]].
void scatter_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  Tensor* dx = tape.grad_of(tape.input(id, 0));
  if (dx == nullptr) return;
  Tensor rows = Tensor::empty(dx->shape(), DType::kFloat32, dx->device());
  backend::gather_rows(node.grad, node.saved[0], rows);
  backend::add_into(rows, 1.0f, *dx);
}

}  // namespace

// y[i] = x[indices[i]]
Var gather_rows(Var x, const Tensor& indices) {
  return gather_impl("gather_rows", "input", "indices", x, indices);
}

// y[i] = table[ids[i]]
Var embedding_lookup(Var table, const Tensor& ids) {
  return gather_impl("embedding_lookup", "table", "ids", table, ids);
}

// y[indices[i]] += x[i], y zero elsewhere
Var scatter_add_rows(Var x, const Tensor& given_indices, std::int64_t num_rows) {
  const char* op = "scatter_add_rows";
  const Tensor& v = x.value();
  detail::require_float(op, "input", v);
  require_rows(op, "input", v);
  detail::require_same_device(op, v, given_indices);
  if (num_rows < 0) fail(op, "num_rows must be >= 0, got ", num_rows);
  const Tensor indices = detail::row_indices(op, "indices", given_indices, num_rows);
  if (indices.numel() != v.rows())
    fail(op, "indices ", indices.describe(), " must have one entry per row of input ",
         v.describe());
  Tensor y = Tensor::zeros(v.shape().with_rows(num_rows), DType::kFloat32, v.device());
  backend::scatter_add_rows(v, indices, y);
  Var out = x.tape().record(std::move(y), {x}, scatter_backward);
  out.tape().node(out.id()).saved[0] = indices;
  return out;
}

}  // namespace weft
