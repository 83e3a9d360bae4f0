// weft.flow: programs that decide as they go, written in Python and batched by the C++ engine
// (weft/flow/flow.h). A program is a generator function, program(ctx, *args): ctx.call issues
// an operation's call at once, `x = yield v` (or `yield ctx.read(a, b)`) suspends it until a
// step has computed the values and resumes it with their rows as NumPy arrays. Each example's
// generator is driven by a C++ coroutine; Engine.run() releases the GIL and takes it back only
// to resume generators and to run operation bodies written in Python. An exception raised in
// one program fails that example only, and its message names the example.
#include <deque>
#include <memory>
#include <optional>

#include "common.h"
#include "weft/core/error.h"
#include "weft/flow/flow.h"

namespace weft::python {
namespace {

using flow::Val;

DType flow_dtype(const std::string& name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  fail("flow", "unknown dtype '", name, "' (float32, float64, int32, int64, bool)");
}

// An operation of a Loom, as Python sees it.
struct Op {
  loom::OpId id;
  std::string name;
  std::size_t outputs;
};

// What a program yields to read several values at once (ctx.read(a, b)).
struct ReadRequest {
  std::vector<Val> values;
  bool many = false;
};

// One example's Python side: its generator (None for a plain function), what it asked to read,
// what it gets back, and what it returned.
struct PyExample {
  py::object generator;
  py::object sent;
  py::object result;
  ReadRequest waiting;
  std::vector<Tensor> rows;
};

// The engine and the Python objects of its examples; Contexts refer to it weakly, so a context
// kept after its engine is gone raises instead of dangling.
struct EngineCore : std::enable_shared_from_this<EngineCore> {
  std::shared_ptr<const loom::Loom> loom;
  std::unique_ptr<Tape> own_tape;  // when no tape was given: inference, no gradients
  std::unique_ptr<flow::Engine> engine;
  std::deque<PyExample> examples;
  bool running = false;
  std::string broken;  // why a step failed as a whole (an operation body raised)

  void check_idle(const char* what) const {
    if (running) fail("flow", what, ": the engine is running (a program or another thread)");
    if (!broken.empty())
      fail("flow", what, ": a step of this engine failed as a whole (", broken,
           "); make a new engine");
  }
};

struct PyContext {
  std::weak_ptr<EngineCore> core;
  flow::Context* context;
  flow::Context& get() const {
    if (core.expired()) fail("flow", "this context's engine is gone");
    return *context;
  }
  const loom::Loom& loom() const {
    get();
    return *core.lock()->loom;
  }
};

Val as_val(py::handle value, const char* what) {
  if (!py::isinstance<Val>(value))
    fail("flow", what, ": expected a Val (from ctx.call, ctx.constant or engine.import_rows), got ",
         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  return value.cast<Val>();
}

// The values a program yielded: a Val, ctx.read(...), or a list or tuple of Vals.
ReadRequest read_request(py::handle yielded) {
  if (py::isinstance<ReadRequest>(yielded)) return yielded.cast<ReadRequest>();
  if (py::isinstance<Val>(yielded)) return ReadRequest{{yielded.cast<Val>()}, false};
  if (py::isinstance<py::list>(yielded) || py::isinstance<py::tuple>(yielded)) {
    ReadRequest r{{}, true};
    for (py::handle v : yielded) r.values.push_back(as_val(v, "yield"));
    return r;
  }
  fail("flow", "the program yielded ",
       py::str(py::type::of(yielded).attr("__name__")).cast<std::string>(),
       yielded.is_none() ? " (a bare `yield`?)" : "",
       "; yield a Val, ctx.read(a, b, ...) or a list of Vals to wait for their values");
}

// Resumes the generator with what it read; false once it has returned. Under the GIL.
bool advance(PyExample& ex) {
  py::gil_scoped_acquire gil;
  std::string error;
  try {
    py::object yielded = ex.generator.attr("send")(ex.sent);
    ex.sent = py::none();
    ex.waiting = read_request(yielded);
    return true;
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_StopIteration)) {
      error = python_error_text(e);
    } else {
      ex.result = e.value().attr("value");
      ex.generator = py::none();
      return false;
    }
  }
  throw Error(error);
}

// The rows read, as NumPy arrays (copies: a row is a view of a batch chunk). Under the GIL.
void deliver(PyExample& ex) {
  py::gil_scoped_acquire gil;
  py::module_ np = py::module_::import("numpy");
  py::list arrays;
  for (const Tensor& row : ex.rows) arrays.append(np.attr("array")(py::cast(row)));
  ex.rows.clear();
  ex.sent = ex.waiting.many ? py::object(arrays) : py::object(arrays[0]);
}

// The C++ coroutine that drives one example's generator.
flow::Program drive(flow::Context& ctx, PyExample& ex) {
  for (;;) {
    if (!advance(ex)) co_return;
    for (std::size_t i = 0; i < ex.waiting.values.size(); ++i) {
      Tensor row = co_await ctx.read(ex.waiting.values[i]);
      ex.rows.push_back(std::move(row));
    }
    deliver(ex);
  }
}

// Outputs of a call: one Val, or a tuple of them.
py::object call_outputs(std::span<const Val> outs) {
  if (outs.size() == 1) return py::cast(outs[0]);
  py::tuple t(outs.size());
  for (std::size_t i = 0; i < outs.size(); ++i) t[i] = py::cast(outs[i]);
  return t;
}

py::object py_call(const PyContext& c, const Op& op, py::args args) {
  std::vector<Val> vals;
  // ctx.call(op, [a, b]) and ctx.call(op, a, b) both read naturally.
  py::handle list =
      args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0]))
          ? args[0]
          : py::handle(args);
  for (py::handle a : list) vals.push_back(as_val(a, "ctx.call"));
  return call_outputs(c.get().call(op.id, vals));
}

