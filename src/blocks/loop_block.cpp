// Loop: a loop whose length the model decides (a stop block read at every iteration) or the
// data gives (teacher forcing). Reading the stop value goes through WeaveState::reader(), which
// only the flow engine's weaving has (flow_run.cpp); the iterations are ordinary block calls.
#include "internal.h"

namespace weft::blocks {
namespace {

std::weak_ptr<TypeSlot> weak(const SlotPtr& slot) { return slot; }

class LoopImpl : public detail::BlockImpl {
 public:
  LoopImpl(Block body, Block stop, LoopOptions options)
      : BlockImpl("Loop"),
        body_(internal::required(body, "Loop", "body")),
        stop_(internal::required(stop, "Loop", "stop")),
        options_(options),
        state_(std::make_shared<TypeSlot>(describe(), "state")) {
    if (options_.max_steps < 0)
      fail("blocks", describe(), ": max_steps must be >= 0, not ", options_.max_steps);
    type_state();
    derive(out(), {state_, body_.impl().out(), stop_.impl().out()},
           [emits = options_.emits, stops = options_.collect_stops](std::span<const Type> t) {
             std::vector<Type> items{t[0]};
             if (emits) items.push_back(Type::sequence(t[1].items()[1]));
             if (stops) items.push_back(Type::sequence(t[2]));
             return items.size() == 1 ? t[0] : Type::tuple(std::move(items));
           });
  }
  std::vector<Block> children() const override { return {body_, stop_}; }
  bool reads_values() const override { return !options_.teacher_forced; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override;

 private:
  // The state type S ties the loop's input, the body's both ends and the stop's input.
  void type_state() {
    const std::string d = describe();
    const bool forced = options_.teacher_forced;
    in()->observe([d, forced, s = weak(state_)](const Type& t) {
      if (forced && (!t.is_tuple() || t.items().size() != 2 || !t.items()[1].is_input()))
        fail("blocks", "bad input type ", t.to_string(), " for ", d,
             ", expected Tuple(state, Input steps) (teacher_forced)");
      if (auto slot = s.lock()) slot->set(forced ? t.items()[0] : t);
    });
    if (forced)
      derive(in(), {state_}, [](std::span<const Type> t) {
        return Type::tuple({t[0], Type::input()});
      });
    else
      unify(in(), state_);
    unify(body_.impl().in(), state_);
    unify(stop_.impl().in(), state_);
    body_.impl().out()->observe([d, emits = options_.emits, s = weak(state_)](const Type& t) {
      if (emits && (!t.is_tuple() || t.items().size() != 2))
        fail("blocks", d, ": the body must return Tuple(state, output) (emits), got ",
             t.to_string());
      if (auto slot = s.lock()) slot->set(emits ? t.items()[0] : t);
    });
    stop_.impl().out()->observe([d](const Type& t) {
      if (!t.is_tensor() || t.shape().numel() != 1 ||
          (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64))
        fail("blocks", d, ": the stop block must give one float32 or float64 number, got ",
             t.to_string());
    });
  }
  // The teacher-forced length: an integer in [0, max_steps].
  std::int64_t forced_steps(const WeaveValue& steps) const {
    const Input& n = internal::input_of(describe(), steps);
    if (!n.is_number_integer() || n.get<std::int64_t>() < 0 ||
        n.get<std::int64_t>() > options_.max_steps)
      fail("blocks", describe(), ": the number of steps must be an integer in [0, ",
           options_.max_steps, "] (max_steps), not ", describe_input(n));
    return n.get<std::int64_t>();
  }
  // Runs the stop block at iteration t; true to run the body once more.
  bool go_on(WeaveState& state, const WeaveValue& s, std::int64_t t, std::int64_t forced,
             WeaveList& stops) const;

  Block body_, stop_;
  LoopOptions options_;
  SlotPtr state_;
};

bool LoopImpl::go_on(WeaveState& state, const WeaveValue& s, std::int64_t t, std::int64_t forced,
                     WeaveList& stops) const {
  if (forced >= 0) {
    if (options_.collect_stops) stops.push_back(stop_.impl().eval(state, s));
    return t < forced;
  }
  WeaveValue p = stop_.impl().eval(state, s);
  if (options_.collect_stops) stops.push_back(p);
  if (!state.reader())
    fail("blocks", describe(), " reads its stop value, so it runs only in a batch of a Compiler ",
         "(which runs such roots on the flow engine)");
  return state.reader()->read(p.tensor).to_double_vector()[0] <= options_.threshold;
}

WeaveValue LoopImpl::eval(WeaveState& state, const WeaveValue& input) const {
  const bool forced_mode = options_.teacher_forced;
  WeaveValue s = forced_mode ? input.items[0] : input;
  const std::int64_t forced = forced_mode ? forced_steps(input.items[1]) : -1;
  WeaveList outputs, stops;
  for (std::int64_t t = 0; go_on(state, s, t, forced, stops); ++t) {
    if (t == options_.max_steps) {
      if (options_.at_bound == LoopBound::kFail)
        fail("blocks", describe(), " did not stop within its bound of ", options_.max_steps,
             " steps (its max_steps; a Loop whose at_bound is \"stop\" ends there instead)");
      break;
    }
    WeaveValue r = body_.impl().eval(state, s);
    if (options_.emits) {
      outputs.push_back(r.items[1]);
      s = r.items[0];
    } else {
      s = std::move(r);
    }
  }
  WeaveList items{std::move(s)};
  if (options_.emits) items.push_back(WeaveValue::of(Type::Kind::kSequence, std::move(outputs)));
  if (options_.collect_stops)
    items.push_back(WeaveValue::of(Type::Kind::kSequence, std::move(stops)));
  return items.size() == 1 ? std::move(items[0])
                           : WeaveValue::of(Type::Kind::kTuple, std::move(items));
}

}  // namespace

Loop::Loop(Block body, Block stop, LoopOptions options)
    : Block(std::make_shared<LoopImpl>(std::move(body), std::move(stop), options)) {}

}  // namespace weft::blocks
