// The optimizer base (state, step bookkeeping), SGD, Adagrad and Adam, and gradient clipping.
// The per-element work is the backend's apply_update / scale_and_clamp / sum_of_squares
// (weft/backend/tensor_ops.h) on the parameters' device, in float32; per-step constants (bias
// corrections, decay factors) are worked out here in double, once per parameter.
#include "weft/train/optimizer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tensor_match.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"

namespace weft::train {

void OptimizerSpec::validate() const {
  auto check = [](bool ok, const char* field, double value, const char* rule) {
    if (!ok || !std::isfinite(value)) fail("optimizer", field, " must be ", rule, ", got ", value);
  };
  check(momentum >= 0 && momentum < 1, "momentum", momentum, "in [0, 1)");
  if (nesterov && momentum == 0) fail("optimizer", "nesterov needs a momentum > 0");
  check(initial_accumulator >= 0, "initial_accumulator", initial_accumulator, ">= 0");
  check(beta1 >= 0 && beta1 < 1, "beta1", beta1, "in [0, 1)");
  check(beta2 >= 0 && beta2 < 1, "beta2", beta2, "in [0, 1)");
  check(epsilon > 0, "epsilon", epsilon, "> 0");
  check(weight_decay >= 0, "weight_decay", weight_decay, ">= 0");
  for (const auto& [prefix, scale] : learning_rate_scales) {
    if (!(scale >= 0) || !std::isfinite(scale))
      fail("optimizer", "the learning-rate scale of '", prefix, "' must be finite and >= 0, got ",
           scale);
  }
}

double OptimizerSpec::learning_rate_scale(const std::string& name) const {
  for (const auto& [prefix, scale] : learning_rate_scales) {
    if (name.starts_with(prefix)) return scale;
  }
  return 1.0;
}

std::string OptimizerSpec::describe() const {
  std::string text(optimizer_kind_name(kind));
  if (kind == OptimizerKind::kSgd && momentum > 0)
    text += fmt::format(" momentum={}{}", momentum, nesterov ? " nesterov" : "");
  if (kind == OptimizerKind::kAdagrad)
    text += fmt::format(" initial_accumulator={} eps={}", initial_accumulator, epsilon);
  if (kind == OptimizerKind::kAdam)
    text += fmt::format(" beta1={} beta2={} eps={}", beta1, beta2, epsilon);
  if (weight_decay > 0)
    text += fmt::format(" weight_decay={} ({})", weight_decay,
                        weight_decay_mode_name(weight_decay_mode));
  for (const auto& [prefix, scale] : learning_rate_scales)
    text += fmt::format(" lr_scale[{}]={}", prefix, scale);
  // Lazy is the default and is not named, so the descriptions of earlier checkpoints still match.
  if (sparse_update == SparseUpdate::kDense) text += " sparse_update=dense";
  return text;
}

namespace {

// The trainable parameters, each handle once, with unique names.
std::vector<Parameter> trainable_once(std::span<const Parameter> parameters) {
  std::vector<Parameter> out;
  std::set<const void*> seen;
  std::set<std::string> names;
  for (const Parameter& p : parameters) {
    if (!p.defined()) fail("optimizer", "a parameter handle is undefined");
    if (!p.trainable() || !seen.insert(p.identity()).second) continue;
    if (!names.insert(p.name()).second)
      fail("optimizer", "two different parameters are named '", p.name(),
           "'; names must be unique to save and load optimizer state");
    out.push_back(p);
  }
  return out;
}

}  // namespace

Optimizer::Optimizer(const OptimizerSpec& spec, std::span<const Parameter> parameters,
                     std::vector<std::string> slot_names, float slot_initial_value)
    : spec_(spec), parameters_(trainable_once(parameters)), slot_names_(std::move(slot_names)) {
  spec_.validate();
  for (const Parameter& p : parameters_) {
    std::vector<Tensor> slots;
    for (std::size_t k = 0; k < slot_names_.size(); ++k)
      slots.push_back(Tensor::full(p.shape(), slot_initial_value, p.value().device()));
    slots_.push_back(std::move(slots));
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::zero_grad() {
  for (Parameter& p : parameters_) p.zero_grad();
}

void Optimizer::step(double learning_rate) {
  if (!(learning_rate >= 0) || !std::isfinite(learning_rate))
    fail("optimizer", "the learning rate must be finite and >= 0, got ", learning_rate);
  ++steps_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    update_parameter(i, learning_rate * spec_.learning_rate_scale(parameters_[i].name()));
  }
}

void Optimizer::update_parameter(std::size_t index, double learning_rate) {
  Parameter& p = parameters_[index];
  std::vector<Tensor>& slots = slots_[index];
  const Shape& slot_shape = slots.empty() ? p.shape() : slots[0].shape();
  // A row-sparse gradient is updated lazily unless the spec asks for the dense update, which
  // reads the gradient densely (its rows scatter-added into the full tensor).
  const bool lazy = p.grad_is_row_sparse() && spec_.sparse_update == SparseUpdate::kLazy;
  const Tensor& grad = lazy ? p.row_sparse_grad().rows : p.grad();
  const Shape grad_shape = lazy ? p.shape() : grad.shape();
  if (p.shape() != slot_shape || grad_shape != p.shape())
    fail("optimizer", "parameter '", p.name(), "' is ", p.shape(), " with gradient ", grad_shape,
         " but was ", slot_shape,
         " when the optimizer was made; make a new optimizer after reshaping parameters");
  const Device device = p.value().device();
  const Device slot_device = slots.empty() ? device : slots[0].device();
  if (grad.device() != device || slot_device != device)
    fail("optimizer", "parameter '", p.name(), "' is on ", device_name(device),
         " with its gradient on ", device_name(grad.device()), " and its optimizer state on ",
         device_name(slot_device), "; make the optimizer after placing the parameters");
  Tensor* slot0 = slots.size() > 0 ? &slots[0] : nullptr;
  Tensor* slot1 = slots.size() > 1 ? &slots[1] : nullptr;
  apply(update_args(learning_rate, steps_), p.value(), grad,
        lazy ? p.row_sparse_grad().indices : Tensor(), slot0, slot1);
}

void Optimizer::apply(const backend::UpdateArgs& args, Tensor& value, const Tensor& grad,
                      const Tensor& indices, Tensor* slot0, Tensor* slot1) {
  if (!indices.defined())
    backend::apply_update(args, value, grad, slot0, slot1);
  else if (indices.numel() > 0)
    backend::apply_update_rows(args, value, indices, grad, slot0, slot1);
}

void Optimizer::update_tensor(double learning_rate, std::int64_t step, Tensor& value,
                              const Tensor& grad, const Tensor& indices,
                              std::span<Tensor> slots) const {
  if (!(learning_rate >= 0) || !std::isfinite(learning_rate))
    fail("optimizer", "the learning rate must be finite and >= 0, got ", learning_rate);
  if (step < 1) fail("optimizer", "the step counts from 1, got ", step);
  if (slots.size() != slot_names_.size())
    fail("optimizer", kind_name(), " keeps ", slot_names_.size(), " slots per tensor, got ",
         slots.size());
  apply(update_args(learning_rate, step), value, grad, indices,
        slots.size() > 0 ? &slots[0] : nullptr, slots.size() > 1 ? &slots[1] : nullptr);
}

io::TensorMap Optimizer::state() const {
  io::TensorMap out;
  const std::string kind(kind_name());
  if (steps_ > std::numeric_limits<std::int32_t>::max())
    fail("optimizer", "the step count ", steps_, " does not fit the int32 state tensor");
  out[kind + "/step"] =
      Tensor::from_vector(Shape{}, std::vector<std::int32_t>{std::int32_t(steps_)});
  for (std::size_t i = 0; i < parameters_.size(); ++i)
    for (std::size_t k = 0; k < slot_names_.size(); ++k)
      out[kind + "/" + slot_names_[k] + "/" + parameters_[i].name()] = slots_[i][k];
  return out;
}

std::vector<std::string> Optimizer::state_problems(const io::TensorMap& state) const {
  std::vector<detail::ExpectedTensor> expected;
  for (const auto& [name, tensor] : this->state())
    expected.push_back({name, tensor.shape(), tensor.dtype()});
  std::vector<std::string> problems = detail::compare_tensors(
      expected, state, "optimizer state", fmt::format("this {} optimizer", kind_name()));
  const auto step = state.find(std::string(kind_name()) + "/step");
  if (problems.empty() && step->second.to_int_vector()[0] < 0)
    problems.push_back(
        fmt::format("the optimizer step count is negative ({})", step->second.to_int_vector()[0]));
  if (!problems.empty()) return problems;
  // Values a run could not have produced would resume into NaN: every slot is finite, and
  // Adagrad's accumulator and Adam's second moment (sums of squares) are never negative.
  const std::string kind(kind_name());
  for (const Parameter& p : parameters_)
    for (const std::string& slot : slot_names_) {
      const std::string name = kind + "/" + slot + "/" + p.name();
      const bool non_negative = slot == "accumulator" || slot == "v";
      const std::vector<float> values = state.at(name).to_float_vector();
      for (std::size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i]) || (non_negative && values[i] < 0)) {
          problems.push_back(
              fmt::format("optimizer state '{}' holds {} at element {}{}", name, values[i], i,
                          non_negative ? " (it must be finite and >= 0)" : " (it must be finite)"));
          break;
        }
    }
  return problems;
}

