// The caching pool behind tensor storage. Requests are rounded up to size classes (four per
// power of two, so at most 25% is wasted) and freed blocks wait on that class's free list
// until a request of that class, or of one of the three below it, takes them, or until the
// pool's cache is over its cap and they are the ones freed longest ago.
#include "weft/tensor/allocator.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>

#include "../backend/device_memory.h"
#include "weft/backend/counters.h"
#include "weft/core/error.h"

namespace weft {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHeaderBytes = 64;  // StorageBlock rounded to the data alignment
constexpr int kClassesPerOctave = 4;
constexpr int kNumClasses = 64 * kClassesPerOctave;
static_assert(sizeof(detail::StorageBlock) <= kHeaderBytes);
// Host blocks from this size up are mapped from the kernel and unmapped when evicted, so they
// surely leave RSS. glibc maps chunks this big too, but below it, it raises its threshold to
// the size of each mapped chunk freed and serves later ones from heaps that shrink only at
// their top. Smaller blocks stay with malloc on purpose: an evicted block asked for again then
// comes from malloc's free memory, not fresh pages (mapping from 1 MiB up made a training
// benchmark's misses page-fault, bench/log/2026-11-26-pool-cap.md); release_cached_memory
// trims what malloc keeps.
constexpr std::size_t kMappedBytes = std::size_t(32) << 20;
constexpr std::size_t kPageBytes = 4096;

// Smallest size class holding `bytes`, and that class's size in bytes.
std::pair<int, std::size_t> size_class_of(std::size_t bytes) {
  if (bytes <= kAlignment) return {0, kAlignment};
  int octave = 63 - __builtin_clzll(bytes - 1);  // 2^octave < bytes <= 2^(octave+1)
  std::size_t step = (std::size_t(1) << octave) / kClassesPerOctave;
  std::size_t steps = (bytes + step - 1) / step;  // in (4, 8]
  return {octave * kClassesPerOctave + int(steps - kClassesPerOctave - 1), steps * step};
}

// Bytes of host memory behind a block of `class_bytes`: header and data, rounded up to the
// alignment (aligned_alloc wants a multiple of it) or, for mapped blocks, to pages.
std::size_t host_bytes(std::size_t class_bytes) {
  const std::size_t total = (kHeaderBytes + class_bytes + kAlignment - 1) / kAlignment * kAlignment;
  return total < kMappedBytes ? total : (total + kPageBytes - 1) / kPageBytes * kPageBytes;
}

void* allocate_host(std::size_t total) {
  if (total < kMappedBytes) return std::aligned_alloc(kAlignment, total);
  void* memory = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

void free_host(void* memory, std::size_t total) {
  if (total < kMappedBytes)
    std::free(memory);
  else
    ::munmap(memory, total);
}

// Blocks taken out of a pool to be handed back to the system, chained through `newer`.
using EvictedChain = detail::StorageBlock*;

class DevicePool {
 public:
  DevicePool(Device device, const CacheLimit& limit) : device_(device), limit_(limit) {}
  ~DevicePool() { release_cached(); }

  detail::StorageBlock* allocate(std::size_t bytes) {
    auto [cls, class_bytes] = size_class_of(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    detail::StorageBlock* block = nullptr;
    if (const int fit = cached_class_for(cls); fit >= 0) {
      block = free_[fit].back();  // the most recently freed: likeliest still in the CPU's caches
      free_[fit].pop_back();
      unlink(block);
      stats_.bytes_cached -= std::int64_t(block->bytes);
    } else {
      block = allocate_from_system(cls, class_bytes);
    }
    block->refs = 1;
    stats_.bytes_in_use += std::int64_t(block->bytes);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    most_in_use_ = std::max(most_in_use_, stats_.bytes_in_use);
    return block;
  }

  void free(detail::StorageBlock* block) {
    EvictedChain evicted = nullptr;
    {
      std::lock_guard lock(mutex_);
      stats_.bytes_in_use -= std::int64_t(block->bytes);
      stats_.bytes_cached += std::int64_t(block->bytes);
      free_[block->size_class].push_back(block);
      link_newest(block);
      evicted = evict_over_limit();
    }
    free_chain(evicted);  // outside the lock: unmapping need not hold up other threads
  }

  void release_cached() {
    EvictedChain all = nullptr;
    {
      std::lock_guard lock(mutex_);
      all = oldest_;
      oldest_ = newest_ = nullptr;
      for (auto& list : free_) list.clear();
      stats_.bytes_cached = 0;
    }
    free_chain(all);
    if (device_ == Device::kCpu) ::malloc_trim(0);  // the small blocks' pages the heap keeps
  }

  void set_limit(const CacheLimit& limit) {
    EvictedChain evicted = nullptr;
    {
      std::lock_guard lock(mutex_);
      limit_ = limit;
      evicted = evict_over_limit();
    }
    free_chain(evicted);
  }
  CacheLimit limit() {
    std::lock_guard lock(mutex_);
    return limit_;
  }

  AllocatorStats stats() {
    std::lock_guard lock(mutex_);
    AllocatorStats stats = stats_;
    stats.cache_limit_bytes = limit_bytes();
    return stats;
  }
  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  // The class a request of class `cls` is served from: its own when a block of it is cached,
  // else the smallest of the next kSpareClasses that has one (a block up to 1.7x the size asked
  // for), else -1 (from the system). Without the larger classes, a workload whose arrays change
  // size from step to step (a loom level's rows) missed in one class while blocks of the next
  // sat cached, until the cap evicted them: at inference, reading arguments in place (less in
  // use, so a lower cap), the ICLR benchmark's RSS grew without end as evicted blocks fragmented
  // the C heap (bench/log/2026-11-29-cell-blocks.md).
  static constexpr int kSpareClasses = 3;
  int cached_class_for(int cls) const {
    for (int c = cls; c <= std::min(cls + kSpareClasses, kNumClasses - 1); ++c)
      if (!free_[c].empty()) return c;
    return -1;
  }

  std::int64_t limit_bytes() const {
    const double scaled = limit_.fraction_of_peak * double(most_in_use_);
    const std::int64_t of_peak =
        scaled >= double(kUnlimitedCacheBytes) ? kUnlimitedCacheBytes : std::int64_t(scaled);
    return std::max(limit_.bytes, of_peak);
  }

  // Takes the blocks freed longest ago off the free lists until the cache fits its cap. Why
  // least recently freed rather than the largest classes first: a class the workload has moved
  // away from (last hour's batch size) is the one not asked for again, while the largest
  // classes are usually the current step's activations, which would be evicted and mapped
  // afresh every step. Within a class, blocks leave in the order they were freed, so the
  // oldest block overall is always at the front of its class's list.
  EvictedChain evict_over_limit() {
    const std::int64_t limit = limit_bytes();
    EvictedChain chain = nullptr;
    while (stats_.bytes_cached > limit && oldest_ != nullptr) {
      detail::StorageBlock* block = oldest_;
      std::deque<detail::StorageBlock*>& list = free_[block->size_class];
      WEFT_ASSERT(!list.empty() && list.front() == block);
      list.pop_front();
      unlink(block);
      stats_.bytes_cached -= std::int64_t(block->bytes);
      ++stats_.evicted_blocks;
      block->newer = chain;
      chain = block;
    }
    return chain;
  }

  void link_newest(detail::StorageBlock* block) {
    block->older = newest_;
    block->newer = nullptr;
    (newest_ ? newest_->newer : oldest_) = block;
    newest_ = block;
  }
  void unlink(detail::StorageBlock* block) {
    (block->older ? block->older->newer : oldest_) = block->newer;
    (block->newer ? block->newer->older : newest_) = block->older;
    block->older = block->newer = nullptr;
  }

  void free_chain(EvictedChain chain) {
    while (chain != nullptr) {
      detail::StorageBlock* next = chain->newer;
      free_to_system(chain);
      chain = next;
    }
  }

  detail::StorageBlock* allocate_from_system(int cls, std::size_t class_bytes) {
    ++stats_.system_allocations;
    detail::StorageBlock* block = nullptr;
    if (device_ == Device::kCpu) {
      void* memory = allocate_host(host_bytes(class_bytes));
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
      const std::size_t total = host_bytes(block->bytes);
      block->~StorageBlock();
      free_host(block, total);
    } else {
      backend::device_free(device_, block->data);
      delete block;
    }
  }

  Device device_;
  std::mutex mutex_;
  // Per class, in the order freed (newest at the back); all classes together form the list
  // oldest_ ... newest_ through the blocks' own links.
  std::deque<detail::StorageBlock*> free_[kNumClasses];
  detail::StorageBlock* oldest_ = nullptr;
  detail::StorageBlock* newest_ = nullptr;
  AllocatorStats stats_;
  CacheLimit limit_;
  std::int64_t most_in_use_ = 0;  // never reset, unlike stats_.peak_bytes_in_use
};

// The limit a variable asks for, or `fallback` where it is unset or empty.
CacheLimit limit_from_environment(const char* variable, const CacheLimit& fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  return parse_cache_limit(text, variable);
}

DevicePool& pool(Device device) {
  // Never destroyed: tensors held in static objects may be released after main returns.
  static DevicePool* cpu =
      new DevicePool(Device::kCpu, limit_from_environment("WEFT_POOL_CACHE", CacheLimit{}));
  static DevicePool* cuda = new DevicePool(
      Device::kCuda,
      limit_from_environment("WEFT_CUDA_POOL_CACHE", CacheLimit{kUnlimitedCacheBytes, 0.0}));
  return device == Device::kCpu ? *cpu : *cuda;
}

// A byte count with an optional binary suffix; -1 where the text is not one.
std::int64_t parse_byte_count(std::string_view text) {
  std::int64_t count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (error != std::errc() || count < 0 || end == text.data()) return -1;
  const std::string_view suffix(end, std::size_t(text.data() + text.size() - end));
  constexpr std::pair<std::string_view, int> kSuffixes[] = {
      {"", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30}, {"GiB", 30}};
  for (const auto& [name, shift] : kSuffixes)
    if (suffix == name) return count > (kUnlimitedCacheBytes >> shift) ? -1 : count << shift;
  return -1;
}

}  // namespace

CacheLimit parse_cache_limit(std::string_view text, std::string_view what) {
  if (text == "unlimited") return CacheLimit{kUnlimitedCacheBytes, 0.0};
  if (!text.empty() && text.back() == '%') {
    const std::string number(text.substr(0, text.size() - 1));
    char* end = nullptr;
    const double percent = std::strtod(number.c_str(), &end);
    if (!number.empty() && *end == '\0' && percent >= 0 && percent <= 1e6)
      return CacheLimit{0, percent / 100.0};
  } else if (const std::int64_t bytes = parse_byte_count(text); bytes >= 0) {
    return CacheLimit{bytes, 0.0};
  }
  fail("allocator", what,
       " must be a byte count (like 268435456, 256M or 1GiB), a percentage of the peak in use "
       "(like 50%) or 'unlimited', got '",
       text.substr(0, 40), "'");
}

AllocatorStats allocator_stats(Device device) { return pool(device).stats(); }
void reset_peak_bytes(Device device) { pool(device).reset_peak(); }
void release_cached_memory(Device device) { pool(device).release_cached(); }
void set_cache_limit(const CacheLimit& limit, Device device) { pool(device).set_limit(limit); }
CacheLimit cache_limit(Device device) { return pool(device).limit(); }

namespace detail {

StorageBlock* allocate_block(std::size_t bytes, Device device) {
  const backend::detail::WorkTimer timer(WorkKind::kAllocation);
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
  const backend::detail::WorkTimer timer(WorkKind::kAllocation);
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
