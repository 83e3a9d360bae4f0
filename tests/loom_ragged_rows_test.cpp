// Ragged-rows operations (loom.h): a call takes any number of values of one type and the body
// gets them row after row with their segment ids and the calls' counts. Batched equals each
// example alone (outputs bit for bit: each segment adds its rows in the same order; gradients),
// parameter gradients against finite differences, length-1 calls, the planned ids and counts,
// and every misuse refused by name.
#include <algorithm>

#include <gmock/gmock.h>

#include "op_test_util.h"
#include "weft/loom/batch_plan.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

using namespace weft::loom;  // NOLINT: the tests read like the loom's own code

const TypeShape kRow{DType::kFloat32, {3}, "row"};

// scale: x * w (a parameter); sum: the ragged segment sum; head: tanh, so sums are consumed.
struct RaggedModel {
  Loom loom;
  TypeId row;
  OpId scale, sum, head;
  Parameter w{"w", random_tensor({3}, 7)};
  RaggedModel() {
    row = loom.add_type(kRow);
    scale = loom.add_operation("scale", {kRow}, {kRow}, [this](std::span<const Var> in) {
      return std::vector<Var>{in[0] * w};
    });
    loom::OperationOptions ragged;
    ragged.ragged_rows = true;
    sum = loom.add_operation(
        "sum", {kRow}, {kRow},
        [](std::span<const Var> in) {
          return std::vector<Var>{segment_sum(in[0], in[1].value(), in[2].shape()[0])};
        },
        ragged);
    head = loom.add_operation("head", {kRow}, {kRow}, [](std::span<const Var> in) {
      return std::vector<Var>{tanh(in[0])};
    });
  }
};

// Example `e`: scaled leaves, a sum of some of them (repeats allowed, any order, 1 to 6), a sum
// of that sum and more leaves (a deeper ragged call), its head as the output.
// An integer in [0, n) from rng.
std::size_t below(Rng& rng, std::size_t n) {
  return std::min(n - 1, std::size_t(rng.uniform() * float(n)));
}

void weave_example(RaggedModel& m, Weaver& w, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Value> leaves;
  const std::size_t n = 1 + below(rng, 5);
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor t = random_tensor({3}, seed * 31 + i, -4.0f, 4.0f);
    leaves.push_back(w.call(m.scale, {w.constant(m.row, t)})[0]);
  }
  std::vector<Value> picked;
  const std::size_t k = 1 + below(rng, 6);
  for (std::size_t i = 0; i < k; ++i) picked.push_back(leaves[below(rng, n)]);
  std::vector<Value> outer{w.call(m.sum, picked)[0]};
  for (std::size_t i = below(rng, 3); i > 0; --i) outer.push_back(leaves[below(rng, n)]);
  w.add_output(w.call(m.head, {w.call(m.sum, outer)[0]})[0]);
}

struct Outcome {
  std::vector<float> outputs, grad;
};

// Runs the given examples in one batch; the loss is sum(cotangent * outputs).
Outcome run(RaggedModel& m, const std::vector<std::uint64_t>& seeds, std::size_t first_cotangent,
            const std::vector<float>& cotangent, Strategy strategy) {
  Weaver w(m.loom);
  for (std::uint64_t s : seeds) weave_example(m, w, s);
  Tape tape;
  TapeScope scope(tape);
  m.w.zero_grad();
  Executor executor(m.loom, tape);
  auto result = executor.run(w, strategy);
  Var out = result.outputs(m.row);
  const std::vector<float> c(
      cotangent.begin() + std::ptrdiff_t(first_cotangent * 3),
      cotangent.begin() + std::ptrdiff_t((first_cotangent + seeds.size()) * 3));
  tape.backward(sum(out * tape.constant(Tensor::from_vector(out.shape(), c))));
  return {out.value().to_float_vector(), m.w.grad().to_float_vector()};
}

TEST(LoomRaggedRows, BatchedEqualsEachExampleAlone) {
  RaggedModel m;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= 40; ++s) seeds.push_back(s);
  const std::vector<float> cotangent = random_cotangent(seeds.size() * 3, 99);
  for (Strategy strategy : {Strategy::kByDepth, Strategy::kAgenda, Strategy::kNone}) {
    const Outcome batched = run(m, seeds, 0, cotangent, strategy);
    std::vector<float> grad(3, 0.0f);
    for (std::size_t e = 0; e < seeds.size(); ++e) {
      const Outcome alone = run(m, {seeds[e]}, e, cotangent, Strategy::kByDepth);
      for (std::size_t j = 0; j < 3; ++j) {
        // Each segment adds its rows in the order given, batched or not: the same bits.
        EXPECT_EQ(batched.outputs[e * 3 + j], alone.outputs[j])
            << "example " << e << " element " << j << " (" << loom::strategy_name(strategy) << ")";
        grad[j] += alone.grad[j];
      }
    }
    for (std::size_t j = 0; j < 3; ++j)
      EXPECT_TRUE(close(batched.grad[j], grad[j], 1e-5, 1e-5))
          << "gradient " << j << ": batched " << batched.grad[j] << " vs summed " << grad[j];
  }
}

