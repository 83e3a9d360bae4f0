// The batch plan (loom/batch_plan.h) on the CPU: the packed buffer holds every constant of the
// weave (aligned, byte for byte) and, for every gather a step or the caller reads, the
// references of exactly the values that step's calls take, in order; a run with a plan made
// ahead on another thread equals one that plans for itself bit for bit, the planned result
// lists equal gathers made after the run, and a plan for another weave is refused by name.
#include "weft/loom/batch_plan.h"

#include <cstring>
#include <thread>

#include <gmock/gmock.h>

#include "loom_device_model.h"
#include "op_test_util.h"

namespace weft::testing {
namespace {

using loom::BatchPlan;
using loom::Executor;
using loom::Schedule;
using loom::Strategy;
using loom::Value;
using loom::ValueLocation;
using loom::Weaver;
using ::testing::HasSubstr;

// The shared test loom plus a one-byte type whose constants end off a word boundary.
struct PlanModel : DeviceModel {
  TypeId flag;
  PlanModel() : DeviceModel(Device::kCpu) {
    flag = loom.add_type(TypeShape{DType::kBool, {3}, "flag"});
  }
};

// A random DAG: constants, a fed row, the parameter, calls reading far-apart depths.
void weave_random(PlanModel& m, Weaver& w, std::uint64_t seed, int examples) {
  Rng rng(seed);
  for (int e = 0; e < examples; ++e) {
    std::vector<Value> words, hiddens{w.parameter(m.hidden, m.h0)};
    for (int i = 0; i < 2; ++i) {
      const float values[3] = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
      words.push_back(w.constant(m.word, values));
    }
    const std::uint8_t bits[3] = {1, 0, std::uint8_t(e % 2)};
    w.bool_constant(m.flag, bits);
    words.push_back(w.batch_input(m.word, std::int64_t(rng.below(4))));
    const int calls = 2 + int(rng.below(12));
    for (int c = 0; c < calls; ++c) {
      const auto pick = [&] { return hiddens[rng.below(hiddens.size())]; };
      const auto kind = rng.below(3);
      if (kind == 0) hiddens.push_back(w.call(m.embed, {words[rng.below(words.size())]})[0]);
      if (kind == 1) hiddens.push_back(w.call(m.combine, {pick(), pick()})[0]);
      if (kind == 2) hiddens.push_back(w.call(m.combine_concat, {pick(), pick()})[0]);
    }
    w.add_output(hiddens.back());
    w.add_output(hiddens[rng.below(hiddens.size())]);
  }
}

// The (chunk, row) pairs of a planned gather, its local chunk indices resolved.
std::vector<ValueLocation> decoded(const BatchPlan& plan, const loom::PlannedGather& g) {
  const std::int32_t* words = plan.packed.data<std::int32_t>() + g.refs_word;
  std::vector<ValueLocation> out;
  for (std::uint64_t r = 0; r < std::uint64_t(g.rows) * g.positions; ++r) {
    const std::int32_t local = words[2 * r];
    EXPECT_GE(local, 0);
    EXPECT_LT(std::uint32_t(local), g.num_chunks);
    out.push_back({plan.gather_chunks[g.first_chunk + std::uint32_t(local)],
                   std::uint32_t(words[2 * r + 1])});
  }
  return out;
}

bool operator_equal(const ValueLocation& a, const ValueLocation& b) {
  return a.chunk == b.chunk && a.row == b.row;
}

void expect_locations(const std::vector<ValueLocation>& got, const std::vector<ValueLocation>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(operator_equal(got[i], want[i]))
        << what << " reference " << i << ": (" << got[i].chunk << ", " << got[i].row
        << ") instead of (" << want[i].chunk << ", " << want[i].row << ")";
}

// Every step's arguments: a view names the contiguous rows its calls take, a gather holds
// exactly their references (position-major for concatenated inputs).
void expect_steps_planned(const Weaver& w, const Schedule& schedule, const BatchPlan& plan) {
  ASSERT_EQ(plan.step_first_argument.size(), schedule.steps.size() + 1);
  for (std::size_t s = 0; s < schedule.steps.size(); ++s) {
    const auto& step = schedule.steps[s];
    const auto& op = w.loom().operation(step.op);
    const auto calls = schedule.step_calls(step);
    const auto* arguments = &plan.arguments[plan.step_first_argument[s]];
    const std::size_t planned = plan.step_first_argument[s + 1] - plan.step_first_argument[s];
    ASSERT_EQ(planned, op.options.concat_inputs ? 1u : op.inputs.size()) << "step " << s;
    for (std::size_t a = 0; a < planned; ++a) {
      const std::size_t first = op.options.concat_inputs ? 0 : a;
      const std::size_t count = op.options.concat_inputs ? op.inputs.size() : 1;
      std::vector<ValueLocation> want;
      for (std::size_t p = first; p < first + count; ++p)
        for (std::uint32_t call : calls) want.push_back(plan.locations[w.call_args(call)[p]]);
      if (arguments[a].is_view) {
        for (std::size_t j = 0; j < want.size(); ++j)
          EXPECT_TRUE(
              operator_equal(want[j], {arguments[a].chunk, arguments[a].row + std::uint32_t(j)}));
        continue;
      }
      expect_locations(decoded(plan, plan.gathers[arguments[a].gather]), want,
                       "step " + std::to_string(s));
    }
  }
}

TEST(LoomBatchPlan, PacksEveryConstantAndEveryReference) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PlanModel m;
    Weaver w(m.loom);
    weave_random(m, w, seed, 1 + int(seed % 5));
    const Schedule schedule = loom::make_schedule(w, Strategy::kByDepth);
    const std::vector<std::vector<Value>> lists = {{w.outputs()[1], w.outputs()[0]}, {}};
    const BatchPlan plan = loom::make_batch_plan(w, schedule, 0, {}, lists);
    ASSERT_EQ(plan.packed.device(), Device::kCpu);
    // Constants: aligned, byte for byte, one after another, before every reference.
    std::uint64_t end = 0;
    ASSERT_EQ(plan.constants.size(), 2u);  // words and flags
    for (const loom::PlannedConstants& c : plan.constants) {
      EXPECT_EQ(c.word % BatchPlan::kAlignWords, 0u);
      EXPECT_GE(c.word, end);
      const auto bytes = w.constant_bytes(c.type);
      ASSERT_EQ(c.bytes, bytes.size());
      EXPECT_EQ(c.rows, w.constant_rows(c.type));
      EXPECT_EQ(std::memcmp(plan.packed.data<std::int32_t>() + c.word, bytes.data(), bytes.size()),
                0);
      end = c.word + (c.bytes + 3) / 4;
    }
    for (const loom::PlannedGather& g : plan.gathers) {
      EXPECT_GE(g.refs_word, end);
      EXPECT_LE(g.refs_word + 2 * std::uint64_t(g.rows) * g.positions, plan.words());
    }
    expect_steps_planned(w, schedule, plan);
    // The result lists and the outputs: their values' references.
    ASSERT_EQ(plan.result_gathers.size(), 2u);
    EXPECT_EQ(plan.result_gathers[1], -1);  // an empty list gathers nothing
    expect_locations(decoded(plan, plan.gathers[std::size_t(plan.result_gathers[0])]),
                     {plan.locations[lists[0][0]], plan.locations[lists[0][1]]}, "result list");
    std::vector<ValueLocation> outputs;
    for (Value v : w.outputs()) outputs.push_back(plan.locations[v]);
    expect_locations(decoded(plan, plan.gathers[std::size_t(plan.output_gathers[m.hidden])]),
                     outputs, "outputs");
    EXPECT_EQ(plan.output_gathers[m.word], -1);
  }
}

