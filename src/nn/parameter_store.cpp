// ParameterStore: creation in order, look-up by full name, and the name-scope stack.
#include "weft/nn/parameter_store.h"

#include <limits>

#include "weft/backend/cuda.h"
#include "weft/core/error.h"

namespace weft::nn {
namespace {

constexpr const char* kWhere = "ParameterStore";

void require_name(const std::string& name, const char* what) {
  if (name.empty()) fail(kWhere, what, " must not be empty");
}

}  // namespace

ParameterStore::ParameterStore(std::uint64_t seed, Device device) : rng_(seed), device_(device) {
  if (device_ != Device::kCpu && !cuda_available())
    fail(kWhere, "the store's device is ", device_name(device_),
         " but CUDA cannot be used: ", cuda_unavailable_reason());
}

Parameter ParameterStore::create(const std::string& name, const Shape& shape,
                                 const Initializer& init, bool trainable) {
  require_name(name, "a parameter name");
  const std::string full = scoped(name);
  if (index_.count(full) != 0)
    fail(kWhere, "parameter '", full, "' already exists (shape ",
         parameters_[index_.at(full)].shape().to_string(),
         "); give the layer another name or open another scope");
  std::int64_t numel = 1;
  for (std::int64_t d : shape.dims()) {
    if (d < 0) fail(kWhere, "parameter '", full, "' has a negative extent: ", shape.to_string());
    if (d != 0 && numel > std::numeric_limits<std::int64_t>::max() / d)
      fail(kWhere, "parameter '", full, "' of shape ", shape.to_string(), " is too large");
    numel *= d;
  }
  if (element_budget_ > 0 && numel > element_budget_ - elements_)
    fail(kWhere, "parameter '", full, "' of shape ", shape.to_string(), " would bring the ",
         "parameters to ", elements_, " + ", numel, " elements, more than the ", element_budget_,
         " ", budget_reason_);
  elements_ += numel;
  Tensor value = Tensor::zeros(shape);
  if (init) init(value, rng_);
  Parameter parameter(full, device_ == Device::kCpu ? std::move(value) : value.to(device_),
                      trainable);
  index_.emplace(full, parameters_.size());
  parameters_.push_back(parameter);
  return parameter;
}

void ParameterStore::set_element_budget(std::int64_t max_elements, std::string reason) {
  element_budget_ = max_elements;
  budget_reason_ = std::move(reason);
}

Parameter ParameterStore::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::string hint;
    if (!scopes_.empty() && index_.count(scoped(name)) != 0)
      hint = "; get() takes full names: did you mean '" + scoped(name) + "'?";
    fail(kWhere, "no parameter named '", name, "' among ", parameters_.size(), " parameters", hint);
  }
  return parameters_[it->second];
}

bool ParameterStore::contains(const std::string& name) const { return index_.count(name) != 0; }

std::vector<Parameter> ParameterStore::trainable_parameters() const {
  std::vector<Parameter> out;
  for (const Parameter& p : parameters_)
    if (p.trainable()) out.push_back(p);
  return out;
}

std::int64_t ParameterStore::num_elements() const {
  std::int64_t total = 0;
  for (const Parameter& p : parameters_) total += p.value().numel();
  return total;
}

void ParameterStore::zero_grad() {
  for (Parameter& p : parameters_) p.zero_grad();
}

std::string ParameterStore::scoped(const std::string& name) const {
  std::string out;
  for (const std::string& s : scopes_) out += s + "/";
  return out + name;
}

ParameterStore::NameScope ParameterStore::scope(const std::string& prefix) {
  require_name(prefix, "a scope name");
  scopes_.push_back(prefix);
  return NameScope(this);
}

ParameterStore::NameScope::NameScope(NameScope&& other) noexcept : store_(other.store_) {
  other.store_ = nullptr;
}

ParameterStore::NameScope::~NameScope() {
  if (store_ != nullptr && !store_->scopes_.empty()) store_->scopes_.pop_back();
}

}  // namespace weft::nn
