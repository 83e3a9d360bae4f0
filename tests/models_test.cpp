// The ICLR benchmark model: tree generators' shapes, weaving, and the loom against the
// model's own hand-batched path on identical trees.
#include "treelstm/iclr_benchmark.h"

#include "op_test_util.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

using treelstm::BenchmarkCell;
using treelstm::BinaryTree;
using treelstm::IclrBenchmarkModel;
using treelstm::TreeType;

TEST(BenchmarkTrees, ShapesFollowTheOriginalGenerators) {
  Rng rng(1);
  BinaryTree seq = treelstm::make_tree(TreeType::kSequence, 128, 128, rng);
  EXPECT_EQ(seq.leaves(), 128);
  EXPECT_EQ(seq.postorder.size(), 255u);
  EXPECT_EQ(seq.depth(), 127);
  BinaryTree balanced = treelstm::make_tree(TreeType::kBalanced, 128, 128, rng);
  EXPECT_EQ(balanced.depth(), 7);
  for (int i = 0; i < 20; ++i) {
    BinaryTree random = treelstm::make_tree(TreeType::kRandom, 128, 10, rng);
    EXPECT_EQ(random.leaves(), 128);
    EXPECT_GE(random.depth(), 7);
    for (std::int32_t v : random.postorder) EXPECT_LT(v, 10);
  }
  EXPECT_EQ(treelstm::make_tree(TreeType::kRandom, 1, 5, rng).depth(), 0);
}

TEST(BenchmarkTrees, BadArgumentsAreReported) {
  Rng rng(1);
  expect_error([&] { treelstm::make_tree(TreeType::kBalanced, 6, 4, rng); },
               {"[tree] a balanced tree needs a power-of-two number of leaves, got 6"});
  expect_error([&] { treelstm::make_tree(TreeType::kRandom, 0, 4, rng); },
               {"[tree] a tree needs at least one leaf, got 0"});
  expect_error([] { treelstm::parse_tree_type("skewed"); },
               {"[tree] unknown tree type 'skewed'; expected random, balanced or sequence"});
  expect_error([] { treelstm::parse_cell("gru"); },
               {"[model] unknown model 'gru'; expected tree-lstm or tree-fc"});
}

// The same balanced trees, run by the loom and by hand (one batched call per level).
std::vector<float> hand_batched_roots(const IclrBenchmarkModel& model, int trees, int leaves,
                                      const std::vector<BinaryTree>& batch) {
  Tape tape;
  TapeScope scope(tape);
  std::vector<std::int32_t> ids;
  for (const auto& tree : batch)
    for (std::int32_t v : tree.postorder)
      if (v >= 0) ids.push_back(v);
  // Rows ordered (tree, leaf); each level pairs consecutive nodes of one tree.
  Var level = model.leaf(Tensor::from_vector(Shape{std::int64_t(ids.size())}, ids));
  for (int width = leaves; width > 1; width /= 2) {
    const std::int64_t n = model.vector_size();
    level = model.internal(reshape(level, {trees * width / 2, 2 * n}));
  }
  return level.value().to_float_vector();
}

TEST(IclrBenchmarkModel, LoomEqualsHandBatchingOnBalancedTrees) {
  for (BenchmarkCell cell : {BenchmarkCell::kTreeLstm, BenchmarkCell::kTreeFc}) {
    Rng rng(3);
    IclrBenchmarkModel model(cell, 6, 16, rng);
    std::vector<BinaryTree> batch;
    for (int t = 0; t < 5; ++t)
      batch.push_back(treelstm::make_tree(TreeType::kBalanced, 8, 16, rng));
    loom::Weaver weaver(model.loom());
    for (const auto& tree : batch) weaver.add_output(model.weave(weaver, tree));
    Tape tape;
    loom::Executor executor(model.loom(), tape);
    auto result = executor.run(weaver);
    auto loom_roots = result.outputs(model.hidden_type()).value().to_float_vector();
    auto manual_roots = hand_batched_roots(model, 5, 8, batch);
    ASSERT_EQ(loom_roots.size(), manual_roots.size());
    for (std::size_t i = 0; i < loom_roots.size(); ++i)
      EXPECT_NEAR(loom_roots[i], manual_roots[i], 1e-5) << treelstm::cell_name(cell) << " " << i;
    EXPECT_EQ(result.stats().levels, 4u);
  }
}

}  // namespace
}  // namespace weft::testing
