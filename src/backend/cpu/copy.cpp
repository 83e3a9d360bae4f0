// CPU copy_blocks: the strided block copy behind concat, split, slice and their gradients, in
// every dtype. A block is a contiguous run of elements; a whole contiguous copy is one memcpy,
// otherwise one memcpy per block, and accumulation is a loop the compiler vectorizes (integers
// wrap on overflow; bool values never accumulate). A source stride of 0 broadcasts one block
// into every destination block.
#include <cstring>
#include <type_traits>

#include "../kernels.h"
#include "weft/core/error.h"

namespace weft::backend::cpu {
namespace {

template <typename T>
void copy_typed(const T* src, std::int64_t src_stride, T* dst, std::int64_t dst_stride,
                std::int64_t blocks, std::int64_t block_size, bool accumulate) {
  if (!accumulate) {
    if (src_stride == block_size && dst_stride == block_size) {
      std::memcpy(dst, src, std::size_t(blocks * block_size) * sizeof(T));
      return;
    }
    for (std::int64_t b = 0; b < blocks; ++b)
      std::memcpy(dst + b * dst_stride, src + b * src_stride, std::size_t(block_size) * sizeof(T));
    return;
  }
  if constexpr (std::is_same_v<T, bool>) {
    WEFT_ASSERT(false && "bool values do not accumulate");
  } else {
    // Integers add through their unsigned type: wrapping, not undefined, on overflow.
    using Sum = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                            std::type_identity<T>>::type;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const T* from = src + b * src_stride;
      T* to = dst + b * dst_stride;
      for (std::int64_t j = 0; j < block_size; ++j) to[j] = T(Sum(to[j]) + Sum(from[j]));
    }
  }
}

// True when blocks of block_size at offset + k * stride, k < blocks, lie inside numel.
bool blocks_fit(std::int64_t numel, std::int64_t offset, std::int64_t stride, std::int64_t blocks,
                std::int64_t block_size) {
  return offset >= 0 && stride >= 0 && offset + (blocks - 1) * stride + block_size <= numel;
}

}  // namespace

void copy_blocks(const Tensor& src, std::int64_t src_offset, std::int64_t src_stride, Tensor& dst,
                 std::int64_t dst_offset, std::int64_t dst_stride, std::int64_t blocks,
                 std::int64_t block_size, bool accumulate) {
  WEFT_ASSERT(src.dtype() == dst.dtype());
  WEFT_ASSERT(blocks >= 0 && block_size >= 0);
  if (blocks == 0 || block_size == 0) return;
  WEFT_ASSERT(blocks_fit(src.numel(), src_offset, src_stride, blocks, block_size));
  WEFT_ASSERT(blocks_fit(dst.numel(), dst_offset, dst_stride, blocks, block_size));
  detail::record_moved_bytes(blocks * block_size * std::int64_t(dtype_size(dst.dtype())));
  visit_dtype(src.dtype(), [&](auto type) {
    using T = decltype(type);
    copy_typed(src.data<T>() + src_offset, src_stride, dst.data<T>() + dst_offset, dst_stride,
               blocks, block_size, accumulate);
  });
}

}  // namespace weft::backend::cpu
