// Layout planning (weft/loom/schedule.h: order_calls_for_views): a step's calls may run in any
// order, and the order is where their outputs land in the step's chunks. Walking the steps
// from the last to the first, each step takes its calls in the order its consumers, already
// laid out, read them, so a consumer whose arguments all come from one step reads them as a
// view instead of a gather: position by position for plain operations ([l0 l1 .. | r0 r1 ..]),
// interleaved for concat_inputs ones ([l0 r0 l1 r1 ..] is the [l | r] batch seen as 2N wide).
#include <algorithm>

#include "weft/loom/schedule.h"

namespace weft::loom {
namespace {

constexpr std::uint32_t kNoStep = UINT32_MAX;

class Layout {
 public:
  Layout(const Weaver& weaver, Schedule& schedule)
      : weaver_(weaver),
        schedule_(schedule),
        producer_(weaver.args().size(), kNoStep),
        unwished_step_(weaver.num_calls(), kNoStep),
        wishes_(schedule.steps.size()) {
    // Laid-out orders visit calls in no particular order: each argument's producing call is
    // looked up once here, in the weave's order, so the walk below reads one entry per argument.
    const auto args = weaver.args();
    for (std::size_t a = 0; a < args.size(); ++a) {
      const Weaver::ValueInfo& info = weaver.info(args[a]);
      if (info.kind == ValueKind::kCallOutput) producer_[a] = info.index;
    }
    for (std::size_t s = 0; s < schedule.steps.size(); ++s)
      for (std::uint32_t call : schedule.step_calls(schedule.steps[s]))
        unwished_step_[call] = std::uint32_t(s);
  }

  void run() {
    for (std::size_t s = schedule_.steps.size(); s-- > 0;) {
      settle(s);
      wish_arguments_of(s);
    }
  }

 private:
  // Step s's calls: the ones its consumers wished for, in the order wished, then the rest in
  // their old order.
  void settle(std::size_t s) {
    const ScheduleStep& step = schedule_.steps[s];
    std::vector<std::uint32_t>& order = wishes_[s];
    if (order.empty()) return;
    for (std::uint32_t call : schedule_.step_calls(step))
      if (unwished_step_[call] != kNoStep) order.push_back(call);
    std::copy(order.begin(), order.end(), schedule_.calls.begin() + step.begin);
    order = {};
  }

  // Step s's arguments, in the order its batched call will read them, become wishes of the
  // steps that compute them.
  void wish_arguments_of(std::size_t s) {
    const ScheduleStep& step = schedule_.steps[s];
    const auto calls = schedule_.step_calls(step);
    const Operation& op = weaver_.loom().operation(step.op);
    const std::size_t positions = op.inputs.size();
    if (op.options.concat_inputs || op.options.ragged_rows) {  // read call after call
      for (std::uint32_t call : calls) {
        const Weaver::CallInfo& c = weaver_.calls()[call];
        for (std::size_t p = 0; p < c.num_args; ++p) wish(c.first_arg + p);
      }
    } else {
      for (std::size_t p = 0; p < positions; ++p)
        for (std::uint32_t call : calls) wish(weaver_.calls()[call].first_arg + p);
    }
  }

  // The argument in args()[arg]: its producing call goes to its step's wishes, once.
  void wish(std::size_t arg) {
    const std::uint32_t call = producer_[arg];
    if (call == kNoStep) return;
    std::uint32_t& step = unwished_step_[call];
    if (step == kNoStep) return;
    wishes_[step].push_back(call);
    step = kNoStep;
  }

  const Weaver& weaver_;
  Schedule& schedule_;
  std::vector<std::uint32_t> producer_;             // per argument: its producing call, or kNoStep
  std::vector<std::uint32_t> unwished_step_;        // per call: its step until wished, then kNoStep
  std::vector<std::vector<std::uint32_t>> wishes_;  // per step, until it is settled
};

}  // namespace

void order_calls_for_views(const Weaver& weaver, Schedule& schedule) {
  Layout(weaver, schedule).run();
}

}  // namespace weft::loom
