// Optimizers over a model's parameters: SGD (momentum, Nesterov), Adagrad and Adam, each with
// optional weight decay, either L2-coupled (added to the gradient) or decoupled (AdamW: the
// value shrinks by lr * decay directly). Only trainable parameters are updated. The state
// (per-parameter slots and the step count) is exposed as named tensors for checkpoints and
// loaded back with every name and shape checked. Gradient clipping is free functions, so a
// training loop can clip before any optimizer. Updates and clipping run where the parameters
// live (CPU or CUDA) as float32 backend kernels; the slots live beside their parameter, and
// state() / load_state() copy through the host only when a checkpoint is written or read.
//
// Row-sparse gradients (a table with Parameter::set_sparse_grad, e.g. nn::Embedding with
// sparse_gradient): by default the update is *lazy*, as PyTorch's sparse SGD / Adagrad /
// SparseAdam and TF's sparse_apply_* kernels do: only the rows the batch touched (duplicates
// summed first) are updated, each by exactly the dense rule with its gradient row; an untouched
// row keeps its value and its state. For plain SGD and for Adagrad without weight decay this is
// the dense update itself (a zero gradient row does not move). It differs where the dense rule
// moves a row whose gradient is zero:
//  - momentum (SGD): an untouched row neither applies nor decays its velocity;
//  - Adam: an untouched row's m and v are not decayed; the bias correction uses the optimizer's
//    step count (as SparseAdam), not the number of times the row was touched;
//  - weight decay, L2 or decoupled: applied to the touched rows only, when they are touched.
// SparseUpdate::kDense gives back the exact dense update of every row (the gradient is first
// scatter-added into the full tensor), at the dense cost.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/io/safetensors.h"

WEFT_API_BEGIN
namespace weft::train {

#define WEFT_OPTIMIZER_KINDS(X) \
  X(kSgd, "sgd")                \
  X(kAdagrad, "adagrad")        \
  X(kAdam, "adam")
enum class OptimizerKind { WEFT_OPTIMIZER_KINDS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(OptimizerKind, WEFT_OPTIMIZER_KINDS, optimizer_kind_name, parse_optimizer_kind,
                "optimizer", "optimizer")
// kL2: g += decay * value before the update. kDecoupled: value -= lr * decay * value.
#define WEFT_WEIGHT_DECAY_MODES(X) \
  X(kL2, "l2")                     \
  X(kDecoupled, "decoupled")
enum class WeightDecayMode { WEFT_WEIGHT_DECAY_MODES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(WeightDecayMode, WEFT_WEIGHT_DECAY_MODES, weight_decay_mode_name,
                parse_weight_decay_mode, "optimizer", "weight decay mode")
// How a row-sparse gradient updates its parameter: kLazy, only the touched rows (the rows and
// their state, see above); kDense, every row, exactly as a dense gradient would.
#define WEFT_SPARSE_UPDATES(X) \
  X(kLazy, "lazy")             \
  X(kDense, "dense")
enum class SparseUpdate { WEFT_SPARSE_UPDATES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(SparseUpdate, WEFT_SPARSE_UPDATES, sparse_update_name, parse_sparse_update,
                "optimizer", "sparse update")

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kSgd;
  // SGD: v = momentum * v + g; value -= lr * v (or lr * (g + momentum * v) with Nesterov).
  double momentum = 0.0;
  bool nesterov = false;
  // Adagrad: s += g^2; value -= lr * g / (sqrt(s) + epsilon), s starting at initial_accumulator.
  double initial_accumulator = 0.0;
  // Adam: m, v moving averages of g and g^2, bias-corrected; value -= lr * m^ / (sqrt(v^) + eps).
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;  // Adam and Adagrad
  double weight_decay = 0.0;
  WeightDecayMode weight_decay_mode = WeightDecayMode::kL2;
  // Per-parameter rates: a parameter whose name starts with a prefix here is updated with
  // the learning rate times its scale (the first matching prefix wins; others use 1). E.g.
  // {"embedding/", 0.1} fine-tunes pretrained word vectors ten times slower than the rest.
  std::vector<std::pair<std::string, double>> learning_rate_scales{};
  // Row-sparse gradients: lazy (touched rows only) or the exact dense update; see above.
  SparseUpdate sparse_update = SparseUpdate::kLazy;

