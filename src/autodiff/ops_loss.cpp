// Losses and the softmax family: softmax and log_softmax over each row's features, the fused
// softmax cross-entropy (per-row losses, int32 class labels) and the L2 penalty ½Σx². The
// softmax kernels are numerically stable for logits of any magnitude.
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

// y = softmax(x) or log_softmax(x): the kernel needs only the output y (int_attrs[0] = log).
void softmax_family_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dx = tape.grad_of(tape.input(id, 0)))
    backend::softmax_backward(node.value, node.grad, node.int_attrs[0] != 0, *dx);
}

Var softmax_family(const char* name, Var x, bool log) {
  const Tensor& vx = x.value();
  detail::require_float(name, "input", vx);
  if (vx.rank() < 2)
    fail(name, "input must have a batch axis and features (rank >= 2), got ", vx.describe(),
         "; a single example of shape [C] is [1, C]");
  Tensor y = Tensor::empty(vx.shape(), DType::kFloat32, vx.device());
  backend::softmax(vx, log, y);
  Var out = x.tape().record(std::move(y), {x}, softmax_family_backward);
  out.tape().node(out.id()).int_attrs[0] = log;
  return out;
}

// saved[0] = probs, saved[1] = labels: dlogits += (probs - onehot(labels)) * dlosses.
void cross_entropy_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dlogits = tape.grad_of(tape.input(id, 0)))
    backend::softmax_cross_entropy_backward(node.saved[0], node.saved[1], node.grad, *dlogits);
}

void check_cross_entropy(const Tensor& logits, const Tensor& labels) {
  const char* op = "softmax_cross_entropy";
  detail::require_float(op, "logits", logits);
  if (logits.rank() != 2)
    fail(op, "logits must have rank 2 ([batch, classes]), got ", logits.describe());
  if (labels.dtype() != DType::kInt32)
    fail(op, "labels must be int32 class ids, got ", labels.describe());
  if (labels.rank() != 1 || labels.shape()[0] != logits.shape()[0])
    fail(op, "labels ", labels.describe(), " do not match logits ", logits.describe(),
         ": one label per row, int32 [", logits.shape()[0], "]");
  detail::require_same_device(op, logits, labels);
  detail::require_indices(op, "labels", labels, logits.shape()[1]);
}

// 1/2 Σx²: dx += x * dy with dy a scalar. binary_backward of kMul adds b * dy_full into da,
// so with b = the scalar cotangent and dy_full = x it does exactly that, with no temporary.
void l2_loss_backward(Tape& tape, std::uint32_t id) {
  const std::uint32_t input = tape.input(id, 0);
  if (Tensor* dx = tape.grad_of(input)) {
    const Tensor& x = tape.node(input).value;
    backend::binary_backward(backend::BinaryOp::kMul, x, tape.node(id).grad, x, dx, nullptr);
  }
}

}  // namespace

// y[r] = exp(x[r]) / Σ exp(x[r])
Var softmax(Var x) { return softmax_family("softmax", x, false); }

// y[r] = x[r] - log Σ exp(x[r])
Var log_softmax(Var x) { return softmax_family("log_softmax", x, true); }

// y[r] = -log softmax(logits[r])[labels[r]]
Var softmax_cross_entropy(Var logits, const Tensor& labels) {
  const Tensor& vl = logits.value();
  check_cross_entropy(vl, labels);
  Tensor losses = Tensor::empty(Shape{vl.shape()[0]}, DType::kFloat32, vl.device());
  Tensor probs = Tensor::empty(vl.shape(), DType::kFloat32, vl.device());
  backend::softmax_cross_entropy(vl, labels, losses, probs);
  Var out = logits.tape().record(std::move(losses), {logits}, cross_entropy_backward);
  TapeNode& node = out.tape().node(out.id());
  if (node.backward != nullptr) {  // inference keeps nothing for a backward that never runs
    node.saved[0] = std::move(probs);
    node.saved[1] = labels;
  }
  return out;
}

// y = 1/2 Σ x²
Var l2_loss(Var x) {
  const Tensor& vx = x.value();
  detail::require_float("l2_loss", "input", vx);
  Tensor y = Tensor::empty(Shape{}, DType::kFloat32, vx.device());
  backend::reduce_all(backend::ReduceAllOp::kSumSquares, vx, y);
  backend::binary(backend::BinaryOp::kMul, y, Tensor::scalar(0.5f, vx.device()), y);
  return x.tape().record(std::move(y), {x}, l2_loss_backward);
}

}  // namespace weft
