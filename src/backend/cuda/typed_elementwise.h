// The dtype-generic paths of the CUDA elementwise kernels (float64, int32, int64, bool), behind
// the float32 kernels of elementwise.cu, which hand other dtypes over to them.
#pragma once

#include <cstdint>

#include "../kernels.h"

namespace weft::backend::cuda::typed {

void fill(Tensor& y, float value);
void copy_blocks(const Tensor& src, std::int64_t src_offset, std::int64_t src_stride, Tensor& dst,
                 std::int64_t dst_offset, std::int64_t dst_stride, std::int64_t blocks,
                 std::int64_t block_size, bool accumulate);
void unary(UnaryOp op, const Tensor& x, Tensor& y);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);

}  // namespace weft::backend::cuda::typed
