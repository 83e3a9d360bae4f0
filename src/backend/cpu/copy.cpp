// PLACEHOLDER: to be replaced by the real kernels.
#include "../kernels.h"
#include "weft/core/error.h"
namespace weft::backend::cpu {
void copy_blocks(const Tensor& src, std::int64_t src_offset, std::int64_t src_stride,
                          Tensor& dst, std::int64_t dst_offset, std::int64_t dst_stride,
                          std::int64_t blocks, std::int64_t block_size, bool accumulate) { fail("copy_blocks", "not implemented"); }
}
