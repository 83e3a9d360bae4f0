// The caching allocator: reuse of freed blocks, statistics, and a training-style loop that
// stops reaching the system allocator after its first iteration.
#include "weft/tensor/allocator.h"

#include "op_test_util.h"

namespace weft::testing {
namespace {

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

}  // namespace
}  // namespace weft::testing
