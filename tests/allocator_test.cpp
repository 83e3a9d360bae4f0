// The caching allocator: reuse of freed blocks, statistics, a training-style loop that stops
// reaching the system allocator after its first iteration, and the cap on the cache: it
// holds, it evicts the blocks freed longest ago, and what it hands back returns to the system.
#include "weft/tensor/allocator.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

#include "op_test_util.h"

namespace weft::testing {
namespace {

// Sets the CPU pool's cache limit for one test and puts the previous one back.
class CacheLimitScope {
 public:
  explicit CacheLimitScope(const CacheLimit& limit) : saved_(cache_limit()) {
    set_cache_limit(limit);
  }
  ~CacheLimitScope() { set_cache_limit(saved_); }

 private:
  CacheLimit saved_;
};

double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * double(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

TEST(Allocator, FreedBlocksAreReusedForTheSameSize) {
  { Tensor warm = Tensor::empty({1000}); }
  const AllocatorStats before = allocator_stats();
  for (int i = 0; i < 100; ++i) Tensor t = Tensor::empty({1000});
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.allocations, before.allocations + 100);
}

TEST(Allocator, StatsTrackBytesInUseAndPeak) {
  reset_peak_bytes();
  const AllocatorStats start = allocator_stats();
  {
    Tensor a = Tensor::empty({1 << 16});  // 256 KiB exactly a size class
    EXPECT_EQ(allocator_stats().bytes_in_use, start.bytes_in_use + (1 << 18));
  }
  EXPECT_EQ(allocator_stats().bytes_in_use, start.bytes_in_use);
  EXPECT_GE(allocator_stats().peak_bytes_in_use, start.bytes_in_use + (1 << 18));
}

TEST(Allocator, SizeClassesWasteAtMostAQuarter) {
  const AllocatorStats start = allocator_stats();
  Tensor t = Tensor::empty({1000, 1001});
  const std::int64_t used = allocator_stats().bytes_in_use - start.bytes_in_use;
  EXPECT_GE(used, 1000 * 1001 * 4);
  EXPECT_LE(used, 1000 * 1001 * 4 * 5 / 4);
}

TEST(Allocator, ReleaseReturnsCachedBlocks) {
  { Tensor t = Tensor::empty({12345}); }
  EXPECT_GT(allocator_stats().bytes_cached, 0);
  release_cached_memory();
  EXPECT_EQ(allocator_stats().bytes_cached, 0);
}

TEST(Allocator, RepeatedTrainingStepsStopCallingTheSystemAllocator) {
  Parameter w("w", random_tensor({16, 8}, 1));
  Parameter b("b", Tensor::zeros({8}));
  Tensor x = random_tensor({32, 16}, 2);
  Tape tape;
  auto step = [&] {
    tape.clear();
    TapeScope scope(tape);
    Var h = tanh(linear(tape.constant(x), w, b));
    tape.backward(l2_loss(h * sigmoid(h)));
  };
  step();
  step();
  const AllocatorStats warm = allocator_stats();
  for (int i = 0; i < 20; ++i) step();
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.system_allocations, warm.system_allocations);
  EXPECT_GT(after.allocations, warm.allocations + 20 * 8);
}

TEST(Allocator, CachedBytesStayUnderAFixedCapOverManySizeClasses) {
  constexpr std::int64_t kCap = 1 << 20;
  CacheLimitScope scope(CacheLimit{kCap, 0.0});
  const AllocatorStats start = allocator_stats();
  EXPECT_EQ(start.cache_limit_bytes, kCap);
  EXPECT_LE(start.bytes_cached, kCap);
  // Batches of shifting sizes (like a server's), freed in an order unlike their allocation.
  for (int round = 0; round < 30; ++round) {
    std::vector<detail::StorageBlock*> blocks;
    for (int i = 0; i < 40; ++i)
      blocks.push_back(detail::allocate_block(std::size_t(1000 + (round * 7 + i * 37) % 200 * 997),
                                              Device::kCpu));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      detail::release_block(blocks[(i * 17) % blocks.size()]);
      ASSERT_LE(allocator_stats().bytes_cached, kCap) << "round " << round << ", free " << i;
    }
  }
  const AllocatorStats end = allocator_stats();
  EXPECT_GT(end.evicted_blocks, start.evicted_blocks);
  // It evicts what is over the cap, not everything: no block is bigger than 200 KB.
  EXPECT_GE(end.bytes_cached, kCap - 200 * 1000);
}

