// argument_rows (weft/autodiff/argument_rows.h): a batched call's argument as rows of other
// values, gathered when read whole, read where they lie by the ops that can.
#include "weft/autodiff/argument_rows.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "../backend/kernels.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"

namespace weft {
namespace {

// -1: not read from WEFT_READ_ROWS yet; else a ReadRows.
std::atomic<int> read_in_place_setting{-1};

ReadRows read_in_place_from_environment() {
  const char* value = std::getenv("WEFT_READ_ROWS");
  const std::string v = value == nullptr ? "" : value;
  if (v.empty() || v == "auto") return ReadRows::kWithoutGradients;
  if (v == "1") return ReadRows::kAlways;
  if (v == "0") return ReadRows::kNever;
  fail("WEFT_READ_ROWS",
       "expected auto (read rows where they lie when no gradient is recorded), 1 (always) or 0 "
       "(gather every argument), got '",
       v, "'");
}

std::int64_t position_width(const TapeNode& node, std::int64_t p) {
  return node.saved[1].data<std::int64_t>()[p];
}

// The gradient of the rows as one matrix (from consumers that read the value whole), added into
// the sources' gradients row by row, position by position.
void argument_rows_backward(Tape& tape, std::uint32_t id) {
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
  std::int64_t column = 0;
  for (std::int64_t p = 0; p < node.int_attrs[1]; ++p) {
    Tensor refs = node.saved[0].rows_view(p * rows, rows);
    backend::scatter_add_argument_rows(node.grad, column, refs, grads, written);
    column += position_width(node, p);
  }
}

// The gather, into `out`, of the rows of `sources`.
void gather_into(std::span<const Tensor> sources, const Tensor& refs, std::int64_t rows,
                 std::span<const std::int64_t> widths, Tensor& out) {
  std::int64_t column = 0;
  for (std::size_t p = 0; p < widths.size(); ++p) {
    backend::gather_argument_rows(sources, refs.rows_view(std::int64_t(p) * rows, rows), out,
                                  column);
    column += widths[p];
  }
}

// The node's rows and blocks, no pointers yet.
backend::RowBlocks shape_of_blocks(const TapeNode& node) {
  backend::RowBlocks blocks;
  blocks.rows = node.int_attrs[0];
  for (std::int64_t p = 0; p < node.int_attrs[1]; ++p)
    blocks.widths.push_back(position_width(node, p));
  return blocks;
}

std::vector<Tensor> source_values(Tape& tape, std::uint32_t id) {
  std::vector<Tensor> values;
  for (std::uint32_t k = 0; k < tape.node(id).num_inputs; ++k)
    values.push_back(Var(&tape, tape.input(id, k)).value());
  return values;
}

void compute_argument_rows(Tape& tape, std::uint32_t id) {
  const std::vector<Tensor> sources = source_values(tape, id);
  TapeNode& node = tape.node(id);
  Tensor out = Tensor::empty(node.deferred_shape, sources[0].dtype(), sources[0].device());
  const Tensor& widths = node.saved[1];
  gather_into(sources, node.saved[0], node.int_attrs[0],
              std::span(widths.data<std::int64_t>(), std::size_t(widths.numel())), out);
  node.value = std::move(out);
}

bool may_defer(std::span<const Var> sources, const Shape& shape) {
  if (!reads_rows_in_place(sources[0].tape()) || shape.rank() < 2) return false;
  return std::all_of(sources.begin(), sources.end(), [](const Var& s) {
    const Tensor& v = s.value();
    return v.device() == Device::kCpu && v.dtype() == DType::kFloat32;
  });
}

}  // namespace

ReadRows read_rows_in_place() {
  int setting = read_in_place_setting.load();
  if (setting < 0) {
    setting = int(read_in_place_from_environment());
    read_in_place_setting.store(setting);
  }
  return ReadRows(setting);
}

void set_read_rows_in_place(ReadRows when) { read_in_place_setting.store(int(when)); }

bool reads_rows_in_place(const Tape& tape) {
  if (batch_invariant()) return false;
  switch (read_rows_in_place()) {
    case ReadRows::kAlways:
      return true;
    case ReadRows::kWithoutGradients:
      return !tape.grad_enabled();
    case ReadRows::kNever:
      return false;
  }
  return false;
}

Var argument_rows(std::span<const Var> sources, const Tensor& refs, std::int64_t rows,
                  std::span<const std::int64_t> widths, const Shape& shape) {
  Tape& tape = sources[0].tape();
  const Tensor& first = sources[0].value();
  for (const Var& s : sources)
    if (s.value().device() != first.device())
      fail("loom", "a gather reads values on different devices: ", device_name(first.device()),
           " and ", device_name(s.value().device()), " (", first.describe(), " vs ",
           s.value().describe(), "): parameters, fed batches and the Executor's device must agree");
  const bool deferred = may_defer(sources, shape);
  Var result =
      deferred ? tape.record_deferred(shape, sources, argument_rows_backward, compute_argument_rows)
               : tape.record(Tensor::empty(shape, first.dtype(), first.device()), sources,
                             argument_rows_backward);
  TapeNode& node = tape.node(result.id());
  node.int_attrs[0] = rows;
  node.int_attrs[1] = std::int64_t(widths.size());
  if (deferred || node.backward) {
    node.saved[0] = refs;
    node.saved[1] = Tensor::from_vector(Shape{std::int64_t(widths.size())},
                                        std::vector<std::int64_t>(widths.begin(), widths.end()));
  }
  if (!deferred) {
    std::vector<Tensor> values;
    for (const Var& s : sources) values.push_back(s.value());
    gather_into(values, refs, rows, widths, node.value);
  }
  return result;
}

namespace detail {

bool reads_items_in_place(const Tape& tape, std::uint32_t id) {
  return tape.node(id).compute_value == compute_argument_rows;
}

bool reads_in_place(const Tape& tape, std::uint32_t id) {
  return reads_items_in_place(tape, id) && tape.node(id).deferred_shape.rank() == 2;
}

backend::RowBlocks rows_in_place(Tape& tape, std::uint32_t id) {
  const std::vector<Tensor> sources = source_values(tape, id);
  const TapeNode& node = tape.node(id);
  backend::RowBlocks blocks = shape_of_blocks(node);
  const std::int32_t* refs = node.saved[0].data<std::int32_t>();
  const std::int64_t count = blocks.rows * node.int_attrs[1];
  blocks.pointers.reserve(std::size_t(count));
  for (std::int64_t j = 0; j < count; ++j) {
    const Tensor& source = sources[std::size_t(refs[2 * j])];
    blocks.pointers.push_back(const_cast<float*>(source.data<float>()) +
                              refs[2 * j + 1] * source.row_size());
  }
  return blocks;
}

namespace {

// A source gradient's row as the add flags need it: its record's byte, which this pass sets to
// 2 (claimed once in this call) or 3 (claimed again) before leaving 1 (written) everywhere.
constexpr std::uint8_t kWritten = 1, kClaimed = 2, kClaimedAgain = 3;

struct SourceGradient {
  Tape::RowsTarget target;
  float* row(std::int32_t r) const {
    return target.grad->data<float>() + r * target.grad->row_size();
  }
};

}  // namespace

backend::RowBlocks gradient_rows_in_place(Tape& tape, std::uint32_t id,
                                          std::vector<float>& discard) {
  const TapeNode& node = tape.node(id);
  if (!node.requires_grad) return {};
  backend::RowBlocks blocks = shape_of_blocks(node);
  discard.assign(std::size_t(*std::max_element(blocks.widths.begin(), blocks.widths.end())), 0.0f);
  std::vector<SourceGradient> sources;
  for (std::uint32_t k = 0; k < node.num_inputs; ++k)
    sources.push_back({tape.grad_rows_target(tape.input(id, k))});
  const std::int32_t* refs = node.saved[0].data<std::int32_t>();
  const std::size_t count = std::size_t(blocks.rows * node.int_attrs[1]);
  blocks.pointers.resize(count);
  blocks.add.assign(count, 1);
  // First pass: pointers, and rows no gradient reached yet claimed (overwritten, not added
  // into) by their first reference in this call.
  bool again = false;
  for (std::size_t j = 0; j < count; ++j) {
    const SourceGradient& source = sources[std::size_t(refs[2 * j])];
    if (source.target.grad == nullptr) {
      blocks.pointers[j] = discard.data();
      blocks.add[j] = 0;
      continue;
    }
    blocks.pointers[j] = source.row(refs[2 * j + 1]);
    if (source.target.written == nullptr) continue;
    std::uint8_t& state = source.target.written[refs[2 * j + 1]];
    if (state == 0) {
      state = kClaimed;
      blocks.add[j] = 0;
    } else if (state != kWritten) {
      state = kClaimedAgain;
      again = true;
    }
  }
  // A row referenced twice in one call (a value that is both children of a node) is zeroed and
  // added into by every reference, so the kernels' order of writes does not matter.
  for (std::size_t j = 0; j < count; ++j) {
    const SourceGradient& source = sources[std::size_t(refs[2 * j])];
    if (source.target.grad == nullptr || source.target.written == nullptr) continue;
    std::uint8_t& state = source.target.written[refs[2 * j + 1]];
    if (again && state == kClaimedAgain) {
      std::fill_n(blocks.pointers[j], source.target.grad->row_size(), 0.0f);
      state = kWritten;
    }
    if (again && state == kWritten) blocks.add[j] = 1;
    if (state == kClaimed) state = kWritten;
  }
  return blocks;
}

}  // namespace detail
}  // namespace weft
