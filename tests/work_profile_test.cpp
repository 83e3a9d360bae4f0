// The work profile (weft/backend/counters.h): off, it records nothing; on, a loom run's
// argument gathers are counted by the bytes the plan says it gathers, their gradients as
// scatters in the backward pass, products and allocations by kind and pass.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "weft/backend/counters.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

using loom::Value;

const loom::TypeShape kWord{DType::kFloat32, {3}, "word"};
const loom::TypeShape kHidden{DType::kFloat32, {4}, "hidden"};

// Leaves embed constant words; internal nodes combine two hidden values without a concat (two
// products), so every row copied by index is the loom's own argument gather.
struct TreeModel {
  loom::Loom loom;
  Parameter we{"we", random_tensor({3, 4}, 201)};
  Parameter wl{"wl", random_tensor({4, 4}, 202)}, wr{"wr", random_tensor({4, 4}, 203)};
  loom::OpId embed = 0, combine = 0;
  loom::TypeId word = 0, hidden = 0;

  TreeModel() {
    embed = loom.add_operation("embed", {kWord}, {kHidden}, [this](std::span<const Var> in) {
      return std::vector<Var>{tanh(matmul(in[0], Tape::current().parameter(we)))};
    });
    combine = loom.add_operation(
        "combine", {kHidden, kHidden}, {kHidden}, [this](std::span<const Var> in) {
          Tape& t = Tape::current();
          return std::vector<Var>{
              tanh(matmul(in[0], t.parameter(wl)) + matmul(in[1], t.parameter(wr)))};
        });
    word = loom.type_id(kWord);
    hidden = loom.type_id(kHidden);
  }

  // A left chain of `leaves` leaves: children from different depths, so arguments gather.
  Value weave_chain(loom::Weaver& weaver, int leaves, float seed) const {
    auto leaf = [&](int i) {
      const float w[3] = {seed, float(i), 1.0f};
      return weaver.call(embed, {weaver.constant(word, std::span<const float>(w, 3))})[0];
    };
    Value root = leaf(0);
    for (int i = 1; i < leaves; ++i) root = weaver.call(combine, {root, leaf(i)})[0];
    return root;
  }
};

struct ProfiledRun {
  loom::RunStats stats;
  WorkProfile forward_run, backward;
};

ProfiledRun profiled_run(const TreeModel& m) {
  loom::Weaver weaver(m.loom);
  for (int t = 0; t < 5; ++t) weaver.add_output(m.weave_chain(weaver, 2 + t, float(t)));
  Tape tape;
  TapeScope scope(tape);
  loom::Executor executor(m.loom, tape);
  ProfiledRun out;
  const BackendCounters before = backend_counters();
  const loom::LoomResult run = executor.run(weaver);
  const BackendCounters after_run = backend_counters();
  Var loss = sum(run.outputs(m.hidden));
  const BackendCounters before_backward = backend_counters();
  tape.backward(loss);
  out.stats = run.stats();
  out.forward_run = (after_run - before).profile;
  out.backward = (backend_counters() - before_backward).profile;
  return out;
}

TEST(WorkProfile, OffRecordsNothing) {
  TreeModel m;
  ASSERT_FALSE(work_profiling());
  const ProfiledRun r = profiled_run(m);
  EXPECT_GT(r.stats.bytes_gathered, 0);
  EXPECT_EQ(r.forward_run.seconds(), 0.0);
  EXPECT_EQ(r.backward.seconds(), 0.0);
  for (std::size_t k = 0; k < kWorkKinds; ++k) {
    EXPECT_EQ(r.forward_run.forward[k].calls + r.backward.backward[k].calls, 0);
    EXPECT_EQ(r.forward_run.forward[k].bytes + r.backward.backward[k].bytes, 0);
  }
}

TEST(WorkProfile, CountsTheLoomsGathersProductsAndScattersByPass) {
  TreeModel m;
  const bool was = set_work_profiling(true);
  const ProfiledRun r = profiled_run(m);
  set_work_profiling(was);
  // Forward: every byte gathered is the plan's; nothing lands in the backward column.
  EXPECT_EQ(r.forward_run.of(false, WorkKind::kGather).bytes, r.stats.bytes_gathered);
  EXPECT_GT(r.forward_run.of(false, WorkKind::kGather).calls, 0);
  EXPECT_GT(r.forward_run.of(false, WorkKind::kProduct).calls, 0);
  EXPECT_GT(r.forward_run.of(false, WorkKind::kElementwise).calls, 0);
  EXPECT_GT(r.forward_run.of(false, WorkKind::kAllocation).calls, 0);
  EXPECT_EQ(r.forward_run.of(false, WorkKind::kScatter).calls, 0);
  for (std::size_t k = 0; k < kWorkKinds; ++k) EXPECT_EQ(r.forward_run.backward[k].calls, 0);
  // Backward: the gathered rows' gradients are added back where they came from (the rows
  // of call outputs: the constants gathered for the reordered leaves take none), and the
  // products' gradients.
  EXPECT_GT(r.backward.of(true, WorkKind::kScatter).bytes, 0);
  EXPECT_LE(r.backward.of(true, WorkKind::kScatter).bytes, r.stats.bytes_gathered);
  EXPECT_GT(r.backward.of(true, WorkKind::kProduct).calls,
            r.forward_run.of(false, WorkKind::kProduct).calls);
  EXPECT_GT(r.backward.of(true, WorkKind::kProduct).seconds, 0.0);
  // The per-kind times of both columns add up to what the profile says it timed (backward()
  // makes its seed gradient before the pass begins: a forward fill).
  double total = 0;
  for (const auto* pass : {&r.backward.forward, &r.backward.backward})
    for (const WorkTime& t : *pass) total += t.seconds;
  EXPECT_NEAR(total, r.backward.seconds(), 1e-12);
}

}  // namespace
}  // namespace weft::testing
