// CPU random kernels: the dropout mask from the counter-based generator mix64(seed, i), so
// element i's draw depends only on (seed, i) — the same mask on every device, for any number
// of threads, and a batch's mask never depends on how its elements were visited.
#include "../kernels.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"

namespace weft::backend::cpu {

void dropout_mask(float keep_prob, std::uint64_t seed, Tensor& mask) {
  WEFT_ASSERT(keep_prob > 0.0f && keep_prob <= 1.0f);
  const float kept = 1.0f / keep_prob;
  float* out = mask.data<float>();
  const std::int64_t n = mask.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    // Uniform in [0, 1) from the top 24 bits, as Rng::uniform draws it.
    const float u = float(mix64(seed, std::uint64_t(i)) >> 40) * 0x1.0p-24f;
    out[i] = u < keep_prob ? kept : 0.0f;
  }
}

}  // namespace weft::backend::cpu
