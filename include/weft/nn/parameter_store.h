// ParameterStore: the named parameters of a model, in creation order, with the Rng their
// initializers draw from and TF-style name scopes ("tree_lstm/fc/weight"). Layers create
// their parameters here; optimizers and checkpoints read parameters() back. A store has a
// device: parameters are initialised on the host from rng() (the same values on every
// device) and then placed there, so the layers built on it compute there.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/core/rng.h"
#include "weft/nn/initializers.h"

WEFT_API_BEGIN
namespace weft::nn {

class ParameterStore {
 public:
  // `seed` seeds rng(), from which every initializer draws, in creation order; `device` is
  // where every parameter lives (Device::kCuda needs a CUDA build and a device: the
  // constructor throws saying which is missing otherwise).
  explicit ParameterStore(std::uint64_t seed = 0, Device device = Device::kCpu);
  // Not copyable (two stores would share parameters under two registries); NameScopes
  // refer to their store, so do not move a store while a scope is open.
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;
  ParameterStore(ParameterStore&&) = default;
  ParameterStore& operator=(ParameterStore&&) = default;

  // Creates scoped(name) as a float32 tensor of `shape` filled on the host by `init` (zeros
  // when init is empty), then placed on device(). Throws "[ParameterStore] parameter 'x'
  // already exists ..." if taken.
  Parameter create(const std::string& name, const Shape& shape, const Initializer& init,
                   bool trainable = true);
  // Looks up a full name (the scope is NOT applied: names are as parameters() reports them).
  // Throws naming the missing name.
  Parameter get(const std::string& name) const;
  bool contains(const std::string& name) const;
  // Every parameter, in creation order.
  const std::vector<Parameter>& parameters() const { return parameters_; }

  // From now on, create() fails before allocating when the parameters would hold more than
  // `max_elements` elements in all; `reason` says where the budget comes from in that error.
  void set_element_budget(std::int64_t max_elements, std::string reason);
  std::vector<Parameter> trainable_parameters() const;
  std::size_t size() const { return parameters_.size(); }
  // Total number of elements over every parameter.
  std::int64_t num_elements() const;
  // Zeroes every parameter's accumulated gradient.
  void zero_grad();
  Rng& rng() { return rng_; }
  // Where the parameters live.
  Device device() const { return device_; }
  // `name` under the current scopes: "outer/inner/name" (just "name" outside any scope).
  std::string scoped(const std::string& name) const;

  // RAII name prefix, nestable:
  //   { auto s = store.scope("tree_lstm"); FC fc(store, "fc", ...); }  -> "tree_lstm/fc/weight"
  class NameScope {
   public:
    NameScope(NameScope&& other) noexcept;
    NameScope(const NameScope&) = delete;
    NameScope& operator=(const NameScope&) = delete;
    NameScope& operator=(NameScope&&) = delete;
    ~NameScope();

   private:
    friend class ParameterStore;
    explicit NameScope(ParameterStore* store) : store_(store) {}
    ParameterStore* store_;
  };
  // Throws if prefix is empty.
  NameScope scope(const std::string& prefix);

 private:
  Rng rng_;
  Device device_ = Device::kCpu;
  std::vector<Parameter> parameters_;
  std::int64_t elements_ = 0;
  std::int64_t element_budget_ = 0;  // 0: none
  std::string budget_reason_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> scopes_;
};

}  // namespace weft::nn
WEFT_API_END
