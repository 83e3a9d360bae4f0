// The caching allocator behind every tensor: freed blocks go back to per-size free lists and
// are handed out again, so a training step that repeats the same shapes does not call malloc
// per op after its first iteration. One pool per device; thread-safe. The freed bytes a pool
// keeps are capped (CacheLimit), so shapes that shift over a long run do not grow it for ever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

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
  std::int64_t cache_limit_bytes = 0;   // the cap on bytes_cached in force now (CacheLimit)
  std::int64_t evicted_blocks = 0;      // cached blocks handed back to keep under the cap
};

// How many freed bytes a device's pool keeps for reuse: the larger of a fixed budget and a
// fraction of the most bytes the pool has ever had in use at once. Past it, the blocks freed
// longest ago go back to the system. Defaults: the CPU pool keeps up to twice its peak in use
// (WEFT_POOL_CACHE overrides it); the CUDA pool is unlimited, since cudaFree waits for the
// device (WEFT_CUDA_POOL_CACHE overrides it). Twice, not once: a training step's forward and
// backward use blocks of different sizes at different times, so what it frees adds up to more
// than it ever held at once, and a cap at the peak evicted blocks the next step asked for again
// (the ICLR benchmark at N = 128, B = 256 trained 18% slower; bench/log/2026-11-26-pool-cap.md).
struct CacheLimit {
  std::int64_t bytes = 0;
  double fraction_of_peak = 2.0;
};
inline constexpr std::int64_t kUnlimitedCacheBytes = std::numeric_limits<std::int64_t>::max();

// A limit as the variables spell it: "256M" (K, M, G or KiB, MiB, GiB: powers of 1024; no
// suffix: bytes), "50%" (of the peak in use) or "unlimited". Errors name `what`.
CacheLimit parse_cache_limit(std::string_view text, std::string_view what);
// Sets the device pool's limit, evicting at once what the new one does not allow.
void set_cache_limit(const CacheLimit& limit, Device device = Device::kCpu);
CacheLimit cache_limit(Device device = Device::kCpu);

// Statistics of the pool of one device.
AllocatorStats allocator_stats(Device device = Device::kCpu);
// Forgets the peak, so the next phase's high-water mark can be measured.
void reset_peak_bytes(Device device = Device::kCpu);
// Returns every cached block of the device's pool to the system (and, for the CPU, the free
// pages the C heap holds: malloc_trim), e.g. when a server goes idle.
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
  // While the block waits in its pool: neighbours in the pool's list of free blocks, in the
  // order they were freed (the eviction order).
  StorageBlock* older = nullptr;
  StorageBlock* newer = nullptr;
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