Val py_constant(const PyContext& c, loom::TypeId type, py::handle value) {
  const loom::Loom& loom = c.loom();
  if (type >= loom.num_types()) fail("flow", "ctx.constant: type ", type, " is not registered");
  const loom::TypeShape& ts = loom.type(type);
  Tensor t = as_tensor(value, std::string(dtype_name(ts.dtype)));
  if (t.numel() != ts.shape.numel())
    fail("flow", "ctx.constant: ", t.describe(), " does not hold the ", ts.shape.numel(),
         " elements of type ", ts.to_string());
  return c.get().constant(type, t.reshaped(ts.shape));
}

// A program that has nothing left to do (a plain function's: it ran when admitted).
flow::Program finished() { co_return; }

std::size_t py_admit(EngineCore& core, const py::function& program, const py::args& args,
                     std::string name) {
  core.check_idle("admit");
  PyExample& ex = core.examples.emplace_back();
  std::shared_ptr<EngineCore> self = core.shared_from_this();
  return core.engine->admit(
      [&](flow::Context& ctx) {
        py::object made = program(PyContext{self, &ctx}, *args);
        if (py::hasattr(made, "send") && py::hasattr(made, "throw")) {
          ex.generator = std::move(made);
          ex.sent = py::none();
          return drive(ctx, ex);
        }
        ex.result = std::move(made);  // a plain function: it issued its calls and read nothing
        return finished();
      },
      std::move(name));
}

// Runs steps with the GIL released (taken back to resume generators and run Python bodies).
bool py_step(EngineCore& core, bool all) {
  core.check_idle(all ? "run" : "step");
  core.running = true;
  bool stepped = false;
  {
    py::gil_scoped_release nogil;
    try {
      if (all)
        core.engine->run();
      else
        stepped = core.engine->step();
    } catch (const std::exception& e) {
      // A body runs for every example of the step at once: the whole step failed.
      core.running = false;
      const std::string what = e.what();
      core.broken = what.substr(0, what.find('\n'));  // a Python error's first line
      throw;
    }
  }
  core.running = false;
  return stepped;
}

const char* state_name(flow::ProgramState state) {
  switch (state) {
    case flow::ProgramState::kAdmitted:
      return "admitted";
    case flow::ProgramState::kRunning:
      return "running";
    case flow::ProgramState::kDone:
      return "done";
    case flow::ProgramState::kFailed:
      return "failed";
  }
  return "?";
}

