// The differentiable ops over batched Vars (the list is ops.def). Each validates its inputs
// and throws weft::Error naming the op and the operands' shapes; kernels then run unchecked.
// Tensors have a leading batch axis: "rows" are examples (or nodes), "features" the rest.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/core/rng.h"

WEFT_API_BEGIN
namespace weft {

// The names of every op in ops.def, in order.
std::span<const std::string_view> op_names();

// y = op(a) · op(b) for 2-D a, b; op transposes when asked.
Var matmul(Var a, Var b, bool transpose_a = false, bool transpose_b = false);
// y[i] = op(a[i]) · op(b[i]) for each i of a batch of matrices: a [b, m, k], b [b, k, n]
// (before the optional transposes of each matrix) give y [b, m, n]. In a loom operation over
// per-example matrices (TypeShapes [m, k] and [k, n]) this is the per-example product.
Var batch_matmul(Var a, Var b, bool transpose_a = false, bool transpose_b = false);
// y = x · W + b; x [B, in], W [in, out], b [out].
Var linear(Var x, Var weight, Var bias);
// y = f(x · W + b) as one op: the product, then one pass adding the bias as f runs (linear
// writes bias rows before its product, and a separate f makes another pass and tensor).
Var linear_relu(Var x, Var weight, Var bias);
Var linear_tanh(Var x, Var weight, Var bias);
Var linear_sigmoid(Var x, Var weight, Var bias);

// Elementwise arithmetic on any number dtype (float32, float64, int32, int64; both operands
// of one dtype, else an error naming both). b (or a) may also be one row (shape = the other's
// per-row shape, or [1, ...]) broadcast over every row, or a single number. Integers wrap
// around on overflow; integer division floors (as Python's //) and a zero divisor is an
// error. Only float32 results carry gradients. minimum / maximum send the gradient of a tie
// to a, as TensorFlow does.
Var add(Var a, Var b);
Var sub(Var a, Var b);
Var mul(Var a, Var b);
Var div(Var a, Var b);
Var minimum(Var a, Var b);
Var maximum(Var a, Var b);
Var neg(Var x);
Var abs(Var x);  // d|x|/dx = sign(x), 0 at 0
inline Var operator+(Var a, Var b) { return add(a, b); }
inline Var operator-(Var a, Var b) { return sub(a, b); }
inline Var operator*(Var a, Var b) { return mul(a, b); }
inline Var operator/(Var a, Var b) { return div(a, b); }
inline Var operator-(Var x) { return neg(x); }
// With a number: a constant of one element of the Var's dtype on the Var's tape.
Var operator+(Var a, float b);
Var operator-(Var a, float b);
Var operator*(Var a, float b);
Var operator/(Var a, float b);
Var operator+(float a, Var b);
Var operator-(float a, Var b);
Var operator*(float a, Var b);

// Elementwise functions: float32 and float64 (relu also on integers).
Var relu(Var x);
Var sigmoid(Var x);
Var tanh(Var x);
Var exp(Var x);
Var log(Var x);
Var softplus(Var x);

// Comparisons, broadcasting as the arithmetic does: a bool tensor, no gradient. Both operands
// of one dtype (any, bool included for equal / not_equal and the orderings false < true).
Var equal(Var a, Var b);
Var not_equal(Var a, Var b);
Var less(Var a, Var b);
Var less_equal(Var a, Var b);
Var greater(Var a, Var b);
Var greater_equal(Var a, Var b);
// y = cond ? a : b, elementwise: cond is bool and gives the shape; a and b (one dtype, any) are
// its shape, one row of it or one number. Gradients reach a where cond holds and b elsewhere.
Var where(Var cond, Var a, Var b);
// x converted to `dtype` (x itself when it has it): float to integer truncates toward zero and
// saturates at the integer's range (NaN gives 0), integer narrowing wraps, and anything to
// bool is x != 0. No gradient flows through a cast between different dtypes.
Var cast(Var x, DType dtype);

// Concatenation and its inverse along an axis (default 1, the feature axis of [B, F]).
Var concat(std::span<const Var> parts, int axis = 1);
Var concat(std::initializer_list<Var> parts, int axis = 1);
std::vector<Var> split(Var x, std::span<const std::int64_t> sizes, int axis = 1);
// Splits into N equal parts: auto [f, i, o, g] = split<4>(gates);
template <int N>
std::array<Var, N> split(Var x, int axis = 1);
// y = x[..., start : start + length, ...] along `axis`.
Var slice(Var x, int axis, std::int64_t start, std::int64_t length);
// The same elements with another shape; one extent may be -1 (inferred).
Var reshape(Var x, std::span<const std::int64_t> shape);
Var reshape(Var x, std::initializer_list<std::int64_t> shape);

// Row indexing with int32 or int64 index tensors of shape [n] (every index checked against the
// rows, int64 ones before they are narrowed to the kernels' int32); gathers take x of any dtype.
Var gather_rows(Var x, const Tensor& indices);
// y has `num_rows` rows, zero except y[indices[i]] += x[i].
Var scatter_add_rows(Var x, const Tensor& indices, std::int64_t num_rows);
// y[i] = table[ids[i]]; ids int32 or int64 [n], table [V, D...].
Var embedding_lookup(Var table, const Tensor& ids);

// Reductions over the rows (the batch axis): [B, F...] -> [1, F...].
Var sum_rows(Var x);
Var mean_rows(Var x);
Var max_rows(Var x);
// Reductions over variable-length groups of rows: segment_ids int32 [B] with values in
// [0, num_segments); [B, F...] -> [num_segments, F...]. Empty segments give 0.
Var segment_sum(Var x, const Tensor& segment_ids, std::int64_t num_segments);
Var segment_mean(Var x, const Tensor& segment_ids, std::int64_t num_segments);
Var segment_max(Var x, const Tensor& segment_ids, std::int64_t num_segments);
// Reductions of every element to a scalar (shape []).
Var sum(Var x);
Var mean(Var x);

// Softmax over each row's features.
Var softmax(Var x);
Var log_softmax(Var x);
// Per-row loss -log softmax(logits)[label]: logits [B, C], labels int32 [B] -> [B].
Var softmax_cross_entropy(Var logits, const Tensor& labels);
// 1/2 sum x^2, a scalar.
Var l2_loss(Var x);
// Inverted dropout: zeroes each element with probability drop_prob and scales the rest by
// 1 / (1 - drop_prob); identity when !training or drop_prob == 0. The mask comes from rng.
Var dropout(Var x, float drop_prob, Rng& rng, bool training = true);

// The LSTM cell state, fused (no intermediates kept): gates [B, (K+2)N] = [f_1..f_K | i | g],
// children [B, KN] = [x_1..x_K] (the previous cell state, or a tree node's K children's);
// c = sum_k sigmoid(f_k) * x_k + sigmoid(i) * tanh(g), [B, N].
Var lstm_cell_state(Var gates, Var children);
// The same with the hidden size N given, read from the first (K+2)N columns of gates [B, W]
// (W may be wider: an LSTM's output gate after them is left to lstm_hidden), and with
// recurrent dropout on the candidate (Semeniuta et al. 2016): c = sum_k sigmoid(f_k) * x_k +
// sigmoid(i) * dropout(tanh(g)), the mask drawn from rng as dropout(tanh(g), p, *rng) draws
// it. candidate_drop_prob 0 is no dropout (rng may then be null).
Var lstm_cell_state(Var gates, Var children, std::int64_t hidden, float candidate_drop_prob = 0.0f,
                    Rng* rng = nullptr);
// The same with the K children's states given apart, each [B, N] (a Tree-LSTM node's children,
// read where they lie instead of concatenated; on devices other than the CPU they are).
Var lstm_cell_state(Var gates, std::span<const Var> children, std::int64_t hidden,
                    float candidate_drop_prob = 0.0f, Rng* rng = nullptr);
// lstm_cell_state(linear(x, weight, bias), children, N, candidate_drop_prob, rng), the gates
// being the op's own: weight [in, (K+2)N] (exactly the cell's gates), bias [(K+2)N], children
// [B, KN]. The cell's pass writes the gates' activations over them as it computes c, and
// backward reads those instead of recomputing sigmoid and tanh: the same values and gradients
// as the composition, the backward's activations saved
// (bench/log/2026-11-26-cell-gates-once.md). One tape node: on the CPU the rows go through in
// blocks small enough for the cache (linear_cell_block_rows), each block's product, cell and,
// in backward, the gates' gradient and the products that read it done before the next block,
// so the [B, (K+2)N] gate arrays never make a trip to memory between passes.
Var linear_lstm_cell_state(Var x, Var weight, Var bias, Var children,
                           float candidate_drop_prob = 0.0f, Rng* rng = nullptr);
// The rows per block linear_lstm_cell_state works through on the CPU: 0 chooses from the gates'
// width and the weight's size (the default, unless WEFT_CELL_BLOCK_ROWS says otherwise); a
// positive value forces it (tests, benchmarks; a huge one: whole calls).
void set_linear_cell_block_rows(std::int64_t rows);
// The LSTM output, fused: h = sigmoid(o) * tanh(c), o = gates[:, offset : offset + N] read in
// place, c [B, N].
Var lstm_hidden(Var gates, std::int64_t offset, Var c);

// Dot-product attention over ragged memories, fused: queries [n, beams, hidden], memory
// [n, size, hidden], lengths int32 [n] with 1 <= lengths[i] <= size. Item i's queries attend over
// the first lengths[i] rows of its memory only: y[i, b] = softmax(q[i, b] · M_i[:L]ᵀ) · M_i[:L],
// [n, beams, hidden]. On the CPU the rows from lengths[i] on (padding) are never read and get no
// gradient, and each item's sums run over its own length alone, so an item's result does not
// depend on the batch it is in. (Elsewhere it composes batch_matmul, a mask and softmax.)
Var ragged_attention(Var queries, Var memory, const Tensor& lengths);

template <int N>
std::array<Var, N> split(Var x, int axis) {
  int a = axis < 0 ? x.shape().rank() + axis : axis;
  std::int64_t extent = (a >= 0 && a < x.shape().rank()) ? x.shape()[a] : 0;
  std::array<std::int64_t, N> sizes;
  sizes.fill(extent / N);
  if (extent % N != 0) sizes[0] = -1;  // makes split() report the uneven extent
  std::vector<Var> parts = split(x, sizes, axis);
  std::array<Var, N> out;
  for (int i = 0; i < N; ++i) out[i] = parts[i];
  return out;
}

}  // namespace weft
WEFT_API_END
