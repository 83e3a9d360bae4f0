// Helpers shared by the nn layers: option checks at construction, input-width checks at call
// time (errors name the layer: "[FC 'tree/fc'] input has 7 features, expected 5"), and the
// cells' gate-bias initializer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/nn/initializers.h"

namespace weft::nn::detail {

// "FC 'tree/fc'": the bracketed part of every error a layer raises.
std::string layer_where(const char* kind, const std::string& name);

// Throws unless extent > 0 (or >= 0 when allow_zero).
void require_extent(const std::string& where, const char* what, std::int64_t extent,
                    bool allow_zero = false);
// Throws unless p is a drop probability in [0, 1).
void require_drop_prob(const std::string& where, const char* what, float p);

// A cell's sizes and recurrent dropout: input_size >= 0, hidden > 0, drop in [0, 1).
void check_cell_sizes(const std::string& where, std::int64_t input_size, std::int64_t hidden,
                      float recurrent_dropout);

// Throws unless v is a float32 [B, width] Var; `role` names it ("input", "h", "child_c[1]").
void require_rows_of(const std::string& where, const std::string& role, Var v, std::int64_t width);

// A cell argument and the name its errors use.
struct NamedVar {
  std::string role;
  Var var;
};

// The input of a cell's gate linear, [x | gate_states...], after checking everything a cell
// step receives: x is [B, input_size], or with input_size 0 must be undefined (or [B, 0])
// and is left out; every state is [B, hidden]; all have the same B. `other_states` are
// checked the same way but not concatenated (the cell states c).
Var checked_gate_input(const std::string& where, Var x, std::int64_t input_size,
                       std::span<const NamedVar> gate_states,
                       std::span<const NamedVar> other_states, std::int64_t hidden);

// Names states role[0], role[1], ...
std::vector<NamedVar> named(const char* role, std::span<const Var> states);

// A bias initializer: `value` in columns [start, start + length), zero elsewhere (the
// forget-gate columns of a cell's fused gate bias).
Initializer gate_bias(std::int64_t start, std::int64_t length, float value);

// The default weight initializer of the cells: `init` if set, else glorot_uniform().
Initializer cell_weight_init(const Initializer& init);

// The LSTM-family cell state from gates [B, W] starting with [f_1..f_K | i | g] (an output
// gate may follow) and the K children's states [B, KN]: sum_k sigmoid(f_k) c_k + sigmoid(i)
// tanh(g), tanh(g) dropped with probability recurrent_dropout while training (the fused
// lstm_cell_state op either way).
Var cell_state(Var gates, Var children, std::int64_t hidden, float recurrent_dropout);
// The same with the children's states apart, each [B, N] (read where they lie, no concat).
Var cell_state(Var gates, std::span<const Var> children, std::int64_t hidden,
               float recurrent_dropout);

}  // namespace weft::nn::detail
