// FC: a fully connected layer over batched rows, y = act(norm(dropout_in(x) W + b)) followed by
// output dropout, as TF Fold's td.FC (norm: the optional normalization function; W: the weight,
// or with weight normalization its unit-norm columns times learned scales). Dropout is active
// only in a training ForwardMode.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/nn/initializers.h"
#include "weft/nn/parameter_store.h"

WEFT_API_BEGIN
namespace weft::nn {

#define WEFT_NN_ACTIVATIONS(X) \
  X(kNone, "none")             \
  X(kRelu, "relu")             \
  X(kTanh, "tanh")             \
  X(kSigmoid, "sigmoid")
enum class Activation { WEFT_NN_ACTIVATIONS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(Activation, WEFT_NN_ACTIVATIONS, activation_name, parse_activation, "activation",
                "activation")
// act(x); kNone returns x.
Var apply_activation(Activation activation, Var x);
// act(x · W + b) as one op where there is one (linear_relu, linear_tanh, linear_sigmoid).
Var linear_activated(Activation activation, Var x, Var weight, Var bias);

struct FCOptions {
  Activation activation = Activation::kRelu;
  float input_dropout = 0.f, output_dropout = 0.f;  // drop probabilities, used when training
  Initializer weight_init{};  // empty: uniform_unit_scaling(1.43 relu, 1.15 tanh, 1.0 otherwise)
  Initializer bias_init{};    // empty: zeros
  // Applied to x W + b before the activation (e.g. a layer normalization); rows must stay
  // independent for batching. Empty: none.
  std::function<Var(Var)> normalization{};
  // Weight normalization (Salimans & Kingma 2016): the weight used is W[:, j] / |W[:, j]| * g_j,
  // with "name/scale" g [out] learned (initialized to ones).
  bool weight_norm = false;
};

class FC {
 public:
  // Creates "name/weight" [in, out] and "name/bias" [out] in the store's current scope.
  FC(ParameterStore& store, const std::string& name, std::int64_t in, std::int64_t out,
     FCOptions options = {});

  // x [B, in] -> [B, out]. Throws "[FC 'name'] input has 7 features, expected 5".
  Var operator()(Var x) const;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  // The weight normalization scales g (undefined without weight_norm).
  const Parameter& scale() const { return scale_; }
  // The weight the layer multiplies by on x's tape: W, or W's unit columns times g.
  Var effective_weight(Tape& tape) const;
  const FCOptions& options() const { return options_; }
  // The scoped name, e.g. "tree_lstm/fc".
  const std::string& name() const { return name_; }
  std::vector<Parameter> parameters() const {
    if (options_.weight_norm) return {weight_, bias_, scale_};
    return {weight_, bias_};
  }

 private:
  std::string name_;
  std::string where_;  // what its errors name, e.g. "FC 'tree/fc'"
  std::int64_t in_, out_;
  FCOptions options_;
  Parameter weight_, bias_, scale_;
};

}  // namespace weft::nn
WEFT_API_END
