// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void dropout_mask(float keep_prob, std::uint64_t seed, Tensor& mask) { fail("dropout_mask", "not implemented"); }
}