// A request whose own class has nothing cached takes a cached block of one of the next three
// classes (up to 1.7x its size) rather than the system's memory; one octave up it does not.
TEST(Allocator, ARequestTakesACachedBlockALittleLargerBeforeTheSystems) {
  release_cached_memory();
  CacheLimitScope unlimited(CacheLimit{kUnlimitedCacheBytes, 0.0});
  detail::StorageBlock* larger = detail::allocate_block(15000, Device::kCpu);  // a class above
  detail::StorageBlock* octave_up = detail::allocate_block(40000, Device::kCpu);
  void* const larger_data = larger->data;
  detail::release_block(larger);
  detail::release_block(octave_up);
  const AllocatorStats before = allocator_stats();
  detail::StorageBlock* small = detail::allocate_block(12000, Device::kCpu);
  EXPECT_EQ(small->data, larger_data);
  EXPECT_GE(small->bytes, std::size_t(12000));
  EXPECT_EQ(allocator_stats().system_allocations, before.system_allocations);
  EXPECT_EQ(allocator_stats().bytes_in_use, before.bytes_in_use + std::int64_t(small->bytes));
  detail::StorageBlock* smaller = detail::allocate_block(12000, Device::kCpu);  // 40000 is too big
  EXPECT_EQ(allocator_stats().system_allocations, before.system_allocations + 1);
  detail::release_block(small);
  detail::release_block(smaller);
  EXPECT_EQ(allocator_stats().bytes_in_use, before.bytes_in_use);
  release_cached_memory();
}

TEST(Allocator, EvictsTheBlocksFreedLongestAgoFirst) {
  release_cached_memory();
  CacheLimitScope unlimited(CacheLimit{kUnlimitedCacheBytes, 0.0});
  // Two blocks of one class and one each of two others, freed a1, b, a2, c.
  detail::StorageBlock* a1 = detail::allocate_block(10000, Device::kCpu);
  detail::StorageBlock* a2 = detail::allocate_block(10000, Device::kCpu);
  detail::StorageBlock* b = detail::allocate_block(20000, Device::kCpu);
  detail::StorageBlock* c = detail::allocate_block(40000, Device::kCpu);
  const auto a_bytes = std::int64_t(a1->bytes), b_bytes = std::int64_t(b->bytes);
  const auto c_bytes = std::int64_t(c->bytes);
  for (detail::StorageBlock* block : {a1, b, a2, c}) detail::release_block(block);
  ASSERT_EQ(allocator_stats().bytes_cached, 2 * a_bytes + b_bytes + c_bytes);
  const AllocatorStats full = allocator_stats();
  // Room for all but one block of class a: a1 goes (freed first), although class a was freed
  // into after b; then room for one a and c only: b goes.
  set_cache_limit(CacheLimit{a_bytes + b_bytes + c_bytes, 0.0});
  EXPECT_EQ(allocator_stats().evicted_blocks, full.evicted_blocks + 1);
  set_cache_limit(CacheLimit{a_bytes + c_bytes, 0.0});
  EXPECT_EQ(allocator_stats().evicted_blocks, full.evicted_blocks + 2);
  EXPECT_EQ(allocator_stats().bytes_cached, a_bytes + c_bytes);
  // What is left: one block of a and c's; a second a and b reach the system.
  std::vector<detail::StorageBlock*> taken;
  const std::int64_t before = allocator_stats().system_allocations;
  for (std::size_t bytes : {10000, 40000, 10000, 20000})
    taken.push_back(detail::allocate_block(bytes, Device::kCpu));
  EXPECT_EQ(allocator_stats().system_allocations, before + 2);
  EXPECT_EQ(taken[0], a2);  // a2 and c came back from the cache
  EXPECT_EQ(taken[1], c);
  for (detail::StorageBlock* block : taken) detail::release_block(block);
}

