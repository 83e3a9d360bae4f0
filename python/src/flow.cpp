// weft.flow: programs that decide as they go, written in Python and batched by the C++ engine
// (weft/flow/flow.h). A program is a generator function, program(ctx, *args): ctx.call issues
// an operation's call at once, `x = yield v` suspends it until a step has computed v and
// resumes it with v's row as a NumPy array (`xs = yield ctx.read(a, b, ...)`: a list, whatever
// the number of values). Each example's generator is driven by a C++ coroutine; Engine.run()
// releases the GIL and takes it back only to resume generators and to run operation bodies
// written in Python. An exception raised in one program fails that example only, and its
// message names the example; KeyboardInterrupt and SystemExit stop the run.
#include <atomic>
#include <optional>

#include "flow_core.h"
#include "weft/core/error.h"

namespace weft::python::flow_py {

DType flow_dtype(const std::string& name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  fail("flow", "unknown dtype '", name, "' (float32, float64, int32, int64, bool)");
}

std::string py_type_name(py::handle value) {
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
}

bool same_loom(const std::weak_ptr<loom::Loom>& handle, const std::shared_ptr<loom::Loom>& loom) {
  return !handle.owner_before(loom) && !loom.owner_before(handle);
}

std::string type_text(const loom::Loom& loom, loom::TypeId type) {
  return loom.type(type).to_string();
}

void EngineCore::check_idle(const char* what) const {
  if (running) fail("flow", what, ": the engine is running (a program or another thread)");
  if (!broken.empty())
    fail("flow", what, ": a step of this engine failed as a whole (", broken,
         "); make a new engine");
}

Val EngineCore::val_of(py::handle value, const char* what) const {
  if (!py::isinstance<PyVal>(value))
    fail("flow", what, ": expected a Val (from ctx.call, ctx.constant or engine.import_rows), got ",
         py_type_name(value));
  const PyVal& v = value.cast<const PyVal&>();
  if (v.engine != serial)
    fail("flow", what, ": Val ", v.val.id, " belongs to another engine (engine #", v.engine,
         "; this is engine #", serial, "): a Val is valid only in the engine that made it");
  return v.val;
}

loom::TypeId EngineCore::type_of(py::handle type, const char* what) const {
  if (!py::isinstance<PyType>(type))
    fail("flow", what, ": expected a type (what Loom.type returns), got ", py_type_name(type));
  const PyType& t = type.cast<const PyType&>();
  if (!same_loom(t.loom, loom))
    fail("flow", what, ": type ", t.id, " is a type of another Loom, not of this engine's");
  return t.id;
}

loom::OpId EngineCore::op_of(const Op& op, const char* what) const {
  if (!same_loom(op.loom, loom))
    fail("flow", what, ": operation '", op.name, "' is an operation of another Loom, not of this ",
         "engine's");
  return op.id;
}

std::size_t EngineCore::admit_native(const std::function<flow::Program(flow::Context&)>& make,
                                     std::string name) {
  examples.emplace_back();
  return engine->admit(make, std::move(name));
}

EngineCore& PyContext::owner() const {
  const std::shared_ptr<EngineCore> c = core.lock();
  if (!c) fail("flow", "this context's engine is gone");
  const flow::ProgramState state = c->engine->state(example);
  if (!c->examples[example].open || state == flow::ProgramState::kDone ||
      state == flow::ProgramState::kFailed)
    fail("flow", "the context of example ", example, " ('", context->name(),
         "') is used after its program ended: a Context is valid only while its program runs");
  return *c;  // the engine holds it alive while its programs run
}

EngineCore& PyContext::untraceable_owner() const {
  EngineCore& c = owner();
  if (c.recording) c.recording->untraceable = true;
  return c;
}

void fail_example(EngineCore& core, const py::error_already_set& e) {
  std::string why = python_error_text(e);
  if (!PyErr_GivenExceptionMatches(e.type().ptr(), PyExc_Exception)) {
    // Ctrl-C or sys.exit() in a program: the run stops after this step (run_steps raises it).
    if (!core.stopped) core.stopped = std::make_exception_ptr(e);
    why = "interrupted by " + why;
  }
  throw Error(why);
}

namespace {

// The values a program yielded: a Val, ctx.read(...), or a list or tuple of Vals.
ReadRequest read_request(const EngineCore& core, py::handle yielded) {
  if (py::isinstance<ReadRequest>(yielded)) {
    ReadRequest r = yielded.cast<ReadRequest>();
    if (r.engine != core.serial) fail("flow", "yield: the ctx.read(...) of another engine");
    return r;
  }
  if (py::isinstance<PyVal>(yielded))
    return ReadRequest{{core.val_of(yielded, "yield")}, false, core.serial};
  if (py::isinstance<py::list>(yielded) || py::isinstance<py::tuple>(yielded)) {
    ReadRequest r{{}, true, core.serial};
    for (py::handle v : yielded) r.values.push_back(core.val_of(v, "yield"));
    return r;
  }
  fail(
      "flow", "the program yielded ", py_type_name(yielded),
      yielded.is_none() ? " (a bare `yield`?)" : "",
      "; yield a Val for its array, or ctx.read(a, b, ...) or a list of Vals for a list of arrays");
}

// Resumes the generator with what it read; false once it has returned. Every resume counts
// against max_steps, whether the values it read were computed by a step or already there.
bool advance(EngineCore& core, PyExample& ex) {
  py::gil_scoped_acquire gil;
  try {
    py::object yielded = ex.generator.attr("send")(ex.sent);
    ex.sent = py::none();
    if (++ex.yields > core.max_steps)
      throw Error("it did not finish within its bound of " + std::to_string(core.max_steps) +
                  " steps (max_steps of flow.Engine; every yield counts, whether it waits or "
                  "not): a decoder that never chooses its end token, or an unbounded loop?");
    ex.waiting = read_request(core, yielded);
    return true;
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_StopIteration)) {
      ex.result = e.value().attr("value");
      ex.generator = py::none();
      ex.open = false;
      return false;
    }
    ex.open = false;
    fail_example(core, e);
  } catch (...) {
    ex.open = false;
    throw;
  }
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
flow::Program drive(flow::Context& ctx, EngineCore& core, PyExample& ex) {
  for (;;) {
    if (!advance(core, ex)) co_return;
    for (std::size_t i = 0; i < ex.waiting.values.size(); ++i) {
      Tensor row = co_await ctx.read(ex.waiting.values[i]);
      ex.rows.push_back(std::move(row));
    }
    deliver(ex);
  }
}

// Outputs of a call: one Val, or a tuple of them.
py::object call_outputs(const EngineCore& core, std::span<const Val> outs) {
  if (outs.size() == 1) return core.wrap(outs[0]);
  py::tuple t(outs.size());
  for (std::size_t i = 0; i < outs.size(); ++i) t[i] = core.wrap(outs[i]);
  return t;
}

// The arguments of ctx.call(op, a, b) or ctx.call(op, [a, b]) (both read naturally).
py::handle argument_list(const py::args& args) {
  return args.size() == 1 &&
                 (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0]))
             ? args[0]
             : py::handle(args);
}

