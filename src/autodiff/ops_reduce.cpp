// Reduction ops: over all rows (sum_rows, mean_rows, max_rows -> [1, F...]), over segments of
// rows (segment_sum / mean / max -> [num_segments, F...], empty segments 0) and over every
// element (sum, mean -> a scalar of shape []). A mean over nothing is 0, like an empty
// segment. Max saves its argmax so that only the chosen element receives the gradient.
#include <algorithm>
#include <vector>

#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

using backend::BinaryOp;
using backend::ReduceOp;

void require_rows(const char* op, const Tensor& x) {
  detail::require_float(op, "input", x);
  if (x.rank() == 0) fail(op, "input must have a leading (row) axis, got ", x.describe());
}

// dx[i] += scale * dy[i % |dy|]: a reduced gradient spread back over what was reduced.
void spread_into(const Tensor& dy, float scale, Tensor& dx) {
  if (scale == 1.0f) {
    backend::binary(BinaryOp::kAdd, dx, dy, dx);
    return;
  }
  Tensor scaled = Tensor::empty(dy.shape(), DType::kFloat32, dy.device());
  backend::binary(BinaryOp::kMul, dy, Tensor::scalar(scale, dy.device()), scaled);
  backend::binary(BinaryOp::kAdd, dx, scaled, dx);
}

// Sums and means over rows or over everything: float_attrs[0] is the scale (1 or 1/count).
void spread_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dx = tape.grad_of(tape.input(id, 0)))
    spread_into(node.grad, node.float_attrs[0], *dx);
}

// Maxima: saved[0] holds the argmax rows.
void max_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dx = tape.grad_of(tape.input(id, 0)))
    backend::scatter_by_argmax(node.grad, node.saved[0], *dx);
}

float inverse_count(std::int64_t count) { return count > 0 ? 1.0f / float(count) : 0.0f; }

void scale_in_place(Tensor& y, float scale) {
  if (scale != 1.0f) backend::binary(BinaryOp::kMul, y, Tensor::scalar(scale, y.device()), y);
}

Var reduce_rows_op(const char* op, ReduceOp kind, bool mean, Var x) {
  const Tensor& v = x.value();
  require_rows(op, v);
  Tensor y = Tensor::empty(v.shape().with_rows(1), DType::kFloat32, v.device());
  if (kind == ReduceOp::kMax) {
    Tensor argmax = Tensor::empty(y.shape(), DType::kInt32, v.device());
    backend::reduce_rows(kind, v, y, &argmax);
    Var out = x.tape().record(std::move(y), {x}, max_backward);
    out.tape().node(out.id()).saved[0] = std::move(argmax);
    return out;
  }
  backend::reduce_rows(kind, v, y, nullptr);
  const float scale = mean ? inverse_count(v.rows()) : 1.0f;
  scale_in_place(y, scale);
  Var out = x.tape().record(std::move(y), {x}, spread_backward);
  out.tape().node(out.id()).float_attrs[0] = scale;
  return out;
}

}  // namespace

// y[0] = sum_r x[r]
Var sum_rows(Var x) { return reduce_rows_op("sum_rows", ReduceOp::kSum, false, x); }
// y[0] = mean_r x[r]
Var mean_rows(Var x) { return reduce_rows_op("mean_rows", ReduceOp::kSum, true, x); }
// y[0] = max_r x[r]
Var max_rows(Var x) { return reduce_rows_op("max_rows", ReduceOp::kMax, false, x); }

namespace {

void check_segments(const char* op, const Tensor& x, const Tensor& ids, std::int64_t segments) {
  require_rows(op, x);
  detail::require_same_device(op, x, ids);
  if (segments < 0) fail(op, "num_segments must be >= 0, got ", segments);
  detail::require_indices(op, "segment_ids", ids, segments);
  if (ids.numel() != x.rows())
    fail(op, "segment_ids ", ids.describe(), " must have one entry per row of input ",
         x.describe());
}

// Segment sums and means: dx[r] += (dy * scale)[ids[r]]; saved = {ids, scale or undefined}.
void segment_spread_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  Tensor* dx = tape.grad_of(tape.input(id, 0));
  if (dx == nullptr) return;
  Tensor dy = node.grad;
  if (node.saved[1].defined()) {
    dy = Tensor::empty(node.grad.shape(), DType::kFloat32, node.grad.device());
    backend::binary(BinaryOp::kMul, node.grad, node.saved[1], dy);
  }
  Tensor rows = Tensor::empty(dx->shape(), DType::kFloat32, dx->device());
  backend::gather_rows(dy, node.saved[0], rows);
  backend::add_into(rows, 1.0f, *dx);
}

