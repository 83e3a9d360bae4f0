// The flow engine: per-example coroutines issue loom calls into one step weave; a step runs
// that weave on the shared tape, records where its values live (global chunks), and resumes
// the programs that were reading. Later steps import earlier values by location.
#include <algorithm>
#include <chrono>

#include "../loom/chunk_ops.h"
#include "weft/core/error.h"
#include "weft/flow/flow.h"

namespace weft::flow {

// One admitted program: its context, its coroutine and what it is waiting for.
struct Engine::Slot {
  Slot(Engine& engine, std::size_t example, std::string label)
      : context(engine, example), name(std::move(label)) {}
  Context context;
  std::string name;
  Program program;
  ProgramState state = ProgramState::kAdmitted;
  std::string error;
  std::coroutine_handle<> resume_at;  // where the program is suspended on a read
  std::uint32_t steps_waited = 0;
  std::uint64_t calls = 0;
};

Program& Program::operator=(Program&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, {});
  }
  return *this;
}

void Program::reset() {
  if (handle_) handle_.destroy();
  handle_ = {};
}

Engine::Engine(const loom::Loom& loom, Tape& tape, EngineOptions options, Device device)
    : loom_(&loom), tape_(&tape), options_(options), weaver_(loom), executor_(loom, tape, device) {
  if (options_.max_steps == 0) fail("flow", "EngineOptions::max_steps must be positive");
}

Engine::~Engine() = default;

Engine::Slot& Engine::slot(std::size_t example) const {
  if (example >= slots_.size())
    fail("flow", "example ", example, " was never admitted (", slots_.size(), " were)");
  return *slots_[example];
}

ProgramState Engine::state(std::size_t example) const { return slot(example).state; }
const std::string& Engine::error(std::size_t example) const { return slot(example).error; }

const Engine::ValueSlot& Engine::value_slot(Val value, const char* what) const {
  if (value.id >= values_.size())
    fail("flow", what, ": ", value.defined() ? "value " + std::to_string(value.id) : "a Val",
         " is not a value of this engine (it has ", values_.size(), ")");
  return values_[value.id];
}

bool Engine::computed(Val value) const { return value_slot(value, "computed").chunk != Val::kNone; }

TypeId Engine::type_of(Val value) const { return value_slot(value, "type_of").type; }

Tensor Engine::value(Val value) const {
  const ValueSlot& v = value_slot(value, "value");
  if (v.chunk == Val::kNone)
    fail("flow", "value ", value.id, " is not computed yet: co_await it in a program, or call ",
         "step() / run() first");
  const loom::TypeShape& ts = loom_->type(v.type);
  return chunks_[v.chunk].value().rows_view(v.row, 1).reshaped(ts.shape).to(Device::kCpu);
}

Var Engine::gather(std::span<const Val> values) const {
  if (values.empty()) fail("flow", "gather of no values");
  const TypeId type = type_of(values[0]);
  std::vector<Var> involved;
  std::vector<std::uint32_t> local_of(chunks_.size(), 0);  // chunk -> involved index + 1
  std::vector<std::int32_t> refs;
  for (Val value : values) {
    const ValueSlot& v = value_slot(value, "gather");
    if (v.type != type)
      fail("flow", "gather mixes types ", loom_->type(type).to_string(), " and ",
           loom_->type(v.type).to_string());
    if (v.chunk == Val::kNone) fail("flow", "gather: value ", value.id, " is not computed yet");
    if (local_of[v.chunk] == 0) {
      involved.push_back(chunks_[v.chunk]);
      local_of[v.chunk] = std::uint32_t(involved.size());
    }
    refs.push_back(std::int32_t(local_of[v.chunk] - 1));
    refs.push_back(std::int32_t(v.row));
  }
  const std::int64_t rows = std::int64_t(values.size());
  return loom::detail::gather_host_refs(involved, refs, loom_->type(type).shape.prepend(rows));
}

std::uint32_t Engine::add_chunk(Var chunk) {
  chunks_.push_back(std::move(chunk));
  chunk_import_step_.push_back(UINT64_MAX);
  chunk_import_index_.push_back(0);
  return std::uint32_t(chunks_.size() - 1);
}

std::vector<Val> Engine::import(Var rows, TypeId type) {
  if (type >= loom_->num_types()) fail("flow", "import: type id ", type, " is not registered");
  const loom::TypeShape& ts = loom_->type(type);
  if (!rows.defined() || rows.value().dtype() != ts.dtype || rows.shape().rank() < 1 ||
      rows.shape().without_rows() != ts.shape)
    fail("flow", "import: ", rows.defined() ? rows.value().describe() : "an undefined Var",
         " does not hold rows of type ", ts.to_string());
  const std::uint32_t chunk = add_chunk(rows);
  std::vector<Val> out;
  for (std::int64_t r = 0; r < rows.shape()[0]; ++r) {
    out.push_back(Val{std::uint32_t(values_.size())});
    values_.push_back(ValueSlot{type, chunk, std::uint32_t(r), UINT64_MAX, 0});
  }
  return out;
}