py::object py_call(const PyContext& c, const Op& op, py::args args) {
  const EngineCore& core = c.owner();
  const loom::OpId id = core.op_of(op, "ctx.call");
  std::vector<Val> vals;
  for (py::handle a : argument_list(args)) vals.push_back(core.val_of(a, "ctx.call"));
  const std::span<const Val> outputs = c.get().call(id, vals);
  if (core.recording)
    core.recording->events.push_back(
        {Recorded::Kind::kCall, id, vals, {outputs.begin(), outputs.end()}, 0, {}, {}});
  return call_outputs(core, outputs);
}

py::object py_read(const PyContext& c, py::args args) {
  const EngineCore& core = c.untraceable_owner();
  ReadRequest r{{}, true, core.serial};
  for (py::handle v : argument_list(args)) r.values.push_back(core.val_of(v, "ctx.read"));
  return py::cast(std::move(r));
}

py::object py_constant(const PyContext& c, py::handle type, py::handle value) {
  const EngineCore& core = c.owner();
  const loom::TypeId id = core.type_of(type, "ctx.constant");
  const loom::TypeShape& ts = core.loom->type(id);
  Tensor t = as_tensor(value, std::string(dtype_name(ts.dtype)));
  if (t.numel() != ts.shape.numel())
    fail("flow", "ctx.constant: ", t.describe(), " does not hold the ", ts.shape.numel(),
         " elements of type ", ts.to_string());
  const Val made = c.get().constant(id, t.reshaped(ts.shape));
  if (core.recording)
    core.recording->events.push_back(
        {Recorded::Kind::kConstant, 0, {}, {made}, id, t.reshaped(ts.shape).clone(), {}});
  return core.wrap(made);
}

// A program that has nothing left to do (a plain function's: it ran when admitted).
flow::Program finished() { co_return; }

