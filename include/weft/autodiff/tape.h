// Reverse-mode autodiff over batched tensors. A Tape records every op applied to Vars as a
// node (value, inputs, backward function) in creation order, which is a topological order,
// so backward() is one reverse sweep. Gradients are accumulated (+=) into each input, so a
// value used by several consumers receives the sum. Parameters are leaves whose gradient
// lives in the Parameter and accumulates across backward calls until zero_grad(); a table
// that asked for row-sparse gradients (an embedding's) keeps the rows its gathers produced
// instead of a dense tensor of its whole shape.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weft/core/export.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft {

class Tape;
class Var;

// Part of a gradient held as rows: row indices[k] of the full gradient is rows[k], every other
// row zero. indices int32 [k], rows float32 [k, ...] (the parameter's row shape), both on the
// parameter's device.
struct RowSparseGrad {
  Tensor indices;
  Tensor rows;
};

// A trainable tensor with its gradient. A cheap shared handle: copies name the same one.
class Parameter {
 public:
  Parameter() = default;
  Parameter(std::string name, Tensor value, bool trainable = true);

  bool defined() const { return data_ != nullptr; }
  const std::string& name() const { return data_->name; }
  Tensor& value() { return data_->value; }
  const Tensor& value() const { return data_->value; }
  // The dense gradient, of the value's shape. Rows recorded as a row-sparse gradient are first
  // scatter-added into it (in recording order: the sum the dense path makes), and from then
  // on the gradient is held densely until zero_grad().
  Tensor& grad();
  const Tensor& grad() const;
  bool trainable() const { return data_->trainable; }
  void set_trainable(bool trainable) { data_->trainable = trainable; }
  void zero_grad();

  // Row-sparse gradients (off by default; for tables read by rows, e.g. nn::Embedding): a
  // gather of this parameter (embedding_lookup, gather_rows) records its gradient as
  // (indices, rows) instead of scatter-adding into the dense tensor, and zero_grad() clears
  // the rows instead of filling the whole tensor, so a step costs what the batch touched.
  // Any other op that takes a gradient of the parameter switches it to the dense tensor for
  // that step (correct, not cheap). Needs a leading row axis.
  void set_sparse_grad(bool enabled);
  bool sparse_grad() const { return data_->sparse_grad; }
  // True when the whole gradient is the recorded rows: sparse_grad() and the dense tensor
  // has not been used since zero_grad() (grad() not called, no dense op reached it).
  bool grad_is_row_sparse() const;
  // The gradient's rows, coalesced: indices sorted and distinct, the rows of a repeated index
  // summed. Requires grad_is_row_sparse(); untouched parameters give k = 0. The rows may be
  // scaled in place (clipping); the result is valid until the next backward or zero_grad.
  RowSparseGrad& row_sparse_grad();
  // For op implementations (and tests): adds rows[i] to row indices[i] of the gradient
  // (int32 [n], float32 [n, ...] on the parameter's device); kept by reference, so the
  // caller must not write `rows` afterwards. Requires sparse_grad().
  void add_grad_rows(const Tensor& indices, const Tensor& rows);
  const Shape& shape() const { return data_->value.shape(); }
  // Identifies the parameter (copies of a handle share it), for de-duplication.
  const void* identity() const { return data_.get(); }

 private:
  friend class Tape;
  struct Data {
    std::string name;
    Tensor value;
    Tensor grad;
    bool trainable = true;
    bool sparse_grad = false;
    bool dense_grad_used = false;  // grad may hold nonzeros (zero_grad must fill it)
    bool coalesced = false;        // grad_rows is one coalesced piece
    std::vector<RowSparseGrad> grad_rows;
    // The node this parameter has on a tape's current recording, so that using it many
    // times in one step makes one leaf (checked against the tape's generation).
    const Tape* tape = nullptr;
    std::uint64_t generation = 0;
    std::uint32_t node = 0;
  };
  std::shared_ptr<Data> data_;
};

// A value recorded on a tape: a handle (tape, node id). Op bodies are written over Vars.
class Var {
 public:
  Var() = default;
  Var(Tape* tape, std::uint32_t id) : tape_(tape), id_(id) {}
  // Uses the parameter on the current thread's tape (see TapeScope).
  Var(const Parameter& parameter);  // NOLINT: implicit, so op bodies read like math

