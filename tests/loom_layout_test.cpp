// Layout planning (order_calls_for_views): same-shape trees pass every internal step's children
// as a view, for plain two-argument operations and concat_inputs ones alike, so the run
// gathers only the reordered leaves' words; random trees get a view wherever one step feeds a
// whole consumer (the nodes over two leaves); and a laid-out run computes what one call per
// node computes, outputs and gradients.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

using loom::Value;

const loom::TypeShape kWord{DType::kInt32, {}, "word"};
const loom::TypeShape kHidden{DType::kFloat32, {4}, "hidden"};

struct TreeLoom {
  loom::Loom loom;
  Parameter table{"table", random_tensor({16, 4}, 301)};
  Parameter w{"w", random_tensor({8, 4}, 302)};
  loom::OpId leaf = 0, pair = 0, pair_concat = 0;
  loom::TypeId word = 0, hidden = 0;

  TreeLoom() {
    leaf = loom.add_operation("leaf", {kWord}, {kHidden}, [this](std::span<const Var> in) {
      return std::vector<Var>{embedding_lookup(Tape::current().parameter(table), in[0].value())};
    });
    pair =
        loom.add_operation("pair", {kHidden, kHidden}, {kHidden}, [this](std::span<const Var> in) {
          return std::vector<Var>{
              tanh(matmul(concat({in[0], in[1]}), Tape::current().parameter(w)))};
        });
    loom::OperationOptions concat;
    concat.concat_inputs = true;
    pair_concat = loom.add_operation(
        "pair_concat", {kHidden, kHidden}, {kHidden},
        [this](std::span<const Var> in) {
          return std::vector<Var>{tanh(matmul(in[0], Tape::current().parameter(w)))};
        },
        concat);
    word = loom.type_id(kWord);
    hidden = loom.type_id(kHidden);
  }

  // A tree given as a post-order (>= 0: a leaf's word; -1: an internal node over the two
  // subtrees before it), combined with `op`.
  Value weave(loom::Weaver& weaver, const std::vector<int>& postorder, loom::OpId op) const {
    std::vector<Value> stack;
    for (int v : postorder) {
      if (v >= 0) {
        const std::int32_t id = v;
        stack.push_back(weaver.call(leaf, {weaver.constant(word, std::span(&id, 1))})[0]);
        continue;
      }
      const Value right = stack.back();
      stack.pop_back();
      stack.back() = weaver.call(op, {stack.back(), right})[0];
    }
    return stack.back();
  }
};

// A balanced tree of 8 leaves with words from `seed`.
std::vector<int> balanced(int seed) {
  std::vector<int> t;
  for (int q = 0; q < 2; ++q) {
    for (int p = 0; p < 2; ++p) {
      t.insert(t.end(), {(seed + 4 * q + 2 * p) % 16, (seed + 4 * q + 2 * p + 1) % 16, -1});
    }
    t.push_back(-1);
  }
  t.push_back(-1);
  return t;
}

struct Outcome {
  loom::RunStats stats;
  std::vector<float> outputs, table_grad, w_grad;
};

Outcome run(const TreeLoom& m, const std::vector<std::vector<int>>& trees, loom::OpId op,
            loom::Strategy strategy) {
  loom::Weaver weaver(m.loom);
  for (const auto& t : trees) weaver.add_output(m.weave(weaver, t, op));
  for (Parameter p : {m.table, m.w}) p.zero_grad();  // shared handles: the model's own
  Tape tape;
  TapeScope scope(tape);
  loom::Executor executor(m.loom, tape);
  const loom::LoomResult result = executor.run(weaver, strategy);
  const Var out = result.outputs(m.hidden);
  tape.backward(sum(out * out));
  return {result.stats(), out.value().to_float_vector(), m.table.grad().to_float_vector(),
          m.w.grad().to_float_vector()};
}

void expect_same_numbers(const Outcome& got, const Outcome& want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (std::size_t i = 0; i < got.outputs.size(); ++i)
    EXPECT_NEAR(got.outputs[i], want.outputs[i], 1e-5);
  for (std::size_t i = 0; i < got.table_grad.size(); ++i)
    EXPECT_NEAR(got.table_grad[i], want.table_grad[i], 1e-4);
  for (std::size_t i = 0; i < got.w_grad.size(); ++i)
    EXPECT_NEAR(got.w_grad[i], want.w_grad[i], 1e-4);
}

TEST(LoomLayout, SameShapeTreesReadEveryInternalArgumentAsAView) {
  TreeLoom m;
  const std::vector<std::vector<int>> trees{balanced(0), balanced(3), balanced(7)};
  for (loom::OpId op : {m.pair, m.pair_concat}) {
    const Outcome got = run(m, trees, op, loom::Strategy::kByDepth);
    const bool concat = op == m.pair_concat;
    // Three internal levels, a plain pair reading two arguments per level and a concat one.
    // A concat pair reads the leaves interleaved, as they were woven, so their words are a view
    // too; a plain pair reads the left leaves, then the right ones: the words are gathered.
    EXPECT_EQ(got.stats.gathers_skipped, concat ? 3 + 1 : 6);
    EXPECT_EQ(got.stats.bytes_gathered, concat ? 0 : std::int64_t(3 * 8 * sizeof(std::int32_t)));
    expect_same_numbers(got, run(m, trees, op, loom::Strategy::kNone));
  }
}

TEST(LoomLayout, RandomTreesGetAViewWhereOneStepFeedsAWholeConsumer) {
  TreeLoom m;
  // Depth-2 nodes (over two leaves) read only the leaf step: a view; deeper ones mix steps.
  const std::vector<std::vector<int>> trees{
      {1, 2, -1, 3, -1, 4, 5, -1, -1}, {6, 7, 8, -1, -1, 9, -1}, {10, 11, -1, 12, 13, -1, -1}};
  for (loom::OpId op : {m.pair, m.pair_concat}) {
    const Outcome got = run(m, trees, op, loom::Strategy::kByDepth);
    EXPECT_GE(got.stats.gathers_skipped, op == m.pair_concat ? 1 : 2);
    expect_same_numbers(got, run(m, trees, op, loom::Strategy::kNone));
  }
}

TEST(LoomLayout, OrdersOnlyWithinSteps) {
  TreeLoom m;
  loom::Weaver weaver(m.loom);
  for (int t = 0; t < 4; ++t) weaver.add_output(m.weave(weaver, balanced(t), m.pair_concat));
  const loom::Schedule schedule = loom::make_schedule(weaver, loom::Strategy::kByDepth);
  for (const loom::ScheduleStep& step : schedule.steps) {
    auto calls = std::vector<std::uint32_t>(schedule.step_calls(step).begin(),
                                            schedule.step_calls(step).end());
    for (std::uint32_t call : calls) EXPECT_EQ(weaver.calls()[call].op, step.op);
    std::sort(calls.begin(), calls.end());
    EXPECT_EQ(std::adjacent_find(calls.begin(), calls.end()), calls.end());
  }
  EXPECT_EQ(schedule.calls.size(), weaver.num_calls());
}

}  // namespace
}  // namespace weft::testing
