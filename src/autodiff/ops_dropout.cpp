// Inverted dropout: during training each element is zeroed with probability drop_prob and
// the survivors are scaled by 1 / keep_prob, so evaluation needs no rescaling and is the
// identity. The mask comes from one 64-bit seed drawn from the caller's Rng, expanded by a
// counter-based kernel, so a run is reproducible from the Rng's seed alone.
#include "../backend/kernels.h"
#include "op_checks.h"
#include "weft/autodiff/ops.h"

namespace weft {
namespace {

// saved[0] = mask (0 or 1 / keep_prob): dx += dy * mask. binary_backward of kMul adds
// b * dy into da; a only enters the gradient of b, which is not asked for.
void dropout_backward(Tape& tape, std::uint32_t id) {
  const TapeNode& node = tape.node(id);
  if (Tensor* dx = tape.grad_of(tape.input(id, 0)))
    backend::binary_backward(backend::BinaryOp::kMul, node.saved[0], node.saved[0], node.grad, dx,
                             nullptr);
}

}  // namespace

// y = x * mask, mask[i] = (uniform(seed, i) < keep_prob) / keep_prob, keep_prob = 1 - drop_prob
Var dropout(Var x, float drop_prob, Rng& rng, bool training) {
  const Tensor& vx = x.value();
  detail::require_float("dropout", "input", vx);
  if (!(drop_prob >= 0.0f && drop_prob < 1.0f))  // also rejects NaN
    fail("dropout", "drop_prob ", drop_prob, " is outside [0, 1) for input ", vx.describe(),
         ": it is the probability of zeroing an element, not of keeping it");
  if (!training || drop_prob == 0.0f) return x;
  const std::uint64_t seed = rng.next_u64();
  Tensor mask = Tensor::empty(vx.shape(), DType::kFloat32, vx.device());
  backend::dropout_mask(1.0f - drop_prob, seed, mask);
  Tensor y = Tensor::empty(vx.shape(), DType::kFloat32, vx.device());
  backend::binary(backend::BinaryOp::kMul, vx, mask, y);
  Var out = x.tape().record(std::move(y), {x}, dropout_backward);
  TapeNode& node = out.tape().node(out.id());
  if (node.backward != nullptr) node.saved[0] = std::move(mask);
  return out;
}

}  // namespace weft
