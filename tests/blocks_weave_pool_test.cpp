// The pool behind a weave's item lists (WeavePoolAllocator, src/blocks/weave_pool.cpp): released
// blocks are handed out again by size class, each class's free list is capped, a thread's lists
// go when it ends, and a batch woven from blocks another batch released gives the same values
// and gradients, bit for bit, as the same batch woven on a fresh thread with an empty pool.
#include <thread>

#include "blocks_test_util.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace weft::testing {
namespace {

using blocks::detail::weave_pool_cached_blocks;

TEST(BlocksWeavePool, ReleasedBlocksAreHandedOutAgainBySize) {
  WeavePoolAllocator<WeaveValue> pool;
  WeaveValue* a = pool.allocate(3);
  const std::size_t cached = weave_pool_cached_blocks();
  pool.deallocate(a, 3);
  EXPECT_EQ(weave_pool_cached_blocks(), cached + 1);
  WeaveValue* b = pool.allocate(3);  // the same size class: the block just released
  EXPECT_EQ(b, a);
  EXPECT_EQ(weave_pool_cached_blocks(), cached);
  // A list too large for the pool comes from the heap and does not stay in it.
  const std::size_t large = blocks::detail::kWeavePoolLargest / sizeof(WeaveValue) + 1;
  WeaveValue* big = pool.allocate(large);
  pool.deallocate(big, large);
  EXPECT_EQ(weave_pool_cached_blocks(), cached);
  pool.deallocate(b, 3);
}

TEST(BlocksWeavePool, EachFreeListIsCapped) {
  WeavePoolAllocator<WeaveValue> pool;
  std::vector<WeaveValue*> blocks(100000);
  for (WeaveValue*& p : blocks) p = pool.allocate(1);
  const std::size_t before = weave_pool_cached_blocks();
  for (WeaveValue* p : blocks) pool.deallocate(p, 1);
  const std::size_t kept = weave_pool_cached_blocks() - before;
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, blocks.size());  // the rest went back to the heap
}

TEST(BlocksWeavePool, ANewThreadStartsEmptyAndItsBlocksGoWithIt) {
  // Under LeakSanitizer a thread's lists not freed when it ends are reported as leaks.
  std::size_t at_start = 1, after_release = 0;
  std::thread worker([&] {
    at_start = weave_pool_cached_blocks();
    WeavePoolAllocator<WeaveValue> pool;
    pool.deallocate(pool.allocate(5), 5);
    after_release = weave_pool_cached_blocks();
  });
  worker.join();
  EXPECT_EQ(at_start, 0u);
  EXPECT_EQ(after_release, 1u);
}

#if defined(__SANITIZE_ADDRESS__)
// Blocks waiting in a free list are not leaks, though only the list holds them: LeakSanitizer
// must be able to follow the list from its head to its last block (it follows no pointer kept in
// poisoned memory), or a process whose threads still hold lists when it ends reports them.
// Three blocks into one free list, no pointer to them left but the list's (apart, so that none
// stays in the test's frame).
[[gnu::noinline]] void three_blocks_into_a_free_list() {
  WeavePoolAllocator<WeaveValue> pool;
  WeaveValue* blocks[3] = {pool.allocate(2), pool.allocate(2), pool.allocate(2)};
  for (WeaveValue* p : blocks) pool.deallocate(p, 2);
}

TEST(BlocksWeavePool, BlocksInAFreeListAreNotLeaks) {
  three_blocks_into_a_free_list();
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0);
}
#endif

// Each node's state is 2 * (its value + the sum of its neighbours' states), two layers: Zip rows,
// gathered lists and tuples made and dropped per node, all through the pool.
Block message_passing(const Parameter& w) {
  Block scaled = Map(Vector(2) >> Function("scale", {Type::vector(2)},
                                           [w](std::span<const Var> x) { return x[0] * Var(w); }));
  Function update("update", {Type::vector(2), Type::vector(2)},
                  [](std::span<const Var> x) { return (x[0] + x[1]) * 2.0f; });
  Composition c("message_passing");
  auto states = c.add(GetItem("xs") >> scaled, c.input());
  auto nbrs = c.add(GetItem("nbrs"), c.input());
  for (int layer = 0; layer < 2; ++layer) {
    auto sums = c.add(GatherLists() >> Map(Sum(SumOrder::kInOrder)), {states, nbrs});
    states = c.add(Zip() >> Map(update), {states, sums});
  }
  c.set_output(c.add(Sum(SumOrder::kInOrder), states));
  return c;
}

// Graphs of `first` .. `first + count - 1` nodes with neighbour lists from `seed`.
std::vector<Input> graphs(int first, int count, int seed) {
  std::vector<Input> examples;
  for (int n = first; n < first + count; ++n) {
    Input xs = Input::array(), nbrs = Input::array();
    for (int i = 0; i < n; ++i) {
      xs.push_back(Input::array({0.25 * (i + seed) - 1.0, 2.0 / (i + seed + 1)}));
      Input list = Input::array();
      for (int j = 0; j < (i * seed + n) % 5; ++j) list.push_back((i + seed * j + 1) % n);
      nbrs.push_back(list);
    }
    examples.push_back({{"xs", xs}, {"nbrs", nbrs}});
  }
  return examples;
}

struct Outcome {
  std::vector<float> outputs, grad;
  std::size_t calls = 0;
};

Outcome weave_and_run(const Compiler& c, const std::vector<Input>& examples, Parameter& w) {
  w.zero_grad();
  Tape tape;
  WovenBatch batch = c.weave(examples);
  Var out = c.run(batch, tape).output();
  tape.backward(sum(out));
  return {out.value().to_float_vector(), w.grad().to_float_vector(), batch.weaver().num_calls()};
}

TEST(BlocksWeavePool, ABatchWovenFromReusedBlocksEqualsOneWovenFresh) {
  Parameter w("w", random_tensor({2}, 5));
  Compiler c(message_passing(w));
  const std::vector<Input> first = graphs(3, 9, 2), second = graphs(1, 7, 3);
  // On a fresh thread (an empty pool), the second batch alone.
  Outcome fresh;
  std::thread([&] { fresh = weave_and_run(c, second, w); }).join();
  // Here: the first batch, then the second from the blocks the first released, twice over.
  for (int round = 0; round < 2; ++round) {
    weave_and_run(c, first, w);
    EXPECT_GT(weave_pool_cached_blocks(), 0u);
    const Outcome reused = weave_and_run(c, second, w);
    EXPECT_EQ(reused.outputs, fresh.outputs) << "round " << round;
    EXPECT_EQ(reused.grad, fresh.grad) << "round " << round;
    EXPECT_EQ(reused.calls, fresh.calls) << "round " << round;
  }
}

}  // namespace
}  // namespace weft::testing
