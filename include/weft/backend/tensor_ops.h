// The few in-place tensor primitives that layers above autodiff need outside the tape: the
// loom's gather of argument rows and its gradient, an accumulate and a copy across devices.
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
// null grads; rows are added in order, so repeated references sum deterministically.
void scatter_add_argument_rows(const Tensor& src, std::int64_t column, const Tensor& refs,
                               std::span<Tensor* const> grads);

}  // namespace weft::backend
WEFT_API_END
