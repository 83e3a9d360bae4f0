// Shape ops: concat, split, slice and reshape. Concat and slice both move a range of one axis
// between tensors with the copy_blocks kernel (outer blocks of `extent * inner` elements), so
// each is the other's backward. Slices along axis 0 and reshapes are views of their input; a
// column slice of an argument read in place (argument_rows) copies only its columns, when read.
#include <sstream>
#include <vector>

#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/argument_rows.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

// A tensor seen as [outer, extent, inner] around one axis.
struct AxisLayout {
  std::int64_t outer = 1, extent = 0, inner = 1;
};

AxisLayout layout_of(const Shape& shape, int axis) {
  AxisLayout l;
  for (int i = 0; i < axis; ++i) l.outer *= shape[i];
  l.extent = shape[axis];
  for (int i = axis + 1; i < shape.rank(); ++i) l.inner *= shape[i];
  return l;
}

// Copies `length` positions of the axis, from position src_start of src to dst_start of dst.
void copy_range(const Tensor& src, std::int64_t src_extent, std::int64_t src_start, Tensor& dst,
                std::int64_t dst_extent, std::int64_t dst_start, std::int64_t length,
                const AxisLayout& l, bool accumulate) {
  backend::copy_blocks(src, src_start * l.inner, src_extent * l.inner, dst, dst_start * l.inner,
                       dst_extent * l.inner, l.outer, length * l.inner, accumulate);
}

// Concat's backward: each part's gradient is its range of the output's gradient.
void concat_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const int axis = int(node.int_attrs[0]);
  const AxisLayout out = layout_of(node.value.shape(), axis);
  std::int64_t offset = 0;
  for (std::uint32_t k = 0; k < node.num_inputs; ++k) {
    const std::uint32_t input = tape.input(id, k);
    const std::int64_t extent = tape.node(input).value.shape()[axis];
    if (const Tape::GradTarget dx = tape.grad_target(input); dx.grad)
      copy_range(node.grad, out.extent, offset, *dx.grad, extent, 0, extent, out, !dx.fresh());
    offset += extent;
  }
}

void check_concat_part(const Tensor& part, std::size_t k, const Tensor& first, int axis) {
  if (part.dtype() != first.dtype())
    fail("concat", "part ", k, " has ", part.describe(), " but part 0 has ", first.describe(),
         ": the dtypes must match");
  bool same = part.rank() == first.rank();
  for (int i = 0; same && i < part.rank(); ++i)
    same = i == axis || part.shape()[i] == first.shape()[i];
  if (!same)
    fail("concat", "part ", k, " has ", part.describe(), " but part 0 has ", first.describe(),
         ": all extents except axis ", axis, " must match");
  detail::require_same_device("concat", first, part);
}

}  // namespace

// y = [x1 | x2 | ...] along an axis
Var concat(std::span<const Var> parts, int axis) {
  if (parts.empty()) fail("concat", "needs at least one part, got an empty list");
  const Tensor& first = parts[0].value();
  if (first.rank() == 0)
    fail("concat", "part 0 is a scalar (", first.describe(), "): nothing to join along");
  const int a = detail::normalize_axis("concat", axis, first);
  Shape shape = first.shape();
  shape[a] = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    check_concat_part(parts[k].value(), k, first, a);
    shape[a] += parts[k].value().shape()[a];
  }
  Tensor y = Tensor::empty(shape, first.dtype(), first.device());
  const AxisLayout out = layout_of(shape, a);
  std::int64_t offset = 0;
  for (const Var& part : parts) {
    const std::int64_t extent = part.value().shape()[a];
    copy_range(part.value(), extent, 0, y, out.extent, offset, extent, out, false);
    offset += extent;
  }
  Var result = parts[0].tape().record(std::move(y), parts, concat_backward);
  result.tape().node(result.id()).int_attrs[0] = a;
  return result;
}

