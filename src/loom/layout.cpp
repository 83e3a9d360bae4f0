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
        step_of_(weaver.num_calls(), kNoStep),
        wished_(weaver.num_calls(), 0),
        wishes_(schedule.steps.size()) {
    for (std::size_t s = 0; s < schedule.steps.size(); ++s)
      for (std::uint32_t call : schedule.step_calls(schedule.steps[s]))
        step_of_[call] = std::uint32_t(s);
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
      if (!wished_[call]) order.push_back(call);
    std::copy(order.begin(), order.end(), schedule_.calls.begin() + step.begin);
    order = {};
  }

  // Step s's arguments, in the order its batched call will read them, become wishes of the
  // steps that compute them.
  void wish_arguments_of(std::size_t s) {
    const ScheduleStep& step = schedule_.steps[s];
    const auto calls = schedule_.step_calls(step);
    const std::size_t positions = weaver_.loom().operation(step.op).inputs.size();
    if (weaver_.loom().operation(step.op).options.concat_inputs) {
      for (std::uint32_t call : calls)
        for (std::size_t p = 0; p < positions; ++p) wish(weaver_.call_args(call)[p]);
    } else {
      for (std::size_t p = 0; p < positions; ++p)
        for (std::uint32_t call : calls) wish(weaver_.call_args(call)[p]);
    }
  }

  void wish(Value value) {
    const Weaver::ValueInfo& info = weaver_.info(value);
    if (info.kind != ValueKind::kCallOutput) return;
    const std::uint32_t call = info.index;
    if (wished_[call] || step_of_[call] == kNoStep) return;
    wished_[call] = 1;
    wishes_[step_of_[call]].push_back(call);
  }

  const Weaver& weaver_;
  Schedule& schedule_;
  std::vector<std::uint32_t> step_of_;
  std::vector<std::uint8_t> wished_;
  std::vector<std::vector<std::uint32_t>> wishes_;  // per step, until it is settled
};

}  // namespace

void order_calls_for_views(const Weaver& weaver, Schedule& schedule) {
  Layout(weaver, schedule).run();
}

}  // namespace weft::loom
