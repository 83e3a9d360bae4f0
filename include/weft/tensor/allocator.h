// The caching allocator behind every tensor: freed blocks go back to per-size free lists and
// are handed out again, so a training step that repeats the same shapes does not call malloc
// per op after its first iteration. One pool per device; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/core/export.h"
#include "weft/tensor/dtype.h"

WEFT_API_BEGIN
namespace weft {

struct AllocatorStats {
  std::int64_t bytes_in_use = 0;        // held by live tensors (rounded to size classes)
  std::int64_t peak_bytes_in_use = 0;   // high-water mark of bytes_in_use since reset_peak
  std::int64_t bytes_cached = 0;        // freed blocks kept for reuse
  std::int64_t system_allocations = 0;  // calls that reached the system allocator
  std::int64_t allocations = 0;         // every allocation request, cached or not
};

// Statistics of the pool of one device.
AllocatorStats allocator_stats(Device device = Device::kCpu);
// Forgets the peak, so the next phase's high-water mark can be measured.
void reset_peak_bytes(Device device = Device::kCpu);
// Returns every cached block of the device's pool to the system.
void release_cached_memory(Device device = Device::kCpu);

namespace detail {
// A block of raw memory from a device pool, with its intrusive reference count. The header
// and the data come from one allocation; data is 64-byte aligned.
struct StorageBlock {
  std::int64_t refs;  // atomic access through the helpers below
  std::size_t bytes;  // usable bytes (the size class)
  Device device;
  int size_class;  // -1: external memory, handed back through release_external
  void* data;
  void (*release_external)(void* context) = nullptr;
  void* external_context = nullptr;
};

StorageBlock* allocate_block(std::size_t bytes, Device device);
void retain_block(StorageBlock* block);
void release_block(StorageBlock* block);
// A block over memory Weft does not own (a NumPy array, a DLPack tensor): when its last
// reference goes, `release(context)` is called instead of returning it to a pool.
StorageBlock* wrap_external_block(void* data, std::size_t bytes, Device device,
                                  void (*release)(void* context), void* context);
}  // namespace detail

}  // namespace weft
WEFT_API_END