Var concat(std::initializer_list<Var> parts, int axis) {
  return concat(std::span<const Var>(parts.begin(), parts.size()), axis);
}

namespace {

// A slice's backward: its gradient lands in its range of the input's gradient.
void slice_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  const int axis = int(node.int_attrs[0]);
  const std::int64_t start = node.int_attrs[1];
  const std::uint32_t input = tape.input(id, 0);
  Tensor* dx = tape.grad_of(input);
  if (dx == nullptr) return;
  const AxisLayout in = layout_of(dx->shape(), axis);
  const std::int64_t length = Var(&tape, id).shape()[axis];  // computed or not (below)
  copy_range(node.grad, length, 0, *dx, in.extent, start, length, in, true);
}

// The value of a column slice of an argument read in place: its columns copied from the rows
// where they lie, or from the argument's value if something gathered it meanwhile.
void compute_columns_in_place(Tape& tape, std::uint32_t id) {
  const std::uint32_t input = tape.input(id, 0);
  const std::int64_t start = tape.node(id).int_attrs[1];
  Tensor y = Tensor::empty(tape.node(id).deferred_shape, DType::kFloat32, Device::kCpu);
  if (detail::reads_in_place(tape, input)) {
    backend::gather_row_columns(detail::rows_in_place(tape, input), start, y);
  } else {
    const Tensor& v = Var(&tape, input).value();
    const AxisLayout in = layout_of(v.shape(), 1);
    copy_range(v, in.extent, start, y, y.shape()[1], 0, y.shape()[1], in, false);
  }
  tape.node(id).value = std::move(y);
}

// x[:, start : start + length] of an argument whose rows are read where they lie (a decoder's
// h or c half of its live examples' states): recorded uncomputed, so the argument is not
// gathered whole to be sliced; its gradient goes to the argument's as any slice's does.
Var slice_columns_in_place(Var x, std::int64_t start, std::int64_t length) {
  const Shape& shape = x.shape();
  if (start < 0 || length < 0 || start > shape[1] || length > shape[1] - start)
    fail("slice", "range [", start, ", ", start + length, ") is out of bounds for extent ",
         shape[1], " of float32 ", shape, " along axis 1");
  Tape& tape = x.tape();
  const Var xs[] = {x};
  Var out =
      tape.record_deferred(Shape{shape[0], length}, xs, slice_backward, compute_columns_in_place);
  tape.node(out.id()).int_attrs[0] = 1;
  tape.node(out.id()).int_attrs[1] = start;
  return out;
}

// Records x[..., start : start + length, ...] along a validated axis and range.
Var slice_unchecked(Var x, int axis, std::int64_t start, std::int64_t length) {
  const Tensor& v = x.value();
  Tensor y;
  if (axis == 0) {
    y = v.rows_view(start, length);
  } else {
    Shape shape = v.shape();
    shape[axis] = length;
    y = Tensor::empty(shape, v.dtype(), v.device());
    const AxisLayout in = layout_of(v.shape(), axis);
    copy_range(v, in.extent, start, y, length, 0, length, in, false);
  }
  Var out = x.tape().record(std::move(y), {x}, slice_backward);
  out.tape().node(out.id()).int_attrs[0] = axis;
  out.tape().node(out.id()).int_attrs[1] = start;
  return out;
}

std::string list_to_string(std::span<const std::int64_t> values) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

// split<N> marks an extent that N does not divide by sizes[0] = -1, the rest extent / N.
bool is_uneven_marker(std::span<const std::int64_t> sizes, std::int64_t extent) {
  const std::int64_t n = std::int64_t(sizes.size());
  if (sizes[0] != -1 || extent % n == 0) return false;
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] != extent / n) return false;
  return true;
}

