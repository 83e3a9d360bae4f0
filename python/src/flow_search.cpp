// weft.flow.greedy and weft.flow.beam_search: the C++ searches (weft/flow/search.h) over a step
// function written in Python, step(ctx, state, token) -> (state, log_probs), which issues the
// calls of one decoding step and reads nothing. The ranking, the hypotheses' bookkeeping, the
// length normalisation and the stopping rule are C++; every example and every beam steps in one
// engine step. A state is any Python object (a Val, a tuple of Vals): the C++ search passes
// states along without looking into them, so here its state Vals index a table of them.
#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "flow_core.h"
#include "weft/core/error.h"
#include "weft/flow/search.h"

namespace weft::python::flow_py {
namespace {

// A step recorded once and replayed in C++ for every beam and step after: its calls, constants
// and parameters, each argument a reference to a leaf of the state, the token, an earlier
// output or a Val the step captured (the same in every call).
struct Trace {
  struct Ref {
    enum class Source { kState, kToken, kOutput, kFixed } source = Source::kFixed;
    std::uint32_t index = 0;
    Val fixed;
  };
  struct Instruction {
    Recorded made;  // made.args unused: `args` says where they come from
    std::vector<Ref> args;
  };
  std::vector<Instruction> instructions;
  std::vector<Ref> next_state;
  Ref log_probs;
};

// One search's Python side, shared by its examples' steps. A state is an index into `states`
// (the Python objects, under the GIL) and, while the step may be traced, into `leaves` (the
// Vals of each state's tuples and lists, `width` per state).
struct SearchRun {
  EngineCore* core = nullptr;
  py::function step;
  std::optional<loom::TypeId> token_type;  // the token as a Val of this type, else an int
  std::vector<py::object> states;
  std::size_t first_example = 0;     // the engine's index of the search's first example
  std::vector<py::object> contexts;  // per example, made on its first step
  bool traceable = false;            // tried on the first step, then replayed or not
  std::string shape;                 // of every state, while traceable
  std::vector<Val> leaves;
  std::size_t width = 0;
  std::unique_ptr<Trace> candidate;  // traced, not yet confirmed by a call from other Vals
  std::vector<Val> candidate_leaves;
  std::unique_ptr<Trace> trace;     // confirmed: replayed from now on
  std::vector<Val> produced, args;  // scratch of a replay
};

bool same_ref(const Trace::Ref& a, const Trace::Ref& b) {
  return a.source == b.source && a.index == b.index && a.fixed == b.fixed;
}

bool same_refs(const std::vector<Trace::Ref>& a, const std::vector<Trace::Ref>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_ref);
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Whether two calls of the step issued the same calls from the same places.
bool same_trace(const Trace& a, const Trace& b) {
  if (a.instructions.size() != b.instructions.size() || !same_refs(a.next_state, b.next_state) ||
      !same_ref(a.log_probs, b.log_probs))
    return false;
  for (std::size_t i = 0; i < a.instructions.size(); ++i) {
    const Trace::Instruction &x = a.instructions[i], &y = b.instructions[i];
    if (x.made.kind != y.made.kind || x.made.op != y.made.op || x.made.type != y.made.type ||
        x.made.outputs.size() != y.made.outputs.size() || !same_refs(x.args, y.args) ||
        !same_tensor(x.made.value, y.made.value) ||
        x.made.parameter.defined() != y.made.parameter.defined() ||
        (x.made.parameter.defined() && &x.made.parameter.value() != &y.made.parameter.value()))
      return false;
  }
  return true;
}

// The Vals of a state made of Vals, tuples and lists, and its shape ("(VV)"); false for
// anything else (the step may look into it: it is called every time).
bool flatten(const EngineCore& core, py::handle state, std::vector<Val>& leaves,
             std::string& shape) {
  if (py::isinstance<PyVal>(state)) {
    const PyVal& v = state.cast<const PyVal&>();
    if (v.engine != core.serial) return false;
    leaves.push_back(v.val);
    shape += 'V';
    return true;
  }
  const bool tuple = py::isinstance<py::tuple>(state);
  if (!tuple && !py::isinstance<py::list>(state)) return false;
  shape += tuple ? '(' : '[';
  for (py::handle item : state)
    if (!flatten(core, item, leaves, shape)) return false;
  shape += tuple ? ')' : ']';
  return true;
}

// Adds a state's leaves; false (and no longer traceable) when its shape differs.
void add_leaves(SearchRun& run, py::handle state) {
  if (!run.traceable) return;
  std::string shape;
  const std::size_t before = run.leaves.size();
  if (!flatten(*run.core, state, run.leaves, shape) || (!run.shape.empty() && shape != run.shape)) {
    run.traceable = false;
    run.leaves.clear();
    return;
  }
  run.shape = shape;
  run.width = run.leaves.size() - before;
}

// The trace of a recorded call of the step from state `state` with token `token`, or null when
// it cannot be replayed faithfully (it looked at its example, two leaves of the state were one
// Val, the state it returned is shaped unlike the one it got).
std::unique_ptr<Trace> make_trace(SearchRun& run, Recording& recording, std::uint32_t state,
                                  Val token, py::handle next_state, Val log_probs) {
  if (recording.untraceable) return nullptr;
  std::unordered_map<std::uint32_t, Trace::Ref> where;
  using Source = Trace::Ref::Source;
  for (std::size_t i = 0; i < run.width; ++i)
    if (!where
             .emplace(run.leaves[state * run.width + i].id,
                      Trace::Ref{Source::kState, std::uint32_t(i), {}})
             .second)
      return nullptr;
  where[token.id] = Trace::Ref{Source::kToken, 0, {}};
  const auto ref = [&](Val v) {
    const auto found = where.find(v.id);
    return found != where.end() ? found->second : Trace::Ref{Source::kFixed, 0, v};
  };
  auto trace = std::make_unique<Trace>();
  std::uint32_t outputs = 0;
  for (Recorded& event : recording.events) {
    Trace::Instruction instruction{std::move(event), {}};
    for (Val a : instruction.made.args) instruction.args.push_back(ref(a));
    for (Val out : instruction.made.outputs)
      where[out.id] = Trace::Ref{Source::kOutput, outputs++, {}};
    trace->instructions.push_back(std::move(instruction));
  }
  std::vector<Val> leaves;
  std::string shape;
  if (!flatten(*run.core, next_state, leaves, shape) || shape != run.shape) return nullptr;
  for (Val leaf : leaves) trace->next_state.push_back(ref(leaf));
  trace->log_probs = ref(log_probs);
  return trace;
}

// The step's (state, log_probs), checked: log_probs a Val of this engine of type float32
// [vocabulary].
flow::DecoderStep step_result(SearchRun& run, py::handle out) {
  EngineCore& core = *run.core;
  if (!(py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out)) || py::len(out) != 2)
    fail("flow", "the step must return (state, log_probs), got ",
         py::str(py::type::of(out).attr("__name__")).cast<std::string>());
  const py::sequence pair = py::reinterpret_borrow<py::sequence>(out);
  const Val log_probs = core.val_of(pair[1], "the step's log_probs");
  const loom::TypeShape& type = core.loom->type(core.engine->type_of(log_probs));
  if (type.dtype != DType::kFloat32 || type.shape.rank() != 1)
    fail("flow", "the step's log_probs are of type ", type.to_string(),
         "; a search needs float32 [vocabulary] (log_softmax of the scores)");
  run.states.push_back(pair[0]);
  add_leaves(run, pair[0]);
  return flow::DecoderStep{Val{std::uint32_t(run.states.size() - 1)}, log_probs};
}

// The step replayed from its trace: C++ only, no GIL.
flow::DecoderStep replay(SearchRun& run, flow::Context& ctx, Val state, std::int32_t token) {
  const Trace& trace = *run.trace;
  const Val token_val = ctx.constant(*run.token_type, std::span<const std::int32_t>(&token, 1));
  run.produced.clear();
  const auto resolve = [&](const Trace::Ref& r) {
    switch (r.source) {
      case Trace::Ref::Source::kState:
        return run.leaves[state.id * run.width + r.index];
      case Trace::Ref::Source::kToken:
        return token_val;
      case Trace::Ref::Source::kOutput:
        return run.produced[r.index];
      case Trace::Ref::Source::kFixed:
        break;
    }
    return r.fixed;
  };
  for (const Trace::Instruction& i : trace.instructions) {
    if (i.made.kind == Recorded::Kind::kCall) {
      run.args.clear();
      for (const Trace::Ref& a : i.args) run.args.push_back(resolve(a));
      const std::span<const Val> outs = ctx.call(i.made.op, run.args);
      run.produced.insert(run.produced.end(), outs.begin(), outs.end());
    } else if (i.made.kind == Recorded::Kind::kConstant) {
      run.produced.push_back(ctx.constant(i.made.type, i.made.value));
    } else {
      run.produced.push_back(ctx.parameter(i.made.type, i.made.parameter));
    }
  }
  for (const Trace::Ref& leaf : trace.next_state) run.leaves.push_back(resolve(leaf));
  run.states.emplace_back();  // no Python object: replayed states live in `leaves` only
  return flow::DecoderStep{Val{std::uint32_t(run.states.size() - 1)}, resolve(trace.log_probs)};
}

// A trace is replayed once a second call, from a state sharing no Val with the first's, issued
// the same calls from the same places: a Val the step captured that was also a leaf of the first
// call's state (every example starting from one Val) cannot pass for a leaf. Any difference, or
// a call that cannot be traced, leaves the step called every time.
void confirm_trace(SearchRun& run, std::unique_ptr<Trace> trace, std::uint32_t state) {
  const auto leaves = std::span(run.leaves).subspan(state * run.width, run.width);
  if (!trace) {
    run.traceable = false;
  } else if (!run.candidate) {
    run.candidate = std::move(trace);
    run.candidate_leaves.assign(leaves.begin(), leaves.end());
  } else if (std::none_of(leaves.begin(), leaves.end(), [&](Val v) {
               return std::find(run.candidate_leaves.begin(), run.candidate_leaves.end(), v) !=
                      run.candidate_leaves.end();
             })) {
    if (same_trace(*run.candidate, *trace))
      run.trace = std::move(run.candidate);
    else
      run.traceable = false;
  }
  if (!run.traceable) {
    run.leaves.clear();
    run.candidate.reset();
  }
}

flow::DecoderStep call_step(SearchRun& run, flow::Context& ctx, Val state, std::int32_t token) {
  if (run.trace) return replay(run, ctx, state, token);
  py::gil_scoped_acquire gil;
  EngineCore& core = *run.core;
  py::object& context = run.contexts[ctx.example() - run.first_example];
  if (!context) context = py::cast(PyContext{core.shared_from_this(), &ctx, ctx.example()});
  const Val token_val =
      run.token_type ? ctx.constant(*run.token_type, std::span<const std::int32_t>(&token, 1))
                     : Val{};
  py::object previous = run.token_type ? core.wrap(token_val) : py::object(py::int_(token));
  Recording recording;
  const bool tracing = run.traceable;
  run.traceable = false;  // until the step has returned
  core.recording = tracing ? &recording : nullptr;
  try {
    py::object out = run.step(context, run.states[state.id], previous);
    core.recording = nullptr;
    run.traceable = tracing;
    const flow::DecoderStep result = step_result(run, out);
    if (run.traceable)
      confirm_trace(run,
                    make_trace(run, recording, state.id, token_val,
                               py::reinterpret_borrow<py::sequence>(out)[0], result.log_probs),
                    state.id);
    return result;
  } catch (py::error_already_set& e) {
    core.recording = nullptr;
    fail_example(core, e);
  } catch (...) {
    core.recording = nullptr;
    throw;
  }
}

struct SearchSpec {
  std::int32_t start = 0, end = 0;
  std::vector<std::int32_t> max_lengths;  // per example
  int width = 0;                          // 0: greedy
  double length_penalty = 0;
};

// One bound for every example, or one per example.
std::vector<std::int32_t> max_lengths(py::handle given, std::size_t examples) {
  std::vector<std::int32_t> out;
  if (py::isinstance<py::int_>(given)) {
    out.assign(examples, given.cast<std::int32_t>());
  } else {
    for (py::handle m : given) out.push_back(m.cast<std::int32_t>());
    if (out.size() != examples)
      fail("flow", "max_length: ", out.size(), " bounds for ", examples, " examples");
  }
  for (std::size_t e = 0; e < out.size(); ++e)
    if (out[e] <= 0) fail("flow", "max_length of example ", e, " must be positive, not ", out[e]);
  return out;
}

std::optional<loom::TypeId> token_type_of(const EngineCore& core, py::handle type) {
  if (type.is_none()) return std::nullopt;
  const loom::TypeId id = core.type_of(type, "token_type");
  const loom::TypeShape& ts = core.loom->type(id);
  if (ts.dtype != DType::kInt32 || ts.shape.numel() != 1)
    fail("flow", "token_type must be an int32 type of one element (loom.type([], \"int32\")), not ",
         ts.to_string());
  return id;
}

// The search's programs, cancelled if the run stops before they end (they refer to this frame).
struct Admitted {
  EngineCore& core;
  std::vector<std::size_t> ids;
  ~Admitted() {
    for (std::size_t id : ids) core.engine->cancel(id, "the search stopped before it finished");
  }
};

py::object error_object(const std::string& message) {
  return py::module_::import("weft._weft").attr("Error")(message);
}

py::list search(EngineCore& core, const py::function& step, const py::sequence& initial,
                const SearchSpec& spec, py::handle token_type, bool trace,
                const std::string& errors) {
  if (errors != "raise" && errors != "return")
    fail("flow", "errors must be 'raise' or 'return', not '", errors, "'");
  core.check_idle(spec.width ? "beam_search" : "greedy");
  const std::size_t n = py::len(initial);
  SearchRun run;
  run.core = &core;
  run.step = step;
  run.token_type = token_type_of(core, token_type);
  run.first_example = core.examples.size();
  // Traced only when nothing but Vals reach the step: the token a Val, the states made of Vals.
  run.traceable = trace && run.token_type.has_value();
  for (py::handle state : initial) {
    run.states.push_back(py::reinterpret_borrow<py::object>(state));
    add_leaves(run, state);
  }
  run.contexts.resize(n);
  std::vector<flow::Decoder> decoders(n);
  for (std::size_t e = 0; e < n; ++e) {
    decoders[e].step = [&run](flow::Context& ctx, Val state, std::int32_t token) {
      return call_step(run, ctx, state, token);
    };
    decoders[e].start_token = spec.start;
    decoders[e].end_token = spec.end;
    decoders[e].max_length = spec.max_lengths[e];
  }
  std::vector<std::vector<flow::Hypothesis>> found(n);
  Admitted admitted{core, {}};
  for (std::size_t e = 0; e < n; ++e)
    admitted.ids.push_back(core.admit_native(
        [&, e](flow::Context& ctx) {
          const Val initial_state{std::uint32_t(e)};
          if (spec.width > 0)
            return flow::beam_program(ctx, decoders[e], initial_state,
                                      {spec.width, spec.length_penalty}, found[e]);
          found[e].resize(1);
          return flow::greedy_program(ctx, decoders[e], initial_state, found[e][0]);
        },
        "example " + std::to_string(core.examples.size())));
  core.run_steps(true);
  py::list out;
  for (std::size_t e = 0; e < n; ++e) {
    if (core.engine->state(admitted.ids[e]) == flow::ProgramState::kFailed) {
      if (errors == "raise") throw Error(core.engine->error(admitted.ids[e]));
      out.append(error_object(core.engine->error(admitted.ids[e])));
    } else if (spec.width > 0) {
      out.append(py::cast(found[e]));
    } else {
      out.append(py::cast(found[e][0]));
    }
  }
  return out;
}

}  // namespace

