// FC: parameters with TF Fold's default initializers, and the forward with width checks and
// mode-dependent dropout.
#include "weft/nn/fc.h"

#include "layer_util.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::nn {
namespace {

// TF Fold's FC: uniform_unit_scaling with the gain that keeps activations' scale.
Initializer default_weight_init(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return uniform_unit_scaling(1.43f);
    case Activation::kTanh:
      return uniform_unit_scaling(1.15f);
    case Activation::kNone:
    case Activation::kSigmoid:
      break;
  }
  return uniform_unit_scaling(1.0f);
}

}  // namespace

Var apply_activation(Activation activation, Var x) {
  switch (activation) {
    case Activation::kRelu:
      return relu(x);
    case Activation::kTanh:
      return tanh(x);
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kNone:
      break;
  }
  return x;
}

Var linear_activated(Activation activation, Var x, Var weight, Var bias) {
  switch (activation) {
    case Activation::kRelu:
      return linear_relu(x, weight, bias);
    case Activation::kTanh:
      return linear_tanh(x, weight, bias);
    case Activation::kSigmoid:
      return linear_sigmoid(x, weight, bias);
    case Activation::kNone:
      break;
  }
  return linear(x, weight, bias);
}

FC::FC(ParameterStore& store, const std::string& name, std::int64_t in, std::int64_t out,
       FCOptions options)
    : name_(store.scoped(name)),
      where_(detail::layer_where("FC", name_)),
      in_(in),
      out_(out),
      options_(std::move(options)) {
  const std::string& where = where_;
  detail::require_extent(where, "in", in);
  detail::require_extent(where, "out", out);
  detail::require_drop_prob(where, "input_dropout", options_.input_dropout);
  detail::require_drop_prob(where, "output_dropout", options_.output_dropout);
  if (!options_.weight_init) options_.weight_init = default_weight_init(options_.activation);
  if (!options_.bias_init) options_.bias_init = zeros();
  auto scope = store.scope(name);
  weight_ = store.create("weight", {in, out}, options_.weight_init);
  bias_ = store.create("bias", {out}, options_.bias_init);
  if (options_.weight_norm) scale_ = store.create("scale", {out}, constant(1.0f));
}

Var FC::effective_weight(Tape& tape) const {
  Var w = tape.parameter(weight_);
  if (!options_.weight_norm) return w;
  // |W[:, j]| = sqrt(sum_i W[i, j]^2), as exp(log(.) / 2) (the tiny floor keeps log finite).
  Var norms = exp(log(sum_rows(w * w) + 1e-12f) * 0.5f);  // [1, out]
  Var g = reshape(tape.parameter(scale_), {1, out_});
  return w * (g / norms);
}

Var FC::operator()(Var x) const {
  detail::require_rows_of(where_, "input", x, in_);
  Tape& tape = x.tape();
  Var in = mode_dropout(x, options_.input_dropout);
  Var w = effective_weight(tape), b = tape.parameter(bias_);
  if (options_.normalization) {
    Var y = options_.normalization(linear(in, w, b));
    return mode_dropout(apply_activation(options_.activation, y), options_.output_dropout);
  }
  return mode_dropout(linear_activated(options_.activation, in, w, b), options_.output_dropout);
}

}  // namespace weft::nn