TEST(LoomRaggedRows, ParameterGradientMatchesFiniteDifferences) {
  RaggedModel m;
  const std::vector<std::uint64_t> seeds{3, 5, 8, 13};
  const std::vector<float> cotangent = random_cotangent(seeds.size() * 3, 5);
  const std::vector<float> analytic = run(m, seeds, 0, cotangent, Strategy::kByDepth).grad;
  auto loss = [&] {
    const std::vector<float> y = run(m, seeds, 0, cotangent, Strategy::kByDepth).outputs;
    double total = 0;
    for (std::size_t i = 0; i < y.size(); ++i) total += double(cotangent[i]) * y[i];
    return total;
  };
  float* values = m.w.value().data<float>();
  check_finite_differences("parameter w", std::span<float>(values, 3), analytic, loss, 1e-2, 2e-3,
                           2e-2);
}

TEST(LoomRaggedRows, OneValueCallsAndThePlannedIdsAndCounts) {
  RaggedModel m;
  Weaver w(m.loom);
  std::vector<Value> leaves;
  for (int i = 0; i < 4; ++i)
    leaves.push_back(w.constant(m.row, random_tensor({3}, std::uint64_t(i) + 1)));
  const Value a = w.call(m.sum, {leaves[2]})[0];                        // one value: a copy
  const Value b = w.call(m.sum, {leaves[0], leaves[3], leaves[0]})[0];  // a repeat
  EXPECT_EQ(w.depth(a), 1);
  EXPECT_EQ(w.depth(b), 1);
  EXPECT_EQ(w.call_args(1).size(), 3u);
  w.add_output(a);
  w.add_output(b);
  const loom::Schedule schedule = loom::make_schedule(w, Strategy::kByDepth);
  ASSERT_EQ(schedule.steps.size(), 1u);
  const loom::BatchPlan plan = loom::make_batch_plan(w, schedule);
  ASSERT_EQ(plan.arguments.size(), 1u);
  const loom::PlannedArgument& arg = plan.arguments[0];
  ASSERT_EQ(arg.ragged_rows, 4u);
  const std::vector<std::int32_t> words = plan.packed.to_int_vector();
  const std::vector<std::int32_t> ids(words.begin() + std::ptrdiff_t(arg.ids_word),
                                      words.begin() + std::ptrdiff_t(arg.ids_word + 6));
  // The calls as the layout ordered them: each call's rows together, then the counts.
  const std::uint32_t first = schedule.calls[0];
  const std::vector<std::int32_t> expected = first == 0
                                                 ? std::vector<std::int32_t>{0, 1, 1, 1, 1, 3}
                                                 : std::vector<std::int32_t>{0, 0, 0, 1, 3, 1};
  EXPECT_EQ(ids, expected);
  Tape tape;
  TapeScope scope(tape);
  Executor executor(m.loom, tape);
  const auto result = executor.run(w, Strategy::kByDepth);
  const std::vector<float> out = result.outputs(m.row).value().to_float_vector();
  const std::vector<float> l0 = random_tensor({3}, 1).to_float_vector();
  const std::vector<float> l2 = random_tensor({3}, 3).to_float_vector();
  const std::vector<float> l3 = random_tensor({3}, 4).to_float_vector();
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(out[j], l2[j]);
    EXPECT_EQ(out[3 + j], (0.0f + l0[j] + l3[j]) + l0[j]);
  }
}

TEST(LoomRaggedRows, MisuseIsRefusedByName) {
  RaggedModel m;
  Weaver w(m.loom);
  const Value row = w.constant(m.row, random_tensor({3}, 1));
  expect_error([&] { w.call(m.sum, std::span<const Value>()); },
               {"operation 'sum'", "one or more", "got 0"});
  Loom other;
  const Value wrong =
      w.constant(m.loom.add_type(TypeShape{DType::kFloat32, {2}, "other"}), random_tensor({2}, 2));
  expect_error(
      [&] {
        w.call(m.sum, {row, row, wrong});
      },
      {"operation 'sum'", "argument 2", "expects float32 [3] 'row'"});
  loom::OperationOptions ragged;
  ragged.ragged_rows = true;
  auto body = [](std::span<const Var> in) { return std::vector<Var>{in[0]}; };
  expect_error(
      [&] {
        other.add_operation("pair", {kRow, kRow}, {kRow}, body, ragged);
      },
      {"operation 'pair'", "ragged rows", "exactly one input type", "got 2"});
  ragged.concat_inputs = true;
  expect_error([&] { other.add_operation("both", {kRow}, {kRow}, body, ragged); },
               {"operation 'both'", "no concat_inputs"});
}

}  // namespace
}  // namespace weft::testing
