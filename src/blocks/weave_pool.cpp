// The per-thread pool behind WeavePoolAllocator (block.h): a weave's item lists and their shared
// handles are small blocks made and dropped by the thousand per batch; each thread keeps the
// ones it releases in free lists by power-of-two size class and hands them out again, so a
// steady run of batches allocates nothing from the heap once the lists are warm.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "weft/blocks/block.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_POOL_ASAN 1
#endif
#endif
#if defined(WEFT_POOL_ASAN)
#include <sanitizer/asan_interface.h>
#define WEFT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define WEFT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft::blocks::detail {
namespace {

constexpr std::size_t kSmallest = 32;  // bytes of the first size class
constexpr std::size_t kClasses = std::bit_width(kWeavePoolLargest / kSmallest);  // 32 .. 4096
constexpr std::size_t kBytesPerClass = std::size_t(1) << 19;  // a list's cap: 512 KiB of blocks

constexpr std::size_t class_of(std::size_t bytes) {
  return bytes <= kSmallest ? 0 : std::size_t(std::bit_width((bytes - 1) / kSmallest));
}
constexpr std::size_t class_bytes(std::size_t c) { return kSmallest << c; }
static_assert(class_bytes(kClasses - 1) == kWeavePoolLargest);
static_assert(class_of(kWeavePoolLargest) == kClasses - 1 && class_of(kSmallest + 1) == 1);

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable while the thread's other thread_locals are
// destroyed (a release then goes to the heap: `closed`).
struct FreeLists {
  std::array<FreeBlock*, kClasses> head{};
  std::array<std::uint32_t, kClasses> count{};
  bool registered = false;
  bool closed = false;
};
constinit thread_local FreeLists lists;

void drain(FreeLists& l) noexcept {
  for (std::size_t c = 0; c < kClasses; ++c) {
    while (FreeBlock* b = l.head[c]) {
      WEFT_UNPOISON(b, class_bytes(c));
      l.head[c] = b->next;
      ::operator delete(b);
    }
    l.count[c] = 0;
  }
}

// Frees the thread's lists when it ends; made on the thread's first release into the pool.
struct Drain {
  ~Drain() {
    drain(lists);
    lists.closed = true;
  }
};

}  // namespace

void* weave_pool_allocate(std::size_t bytes) {
  if (bytes > kWeavePoolLargest) return ::operator new(bytes);
  const std::size_t c = class_of(bytes);
  FreeBlock* b = lists.head[c];
  if (b == nullptr) return ::operator new(class_bytes(c));
  WEFT_UNPOISON(b, class_bytes(c));
  lists.head[c] = b->next;
  --lists.count[c];
  return b;
}

void weave_pool_release(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  const std::size_t c = class_of(bytes);
  if (bytes > kWeavePoolLargest || lists.closed ||
      lists.count[c] >= kBytesPerClass / class_bytes(c)) {
    ::operator delete(block);
    return;
  }
  if (!lists.registered) {
    lists.registered = true;
    thread_local Drain drain_at_exit;
    (void)drain_at_exit;
  }
  auto* b = static_cast<FreeBlock*>(block);
  b->next = lists.head[c];
  lists.head[c] = b;
  ++lists.count[c];
  // All but the link: LeakSanitizer follows no pointer kept in poisoned memory, so a poisoned
  // link would make every block behind a list's first a leak when the process ends with the
  // list's thread still running (a server's workers, which never end).
  WEFT_POISON(b + 1, class_bytes(c) - sizeof(FreeBlock));
}

std::size_t weave_pool_cached_blocks() noexcept {
  std::size_t n = 0;
  for (const std::uint32_t k : lists.count) n += k;
  return n;
}

}  // namespace weft::blocks::detail
