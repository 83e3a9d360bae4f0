// Raw device memory for the allocator and copies between devices. CPU memory is handled by
// the allocator itself; these functions serve the other devices (CUDA, or its stubs). Whether
// a device is usable is public: weft/backend/cuda.h.
#pragma once

#include <cstddef>

#include "weft/tensor/dtype.h"

namespace weft::backend {

void* device_allocate(Device device, std::size_t bytes);
void device_free(Device device, void* pointer);
// Copies `bytes` between any two devices.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes);

}  // namespace weft::backend