std::size_t py_admit(EngineCore& core, const py::function& program, const py::args& args,
                     std::string name) {
  core.check_idle("admit");
  const std::size_t example = core.examples.size();
  PyExample& ex = core.examples.emplace_back();
  std::shared_ptr<EngineCore> self = core.shared_from_this();
  core.engine->admit(
      [&](flow::Context& ctx) {
        py::object made;
        try {
          made = program(PyContext{self, &ctx, example}, *args);
        } catch (py::error_already_set& e) {
          ex.open = false;
          fail_example(core, e);
        }
        if (py::hasattr(made, "send") && py::hasattr(made, "throw")) {
          ex.generator = std::move(made);
          ex.sent = py::none();
          return drive(ctx, core, ex);
        }
        ex.result = std::move(made);  // a plain function: it issued its calls and read nothing
        ex.open = false;
        return finished();
      },
      std::move(name));
  if (core.stopped) std::rethrow_exception(std::exchange(core.stopped, nullptr));
  return example;
}

}  // namespace

bool EngineCore::run_steps(bool all) {
  check_idle(all ? "run" : "step");
  running = true;
  bool stepped = false;
  {
    py::gil_scoped_release nogil;
    try {
      do {
        stepped = engine->step();
        py::gil_scoped_acquire gil;  // Ctrl-C while C++ ran: Python runs its handler now
        if (!stopped && PyErr_CheckSignals() != 0)
          stopped = std::make_exception_ptr(py::error_already_set());
      } while (all && stepped && !stopped);
    } catch (const std::exception& e) {
      // A body runs for every example of the step at once: the whole step failed.
      running = false;
      const std::string what = e.what();
      broken = what.substr(0, what.find('\n'));  // a Python error's first line
      throw;
    }
  }
  running = false;
  // The programs still live go on at the next run(); the interrupted one has failed.
  if (stopped) std::rethrow_exception(std::exchange(stopped, nullptr));
  return stepped;
}

namespace {

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
  if (state != flow::ProgramState::kDone && !core.broken.empty())
    fail("flow", "example ", example, " did not finish: a step of this engine failed as a whole (",
         core.broken, ")");
  if (state != flow::ProgramState::kDone)
    fail("flow", "example ", example, " has not finished (it is ", state_name(state),
         "): run() the engine first");
  return core.examples[example].result;
}

std::shared_ptr<EngineCore> make_engine(std::shared_ptr<loom::Loom> loom, py::object tape,
                                        std::int64_t max_steps, std::int64_t max_calls) {
  static std::atomic<std::uint64_t> engines{0};
  if (max_steps <= 0 || max_steps > std::int64_t(UINT32_MAX))
    fail("flow", "Engine: max_steps must be in [1, ", UINT32_MAX, "], not ", max_steps);
  if (max_calls <= 0) fail("flow", "Engine: max_calls must be positive, not ", max_calls);
  auto core = std::make_shared<EngineCore>();
  core->serial = ++engines;
  core->loom = std::move(loom);
  core->max_steps = std::uint32_t(max_steps);
  Tape* on = nullptr;
  if (tape.is_none()) {
    core->own_tape = std::make_unique<Tape>();
    core->own_tape->set_grad_enabled(false);
    on = core->own_tape.get();
  } else {
    on = &tape.cast<Tape&>();
  }
  flow::EngineOptions options;
  options.max_steps = std::uint32_t(max_steps);
  options.max_calls = std::uint64_t(max_calls);
  core->engine = std::make_unique<flow::Engine>(*core->loom, *on, options);
  return core;
}

// The types of an operation's inputs or outputs, each one of `loom`'s.
std::vector<loom::TypeShape> type_shapes(const std::shared_ptr<loom::Loom>& loom,
                                         const py::sequence& types, const std::string& where) {
  std::vector<loom::TypeShape> out;
  for (py::handle t : types) {
    if (!py::isinstance<PyType>(t))
      fail("flow", where,
           ": expected a type (what Loom.type returns) for each input and output, got ",
           py_type_name(t));
    const PyType& type = t.cast<const PyType&>();
    if (!same_loom(type.loom, loom))
      fail("flow", where, ": type ", type.id, " is a type of another Loom");
    out.push_back(loom->type(type.id));
  }
  return out;
}

Op add_op(const std::shared_ptr<loom::Loom>& loom, const std::string& name,
          const py::sequence& inputs, const py::sequence& outputs, py::function body) {
  const std::string where = "Loom.op('" + name + "')";
  const std::vector<loom::TypeShape> in = type_shapes(loom, inputs, where);
  const std::vector<loom::TypeShape> out = type_shapes(loom, outputs, where);
  const loom::OpId id =
      loom->add_operation(name, in, out, python_body(std::move(body), "operation '" + name + "'"));
  return Op{id, name, out.size(), loom};
}