py::object py_result(const EngineCore& core, std::size_t example) {
  const flow::ProgramState state = core.engine->state(example);
  if (state == flow::ProgramState::kFailed) throw Error(core.engine->error(example));
  if (state != flow::ProgramState::kDone)
    fail("flow", "example ", example, " has not finished (it is ", state_name(state),
         "): run() the engine first");
  return core.examples[example].result;
}

std::shared_ptr<EngineCore> make_engine(std::shared_ptr<loom::Loom> loom, py::object tape,
                                        std::uint32_t max_steps, std::uint64_t max_calls) {
  auto core = std::make_shared<EngineCore>();
  core->loom = std::move(loom);
  Tape* on = nullptr;
  if (tape.is_none()) {
    core->own_tape = std::make_unique<Tape>();
    core->own_tape->set_grad_enabled(false);
    on = core->own_tape.get();
  } else {
    on = &tape.cast<Tape&>();
  }
  flow::EngineOptions options;
  options.max_steps = max_steps;
  options.max_calls = max_calls;
  core->engine = std::make_unique<flow::Engine>(*core->loom, *on, options);
  return core;
}

loom::TypeShape type_shape(const loom::Loom& loom, loom::TypeId type) {
  if (type >= loom.num_types()) fail("flow", "type ", type, " is not registered in this Loom");
  return loom.type(type);
}

Op add_op(loom::Loom& loom, const std::string& name, const std::vector<loom::TypeId>& inputs,
          const std::vector<loom::TypeId>& outputs, py::function body) {
  std::vector<loom::TypeShape> in, out;
  for (loom::TypeId t : inputs) in.push_back(type_shape(loom, t));
  for (loom::TypeId t : outputs) out.push_back(type_shape(loom, t));
  const loom::OpId id =
      loom.add_operation(name, in, out, python_body(std::move(body), "operation '" + name + "'"));
  return Op{id, name, outputs.size()};
}

void bind_loom(py::module_& m) {
  py::class_<loom::Loom, std::shared_ptr<loom::Loom>>(m, "Loom", R"doc(
The operations programs call: Loom(); t = loom.type(shape, dtype="float32") registers a value
type (per-example shape, no batch axis) and returns its id; loom.op(name, inputs, outputs, body)
an operation over types, body(*vars) -> Var or tuple of Vars, batched ([B, ...] per input)
over every call of a step.)doc")
      .def(py::init([] { return std::make_shared<loom::Loom>(); }))
      .def(
          "type",
          [](loom::Loom& l, const std::vector<std::int64_t>& shape, const std::string& dtype,
             const std::string& name) {
            return l.add_type(loom::TypeShape{flow_dtype(dtype), Shape(shape), name});
          },
          py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = "")
      .def("op", &add_op, py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("body"));
  py::class_<Op>(m, "Op", "An operation of a Loom (what ctx.call takes).")
      .def_readonly("name", &Op::name)
      .def_readonly("outputs", &Op::outputs)
      .def("__repr__", [](const Op& op) { return "<flow.Op '" + op.name + "'>"; });
  py::class_<Val>(m, "Val", "A value of an engine's batch, computed or pending (a handle).")
      .def_readonly("id", &Val::id)
      .def("__eq__", [](const Val& a, const Val& b) { return a == b; })
      .def("__hash__", [](const Val& v) { return std::hash<std::uint32_t>()(v.id); })
      .def("__repr__", [](const Val& v) { return "<flow.Val " + std::to_string(v.id) + ">"; });
  py::class_<ReadRequest>(m, "Read", "What `yield ctx.read(a, b)` waits on.");
}

void bind_context(py::module_& m) {
  py::class_<PyContext>(m, "Context", R"doc(
One program's view of the engine. call(op, *args) issues a call at once and returns its output
Val (a tuple of Vals for several outputs); constant(type, value) and parameter(type, param) make
values; `x = yield v` or `a, b = yield ctx.read(a, b)` waits for computed values.)doc")
      .def_property_readonly("example", [](const PyContext& c) { return c.get().example(); })
      .def_property_readonly("name", [](const PyContext& c) { return c.get().name(); })
      .def("call", &py_call, py::arg("op"))
      .def("constant", &py_constant, py::arg("type"), py::arg("value"))
      .def(
          "parameter",
          [](const PyContext& c, loom::TypeId type, const Parameter& p) {
            return c.get().parameter(type, p);
          },
          py::arg("type"), py::arg("parameter"))
      .def("read",
           [](const PyContext&, py::args values) {
             ReadRequest r{{}, values.size() != 1};
             for (py::handle v : values) r.values.push_back(as_val(v, "ctx.read"));
             return r;
           })
      .def("type_of", [](const PyContext& c, Val v) { return c.get().type_of(v); });
}