  // The scale for a parameter name (1 when no prefix matches).
  double learning_rate_scale(const std::string& name) const;

  // Throws weft::Error naming the bad field.
  void validate() const;
  // "adam beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0.01 (decoupled)", for logs.
  std::string describe() const;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const OptimizerSpec& spec() const { return spec_; }
  std::string_view kind_name() const { return optimizer_kind_name(spec_.kind); }
  // The parameters it updates: the trainable ones it was given, in order, each once.
  const std::vector<Parameter>& parameters() const { return parameters_; }
  // Updates made so far.
  std::int64_t steps() const { return steps_; }

  // One update of every parameter from its accumulated gradient. Gradients are left as they
  // are (call zero_grad before the next backward).
  void step(double learning_rate);
  void zero_grad();

  // The state as tensors: "<kind>/step" (int32 [], on the host) and "<kind>/<slot>/<parameter
  // name>" (the parameter's shape, on its device), e.g. "adam/m/fc/weight". The tensors share
  // the live state: save or clone them before the next step.
  io::TensorMap state() const;
  // Every difference between `state` and what state() holds (names, dtypes, shapes), one
  // line each; empty when it can be loaded.
  std::vector<std::string> state_problems(const io::TensorMap& state) const;
  // Checks that `state` has exactly the names, dtypes and shapes state() has, throwing
  // "[where] ..." with every missing, unexpected or mismatched entry; loads nothing.
  void check_state(const io::TensorMap& state, const std::string& where) const;
  // check_state, then copies the values in (to each slot's device, wherever `state` lives).
  void load_state(const io::TensorMap& state, const std::string& where = "optimizer");

  // The rule applied to tensors held elsewhere (weft.torch.Adam over torch's tensors), at
  // `step` (counting from 1, as the bias correction counts) and this rate: `value` by a dense
  // `grad` of its shape, or, where `indices` is defined, lazily by `grad` = the rows at
  // `indices` (int32 [k], sorted and distinct), as a row-sparse gradient is. `slots` are
  // slot_names()'s, each of value's shape; everything float32 on value's device.
  void update_tensor(double learning_rate, std::int64_t step, Tensor& value, const Tensor& grad,
                     const Tensor& indices, std::span<Tensor> slots) const;
  const std::vector<std::string>& slot_names() const { return slot_names_; }

 protected:
  Optimizer(const OptimizerSpec& spec, std::span<const Parameter> parameters,
            std::vector<std::string> slot_names, float slot_initial_value = 0.0f);
  // The float32 constants of this rule's update at `learning_rate` (which already has the
  // parameter's scale), weight decay included; `step` counts from 1. The base class applies
  // them to the whole parameter or to a row-sparse gradient's rows, with the slots in
  // slot_names order.
  virtual backend::UpdateArgs update_args(double learning_rate, std::int64_t step) const = 0;

 private:
  void update_parameter(std::size_t index, double learning_rate);
  // The backend's update, dense or (indices defined) of the rows at indices.
  static void apply(const backend::UpdateArgs& args, Tensor& value, const Tensor& grad,
                    const Tensor& indices, Tensor* slot0, Tensor* slot1);

  OptimizerSpec spec_;
  std::vector<Parameter> parameters_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<Tensor>> slots_;  // [parameter][slot], float32 on the parameter's device
  std::int64_t steps_ = 0;
};

// The optimizer the spec describes, over the trainable parameters among `parameters`
// (duplicated handles count once). Throws if the spec is invalid or two parameters share a name.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec,
                                          std::span<const Parameter> parameters);

// The global L2 norm of the trainable parameters' gradients (each gradient's sum of squares is
// taken on its device; one float per parameter comes back to the host). A row-sparse gradient
// counts its rows, duplicates summed, which is the norm of its dense tensor; clipping scales or
// clamps those rows and leaves the gradient row-sparse.
double grad_norm(std::span<const Parameter> parameters);
// When the global norm exceeds max_norm (> 0), scales every trainable gradient by
// max_norm / norm. Returns the norm before clipping.
double clip_grad_norm(std::span<const Parameter> parameters, double max_norm);
// Clamps every trainable gradient element to [-limit, limit] (limit > 0).
void clip_grad_value(std::span<const Parameter> parameters, double limit);

}  // namespace weft::train
WEFT_API_END