PyType add_type(const std::shared_ptr<loom::Loom>& loom, const std::vector<std::int64_t>& shape,
                const std::string& dtype, const std::string& name) {
  return PyType{loom->add_type(loom::TypeShape{flow_dtype(dtype), Shape(shape), name}), loom};
}

void bind_loom(py::module_& m) {
  py::class_<loom::Loom, std::shared_ptr<loom::Loom>>(m, "Loom", R"doc(
The operations programs call: Loom(); t = loom.type(shape, dtype="float32") registers a value
type (per-example shape, no batch axis); loom.op(name, inputs, outputs, body) an operation over
types, body(*vars) -> Var or tuple of Vars, batched ([B, ...] per input) over every call of a
step. Types and operations belong to their Loom: an engine of another Loom refuses them.)doc")
      .def(py::init([] { return std::make_shared<loom::Loom>(); }))
      .def("type", &add_type, py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = "")
      .def("op", &add_op, py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("body"));
  py::class_<PyType>(m, "Type", "A value type of a Loom (what Loom.type returns).")
      .def_readonly("id", &PyType::id)
      .def_property_readonly("shape",
                             [](const PyType& t) {
                               const auto l = t.loom.lock();
                               if (!l) fail("flow", "Type.shape: its Loom is gone");
                               const Shape& s = l->type(t.id).shape;
                               return std::vector<std::int64_t>(s.dims().begin(), s.dims().end());
                             })
      .def_property_readonly("dtype",
                             [](const PyType& t) {
                               const auto l = t.loom.lock();
                               if (!l) fail("flow", "Type.dtype: its Loom is gone");
                               return std::string(dtype_name(l->type(t.id).dtype));
                             })
      .def("__eq__",
           [](const PyType& a, const PyType& b) {
             return a.id == b.id && !a.loom.owner_before(b.loom) && !b.loom.owner_before(a.loom);
           })
      .def("__hash__", [](const PyType& t) { return std::hash<std::uint32_t>()(t.id); })
      .def("__repr__", [](const PyType& t) {
        const auto l = t.loom.lock();
        return "<flow.Type " + std::to_string(t.id) + (l ? ": " + type_text(*l, t.id) : "") + ">";
      });
  py::class_<Op>(m, "Op", "An operation of a Loom (what ctx.call takes).")
      .def_readonly("name", &Op::name)
      .def_readonly("outputs", &Op::outputs)
      .def("__repr__", [](const Op& op) { return "<flow.Op '" + op.name + "'>"; });
  py::class_<PyVal>(m, "Val", "A value of one engine's batch, computed or pending (a handle).")
      .def_property_readonly("id", [](const PyVal& v) { return v.val.id; })
      .def("__eq__",
           [](const PyVal& a, const PyVal& b) { return a.val == b.val && a.engine == b.engine; })
      .def("__hash__",
           [](const PyVal& v) { return std::hash<std::uint64_t>()(v.engine << 32 ^ v.val.id); })
      .def("__repr__", [](const PyVal& v) {
        return "<flow.Val " + std::to_string(v.val.id) + " of engine #" + std::to_string(v.engine) +
               ">";
      });
  py::class_<ReadRequest>(m, "Read", "What `yield ctx.read(a, b, ...)` waits on.");
}

void bind_context(py::module_& m) {
  py::class_<PyContext>(m, "Context", R"doc(
One program's view of the engine, valid while its program runs. call(op, *args) issues a call at
once and returns its output Val (a tuple of Vals for several outputs); constant(type, value) and
parameter(type, param) make values; `x = yield v` waits for one value and gives its array,
`xs = yield ctx.read(a, b, ...)` (or ctx.read(list), or `yield [a, b]`) a list of arrays, one
per value, whatever their number.)doc")
      .def_property_readonly("example",
                             [](const PyContext& c) {
                               c.untraceable_owner();
                               return c.get().example();
                             })
      .def_property_readonly("name",
                             [](const PyContext& c) {
                               c.untraceable_owner();
                               return c.get().name();
                             })
      .def("call", &py_call, py::arg("op"))
      .def("constant", &py_constant, py::arg("type"), py::arg("value"))
      .def(
          "parameter",
          [](const PyContext& c, py::handle type, const Parameter& p) {
            const EngineCore& core = c.owner();
            const loom::TypeId id = core.type_of(type, "ctx.parameter");
            const Val made = c.get().parameter(id, p);
            if (core.recording)
              core.recording->events.push_back(
                  {Recorded::Kind::kParameter, 0, {}, {made}, id, {}, p});
            return core.wrap(made);
          },
          py::arg("type"), py::arg("parameter"))
      .def("read", &py_read)
      .def("type_of", [](const PyContext& c, py::handle v) {
        const EngineCore& core = c.owner();
        return PyType{c.get().type_of(core.val_of(v, "ctx.type_of")), core.loom};
      });
}

