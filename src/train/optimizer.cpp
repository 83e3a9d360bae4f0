// The optimizer base (state, decay, step bookkeeping), SGD, Adagrad and Adam, and gradient
// clipping. Per-element math is in double and stored as float32, so several steps agree with
// a float64 reference to float rounding.
#include "weft/train/optimizer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tensor_match.h"
#include "weft/core/error.h"
#include "weft/core/named_enum.h"

namespace weft::train {

std::string_view optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(std::string_view name) {
  return parse_named("optimizer", "optimizer", name,
                     {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam},
                     optimizer_kind_name);
}

std::string_view weight_decay_mode_name(WeightDecayMode mode) {
  return mode == WeightDecayMode::kL2 ? "l2" : "decoupled";
}

WeightDecayMode parse_weight_decay_mode(std::string_view name) {
  return parse_named("optimizer", "weight decay mode", name,
                     {WeightDecayMode::kL2, WeightDecayMode::kDecoupled}, weight_decay_mode_name);
}

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
      slots.push_back(Tensor::full(p.shape(), slot_initial_value));
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
  const Shape& slot_shape = slots_[index].empty() ? p.shape() : slots_[index][0].shape();
  if (p.shape() != slot_shape || p.grad().shape() != p.shape())
    fail("optimizer", "parameter '", p.name(), "' is ", p.shape(), " with gradient ",
         p.grad().shape(), " but was ", slot_shape,
         " when the optimizer was made; make a new optimizer after reshaping parameters");
  const bool on_host = p.value().device() == Device::kCpu;
  Tensor value = on_host ? p.value() : p.value().to(Device::kCpu);
  const Tensor grad_tensor = p.grad().to(Device::kCpu);
  float* v = value.data<float>();
  const float* g = grad_tensor.data<float>();
  const std::int64_t n = value.numel();
  if (spec_.weight_decay > 0 && spec_.weight_decay_mode == WeightDecayMode::kL2) {
    decayed_grad_.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i)
      decayed_grad_[std::size_t(i)] = float(double(g[i]) + spec_.weight_decay * double(v[i]));
    g = decayed_grad_.data();
  }
  if (spec_.weight_decay > 0 && spec_.weight_decay_mode == WeightDecayMode::kDecoupled) {
    const double shrink = 1.0 - learning_rate * spec_.weight_decay;
    for (std::int64_t i = 0; i < n; ++i) v[i] = float(double(v[i]) * shrink);
  }
  std::vector<float*> slots;
  for (Tensor& slot : slots_[index]) slots.push_back(slot.data<float>());
  update(v, g, slots, n, learning_rate, steps_);
  if (!on_host) detail::copy_values(value, p.value());
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

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters,
                  spec.momentum > 0 ? std::vector<std::string>{"velocity"}
                                    : std::vector<std::string>{}) {}

 protected:
  void update(float* value, const float* grad, std::span<float* const> slots, std::int64_t n,
              double lr, std::int64_t /*step*/) override {
    const double mu = spec().momentum;
    if (mu == 0) {
      for (std::int64_t i = 0; i < n; ++i) value[i] = float(value[i] - lr * grad[i]);
      return;
    }
    float* velocity = slots[0];
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = mu * velocity[i] + grad[i];
      velocity[i] = float(v);
      const double direction = spec().nesterov ? grad[i] + mu * v : v;
      value[i] = float(value[i] - lr * direction);
    }
  }
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters, {"accumulator"}, float(spec.initial_accumulator)) {}

 protected:
  void update(float* value, const float* grad, std::span<float* const> slots, std::int64_t n,
              double lr, std::int64_t /*step*/) override {
    float* sum = slots[0];
    for (std::int64_t i = 0; i < n; ++i) {
      const double s = double(sum[i]) + double(grad[i]) * grad[i];
      sum[i] = float(s);
      value[i] = float(value[i] - lr * grad[i] / (std::sqrt(s) + spec().epsilon));
    }
  }
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerSpec& spec, std::span<const Parameter> parameters)
      : Optimizer(spec, parameters, {"m", "v"}) {}

 protected:
  void update(float* value, const float* grad, std::span<float* const> slots, std::int64_t n,
              double lr, std::int64_t step) override {
    const double b1 = spec().beta1, b2 = spec().beta2, eps = spec().epsilon;
    const double correction1 = 1.0 - std::pow(b1, double(step));
    const double correction2 = 1.0 - std::pow(b2, double(step));
    float* m = slots[0];
    float* v = slots[1];
    for (std::int64_t i = 0; i < n; ++i) {
      const double g = grad[i];
      const double mi = b1 * m[i] + (1 - b1) * g;
      const double vi = b2 * v[i] + (1 - b2) * g * g;
      m[i] = float(mi);
      v[i] = float(vi);
      value[i] = float(value[i] - lr * (mi / correction1) / (std::sqrt(vi / correction2) + eps));
    }
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

double grad_norm(std::span<const Parameter> parameters) {
  double sum = 0;
  std::set<const void*> seen;
  for (const Parameter& p : parameters) {
    if (!p.trainable() || !seen.insert(p.identity()).second) continue;
    const std::vector<float> g = p.grad().to_float_vector();
    for (float x : g) sum += double(x) * x;
  }
  return std::sqrt(sum);
}

namespace {

// Applies f to every element of each trainable gradient once.
template <typename F>
void transform_grads(std::span<const Parameter> parameters, F f) {
  std::set<const void*> seen;
  for (Parameter p : parameters) {
    if (!p.trainable() || !seen.insert(p.identity()).second) continue;
    const bool on_host = p.grad().device() == Device::kCpu;
    Tensor grad = on_host ? p.grad() : p.grad().to(Device::kCpu);
    float* g = grad.data<float>();
    for (std::int64_t i = 0; i < grad.numel(); ++i) g[i] = f(g[i]);
    if (!on_host) detail::copy_values(grad, p.grad());
  }
}

}  // namespace

double clip_grad_norm(std::span<const Parameter> parameters, double max_norm) {
  if (!(max_norm > 0)) fail("clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  const double norm = grad_norm(parameters);
  if (norm > max_norm && std::isfinite(norm)) {
    const double scale = max_norm / norm;
    transform_grads(parameters, [scale](float g) { return float(g * scale); });
  }
  return norm;
}

void clip_grad_value(std::span<const Parameter> parameters, double limit) {
  if (!(limit > 0)) fail("clip_grad_value", "limit must be > 0, got ", limit);
  const float l = float(limit);
  transform_grads(parameters, [l](float g) { return std::clamp(g, -l, l); });
}

}  // namespace weft::train