  bool defined() const { return tape_ != nullptr; }
  Tape& tape() const { return *tape_; }
  std::uint32_t id() const { return id_; }
  // The value; one recorded as computed when first read (the loom's argument rows,
  // autodiff/argument_rows.h) is computed here. shape() never computes it.
  const Tensor& value() const;
  const Shape& shape() const;
  bool requires_grad() const;
  // The gradient accumulated by the last backward(); undefined if none reached this Var.
  const Tensor& grad() const;

 private:
  Tape* tape_ = nullptr;
  std::uint32_t id_ = 0;
};

// How a node propagates its gradient: reads node.grad and the inputs, accumulates into the
// inputs' gradients through tape.grad_of(input), through tape.grad_target(input) where its
// kernel writes every element (a product, a copy), or through tape.grad_rows_target(input)
// where it adds whole rows (the loom's gathers).
using BackwardFn = void (*)(Tape& tape, std::uint32_t node);

// Per-op state saved for backward: the inputs, extra tensors and scalar attributes.
struct TapeNode {
  Tensor value;
  Tensor grad;
  BackwardFn backward = nullptr;
  std::uint32_t first_input = 0;
  std::uint32_t num_inputs = 0;
  bool requires_grad = false;
  bool is_leaf = false;  // variables and parameters keep their gradient after backward
  // A parameter leaf with row-sparse gradients: its gradient binds lazily (grad_of), and
  // accumulate_rows hands gathered rows to the parameter instead.
  Parameter sparse_parameter;
  Tensor saved[2];  // a leaf's saved[0]: its value transposed, once asked for (transposed_value)
  std::int64_t int_attrs[3] = {0, 0, 0};
  float float_attrs[2] = {0, 0};
  // 1 + the slot of its record of written gradient rows while grad_rows_target has one open,
  // else 0.
  std::uint32_t row_record = 0;
  // A value computed only when first read (Var::value), `deferred_shape` until then: the
  // loom's argument rows, which the ops that read rows where they lie never compute.
  void (*compute_value)(Tape& tape, std::uint32_t node) = nullptr;
  Shape deferred_shape;
  // A 2-D leaf's value in the row products' panels, as is [0] and transposed [1] (Tape::panels).
  Tensor panels[2];
};

class Tape {
 public:
  Tape();
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // The current thread's tape: the innermost TapeScope's, or a per-thread default.
  static Tape& current();

  // A value with no gradient.
  Var constant(Tensor value);
  // A leaf whose gradient backward() computes (read it with Var::grad()).
  Var variable(Tensor value);
  // A parameter's leaf on this tape; the same node every time within one recording.
  Var parameter(const Parameter& parameter);

  // Backpropagates from a one-element output (seed 1) or from any output with a cotangent of
  // its shape. Parameters' gradients accumulate; run zero_grad on them between steps.
  void backward(Var output);
  void backward(Var output, const Tensor& cotangent);

  // Drops every node (keeping capacity, so a training loop does not reallocate) and starts
  // a new recording. Vars from before are invalid afterwards.
  void clear();

  // When off, ops record values only: no backward functions, no saved tensors (inference).
  void set_grad_enabled(bool enabled) { grad_enabled_ = enabled; }
  bool grad_enabled() const { return grad_enabled_; }

  std::size_t size() const { return size_; }
  std::uint64_t generation() const { return generation_; }

  // Drops the values of the nodes from `first` on that no gradient needs (no backward, not a
  // leaf) and are not in `keep` (sorted ids): an inference loop on one long-lived tape keeps
  // only the values it still reads (flow::EngineOptions::drop_step_intermediates). The nodes
  // stay; a dropped node's value is an undefined tensor, and its storage goes back to the pool
  // unless a kept value views it.
  void drop_values(std::uint32_t first, std::span<const std::uint32_t> keep);

