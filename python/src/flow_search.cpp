// weft.flow.greedy and weft.flow.beam_search: the C++ searches (weft/flow/search.h) over a step
// function written in Python, step(ctx, state, token) -> (state, log_probs), which issues the
// calls of one decoding step and reads nothing. The ranking, the hypotheses' bookkeeping, the
// length normalisation and the stopping rule are C++; every example and every beam steps in one
// engine step. A state is any Python object (a Val, a tuple of Vals): the C++ search passes
// states along without looking into them, so here its state Vals index a table of them.
#include <optional>

#include "flow_core.h"
#include "weft/core/error.h"
#include "weft/flow/search.h"

namespace weft::python::flow_py {
namespace {

// One search's Python side, shared by its examples' steps (always under the GIL).
struct SearchRun {
  EngineCore* core = nullptr;
  py::function step;
  std::optional<loom::TypeId> token_type;  // the token as a Val of this type, else an int
  std::vector<py::object> states;
  std::size_t first_example = 0;     // the engine's index of the search's first example
  std::vector<py::object> contexts;  // per example, made on its first step
};

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
  return flow::DecoderStep{Val{std::uint32_t(run.states.size() - 1)}, log_probs};
}

flow::DecoderStep call_step(SearchRun& run, flow::Context& ctx, Val state, std::int32_t token) {
  py::gil_scoped_acquire gil;
  EngineCore& core = *run.core;
  py::object& context = run.contexts[ctx.example() - run.first_example];
  if (!context) context = py::cast(PyContext{core.shared_from_this(), &ctx, ctx.example()});
  py::object previous =
      run.token_type
          ? core.wrap(ctx.constant(*run.token_type, std::span<const std::int32_t>(&token, 1)))
          : py::object(py::int_(token));
  try {
    return step_result(run, run.step(context, run.states[state.id], previous));
  } catch (py::error_already_set& e) {
    fail_example(core, e);
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
                const SearchSpec& spec, py::handle token_type, const std::string& errors) {
  if (errors != "raise" && errors != "return")
    fail("flow", "errors must be 'raise' or 'return', not '", errors, "'");
  core.check_idle(spec.width ? "beam_search" : "greedy");
  const std::size_t n = py::len(initial);
  SearchRun run{&core, step, token_type_of(core, token_type), {}, core.examples.size(), {}};
  for (py::handle state : initial) run.states.push_back(py::reinterpret_borrow<py::object>(state));
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
         double length_penalty, py::handle token_type, const std::string& errors) {
        if (width < 0) fail("flow", "beam_search: width must be positive, not ", width);
        SearchSpec spec{start, end, max_lengths(max_length, py::len(initial)), width,
                        length_penalty};
        return search(core, step, initial, spec, token_type, errors);
      },
      py::arg("engine"), py::arg("step"), py::arg("initial"), py::arg("start"), py::arg("end"),
      py::arg("max_length"), py::arg("width"), py::arg("length_penalty"), py::arg("token_type"),
      py::arg("errors"));
}

}  // namespace weft::python::flow_py