std::vector<Val> Engine::import(const loom::LoomResult& result,
                                std::span<const loom::Value> values) {
  const loom::Weaver& weaver = result.weaver();
  if (&weaver.loom() != loom_) fail("flow", "import: the result was run on another loom");
  std::vector<std::uint32_t> global(result.chunks().size(), Val::kNone);
  std::vector<Val> out;
  for (loom::Value v : values) {
    const loom::ValueLocation loc = result.location(v);
    if (global[loc.chunk] == Val::kNone) global[loc.chunk] = add_chunk(result.chunks()[loc.chunk]);
    out.push_back(Val{std::uint32_t(values_.size())});
    values_.push_back(ValueSlot{weaver.type_of(v), global[loc.chunk], loc.row, UINT64_MAX, 0});
  }
  return out;
}

void Engine::drop_intermediates(std::uint32_t first_node) { drop_since(first_node, 0); }

void Engine::drop_since(std::uint32_t first_node, std::size_t first_chunk) {
  if (!options_.drop_step_intermediates || tape_->grad_enabled()) return;
  std::vector<std::uint32_t> kept;
  for (std::size_t c = first_chunk; c < chunks_.size(); ++c)
    if (chunks_[c].id() >= first_node) kept.push_back(chunks_[c].id());
  std::sort(kept.begin(), kept.end());
  tape_->drop_values(first_node, kept);
}

std::size_t Engine::admit(const std::function<Program(Context&)>& make, std::string name) {
  const std::size_t example = slots_.size();
  slots_.push_back(std::make_unique<Slot>(*this, example, std::move(name)));
  Slot& s = *slots_.back();
  try {
    s.program = make(s.context);
    if (!s.program.valid()) fail("flow", "admit: the program of example ", example, " is empty");
  } catch (const std::exception& e) {
    fail_program(s, failure_text(s, e.what()));
    return example;
  }
  admitted_.push_back(std::uint32_t(example));
  return example;
}

// The step-local value of `value`: as woven this step, or imported from where it lies.
loom::Value Engine::local_value(Val value) {
  ValueSlot& v = values_[value.id];
  if (v.local_step == step_) return v.local;
  // Not woven this step, so computed earlier (a pending value is always of this step).
  const std::uint32_t chunk = v.chunk;
  if (chunk_import_step_[chunk] != step_) {
    chunk_import_step_[chunk] = step_;
    chunk_import_index_[chunk] = std::uint32_t(import_chunks_.size());
    import_chunks_.push_back(chunks_[chunk]);
  }
  const std::uint32_t slot = std::uint32_t(import_rows_.size());
  import_rows_.push_back({chunk_import_index_[chunk], v.row});
  v.local = weaver_.imported(v.type, slot);
  v.local_step = step_;
  ++stats_.imports;
  return v.local;
}

Val Engine::add_woven(loom::Value local) {
  const Val out{std::uint32_t(values_.size())};
  values_.push_back(ValueSlot{weaver_.type_of(local), Val::kNone, 0, step_, local});
  woven_.push_back(out);
  return out;
}

void Engine::count_call(Slot& caller, const char* what) {
  if (++caller.calls > options_.max_calls)
    fail("flow", "the program issued more than ", options_.max_calls,
         " calls (the engine's max_calls) at ", what, ": a loop that never reads a value?");
}

std::span<const Val> Engine::call(Slot& caller, OpId op, std::span<const Val> args) {
  count_call(caller, "a call");
  local_args_.clear();
  for (Val a : args) {
    value_slot(a, "call argument");
    local_args_.push_back(local_value(a));
  }
  // The weaver validates before it records, so a bad call leaves the step weave intact.
  const std::span<const loom::Value> outputs = weaver_.call(op, local_args_);
  call_outputs_.clear();
  for (loom::Value out : outputs) call_outputs_.push_back(add_woven(out));
  ++stats_.calls;
  return call_outputs_;
}

void Engine::wait(Slot& waiter, std::coroutine_handle<> handle) {
  waiter.resume_at = handle;
  ++waiter.steps_waited;
}

std::string Engine::failure_text(const Slot& s, const std::string& why) {
  return "[flow] example " + std::to_string(s.context.example()) + " ('" + s.name +
         "') failed: " + why;
}

void Engine::fail_program(Slot& s, const std::string& message) {
  s.program.reset();
  s.state = ProgramState::kFailed;
  s.error = message;
  ++stats_.programs_failed;
}

void Engine::finish(Slot& s) {
  const std::exception_ptr error = s.program.handle().promise().error;
  if (!error) {
    s.program.reset();
    s.state = ProgramState::kDone;
    ++stats_.programs_done;
    return;
  }
  std::string message = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  fail_program(s, failure_text(s, message));
}

// Runs a program until it reads a value not computed yet, or ends.
void Engine::resume(Slot& s, std::coroutine_handle<> handle) {
  s.resume_at = {};
  handle.resume();
  if (s.program.done()) finish(s);
}

