// What this process can do with CUDA: whether the backend was built in, whether a device is
// usable, which devices there are, and a wait for queued GPU work (for timing). Tensors go to
// the GPU with Device::kCuda (Tensor::empty / zeros / to). All of these answer sensibly in a
// build without CUDA: nothing built in, no devices.
#pragma once

#include <string>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// True when this Weft was built with the CUDA backend (WEFT_WITH_CUDA=ON, or AUTO that found
// the toolkit).
bool cuda_built();
// True when the CUDA backend is built in and at least one device can be used.
bool cuda_available();
// Number of usable CUDA devices (0 without the backend, a driver or a device).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"; throws weft::Error when `device` is not one of
// cuda_device_count()'s.
std::string cuda_device_name(int device = 0);
// Why no device is usable ("built without CUDA", the driver's message), or "" when one is.
std::string cuda_unavailable_reason();
// Blocks until every kernel and copy queued so far has finished; rethrows an asynchronous
// kernel fault as weft::Error. A no-op without a usable device.
void cuda_synchronize();

}  // namespace weft
WEFT_API_END
