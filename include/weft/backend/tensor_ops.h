// The few in-place tensor primitives that layers above autodiff need outside the tape: the
// loom's gather of argument rows and its gradient, an accumulate and a copy across devices,
// and the optimizers' float32 update, clipping and squared norm where the parameters live.
// Each dispatches on the output's device to the backend's kernel (the kernel table itself,
// src/backend/kernels.def, is private to the tensor and autodiff layers). Inputs are checked.
#pragma once

#include <cstdint>
#include <span>

#include "weft/core/export.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::backend {

// y += scale * x, x and y of one shape, float32, on y's device.
void add_scaled(const Tensor& x, float scale, Tensor& y);

// dst's values = src's (same shape and dtype; any two devices).
void copy_values(const Tensor& src, Tensor& dst);

// The loom's argument gather: dst[i, column : column + w] = row refs[i, 1] of
// chunks[refs[i, 0]], w being that chunk's row size (refs int32 [n, 2]).
void gather_argument_rows(std::span<const Tensor> chunks, const Tensor& refs, Tensor& dst,
                          std::int64_t column);
// Its gradient: row refs[i, 1] of *grads[refs[i, 0]] += src[i, column : column + w], skipping
// null grads; rows are added in order, so repeated references sum deterministically. `written`
// is empty or holds, per grad, its record of written rows (Tape::grad_rows_target) or null: a
// row the record marks unwritten is written instead of added into, then marked. Records are
// taken on the CPU only.
void scatter_add_argument_rows(const Tensor& src, std::int64_t column, const Tensor& refs,
                               std::span<Tensor* const> grads,
                               std::span<std::uint8_t* const> written = {});

// The float32 constants of one apply_update; the host works them out in double, once per
// parameter and step, so the kernels do only float arithmetic per element.
enum class UpdateRule : std::uint8_t { kSgd, kAdagrad, kAdam };
struct UpdateArgs {
  UpdateRule rule = UpdateRule::kSgd;
  float learning_rate = 0.0f;      // SGD and Adagrad
  float l2 = 0.0f;                 // g = grad + l2 * value (L2-coupled weight decay)
  float shrink = 1.0f;             // value *= shrink before the update (decoupled decay)
  float momentum = 0.0f;           // SGD: v = momentum * v + g
  bool nesterov = false;           // SGD: value -= lr * (g + momentum * v), else lr * v
  float epsilon = 0.0f;            // Adagrad: value -= lr * g / (sqrt(s) + eps), s += g^2 first
  float beta1 = 0.0f;              // Adam: m = beta1 * m + one_minus_beta1 * g
  float beta2 = 0.0f;              // Adam: v = beta2 * v + one_minus_beta2 * g^2
  float one_minus_beta1 = 1.0f;    // 1 - beta1 and 1 - beta2 from the double betas: in float,
  float one_minus_beta2 = 1.0f;    // 1 - 0.999f would keep only 4 significant digits
  float step_size = 0.0f;          // Adam: lr / (1 - beta1^t)
  float rsqrt_correction2 = 1.0f;  // Adam: 1 / sqrt(1 - beta2^t); value -= step_size * m /
                                   // (sqrt(v) * rsqrt_correction2 + eps)
};

// One optimizer update in place, on value's device (the rules are in weft/train/optimizer.h):
// the gradient (plus args.l2 * value), the decoupled shrink, then the rule's update of value
// and its slots (SGD: velocity, null without momentum; Adagrad: accumulator; Adam: m, v). Every
// tensor float32, of value's shape, on its device.
void apply_update(const UpdateArgs& args, Tensor& value, const Tensor& grad, Tensor* slot0,
                  Tensor* slot1);
// The same update of only the rows indices[k] of value and of the slots, from grad_rows[k]
// (a row-sparse gradient: indices int32 [k], in range and distinct; grad_rows float32 [k, ...]
// of value's row shape); every other row, and its slots, is left as it is. On value's device.
void apply_update_rows(const UpdateArgs& args, Tensor& value, const Tensor& indices,
                       const Tensor& grad_rows, Tensor* slot0, Tensor* slot1);
// x[i] = clamp(scale * x[i], -limit, limit), float32, in place: clipping by norm and by value.
void scale_and_clamp(Tensor& x, float scale, float limit);
// The sum of x's squared elements (float32, any device), on the host.
double sum_of_squares(const Tensor& x);

}  // namespace weft::backend
WEFT_API_END
