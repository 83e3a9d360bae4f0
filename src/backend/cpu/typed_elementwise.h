// The dtype-generic paths of the CPU elementwise kernels (float64, int32, int64, bool), behind
// the float32 kernels of elementwise.cpp, which hand other dtypes over to them.
#pragma once

#include <cstdint>

#include "../kernels.h"

namespace weft::backend::cpu::typed {

void fill(Tensor& y, float value);
void unary(UnaryOp op, const Tensor& x, Tensor& y);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);

}  // namespace weft::backend::cpu::typed