struct Outcome {
  std::vector<float> outputs, listed, fed_grad;
  std::vector<std::vector<float>> parameter_grads;
  loom::RunStats stats;
};

// Runs the weave with `plan` (null: the executor plans), then a loss on its outputs backward.
Outcome run_with(PlanModel& m, const Weaver& w, const Schedule& schedule, const BatchPlan* plan) {
  Tape tape;
  Executor executor(m.loom, tape);
  Var fed = tape.variable(random_tensor({4, 3}, 77));
  executor.feed(m.word, fed);
  const loom::LoomResult result = executor.run(w, schedule, plan);
  Var h = result.outputs(m.hidden);
  Outcome out;
  out.listed = (plan ? result.planned_gather(0)
                     : result.gather(std::vector<Value>{w.outputs()[1], w.outputs()[0]}))
                   .value()
                   .to_float_vector();
  tape.backward(sum(h * tape.constant(random_tensor(h.shape(), 78))));
  out.outputs = h.value().to_float_vector();
  out.fed_grad = fed.grad().to_float_vector();
  for (const Parameter& p : m.parameters())
    out.parameter_grads.push_back(p.grad().to_float_vector());
  out.stats = result.stats();
  return out;
}

TEST(LoomBatchPlan, APlanMadeAheadRunsBitForBitAsOneMadeAtTheRun) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PlanModel ahead_model, here_model;
    Weaver ahead(ahead_model.loom), here(here_model.loom);
    weave_random(ahead_model, ahead, seed, 5);
    weave_random(here_model, here, seed, 5);
    const Schedule schedule = loom::make_schedule(ahead, Strategy::kByDepth);
    BatchPlan plan;
    std::thread planner([&] {  // planned on another thread, as a batch woven ahead is
      const std::vector<std::vector<Value>> lists = {{ahead.outputs()[1], ahead.outputs()[0]}};
      plan = loom::make_batch_plan(ahead, schedule, 0, {}, lists);
    });
    planner.join();
    const Outcome planned = run_with(ahead_model, ahead, schedule, &plan);
    const Outcome unplanned = run_with(here_model, here, schedule, nullptr);
    EXPECT_EQ(planned.outputs, unplanned.outputs);
    EXPECT_EQ(planned.listed, unplanned.listed);
    EXPECT_EQ(planned.fed_grad, unplanned.fed_grad);
    EXPECT_EQ(planned.parameter_grads, unplanned.parameter_grads);
    // The run reports the plan it read: its buffer and its gathers.
    EXPECT_EQ(planned.stats.packed_bytes, std::int64_t(plan.packed.nbytes()));
    EXPECT_EQ(planned.stats.planned_gathers, std::int64_t(plan.gathers.size()));
    EXPECT_EQ(planned.stats.gathers_skipped, unplanned.stats.gathers_skipped);
    EXPECT_GT(planned.stats.planned_gathers, 0);
    // The CPU launches, copies and waits for nothing.
    EXPECT_EQ(planned.stats.backend.launches + planned.stats.backend.host_to_device +
                  planned.stats.backend.synchronizations,
              0);
  }
}