  // For op implementations --------------------------------------------------------------
  // Records an op's output. Backward is kept only if grad is enabled and an input needs it.
  Var record(Tensor value, std::span<const Var> inputs, BackwardFn backward_fn);
  Var record(Tensor value, std::initializer_list<Var> inputs, BackwardFn backward_fn) {
    return record(std::move(value), std::span<const Var>(inputs.begin(), inputs.size()),
                  backward_fn);
  }
  // Records a value computed only when first read (TapeNode::compute_value), of `shape` until
  // then; its inputs are kept, for `compute` to read, even when no gradient is wanted.
  Var record_deferred(const Shape& shape, std::span<const Var> inputs, BackwardFn backward_fn,
                      void (*compute)(Tape& tape, std::uint32_t node));
  // Nodes never move once recorded (they live in fixed-size blocks), so references to a
  // node or its value stay valid while more ops are recorded.
  TapeNode& node(std::uint32_t id) { return blocks_[id >> kBlockBits][id & (kBlockSize - 1)]; }
  const TapeNode& node(std::uint32_t id) const {
    return blocks_[id >> kBlockBits][id & (kBlockSize - 1)];
  }
  // The id of input k of a node.
  std::uint32_t input(std::uint32_t id, std::uint32_t k) const {
    return inputs_[node(id).first_input + k];
  }
  // The gradient buffer of a node, zero-filled on first use, for kernels to accumulate into;
  // nullptr when the node does not require a gradient.
  Tensor* grad_of(std::uint32_t node);
  // The gradient buffer of a node for a kernel that writes every element of it, and the
  // factor (a GEMM's beta) for what it holds: 0 when no gradient has reached the node yet, so
  // the buffer is fresh and not zero-filled (the kernel must overwrite all of it; debug builds
  // fill it with NaN to catch one that does not), 1 when it must be added into. Saves the
  // zero fill and a read of the buffer for the first gradient to reach a node.
  struct GradTarget {
    Tensor* grad = nullptr;  // nullptr when the node does not require a gradient
    float beta = 1.0f;
    bool fresh() const { return beta == 0.0f; }
  };
  GradTarget grad_target(std::uint32_t node);
  // The targets of a kernel that writes two gradients at once: taken before either is written,
  // so one node as both is added into (never fresh) rather than read before it is written.
  std::pair<GradTarget, GradTarget> grad_targets(std::uint32_t first, std::uint32_t second);
  // The gradient of a node for a kernel that adds whole rows into it (the loom's scatters), with
  // a byte per row saying whether the row holds a gradient yet: a row not yet written is
  // written rather than added into, and marked, so a gradient assembled from the rows its
  // consumers scatter is never zero-filled first. `written` is null where every row must be
  // added into (the gradient existed already, or lives on a device whose kernels do not read
  // the record). Rows still unwritten are zeroed, and the record closed, before anything else
  // reads the gradient: grad_of, grad_target, the node's own backward, the end of backward().
  struct RowsTarget {
    Tensor* grad = nullptr;  // nullptr when the node does not require a gradient
    std::uint8_t* written = nullptr;
  };
  RowsTarget grad_rows_target(std::uint32_t node);
  // A 2-D leaf's value transposed ([c, r] for [r, c]), made at the first call in a recording
  // and kept with the node: a backward product that reads a weight transposed at every loom
  // level reads this copy untransposed instead, which the CPU's BLAS runs faster
  // (bench/log/2026-11-26-weight-transposes.md). The value as it was at that first call.
  const Tensor& transposed_value(std::uint32_t leaf);
  // A weight in the panels the row products read (kernels.def: pack_panels), transposed or not:
  // for a leaf made at the first call in a recording and kept with the node (as
  // transposed_value), for any other value made anew.
  Tensor panels(std::uint32_t id, bool transposed);
  // For gathers: grad[indices[i]] += rows[i] (indices int32, rows float32 [n, ...]). A
  // parameter with row-sparse gradients records the rows (no copy: `rows` must not be written
  // afterwards); any other node gets them scatter-added into grad_of(node).
  void accumulate_rows(std::uint32_t node, const Tensor& indices, const Tensor& rows);

 private:
  static constexpr int kBlockBits = 10;
  static constexpr std::uint32_t kBlockSize = 1u << kBlockBits;
  // A fresh node at the end (blocks are kept across clear(), so steady state allocates none).
  TapeNode& push_node(std::uint32_t& id);
  // Zeroes the rows of n.grad that grad_rows_target's record says are unwritten, and closes it.
  void close_row_record(TapeNode& n);

  std::vector<std::unique_ptr<TapeNode[]>> blocks_;
  std::uint32_t size_ = 0;
  std::vector<std::uint32_t> inputs_;
  // grad_rows_target's records, reused across backward passes; slots [0, open_row_records_)
  // are in use during one.
  struct RowRecord {
    std::uint32_t node = 0;
    std::vector<std::uint8_t> written;  // one byte per row of the node's gradient
  };
  std::vector<RowRecord> row_records_;
  std::uint32_t open_row_records_ = 0;
  bool grad_enabled_ = true;
  std::uint64_t generation_;
};

// Makes `tape` the current thread's tape for its lifetime (nestable).
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_;
};

}  // namespace weft
WEFT_API_END