void bind_engine(py::module_& m) {
  py::class_<EngineCore, std::shared_ptr<EngineCore>>(m, "Engine", R"doc(
Engine(loom, tape=None, max_steps=10000, max_calls=10000000): runs programs batched. admit(
program, *args, name=...) makes program(ctx, *args) (a generator function, or a plain function
that reads nothing) one example; run() steps until every example has finished or failed. On
`tape` the calls are differentiable (engine.gather(vals) gives a Var for a loss); without one
they run without gradients. A program that waits more than max_steps steps fails, naming its
example, as does one whose code raises: the others run on.)doc")
      .def(py::init(&make_engine), py::arg("loom"), py::arg("tape") = py::none(),
           py::arg("max_steps") = 10000, py::arg("max_calls") = 10'000'000, py::keep_alive<1, 3>())
      .def(
          "admit",
          [](EngineCore& core, const py::function& program, const py::args& args,
             const std::optional<std::string>& name) {
            return py_admit(core, program, args,
                            name ? *name : "example " + std::to_string(core.examples.size()));
          },
          py::arg("program"), py::kw_only(), py::arg("name") = py::none())
      .def("step", [](EngineCore& core) { return py_step(core, false); })
      .def("run", [](EngineCore& core) { py_step(core, true); })
      .def("state",
           [](const EngineCore& c, std::size_t e) { return state_name(c.engine->state(e)); })
      .def("error", [](const EngineCore& c, std::size_t e) { return c.engine->error(e); })
      .def("result", &py_result, py::arg("example"))
      .def_property_readonly("num_examples",
                             [](const EngineCore& c) { return c.engine->num_examples(); })
      .def("value",
           [](const EngineCore& c, Val v) {
             return py::module_::import("numpy").attr("array")(py::cast(c.engine->value(v)));
           })
      .def(
          "gather",
          [](const EngineCore& c, const std::vector<Val>& values) {
            return c.engine->gather(values);
          },
          py::arg("values"))
      .def(
          "import_rows",
          [](EngineCore& c, const Var& rows, loom::TypeId type) {
            c.check_idle("import_rows");
            return c.engine->import(rows, type);
          },
          py::arg("rows"), py::arg("type"))
      .def_property_readonly("stats", [](const EngineCore& c) {
        const flow::FlowStats& s = c.engine->stats();
        py::dict d;
        d["steps"] = s.steps;
        d["calls"] = s.calls;
        d["batched_calls"] = s.batched_calls;
        d["programs_done"] = s.programs_done;
        d["programs_failed"] = s.programs_failed;
        return d;
      });
}

}  // namespace

// "ZeroDivisionError: division by zero (at decoder.py:12, in greedy)": the Python error's type
// and text, and where it was raised.
std::string python_error_text(const py::error_already_set& e) {
  std::string text = py::str(e.type().attr("__name__")).cast<std::string>();
  const std::string message = py::str(e.value()).cast<std::string>();
  if (!message.empty()) text += ": " + message;
  py::object tb = e.trace();
  if (tb.is_none() || !tb) return text;
  while (!tb.attr("tb_next").is_none()) tb = tb.attr("tb_next");
  py::object code = tb.attr("tb_frame").attr("f_code");
  return text + " (at " + py::str(code.attr("co_filename")).cast<std::string>() + ":" +
         py::str(tb.attr("tb_lineno")).cast<std::string>() + ", in " +
         py::str(code.attr("co_name")).cast<std::string>() + ")";
}

void init_flow(py::module_& m) {
  py::module_ flow = m.def_submodule("flow", "Programs that decide as they go (weft.flow).");
  bind_loom(flow);
  bind_context(flow);
  bind_engine(flow);
}

}  // namespace weft::python