void bind_search(py::module_& m) {
  py::class_<flow::Hypothesis>(m, "Hypothesis", R"doc(
A decoded sequence: tokens (without the start token; with the end token when ended), log_prob
(the sum of the chosen tokens' log-probabilities), score (log_prob / len(tokens) **
length_penalty) and ended (it chose the end token, else it stopped at max_length).)doc")
      .def_readonly("tokens", &flow::Hypothesis::tokens)
      .def_readonly("log_prob", &flow::Hypothesis::log_prob)
      .def_readonly("score", &flow::Hypothesis::score)
      .def_readonly("ended", &flow::Hypothesis::ended)
      .def("__repr__", [](const flow::Hypothesis& h) {
        std::string tokens;
        for (std::int32_t t : h.tokens) tokens += (tokens.empty() ? "" : ", ") + std::to_string(t);
        return "<flow.Hypothesis [" + tokens + "] log_prob " + std::to_string(h.log_prob) +
               (h.ended ? "" : ", not ended") + ">";
      });
  m.def(
      "_search",
      [](EngineCore& core, const py::function& step, const py::sequence& initial,
         std::int32_t start, std::int32_t end, py::handle max_length, int width,
         double length_penalty, py::handle token_type, bool trace, const std::string& errors) {
        if (width < 0) fail("flow", "beam_search: width must be positive, not ", width);
        SearchSpec spec{start, end, max_lengths(max_length, py::len(initial)), width,
                        length_penalty};
        return search(core, step, initial, spec, token_type, trace, errors);
      },
      py::arg("engine"), py::arg("step"), py::arg("initial"), py::arg("start"), py::arg("end"),
      py::arg("max_length"), py::arg("width"), py::arg("length_penalty"), py::arg("token_type"),
      py::arg("trace"), py::arg("errors"));
}

}  // namespace weft::python::flow_py