// 1 / (rows in the segment) for every element of a [num_segments, F...] output; 0 if empty.
Tensor segment_scales(const Tensor& ids, const Shape& out_shape, Device device) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(out_shape[0]), 0);
  for (std::int32_t s : ids.to_int_vector()) ++counts[std::size_t(s)];
  const std::size_t row = std::size_t(out_shape.row_size());
  std::vector<float> scales(counts.size() * row);
  for (std::size_t s = 0; s < counts.size(); ++s)
    std::fill_n(scales.begin() + std::ptrdiff_t(s * row), row, inverse_count(counts[s]));
  return Tensor::from_vector(out_shape, scales, device);
}

Var segment_op(const char* op, ReduceOp kind, bool mean, Var x, const Tensor& ids,
               std::int64_t segments) {
  const Tensor& v = x.value();
  check_segments(op, v, ids, segments);
  Tensor y = Tensor::empty(v.shape().with_rows(segments), DType::kFloat32, v.device());
  if (kind == ReduceOp::kMax) {
    Tensor argmax = Tensor::empty(y.shape(), DType::kInt32, v.device());
    backend::segment_reduce(kind, v, ids, y, &argmax);
    Var out = x.tape().record(std::move(y), {x}, max_backward);
    out.tape().node(out.id()).saved[0] = std::move(argmax);
    return out;
  }
  backend::segment_reduce(kind, v, ids, y, nullptr);
  Tensor scales;
  if (mean) {
    scales = segment_scales(ids, y.shape(), v.device());
    backend::binary(BinaryOp::kMul, y, scales, y);
  }
  Var out = x.tape().record(std::move(y), {x}, segment_spread_backward);
  TapeNode& node = out.tape().node(out.id());
  node.saved[0] = ids;
  node.saved[1] = std::move(scales);
  return out;
}

}  // namespace

// y[s] = sum of x[r] with segment_ids[r] = s
Var segment_sum(Var x, const Tensor& segment_ids, std::int64_t num_segments) {
  return segment_op("segment_sum", ReduceOp::kSum, false, x, segment_ids, num_segments);
}
// y[s] = mean of x[r] with segment_ids[r] = s (0 when empty)
Var segment_mean(Var x, const Tensor& segment_ids, std::int64_t num_segments) {
  return segment_op("segment_mean", ReduceOp::kSum, true, x, segment_ids, num_segments);
}
// y[s] = max of x[r] with segment_ids[r] = s (0 when empty)
Var segment_max(Var x, const Tensor& segment_ids, std::int64_t num_segments) {
  return segment_op("segment_max", ReduceOp::kMax, false, x, segment_ids, num_segments);
}

namespace {

Var reduce_all_op(const char* op, bool mean, Var x) {
  const Tensor& v = x.value();
  detail::require_float(op, "input", v);
  Tensor y = Tensor::empty(Shape{}, DType::kFloat32, v.device());
  backend::reduce_all(backend::ReduceAllOp::kSum, v, y);
  const float scale = mean ? inverse_count(v.numel()) : 1.0f;
  scale_in_place(y, scale);
  Var out = x.tape().record(std::move(y), {x}, spread_backward);
  out.tape().node(out.id()).float_attrs[0] = scale;
  return out;
}

}  // namespace

// y = sum of every element
Var sum(Var x) { return reduce_all_op("sum", false, x); }
// y = mean of every element
Var mean(Var x) { return reduce_all_op("mean", true, x); }

}  // namespace weft