TEST(LoomBatchPlan, AGatherOfManyChunksEqualsTheValuesOneByOne) {
  // Unbatched, every call is a chunk of its own: the outputs' gather reads hundreds of chunks
  // (on CUDA, more than a kernel parameter's table holds).
  PlanModel m;
  Weaver w(m.loom);
  weave_chain(m, w, 300);
  Tape tape;
  Executor executor(m.loom, tape);
  const loom::LoomResult result = executor.run(w, Strategy::kNone);
  const std::vector<float> all = result.outputs(m.hidden).value().to_float_vector();
  ASSERT_EQ(all.size(), 300u * 4);
  for (std::size_t k = 0; k < 300; k += 37) {
    const std::vector<float> one =
        result.gather(std::vector<Value>{w.outputs()[k]}).value().to_float_vector();
    EXPECT_EQ(std::vector<float>(all.begin() + std::ptrdiff_t(4 * k),
                                 all.begin() + std::ptrdiff_t(4 * k + 4)),
              one)
        << "output " << k;
  }
}

TEST(LoomBatchPlan, APlanForAnotherWeaveIsRefused) {
  PlanModel m;
  Weaver small(m.loom), large(m.loom);
  weave_random(m, small, 1, 1);
  weave_random(m, large, 2, 4);
  const Schedule small_schedule = loom::make_schedule(small, Strategy::kByDepth);
  const Schedule large_schedule = loom::make_schedule(large, Strategy::kByDepth);
  const BatchPlan plan = loom::make_batch_plan(small, small_schedule);
  Tape tape;
  Executor executor(m.loom, tape);
  executor.feed(m.word, tape.variable(random_tensor({4, 3}, 77)));
  EXPECT_THAT([&] { executor.run(large, large_schedule, &plan); },
              ::testing::ThrowsMessage<Error>(HasSubstr("made for another weave or schedule")));
  const std::vector<std::vector<Value>> mixed = {
      {small.outputs()[0], small.constant(m.word, random_tensor({3}, 5))}};
  EXPECT_THAT([&] { loom::make_batch_plan(small, small_schedule, 0, {}, mixed); },
              ::testing::ThrowsMessage<Error>(HasSubstr("mixes types")));
}

}  // namespace
}  // namespace weft::testing