void Optimizer::check_state(const io::TensorMap& state, const std::string& where) const {
  const std::vector<std::string> problems = state_problems(state);
  if (!problems.empty()) fail(where, detail::join(problems));
}

void Optimizer::load_state(const io::TensorMap& state, const std::string& where) {
  check_state(state, where);
  const std::string kind(kind_name());
  steps_ = state.at(kind + "/step").to_int_vector()[0];
  for (std::size_t i = 0; i < parameters_.size(); ++i)
    for (std::size_t k = 0; k < slot_names_.size(); ++k)
      detail::copy_values(state.at(kind + "/" + slot_names_[k] + "/" + parameters_[i].name()),
                          slots_[i][k]);
}

namespace {

// The arguments every rule shares: the rate and the weight decay of the spec's kind.
backend::UpdateArgs base_args(const OptimizerSpec& spec, backend::UpdateRule rule, double lr) {
  backend::UpdateArgs args;
  args.rule = rule;
  args.learning_rate = float(lr);
  if (spec.weight_decay > 0 && spec.weight_decay_mode == WeightDecayMode::kL2)
    args.l2 = float(spec.weight_decay);
  if (spec.weight_decay > 0 && spec.weight_decay_mode == WeightDecayMode::kDecoupled)
    args.shrink = float(1.0 - lr * spec.weight_decay);
  return args;
}

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters,
                  spec.momentum > 0 ? std::vector<std::string>{"velocity"}
                                    : std::vector<std::string>{}) {}

 protected:
  backend::UpdateArgs update_args(double lr, std::int64_t /*step*/) const override {
    backend::UpdateArgs args = base_args(spec(), backend::UpdateRule::kSgd, lr);
    args.momentum = float(spec().momentum);
    args.nesterov = spec().nesterov;
    return args;
  }
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters, {"accumulator"}, float(spec.initial_accumulator)) {}

 protected:
  backend::UpdateArgs update_args(double lr, std::int64_t /*step*/) const override {
    backend::UpdateArgs args = base_args(spec(), backend::UpdateRule::kAdagrad, lr);
    args.epsilon = float(spec().epsilon);
    return args;
  }
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters, {"m", "v"}) {}

 protected:
  // value -= lr * (m / c1) / (sqrt(v / c2) + eps), with c_k = 1 - beta_k^step, written as
  // step_size * m / (sqrt(v) / sqrt(c2) + eps) so the kernel divides once per element. The
  // step is the optimizer's, also for the rows of a lazy update (as PyTorch's SparseAdam).
  backend::UpdateArgs update_args(double lr, std::int64_t step) const override {
    backend::UpdateArgs args = base_args(spec(), backend::UpdateRule::kAdam, lr);
    args.beta1 = float(spec().beta1);
    args.beta2 = float(spec().beta2);
    args.one_minus_beta1 = float(1.0 - spec().beta1);
    args.one_minus_beta2 = float(1.0 - spec().beta2);
    args.epsilon = float(spec().epsilon);
    args.step_size = float(lr / (1.0 - std::pow(spec().beta1, double(step))));
    args.rsqrt_correction2 = float(1.0 / std::sqrt(1.0 - std::pow(spec().beta2, double(step))));
    return args;
  }
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec,
                                          std::span<const Parameter> parameters) {
  switch (spec.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<Sgd>(spec, parameters);
    case OptimizerKind::kAdagrad:
      return std::make_unique<Adagrad>(spec, parameters);
    case OptimizerKind::kAdam:
      return std::make_unique<Adam>(spec, parameters);
  }
  fail("optimizer", "unknown optimizer kind");
}

