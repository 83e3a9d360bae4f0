// The public in-place primitives (weft/backend/tensor_ops.h): checks, then the backend's
// kernel on the output's device.
#include "weft/backend/tensor_ops.h"

#include "kernels.h"
#include "weft/core/error.h"

namespace weft::backend {
namespace {

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    fail(op, "the tensors differ: ", a.describe(), " vs ", b.describe());
}

void check_refs(const char* op, const Tensor& refs, const Tensor& rows) {
  if (refs.dtype() != DType::kInt32 || refs.rank() != 2 || refs.shape()[1] != 2)
    fail(op, "refs must be int32 [n, 2], got ", refs.describe());
  if (rows.rank() < 1 || rows.shape()[0] != refs.shape()[0])
    fail(op, "one row per ref: ", refs.describe(), " vs ", rows.describe());
}

}  // namespace

void add_scaled(const Tensor& x, float scale, Tensor& y) {
  check_same("add_scaled", x, y);
  if (y.dtype() != DType::kFloat32) fail("add_scaled", "needs float32, got ", y.describe());
  if (x.device() != y.device())
    fail("add_scaled", "operands are on different devices: ", x.describe(), " vs ", y.describe());
  add_into(x, scale, y);
}

void copy_values(const Tensor& src, Tensor& dst) {
  check_same("copy_values", src, dst);
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  const Tensor there = src.to(dst.device());
  copy_blocks(there, 0, n, dst, 0, n, 1, n, false);
}

void gather_argument_rows(std::span<const Tensor> chunks, const Tensor& refs, Tensor& dst,
                          std::int64_t column) {
  check_refs("gather_argument_rows", refs, dst);
  gather_chunk_rows(chunks, refs, dst, column);
}

void apply_update(const UpdateArgs& args, Tensor& value, const Tensor& grad, Tensor* slot0,
                  Tensor* slot1) {
  if (value.dtype() != DType::kFloat32)
    fail("apply_update", "needs float32, got ", value.describe());
  check_same("apply_update", value, grad);
  for (const Tensor* other :
       {&grad, static_cast<const Tensor*>(slot0), static_cast<const Tensor*>(slot1)}) {
    if (other == nullptr) continue;
    check_same("apply_update", value, *other);
    if (other->device() != value.device())
      fail("apply_update", "operands are on different devices: ", value.describe(), " vs ",
           other->describe());
  }
  optimizer_update(args, value, grad, slot0, slot1);
}

void apply_update_rows(const UpdateArgs& args, Tensor& value, const Tensor& indices,
                       const Tensor& grad_rows, Tensor* slot0, Tensor* slot1) {
  const char* op = "apply_update_rows";
  if (value.dtype() != DType::kFloat32 || value.rank() == 0)
    fail(op, "needs a float32 value with a row axis, got ", value.describe());
  if (indices.dtype() != DType::kInt32 || indices.rank() != 1)
    fail(op, "indices must be int32 [k], got ", indices.describe());
  const Shape rows_shape = value.shape().with_rows(indices.numel());
  if (grad_rows.dtype() != DType::kFloat32 || grad_rows.shape() != rows_shape)
    fail(op, "grad rows ", grad_rows.describe(), " must be float32 ", rows_shape.to_string());
  for (const Tensor* other : {&indices, &grad_rows, static_cast<const Tensor*>(slot0),
                              static_cast<const Tensor*>(slot1)}) {
    if (other == nullptr) continue;
    if (other != &indices && other != &grad_rows) check_same(op, value, *other);
    if (other->device() != value.device())
      fail(op, "operands are on different devices: ", value.describe(), " vs ", other->describe());
  }
  std::int64_t bad = -1;
  find_bad_index(indices, value.rows(), bad);
  if (bad >= 0)
    fail(op, "row index ", indices.to_int_vector()[std::size_t(bad)], " at position ", bad,
         " is outside [0, ", value.rows(), ")");
  optimizer_update_rows(args, value, indices, grad_rows, slot0, slot1);
}

void scale_and_clamp(Tensor& x, float scale, float limit) {
  if (x.dtype() != DType::kFloat32) fail("scale_and_clamp", "needs float32, got ", x.describe());
  scale_clamp(x, scale, limit);
}

double sum_of_squares(const Tensor& x) {
  if (x.dtype() != DType::kFloat32) fail("sum_of_squares", "needs float32, got ", x.describe());
  Tensor squares = Tensor::empty(Shape{1}, DType::kFloat32, x.device());
  reduce_all(ReduceAllOp::kSumSquares, x, squares);
  return double(squares.to(Device::kCpu).data<float>()[0]);
}

void scatter_add_argument_rows(const Tensor& src, std::int64_t column, const Tensor& refs,
                               std::span<Tensor* const> grads,
                               std::span<std::uint8_t* const> written) {
  check_refs("scatter_add_argument_rows", refs, src);
  if (!written.empty() && written.size() != grads.size())
    fail("scatter_add_argument_rows", written.size(), " row records for ", grads.size(),
         " gradients");
  if (src.device() != Device::kCpu)
    for (std::uint8_t* record : written)
      if (record != nullptr)
        fail("scatter_add_argument_rows", "records of written rows are for the CPU's kernel; ",
             src.describe(), " is on ", device_name(src.device()));
  scatter_add_chunk_rows(src, column, refs, grads, written);
}

}  // namespace weft::backend
