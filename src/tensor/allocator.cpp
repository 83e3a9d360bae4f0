// The caching pool behind tensor storage. Requests are rounded up to size classes (four per
// power of two, so at most 25% is wasted) and freed blocks wait on that class's free list
// until the same size is asked for again.
#include "weft/tensor/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "../backend/device_memory.h"
#include "weft/core/error.h"

namespace weft {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHeaderBytes = 64;  // StorageBlock rounded to the data alignment
constexpr int kClassesPerOctave = 4;
constexpr int kNumClasses = 64 * kClassesPerOctave;
static_assert(sizeof(detail::StorageBlock) <= kHeaderBytes);

// Smallest size class holding `bytes`, and that class's size in bytes.
std::pair<int, std::size_t> size_class_of(std::size_t bytes) {
  if (bytes <= kAlignment) return {0, kAlignment};
  int octave = 63 - __builtin_clzll(bytes - 1);  // 2^octave < bytes <= 2^(octave+1)
  std::size_t step = (std::size_t(1) << octave) / kClassesPerOctave;
  std::size_t steps = (bytes + step - 1) / step;  // in (4, 8]
  return {octave * kClassesPerOctave + int(steps - kClassesPerOctave - 1), steps * step};
}

class DevicePool {
 public:
  explicit DevicePool(Device device) : device_(device) {}
  ~DevicePool() { release_cached(); }

  detail::StorageBlock* allocate(std::size_t bytes) {
    auto [cls, class_bytes] = size_class_of(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    detail::StorageBlock* block = nullptr;
    if (!free_[cls].empty()) {
      block = free_[cls].back();
      free_[cls].pop_back();
      stats_.bytes_cached -= std::int64_t(class_bytes);
    } else {
      block = allocate_from_system(cls, class_bytes);
    }
    block->refs = 1;
    stats_.bytes_in_use += std::int64_t(class_bytes);
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
      stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return block;
  }

  void free(detail::StorageBlock* block) {
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= std::int64_t(block->bytes);
    stats_.bytes_cached += std::int64_t(block->bytes);
    free_[block->size_class].push_back(block);
  }

  void release_cached() {
    std::lock_guard lock(mutex_);
    for (auto& list : free_) {
      for (detail::StorageBlock* block : list) free_to_system(block);
      list.clear();
    }
    stats_.bytes_cached = 0;
  }

  AllocatorStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  detail::StorageBlock* allocate_from_system(int cls, std::size_t class_bytes) {
    ++stats_.system_allocations;
    detail::StorageBlock* block = nullptr;
    if (device_ == Device::kCpu) {
      // aligned_alloc wants a multiple of the alignment; size classes below 128 bytes are not.
      const std::size_t total =
          (kHeaderBytes + class_bytes + kAlignment - 1) / kAlignment * kAlignment;
      void* memory = std::aligned_alloc(kAlignment, total);
      if (!memory)
        fail("allocator", "out of host memory allocating ", class_bytes, " bytes (",
             stats_.bytes_in_use, " bytes in use, ", stats_.bytes_cached, " cached)");
      block = new (memory) detail::StorageBlock{};
      block->data = static_cast<char*>(memory) + kHeaderBytes;
    } else {
      void* data = backend::device_allocate(device_, class_bytes);  // may throw: allocate first
      block = new detail::StorageBlock{};
      block->data = data;
    }
    block->bytes = class_bytes;
    block->device = device_;
    block->size_class = cls;
    return block;
  }

  void free_to_system(detail::StorageBlock* block) {
    if (device_ == Device::kCpu) {
      block->~StorageBlock();
      std::free(block);
    } else {
      backend::device_free(device_, block->data);
      delete block;
    }
  }

  Device device_;
  std::mutex mutex_;
  std::vector<detail::StorageBlock*> free_[kNumClasses];
  AllocatorStats stats_;
};

DevicePool& pool(Device device) {
  // Never destroyed: tensors held in static objects may be released after main returns.
  static DevicePool* cpu = new DevicePool(Device::kCpu);
  static DevicePool* cuda = new DevicePool(Device::kCuda);
  return device == Device::kCpu ? *cpu : *cuda;
}

}  // namespace

AllocatorStats allocator_stats(Device device) { return pool(device).stats(); }
void reset_peak_bytes(Device device) { pool(device).reset_peak(); }
void release_cached_memory(Device device) { pool(device).release_cached(); }

namespace detail {

StorageBlock* allocate_block(std::size_t bytes, Device device) {
  return pool(device).allocate(bytes);
}

void retain_block(StorageBlock* block) {
  std::atomic_ref<std::int64_t>(block->refs).fetch_add(1, std::memory_order_relaxed);
}

void release_block(StorageBlock* block) {
  if (std::atomic_ref<std::int64_t>(block->refs).fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;
  if (block->size_class < 0) {
    if (block->release_external) block->release_external(block->external_context);
    delete block;
    return;
  }
  pool(block->device).free(block);
}

StorageBlock* wrap_external_block(void* data, std::size_t bytes, Device device,
                                  void (*release)(void* context), void* context) {
  auto* block = new StorageBlock{};
  block->refs = 1;
  block->bytes = bytes;
  block->device = device;
  block->size_class = -1;
  block->data = data;
  block->release_external = release;
  block->external_context = context;
  return block;
}

}  // namespace detail
}  // namespace weft