namespace {

// Each trainable parameter once (a handle given twice is clipped once).
template <typename F>
void for_each_trainable(std::span<const Parameter> parameters, F f) {
  std::set<const void*> seen;
  for (Parameter p : parameters)
    if (p.trainable() && seen.insert(p.identity()).second) f(p);
}

}  // namespace

// What clipping reads and scales: a row-sparse gradient's rows (coalesced, so a row used twice
// counts once with its summed gradient, as in the dense tensor), else the dense gradient.
Tensor& clip_target(Parameter& p) {
  return p.grad_is_row_sparse() ? p.row_sparse_grad().rows : p.grad();
}

double grad_norm(std::span<const Parameter> parameters) {
  double sum = 0;
  for_each_trainable(parameters, [&sum](Parameter& p) {
    const Tensor& g = clip_target(p);
    if (g.numel() > 0) sum += backend::sum_of_squares(g);
  });
  return std::sqrt(sum);
}

double clip_grad_norm(std::span<const Parameter> parameters, double max_norm) {
  if (!(max_norm > 0)) fail("clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  const double norm = grad_norm(parameters);
  if (norm > max_norm && std::isfinite(norm)) {
    const float scale = float(max_norm / norm);
    const float unlimited = std::numeric_limits<float>::infinity();
    for_each_trainable(parameters, [&](Parameter& p) {
      Tensor& g = clip_target(p);
      if (g.numel() > 0) backend::scale_and_clamp(g, scale, unlimited);
    });
  }
  return norm;
}

void clip_grad_value(std::span<const Parameter> parameters, double limit) {
  if (!(limit > 0)) fail("clip_grad_value", "limit must be > 0, got ", limit);
  for_each_trainable(parameters, [&](Parameter& p) {
    Tensor& g = clip_target(p);
    if (g.numel() > 0) backend::scale_and_clamp(g, 1.0f, float(limit));
  });
}

}  // namespace weft::train