std::vector<Val> vals_of(const EngineCore& core, const py::iterable& values, const char* what) {
  std::vector<Val> out;
  for (py::handle v : values) out.push_back(core.val_of(v, what));
  return out;
}

py::list wrap_all(const EngineCore& core, const std::vector<Val>& values) {
  py::list out;
  for (Val v : values) out.append(core.wrap(v));
  return out;
}

// engine.import_rows(rows, type): a Var of the engine's tape, or an array (a constant on it).
py::list py_import_rows(EngineCore& core, py::handle rows, py::handle type) {
  core.check_idle("import_rows");
  const loom::TypeId id = core.type_of(type, "import_rows");
  Tape& tape = core.engine->tape();
  if (!py::isinstance<Var>(rows)) {
    const loom::TypeShape& ts = core.loom->type(id);
    return wrap_all(
        core,
        core.engine->import(tape.constant(as_tensor(rows, std::string(dtype_name(ts.dtype)))), id));
  }
  const Var var = rows.cast<Var>();
  if (var.defined() && &var.tape() != &tape)
    fail("flow", "import_rows: the Var is of another tape than this engine's (",
         core.own_tape ? "the engine has its own tape: pass flow.Engine(loom, tape) the tape the "
                         "Var was recorded on, or pass the rows as an array"
                       : "record it on the tape given to flow.Engine",
         ")");
  return wrap_all(core, core.engine->import(var, id));
}

py::dict stats_dict(const flow::FlowStats& s) {
  py::dict d;
  d["steps"] = s.steps;
  d["calls"] = s.calls;
  d["batched_calls"] = s.batched_calls;
  d["programs_done"] = s.programs_done;
  d["programs_failed"] = s.programs_failed;
  return d;
}

void bind_engine(py::module_& m) {
  py::class_<EngineCore, std::shared_ptr<EngineCore>>(m, "Engine", R"doc(
Engine(loom, tape=None, max_steps=10000, max_calls=10000000): runs programs batched. admit(
program, *args, name=...) makes program(ctx, *args) (a generator function, or a plain function
that reads nothing) one example; run() steps until every example has finished or failed. On
`tape` the calls are differentiable (engine.gather(vals) gives a Var for a loss); without one
they run without gradients. A program that yields more than max_steps times fails, naming its
example, as does one whose code raises: the others run on. KeyboardInterrupt and SystemExit
stop run() and are raised from it.)doc")
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
      .def("step", [](EngineCore& core) { return core.run_steps(false); })
      .def("run", [](EngineCore& core) { core.run_steps(true); })
      .def("state",
           [](const EngineCore& c, std::size_t e) { return state_name(c.engine->state(e)); })
      .def("error", [](const EngineCore& c, std::size_t e) { return c.engine->error(e); })
      .def("result", &py_result, py::arg("example"))
      .def_property_readonly("num_examples",
                             [](const EngineCore& c) { return c.engine->num_examples(); })
      .def("value",
           [](const EngineCore& c, py::handle v) {
             const Val value = c.val_of(v, "engine.value");
             if (!c.engine->computed(value))
               fail("flow", "engine.value: value ", value.id, " is not computed yet: yield it in ",
                    "a program, or step() / run() the engine first");
             return py::module_::import("numpy").attr("array")(py::cast(c.engine->value(value)));
           })
      .def(
          "gather",
          [](const EngineCore& c, const py::iterable& values) {
            return c.engine->gather(vals_of(c, values, "engine.gather"));
          },
          py::arg("values"))
      .def("import_rows", &py_import_rows, py::arg("rows"), py::arg("type"))
      .def_property_readonly("stats",
                             [](const EngineCore& c) { return stats_dict(c.engine->stats()); });
}

}  // namespace

}  // namespace weft::python::flow_py

namespace weft::python {

// "ZeroDivisionError: division by zero (at decoder.py:12, in greedy)".
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
  flow_py::bind_loom(flow);
  flow_py::bind_context(flow);
  flow_py::bind_engine(flow);
  flow_py::bind_search(flow);
}

}  // namespace weft::python