TEST(Allocator, BlocksAfterEvictionAreAlignedAndWhole) {
  CacheLimitScope no_cache(CacheLimit{0, 0.0});  // every freed block goes back at once
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t bytes :
         {std::size_t(1), std::size_t(100), std::size_t(5000), std::size_t(300000),
          std::size_t(1) << 20, (std::size_t(3) << 20) + 5}) {
      const AllocatorStats before = allocator_stats();
      detail::StorageBlock* block = detail::allocate_block(bytes, Device::kCpu);
      EXPECT_EQ(allocator_stats().system_allocations, before.system_allocations + 1);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block->data) % 64, 0u) << bytes;
      ASSERT_GE(block->bytes, bytes);
      auto* data = static_cast<unsigned char*>(block->data);
      for (std::size_t i = 0; i < block->bytes; ++i)
        data[i] = static_cast<unsigned char>(i * 31 + 7);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < block->bytes; ++i)
        wrong += data[i] != static_cast<unsigned char>(i * 31 + 7);
      EXPECT_EQ(wrong, 0u) << bytes;
      detail::release_block(block);
      EXPECT_EQ(allocator_stats().bytes_cached, 0);
      EXPECT_EQ(allocator_stats().evicted_blocks, before.evicted_blocks + 1);
    }
  // Tensors computed on blocks that come and go agree with the same computation cached.
  const Tensor x = random_tensor({64, 300}, 3), w = random_tensor({300, 50}, 4);
  const auto product = [&] {
    Tape tape;
    TapeScope scope(tape);
    return tanh(matmul(tape.constant(x), tape.constant(w))).value().to_float_vector();
  };
  const std::vector<float> uncached = product();
  CacheLimitScope cached(CacheLimit{kUnlimitedCacheBytes, 0.0});
  EXPECT_EQ(product(), uncached);
}

TEST(Allocator, LargeBlocksGoBackToTheOperatingSystem) {
  constexpr std::size_t kBytes = std::size_t(64) << 20;
  CacheLimitScope unlimited(CacheLimit{kUnlimitedCacheBytes, 0.0});
  for (bool evict : {false, true}) {
    detail::StorageBlock* block = detail::allocate_block(kBytes, Device::kCpu);
    std::memset(block->data, 1, kBytes);  // resident now
    const double touched = resident_mib();
    if (evict) set_cache_limit(CacheLimit{0, 0.0});
    detail::release_block(block);
    if (!evict) release_cached_memory();
    EXPECT_LT(resident_mib(), touched - 48) << (evict ? "evicted" : "released");
  }
}

TEST(Allocator, AFractionOfThePeakScalesTheCap) {
  detail::StorageBlock* big = detail::allocate_block(std::size_t(32) << 20, Device::kCpu);
  const std::int64_t in_use = allocator_stats().bytes_in_use;
  std::int64_t half = 0;
  {
    CacheLimitScope scope(CacheLimit{0, 0.5});
    half = allocator_stats().cache_limit_bytes;
    detail::release_block(big);
    EXPECT_LE(allocator_stats().bytes_cached, half);
  }
  EXPECT_GE(half, in_use / 2);
  CacheLimitScope whole(CacheLimit{0, 1.0});
  EXPECT_NEAR(double(allocator_stats().cache_limit_bytes), 2.0 * double(half), 1.0);
  // A fixed budget over the fraction wins.
  CacheLimitScope both(CacheLimit{std::int64_t(1) << 40, 1.0});
  EXPECT_EQ(allocator_stats().cache_limit_bytes, std::int64_t(1) << 40);
}

TEST(Allocator, CacheLimitsParseAndBadOnesFailClearly) {
  const auto bytes = [](std::string_view text) {
    return parse_cache_limit(text, "WEFT_POOL_CACHE").bytes;
  };
  EXPECT_EQ(bytes("4096"), 4096);
  EXPECT_EQ(bytes("0"), 0);
  EXPECT_EQ(bytes("256M"), std::int64_t(256) << 20);
  EXPECT_EQ(bytes("1GiB"), std::int64_t(1) << 30);
  EXPECT_EQ(bytes("64K"), 64 << 10);
  EXPECT_EQ(bytes("unlimited"), kUnlimitedCacheBytes);
  const CacheLimit percent = parse_cache_limit("50%", "WEFT_POOL_CACHE");
  EXPECT_EQ(percent.bytes, 0);
  EXPECT_DOUBLE_EQ(percent.fraction_of_peak, 0.5);
  EXPECT_DOUBLE_EQ(parse_cache_limit("256M", "x").fraction_of_peak, 0.0);
  for (const char* bad : {"", "abc", "-1", "12Q", "%", "50%%", "-5%", "nan%", "1e3", "256 M",
                          "99999999999G", "9223372036854775808"})
    expect_error([&] { parse_cache_limit(bad, "WEFT_POOL_CACHE"); },
                 {"WEFT_POOL_CACHE", "byte count", std::string("'") + bad + "'"});
}

}  // namespace
}  // namespace weft::testing
