// The nn layers' shared checks and the gate-bias initializer.
#include "layer_util.h"

#include <string_view>

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::nn::detail {

std::string layer_where(const char* kind, const std::string& name) {
  return std::string(kind) + " '" + name + "'";
}

void require_extent(const std::string& where, const char* what, std::int64_t extent,
                    bool allow_zero) {
  if (extent > 0 || (allow_zero && extent == 0)) return;
  fail(where, what, allow_zero ? " must be >= 0" : " must be > 0", ", got ", extent);
}

void require_drop_prob(const std::string& where, const char* what, float p) {
  if (!(p >= 0.0f && p < 1.0f))
    fail(where, what, " ", p, " is outside [0, 1): it is the probability of dropping a unit");
}

void check_cell_sizes(const std::string& where, std::int64_t input_size, std::int64_t hidden,
                      float recurrent_dropout) {
  require_extent(where, "input_size", input_size, /*allow_zero=*/true);
  require_extent(where, "hidden", hidden);
  require_drop_prob(where, "recurrent_dropout", recurrent_dropout);
}

void require_rows_of(const std::string& where, const std::string& role, Var v, std::int64_t width) {
  if (!v.defined()) fail(where, role, " is an undefined Var, expected [B, ", width, "]");
  const Tensor& t = v.value();
  if (t.dtype() != DType::kFloat32 || t.rank() != 2)
    fail(where, role, " must be float32 [B, ", width, "], got ", t.describe());
  if (t.shape()[1] != width)
    fail(where, role, " has ", t.shape()[1], " features, expected ", width);
}

namespace {

// Checks x unless the cell takes no input (then x must be undefined or [B, 0]); whether x is
// one of the gate input's parts.
bool checked_cell_input(const std::string& where, Var x, std::int64_t input_size) {
  if (input_size == 0) {
    if (x.defined() && (x.value().rank() != 2 || x.value().shape()[1] != 0))
      fail(where, "the cell has input_size 0, so x must be an undefined Var, got ",
           x.value().describe());
    return false;
  }
  require_rows_of(where, "input", x, input_size);
  return true;
}

}  // namespace

// No vector of the parts and no copy of their names: a cell runs this on every batched call.
Var checked_gate_input(const std::string& where, Var x, std::int64_t input_size,
                       std::span<const NamedVar> gate_states,
                       std::span<const NamedVar> other_states, std::int64_t hidden) {
  const bool with_input = checked_cell_input(where, x, input_size);
  WEFT_ASSERT(with_input || !gate_states.empty());  // every cell passes a gate state
  for (const NamedVar& state : gate_states) require_rows_of(where, state.role, state.var, hidden);
  for (const NamedVar& state : other_states) require_rows_of(where, state.role, state.var, hidden);
  // Every argument has the first one's rows.
  const std::string_view first_role =
      with_input ? std::string_view("input") : std::string_view(gate_states[0].role);
  const std::int64_t rows = (with_input ? x : gate_states[0].var).value().rows();
  const auto same_rows = [&](const NamedVar& part) {
    if (part.var.value().rows() != rows)
      fail(where, part.role, " has ", part.var.value().rows(), " rows but ", first_role, " has ",
           rows, ": every argument needs one row per batch element");
  };
  for (const NamedVar& state : gate_states) same_rows(state);
  for (const NamedVar& state : other_states) same_rows(state);
  const std::size_t gate_inputs = gate_states.size() + (with_input ? 1 : 0);
  if (gate_inputs == 1) return with_input ? x : gate_states[0].var;
  std::vector<Var> vars;
  vars.reserve(gate_inputs);
  if (with_input) vars.push_back(x);
  for (const NamedVar& state : gate_states) vars.push_back(state.var);
  return concat(vars);
}

std::vector<NamedVar> named(const char* role, std::span<const Var> states) {
  std::vector<NamedVar> out;
  for (std::size_t k = 0; k < states.size(); ++k)
    out.push_back({std::string(role) + "[" + std::to_string(k) + "]", states[k]});
  return out;
}

Initializer gate_bias(std::int64_t start, std::int64_t length, float value) {
  return [start, length, value](Tensor& bias, Rng& rng) {
    zeros()(bias, rng);
    WEFT_ASSERT(bias.rank() == 1 && start >= 0 && start + length <= bias.numel());
    float* out = bias.data<float>();
    for (std::int64_t j = start; j < start + length; ++j) out[j] = value;
  };
}

Initializer cell_weight_init(const Initializer& init) { return init ? init : glorot_uniform(); }

namespace {
// Children: one [B, KN] Var, or the K [B, N] states apart.
template <typename Children>
Var cell_state_of(Var gates, Children children, std::int64_t hidden, float recurrent_dropout) {
  if (!is_training() || recurrent_dropout == 0.0f) return lstm_cell_state(gates, children, hidden);
  return lstm_cell_state(gates, children, hidden, recurrent_dropout, &dropout_rng());
}
}  // namespace

Var cell_state(Var gates, Var children, std::int64_t hidden, float recurrent_dropout) {
  return cell_state_of(gates, children, hidden, recurrent_dropout);
}

Var cell_state(Var gates, std::span<const Var> children, std::int64_t hidden,
               float recurrent_dropout) {
  return cell_state_of(gates, children, hidden, recurrent_dropout);
}

}  // namespace weft::nn::detail
