// The Python side of weft.flow shared by its bindings (flow.cpp: looms, contexts, engines;
// flow_search.cpp: greedy and beam search): handles that know their owner (a Val its engine, an
// Op and a Type their Loom), the engine with its examples' Python objects, and how a Python
// error raised inside a program becomes that example's failure or, for KeyboardInterrupt and
// SystemExit, stops the run.
#pragma once

#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "weft/flow/flow.h"

namespace weft::python::flow_py {

using flow::Val;

// A value of one engine's batch; `engine` is that engine's serial number.
struct PyVal {
  Val val;
  std::uint64_t engine = 0;
};

// A type registered in a Loom (what Loom.type returns).
struct PyType {
  loom::TypeId id = 0;
  std::weak_ptr<loom::Loom> loom;
};

// An operation of a Loom, as Python sees it.
struct Op {
  loom::OpId id = 0;
  std::string name;
  std::size_t outputs = 0;
  std::weak_ptr<loom::Loom> loom;
};

// What a program yields to read values: `many` answers a list (ctx.read, a list or tuple of
// Vals), otherwise the one value's array (a bare Val).
struct ReadRequest {
  std::vector<Val> values;
  bool many = false;
  std::uint64_t engine = 0;
};

// What a search's step did when it was called to be traced (flow_search.cpp): its calls,
// constants and parameters in order, and whether it looked at anything that may differ between
// calls (its example, a read), which makes it untraceable.
struct Recorded {
  enum class Kind { kCall, kConstant, kParameter };
  Kind kind = Kind::kCall;
  loom::OpId op = 0;
  std::vector<Val> args, outputs;
  loom::TypeId type = 0;
  Tensor value;
  Parameter parameter;
};
struct Recording {
  std::vector<Recorded> events;
  bool untraceable = false;
};

// One example's Python side: its generator (None for a plain function or a search), what it
// asked to read, what it gets back, what it returned, and whether its context may still be used.
struct PyExample {
  py::object generator;
  py::object sent;
  py::object result;
  ReadRequest waiting;
  std::vector<Tensor> rows;
  std::uint64_t yields = 0;
  bool open = true;
};

// The engine and the Python objects of its examples; Contexts refer to it weakly, so a context
// kept after its engine is gone raises instead of dangling.
struct EngineCore : std::enable_shared_from_this<EngineCore> {
  std::uint64_t serial = 0;
  std::shared_ptr<loom::Loom> loom;
  std::unique_ptr<Tape> own_tape;  // when no tape was given: inference, no gradients
  std::unique_ptr<flow::Engine> engine;
  std::deque<PyExample> examples;
  std::uint32_t max_steps = 0;
  bool running = false;
  std::string broken;              // why a step failed as a whole (an operation body raised)
  std::exception_ptr stopped;      // a KeyboardInterrupt or SystemExit raised inside the run
  Recording* recording = nullptr;  // while a search's step is traced

  void check_idle(const char* what) const;
  // A Val of this engine, else weft.Error naming `what` and whose it is.
  Val val_of(py::handle value, const char* what) const;
  py::object wrap(Val value) const { return py::cast(PyVal{value, serial}); }
  // A type or operation of this engine's Loom, else weft.Error naming `what`.
  loom::TypeId type_of(py::handle type, const char* what) const;
  loom::OpId op_of(const Op& op, const char* what) const;
  // Admits a program made in C++ (a search's), with an empty Python side.
  std::size_t admit_native(const std::function<flow::Program(flow::Context&)>& make,
                           std::string name);
  // Steps (all: until done) with the GIL released; raises what stopped the run.
  bool run_steps(bool all);
};

// One program's view of the engine.
struct PyContext {
  std::weak_ptr<EngineCore> core;
  flow::Context* context = nullptr;
  std::size_t example = 0;
  // The engine, while this context's program runs; else weft.Error.
  EngineCore& owner() const;
  // owner(), for what a traced step may not depend on (its example, the values it reads).
  EngineCore& untraceable_owner() const;
  flow::Context& get() const {
    owner();
    return *context;
  }
};

bool same_loom(const std::weak_ptr<loom::Loom>& handle, const std::shared_ptr<loom::Loom>& loom);

// What an error raised by a program's Python code (under the GIL) does: KeyboardInterrupt,
// SystemExit (any BaseException that is not an Exception) is kept in core.stopped to stop the
// run; either way the example fails with a weft::Error saying why (this throws it).
[[noreturn]] void fail_example(EngineCore& core, const py::error_already_set& e);

// A type's name for messages: "float32 [4]".
std::string type_text(const loom::Loom& loom, loom::TypeId type);

void bind_search(py::module_& flow);

}  // namespace weft::python::flow_py
