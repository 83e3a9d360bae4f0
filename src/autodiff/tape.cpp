// The tape: recording nodes, leaves and parameters, and the reverse sweep of backward().
#include "weft/autodiff/tape.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "../backend/kernels.h"
#include "weft/core/denormals.h"
#include "weft/core/error.h"

namespace weft {
namespace {
thread_local Tape* current_tape = nullptr;
std::atomic<std::uint64_t> next_generation{1};
}  // namespace

Parameter::Parameter(std::string name, Tensor value, bool trainable)
    : data_(std::make_shared<Data>()) {
  if (value.dtype() != DType::kFloat32)
    fail("parameter", "parameter '", name, "' must be float32, got ", value.describe());
  data_->name = std::move(name);
  data_->grad = Tensor::zeros(value.shape(), DType::kFloat32, value.device());
  data_->value = std::move(value);
  data_->trainable = trainable;
}

Var::Var(const Parameter& parameter) : Var(Tape::current().parameter(parameter)) {}

const Tensor& Var::value() const {
  TapeNode& n = tape_->node(id_);
  if (n.compute_value != nullptr) {
    const auto compute = n.compute_value;
    n.compute_value = nullptr;
    compute(*tape_, id_);
  }
  return n.value;
}
const Shape& Var::shape() const {
  const TapeNode& n = tape_->node(id_);
  return n.compute_value != nullptr ? n.deferred_shape : n.value.shape();
}
bool Var::requires_grad() const { return tape_->node(id_).requires_grad; }
const Tensor& Var::grad() const { return tape_->node(id_).grad; }

namespace {
// The shape and device of a node's value, computed or not (deferred values are on the CPU).
const Shape& value_shape(const TapeNode& n) {
  return n.compute_value != nullptr ? n.deferred_shape : n.value.shape();
}
Device value_device(const TapeNode& n) {
  return n.compute_value != nullptr ? Device::kCpu : n.value.device();
}
}  // namespace

Tape::Tape() : generation_(next_generation++) {}

Tape& Tape::current() {
  if (current_tape) return *current_tape;
  thread_local Tape default_tape;
  return default_tape;
}

TapeNode& Tape::push_node(std::uint32_t& id) {
  id = size_++;
  if ((id >> kBlockBits) >= blocks_.size())
    blocks_.push_back(std::make_unique<TapeNode[]>(kBlockSize));
  return node(id);
}

Var Tape::constant(Tensor value) {
  if (!value.defined()) fail("constant", "undefined tensor");
  std::uint32_t id;
  push_node(id).value = std::move(value);
  return Var(this, id);
}

Var Tape::variable(Tensor value) {
  if (!value.defined()) fail("variable", "undefined tensor");
  if (value.dtype() != DType::kFloat32)
    fail("variable", "a differentiable leaf must be float32, got ", value.describe());
  std::uint32_t id;
  TapeNode& node = push_node(id);
  node.value = std::move(value);
  node.requires_grad = grad_enabled_;
  node.is_leaf = true;
  return Var(this, id);
}

Var Tape::parameter(const Parameter& parameter) {
  if (!parameter.defined()) fail("parameter", "undefined parameter");
  Parameter::Data& data = *parameter.data_;
  if (data.tape == this && data.generation == generation_) return Var(this, data.node);
  std::uint32_t id;
  TapeNode& node = push_node(id);
  node.value = data.value;
  node.requires_grad = grad_enabled_ && data.trainable;
  node.is_leaf = true;
  if (node.requires_grad && data.sparse_grad) {
    node.sparse_parameter = parameter;  // the gradient binds on first dense use (grad_of)
  } else if (node.requires_grad) {
    node.grad = data.grad;  // gradients land in the parameter itself
    data.dense_grad_used = true;
  }
  data.tape = this;
  data.generation = generation_;
  data.node = id;
  return Var(this, id);
}

Var Tape::record(Tensor value, std::span<const Var> inputs, BackwardFn backward_fn) {
  bool needs_grad = false;
  for (const Var& input : inputs) {
    if (&input.tape() != this)
      fail("autodiff", "an op mixes Vars of different tapes; record a step on one tape");
    needs_grad = needs_grad || node(input.id()).requires_grad;
  }
  needs_grad = needs_grad && grad_enabled_ && backward_fn != nullptr;
  std::uint32_t id;
  TapeNode& recorded = push_node(id);
  recorded.value = std::move(value);
  if (needs_grad) {
    recorded.requires_grad = true;
    recorded.backward = backward_fn;
    recorded.first_input = std::uint32_t(inputs_.size());
    recorded.num_inputs = std::uint32_t(inputs.size());
    for (const Var& input : inputs) inputs_.push_back(input.id());
  }
  return Var(this, id);
}

Var Tape::record_deferred(const Shape& shape, std::span<const Var> inputs, BackwardFn backward_fn,
                          void (*compute)(Tape& tape, std::uint32_t node)) {
  Var out = record(Tensor(), inputs, backward_fn);
  TapeNode& n = node(out.id());
  n.compute_value = compute;
  n.deferred_shape = shape;
  if (n.num_inputs == 0) {  // no gradient wanted: the inputs kept for compute alone
    n.first_input = std::uint32_t(inputs_.size());
    n.num_inputs = std::uint32_t(inputs.size());
    for (const Var& input : inputs) inputs_.push_back(input.id());
  }
  return out;
}

void Tape::drop_values(std::uint32_t first, std::span<const std::uint32_t> keep) {
  // A kept value not computed yet reads its sources, which may be dropped: computed first.
  for (std::uint32_t id : keep)
    if (id >= first && id < size_ && node(id).compute_value != nullptr) Var(this, id).value();
  for (std::uint32_t id = first; id < size_; ++id) {
    TapeNode& n = node(id);
    if (n.is_leaf || n.requires_grad || std::binary_search(keep.begin(), keep.end(), id)) continue;
    n.compute_value = nullptr;
    n.value = Tensor();
    n.saved[0] = Tensor();
    n.saved[1] = Tensor();
  }
}

Tensor* Tape::grad_of(std::uint32_t id) {
  TapeNode& n = node(id);
  if (!n.requires_grad) return nullptr;
  if (n.row_record != 0) close_row_record(n);
  if (n.grad.defined()) return &n.grad;
  if (n.sparse_parameter.defined()) {
    n.grad = n.sparse_parameter.grad();  // a dense use: rows so far folded in, then dense
  } else {
    n.grad = Tensor::zeros(value_shape(n), DType::kFloat32, value_device(n));
  }
  return &n.grad;
}

Tape::GradTarget Tape::grad_target(std::uint32_t id) {
  TapeNode& n = node(id);
  if (!n.requires_grad) return {};
  if (n.grad.defined() || n.sparse_parameter.defined()) return {grad_of(id), 1.0f};
  n.grad = Tensor::empty(value_shape(n), DType::kFloat32, value_device(n));
#ifndef NDEBUG
  backend::fill(n.grad, std::numeric_limits<float>::quiet_NaN());
#endif
  return {&n.grad, 0.0f};
}

Tape::RowsTarget Tape::grad_rows_target(std::uint32_t id) {
  TapeNode& n = node(id);
  if (!n.requires_grad) return {};
  if (n.row_record != 0) return {&n.grad, row_records_[n.row_record - 1].written.data()};
  if (n.grad.defined() || n.sparse_parameter.defined() || value_shape(n).rank() < 1 ||
      value_device(n) != Device::kCpu)
    return {grad_of(id), nullptr};
  n.grad = Tensor::empty(value_shape(n), DType::kFloat32, value_device(n));
#ifndef NDEBUG
  backend::fill(n.grad, std::numeric_limits<float>::quiet_NaN());
#endif
  if (open_row_records_ == row_records_.size()) row_records_.emplace_back();
  RowRecord& record = row_records_[open_row_records_];
  record.node = id;
  record.written.assign(std::size_t(value_shape(n)[0]), 0);
  n.row_record = ++open_row_records_;
  return {&n.grad, record.written.data()};
}

void Tape::close_row_record(TapeNode& n) {
  const std::vector<std::uint8_t>& record = row_records_[n.row_record - 1].written;
  n.row_record = 0;
  const std::int64_t rows = std::int64_t(record.size());
  // Each run of unwritten rows zeroed as one block.
  for (std::int64_t first = 0; first < rows;) {
    if (record[std::size_t(first)]) {
      ++first;
      continue;
    }
    std::int64_t end = first + 1;
    while (end < rows && !record[std::size_t(end)]) ++end;
    Tensor unwritten = n.grad.rows_view(first, end - first);
    backend::fill(unwritten, 0.0f);
    first = end;
  }
}

std::pair<Tape::GradTarget, Tape::GradTarget> Tape::grad_targets(std::uint32_t first,
                                                                 std::uint32_t second) {
  if (first == second) {
    const GradTarget both{grad_of(first)};
    return {both, both};
  }
  return {grad_target(first), grad_target(second)};
}

const Tensor& Tape::transposed_value(std::uint32_t id) {
  TapeNode& n = node(id);
  WEFT_ASSERT(n.is_leaf && n.value.rank() == 2);
  if (!n.saved[0].defined()) {
    n.saved[0] =
        Tensor::empty(Shape{n.value.row_size(), n.value.rows()}, DType::kFloat32, n.value.device());
    backend::transpose(n.value, n.saved[0]);
  }
  return n.saved[0];
}

Tensor Tape::panels(std::uint32_t id, bool transposed) {
  TapeNode& n = node(id);
  Tensor packed;
  if (n.is_leaf && n.panels[transposed].defined()) return n.panels[transposed];
  backend::pack_panels(Var(this, id).value(), transposed, packed);
  if (n.is_leaf) n.panels[transposed] = packed;
  return packed;
}

void Tape::accumulate_rows(std::uint32_t id, const Tensor& indices, const Tensor& rows) {
  TapeNode& n = node(id);
  if (!n.requires_grad) return;
  if (n.sparse_parameter.defined() && !n.grad.defined()) {
    n.sparse_parameter.add_grad_rows(indices, rows);
    return;
  }
  backend::scatter_add_rows(rows, indices, *grad_of(id));
}

void Tape::backward(Var output) {
  if (output.value().numel() != 1)
    fail("backward", "output ", output.value().describe(),
         " is not a single number; pass a cotangent of its shape");
  backward(output, Tensor::full(output.value().shape(), 1.0f, output.value().device()));
}

void Tape::backward(Var output, const Tensor& cotangent) {
  if (&output.tape() != this) fail("backward", "the output belongs to another tape");
  if (cotangent.shape() != output.value().shape() || cotangent.dtype() != DType::kFloat32)
    fail("backward", "cotangent ", cotangent.describe(), " does not match output ",
         output.value().describe());
  if (cotangent.device() != output.value().device())
    fail("backward", "cotangent is on ", device_name(cotangent.device()), " but output ",
         output.value().describe(), " is on ", device_name(output.value().device()),
         "; move it with Tensor::to()");
  if (!node(output.id()).requires_grad) return;  // nothing upstream is differentiable
  const DenormalScope denormals;                 // once for the pass, not per kernel (denormals.h)
  const BackwardPass pass;                       // the work profile's backward column
  backend::add_into(cotangent, 1.0f, *grad_of(output.id()));
  for (std::int64_t id = output.id(); id >= 0; --id) {
    TapeNode& n = node(std::uint32_t(id));
    if (!n.grad.defined() || n.backward == nullptr) continue;
    if (n.row_record != 0) close_row_record(n);
    n.backward(*this, std::uint32_t(id));
    // An interior gradient is spent once propagated; releasing it keeps peak memory at the
    // live frontier instead of one gradient per node.
    if (!n.is_leaf) n.grad = Tensor();
  }
  // Leaves, and nodes without a backward, read afterwards through Var::grad().
  for (std::uint32_t slot = 0; slot < open_row_records_; ++slot) {
    TapeNode& n = node(row_records_[slot].node);
    if (n.row_record == slot + 1) close_row_record(n);
  }
  open_row_records_ = 0;
}

void Tape::clear() {
  for (std::uint32_t id = 0; id < size_; ++id) node(id) = TapeNode();  // releases tensors
  size_ = 0;
  inputs_.clear();
  open_row_records_ = 0;  // a backward that threw may have left some open
  generation_ = next_generation++;
}

TapeScope::TapeScope(Tape& tape) : previous_(current_tape) { current_tape = &tape; }
TapeScope::~TapeScope() { current_tape = previous_; }

}  // namespace weft