void check_split_sizes(const Tensor& v, std::span<const std::int64_t> sizes, int axis) {
  const std::int64_t extent = v.shape()[axis];
  if (is_uneven_marker(sizes, extent))
    fail("split", "extent ", extent, " of ", v.describe(), " along axis ", axis,
         " does not divide into ", sizes.size(), " equal parts");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0)
      fail("split", "size ", sizes[i], " at position ", i, " of ", list_to_string(sizes),
           " is negative");
    total += sizes[i];
  }
  if (total != extent)
    fail("split", "sizes ", list_to_string(sizes), " sum to ", total, " but ", v.describe(),
         " has extent ", extent, " along axis ", axis);
}

}  // namespace

// [y1 | y2 | ...] = x along an axis
std::vector<Var> split(Var x, std::span<const std::int64_t> sizes, int axis) {
  const Tensor& v = x.value();
  const int a = detail::normalize_axis("split", axis, v);
  if (sizes.empty()) fail("split", "needs at least one size, got none for ", v.describe());
  check_split_sizes(v, sizes, a);
  std::vector<Var> parts;
  parts.reserve(sizes.size());
  std::int64_t offset = 0;
  for (std::int64_t size : sizes) {
    parts.push_back(slice_unchecked(x, a, offset, size));
    offset += size;
  }
  return parts;
}

// y = x[..., start : start + length, ...] along an axis
Var slice(Var x, int axis, std::int64_t start, std::int64_t length) {
  if ((axis == 1 || axis == -1) && detail::reads_in_place(x.tape(), x.id()))
    return slice_columns_in_place(x, start, length);
  const Tensor& v = x.value();
  const int a = detail::normalize_axis("slice", axis, v);
  const std::int64_t extent = v.shape()[a];
  if (start < 0 || length < 0 || start > extent || length > extent - start)
    fail("slice", "range [", start, ", ", start + length, ") is out of bounds for extent ", extent,
         " of ", v.describe(), " along axis ", a);
  return slice_unchecked(x, a, start, length);
}

namespace {

// y = x viewed with another shape: dx += dy, element for element.
void reshape_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dx = tape.grad_of(tape.input(id, 0))) backend::add_into(node.grad, 1.0f, *dx);
}

// The requested extents with one -1 replaced by what makes the element count match.
Shape resolve_shape(const Tensor& v, std::span<const std::int64_t> dims) {
  // Written out only for an error: a reshape is a view, and formatting took longer than it.
  const auto asked = [dims] { return list_to_string(dims); };
  if (dims.size() > std::size_t(Shape::kMaxRank))
    fail("reshape", "shape ", asked(), " has rank ", dims.size(), ", above the maximum ",
         Shape::kMaxRank);
  std::vector<std::int64_t> out(dims.begin(), dims.end());
  int inferred = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1 && inferred >= 0)
      fail("reshape", "shape ", asked(), " has more than one -1; at most one extent is inferred");
    if (out[i] == -1) {
      inferred = int(i);
    } else if (out[i] < 0) {
      fail("reshape", "extent ", out[i], " at position ", i, " of ", asked(),
           " is invalid: extents are >= 0, or -1 for one inferred extent");
    } else {
      known *= out[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || v.numel() % known != 0)
      fail("reshape", "cannot infer the -1 in ", asked(), " for ", v.describe(), " (", v.numel(),
           " elements): the other extents' product ", known, " does not divide it");
    out[std::size_t(inferred)] = v.numel() / known;
    known = v.numel();
  }
  if (known != v.numel())
    fail("reshape", "cannot reshape ", v.describe(), " (", v.numel(), " elements) to ", asked(),
         " (", known, " elements)");
  return Shape(std::span<const std::int64_t>(out));
}

}  // namespace

// y = x viewed with another shape
Var reshape(Var x, std::span<const std::int64_t> shape) {
  const Tensor& v = x.value();
  return x.tape().record(v.reshaped(resolve_shape(v, shape)), {x}, reshape_backward);
}

Var reshape(Var x, std::initializer_list<std::int64_t> shape) {
  return reshape(x, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

}  // namespace weft