void Engine::start_admitted() {
  for (std::uint32_t example : admitted_) {
    Slot& s = *slots_[example];
    s.state = ProgramState::kRunning;
    resume(s, s.program.handle());
    if (s.state == ProgramState::kRunning) live_.push_back(example);
  }
  admitted_.clear();
}

void Engine::run_weave() {
  const std::uint32_t first_node = std::uint32_t(tape_->size());
  const std::size_t first_chunk = chunks_.size();
  executor_.import(import_chunks_, import_rows_);
  const loom::LoomResult result = executor_.run(weaver_, options_.strategy);
  result_chunk_map_.assign(result.chunks().size(), Val::kNone);
  for (Val id : woven_) {
    ValueSlot& v = values_[id.id];
    const loom::ValueLocation loc = result.location(v.local);
    std::uint32_t& global = result_chunk_map_[loc.chunk];
    if (global == Val::kNone) global = add_chunk(result.chunks()[loc.chunk]);
    v.chunk = global;
    v.row = loc.row;
  }
  drop_since(first_node, first_chunk);  // after the chunks this step's values lie in were added
  stats_.calls_per_step.push_back(std::int64_t(weaver_.num_calls()));
  stats_.batched_calls += std::int64_t(result.schedule().steps.size());
  ++stats_.steps;
  weaver_.clear();
  woven_.clear();
  import_chunks_.clear();
  import_rows_.clear();
  ++step_;
}

void Engine::resume_readers() {
  std::size_t kept = 0;
  for (std::uint32_t example : live_) {
    Slot& s = *slots_[example];
    if (s.steps_waited > options_.max_steps)
      fail_program(s, failure_text(s, "it did not finish within its bound of " +
                                          std::to_string(options_.max_steps) +
                                          " steps (the engine's max_steps): a decoder that "
                                          "never chooses its end token, or an unbounded loop?"));
    else if (!s.resume_at)
      fail_program(s, failure_text(s,
                                   "it suspended without reading a value (a co_await of "
                                   "something other than Context::read, or one in a `while` "
                                   "condition, which g++ 12 miscompiles)"));
    else
      resume(s, s.resume_at);
    if (s.state == ProgramState::kRunning) live_[kept++] = example;
  }
  live_.resize(kept);
}

bool Engine::step() {
  const auto start = std::chrono::steady_clock::now();
  start_admitted();
  const bool pending = weaver_.num_values() > 0;
  if (!pending && live_.empty()) return false;
  if (pending) run_weave();
  resume_readers();
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

void Engine::run() {
  while (step()) {
  }
}

bool Engine::cancel(std::size_t example, const std::string& reason) {
  Slot& s = slot(example);
  if (s.state != ProgramState::kAdmitted && s.state != ProgramState::kRunning) return false;
  std::vector<std::uint32_t>& list = s.state == ProgramState::kAdmitted ? admitted_ : live_;
  list.erase(std::find(list.begin(), list.end(), std::uint32_t(example)));
  fail_program(s, failure_text(s, reason));
  return true;
}

// Context and Read ---------------------------------------------------------------------

const std::string& Context::name() const { return engine_->slot(example_).name; }

std::span<const Val> Context::call(OpId op, std::span<const Val> args) {
  return engine_->call(engine_->slot(example_), op, args);
}

Val Context::apply(OpId op, std::initializer_list<Val> args) {
  if (op < engine_->loom().num_operations() && engine_->loom().operation(op).outputs.size() != 1)
    fail("flow", "apply: operation '", engine_->loom().operation(op).name, "' has ",
         engine_->loom().operation(op).outputs.size(), " outputs; use call()");
  return call(op, args)[0];
}

TypeId Context::type_of(Val value) const { return engine_->type_of(value); }

Val Context::constant(TypeId type, std::span<const float> values) {
  engine_->count_call(engine_->slot(example_), "a constant");
  return engine_->add_woven(engine_->weaver_.constant(type, values));
}

Val Context::constant(TypeId type, std::span<const double> values) {
  engine_->count_call(engine_->slot(example_), "a constant");
  return engine_->add_woven(engine_->weaver_.constant(type, values));
}

Val Context::constant(TypeId type, std::span<const std::int32_t> values) {
  engine_->count_call(engine_->slot(example_), "a constant");
  return engine_->add_woven(engine_->weaver_.constant(type, values));
}

Val Context::constant(TypeId type, const Tensor& value) {
  engine_->count_call(engine_->slot(example_), "a constant");
  return engine_->add_woven(engine_->weaver_.constant(type, value));
}

Val Context::parameter(TypeId type, const Parameter& parameter) {
  engine_->count_call(engine_->slot(example_), "a parameter");
  return engine_->add_woven(engine_->weaver_.parameter(type, parameter));
}

bool Read::await_ready() const { return context_->engine_->computed(value_); }

void Read::await_suspend(std::coroutine_handle<> waiting) const {
  Engine& engine = *context_->engine_;
  engine.wait(engine.slot(context_->example_), waiting);
}

Tensor Read::await_resume() const { return context_->engine_->value(value_); }

}  // namespace weft::flow
