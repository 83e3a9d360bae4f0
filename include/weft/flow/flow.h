// Programs that decide as they go (DESIGN.md section 6): decoders, parsers and searches whose
// next operation depends on values they have just computed, batched like the loom's weaves.
//
// Design. Each example is a C++20 coroutine (a Program) holding a Context. Context::call
// weaves a loom operation call straight into the engine's current step weave (validated at
// once, so a bad call fails its own program only) and returns Vals at once: issuing never
// synchronises. `co_await ctx.read(v)` suspends the program only if v is not computed yet.
// When every live program is suspended or finished, Engine::step() runs the step weave (one
// schedule, one batched body call per operation and depth, on the SAME tape as everything
// else), records where each new value lives, and resumes every reader. Values computed by
// earlier steps, by a static weave (Engine::import) or fed as tensors enter a step's weave as
// imported values (loom::Weaver::imported): their rows are read where they lie, so the past
// is never re-woven and gradients flow back through every step into the static weave.
// Programs are admitted and retired at step boundaries (what iteration-level serving needs);
// a program that reads nothing runs to its end in one step, like a static weave. A step runs
// every pending call: all live programs are waiting then, so nothing runs before its time.
//
// Write a program as a coroutine function taking what it needs as parameters (by value, or by
// reference to what outlives the run), never as a capturing lambda coroutine: its frame would
// refer to the lambda object, gone when admit() returns. Await in a statement of its own:
// g++ 12 miscompiles a co_await in a `while` condition (the program suspends without reaching
// the read; the engine fails it, naming the example) and rejects a braced list in an
// expression that awaits (`co_await ctx.read(ctx.apply(op, {h}))`).
//
//   flow::Program decode(flow::Context& ctx, flow::Val state, std::vector<int>& out) {
//     for (int t = 0; t < 20; ++t) {
//       auto next = ctx.call(step_op, {state});   // issues; no synchronisation
//       state = next[0];
//       int token = argmax(co_await ctx.read(next[1]));  // waits for this step's batch
//       if (token == kEnd) co_return;
//       out.push_back(token);
//     }
//   }
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/core/export.h"
#include "weft/loom/executor.h"

WEFT_API_BEGIN
namespace weft::flow {

using loom::OpId;
using loom::TypeId;

// A value of an engine's batch (computed or pending): a handle, cheap to copy.
struct Val {
  static constexpr std::uint32_t kNone = UINT32_MAX;
  std::uint32_t id = kNone;
  bool defined() const { return id != kNone; }
  bool operator==(const Val& other) const = default;
};

// The return type of a per-example coroutine. The body starts at the engine's next step
// boundary, not when the coroutine function is called.
class Program {
 public:
  struct promise_type {
    Program get_return_object() {
      return Program(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
    std::exception_ptr error;
  };

  Program() = default;
  explicit Program(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  Program(Program&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Program& operator=(Program&& other) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() { reset(); }

  bool valid() const { return bool(handle_); }
  bool done() const { return handle_ && handle_.done(); }
  std::coroutine_handle<promise_type> handle() const { return handle_; }
  // Destroys the coroutine frame (its locals' destructors run).
  void reset();

 private:
  std::coroutine_handle<promise_type> handle_;
};

class Engine;
class Context;

// What `co_await ctx.read(v)` waits on: ready at once when v is already computed; otherwise
// the program suspends until the step that computes it. Resumes with v's row (per-example
// shape, on the host).
class Read {
 public:
  bool await_ready() const;
  void await_suspend(std::coroutine_handle<> waiting) const;
  Tensor await_resume() const;

 private:
  friend class Context;
  Read(Context& context, Val value) : context_(&context), value_(value) {}
  Context* context_;
  Val value_;
};

// One program's view of the engine: it issues calls and reads values. Lives while the
// program does; its address is stable.
class Context {
 public:
  std::size_t example() const { return example_; }
  const std::string& name() const;

  // Calls an operation; its outputs' Vals (the span is valid until the next call or co_await).
  std::span<const Val> call(OpId op, std::span<const Val> args);
  std::span<const Val> call(OpId op, std::initializer_list<Val> args) {
    return call(op, std::span<const Val>(args.begin(), args.size()));
  }
  // The one output of an operation with one output.
  Val apply(OpId op, std::initializer_list<Val> args);
  // Values of the next step's weave (depth 0): constants of the type's shape, and parameters.
  Val constant(TypeId type, std::span<const float> values);
  Val constant(TypeId type, std::span<const double> values);
  Val constant(TypeId type, std::span<const std::int32_t> values);
  // Any dtype: a tensor of the type's shape (copied into the weave).
  Val constant(TypeId type, const Tensor& value);
  Val parameter(TypeId type, const Parameter& parameter);
  // The awaitable of a value (computed or pending).
  Read read(Val value) { return Read(*this, value); }
  TypeId type_of(Val value) const;

 private:
  friend class Engine;
  friend class Read;
  Context(Engine& engine, std::size_t example) : engine_(&engine), example_(example) {}
  Engine* engine_;
  std::size_t example_;
};

struct EngineOptions {
  // A program that waits on more steps than this fails, naming its example: a decoder that
  // never chooses its end token cannot hold the batch forever.
  std::uint32_t max_steps = 10000;
  // A program that issues more calls than this fails (a loop that never reads anything).
  std::uint64_t max_calls = 10'000'000;
  loom::Strategy strategy = loom::Strategy::kByDepth;
  // Inference on a tape with gradients off: after each step, drop the values the step computed
  // but did not output (its argument gathers and its bodies' intermediates), so an engine that
  // steps for long holds the values its programs can still read, not everything it computed.
  // Leave off where code outside the engine keeps Vars of a step's intermediates.
  bool drop_step_intermediates = false;
};

enum class ProgramState { kAdmitted, kRunning, kDone, kFailed };

struct FlowStats {
  std::int64_t steps = 0;          // step weaves run
  std::int64_t calls = 0;          // operation calls issued, over all steps
  std::int64_t batched_calls = 0;  // the loom's batched body calls, over all steps
  std::int64_t imports = 0;        // earlier values read by later steps
  std::int64_t programs_done = 0;
  std::int64_t programs_failed = 0;
  std::vector<std::int64_t> calls_per_step;
  double seconds = 0;  // wall time inside step(): weaving, scheduling, kernels, the programs
  double mean_calls_per_step() const { return steps ? double(calls) / double(steps) : 0.0; }
};

// Runs a batch of programs on one tape. Not thread-safe; one engine per batch.
class Engine {
 public:
  Engine(const loom::Loom& loom, Tape& tape, EngineOptions options = {},
         Device device = Device::kCpu);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Values computed outside the engine on the same tape: each row of `rows` (a Var of shape
  // [n, ...type shape]), or values of a static weave's run (the encoder's outputs).
  std::vector<Val> import(Var rows, TypeId type);
  std::vector<Val> import(const loom::LoomResult& result, std::span<const loom::Value> values);
  // With drop_step_intermediates and gradients off: drops the values of the tape's nodes from
  // `first_node` on that are not values of this engine (what an encoder computed on the
  // engine's tape beside the outputs it imported). Steps do this themselves.
  void drop_intermediates(std::uint32_t first_node);
  Tape& tape() const { return *tape_; }

  // Admits a program, made by `make` with its context; it starts at the next step. Returns
  // its example index. A `make` that throws fails that example.
  std::size_t admit(const std::function<Program(Context&)>& make, std::string name = {});

  // One step: start the admitted programs, run the pending calls as one weave, resume every
  // reader, retire the finished. False when there was nothing left to do.
  bool step();
  // Steps until every admitted program has finished or failed.
  void run();
  // Retires a program that has not finished (a server's client went away): its coroutine
  // frame is destroyed now and it fails with `reason`. Between steps only; false when the
  // program had already finished or failed. The calls it issued before (already in the next
  // step's weave) still run once, unread; its values stay until the engine goes.
  bool cancel(std::size_t example, const std::string& reason);

  ProgramState state(std::size_t example) const;
  // Why an example failed ("" unless it did).
  const std::string& error(std::size_t example) const;
  std::size_t num_examples() const { return slots_.size(); }
  std::size_t num_live() const { return live_.size() + admitted_.size(); }

  bool computed(Val value) const;
  // A computed value's row on the host (a view when the value lives on the CPU).
  Tensor value(Val value) const;
  // Computed values of one type as one differentiable Var [n, ...shape] (a loss, outputs).
  Var gather(std::span<const Val> values) const;
  TypeId type_of(Val value) const;

  const FlowStats& stats() const { return stats_; }
  const loom::Loom& loom() const { return *loom_; }

 private:
  friend class Context;
  friend class Read;
  struct Slot;
  struct ValueSlot {
    TypeId type;
    std::uint32_t chunk;       // global chunk once computed, else Val::kNone
    std::uint32_t row;         // row in it
    std::uint64_t local_step;  // the step whose weave holds `local` (woven or imported)
    loom::Value local;
  };

  Slot& slot(std::size_t example) const;
  const ValueSlot& value_slot(Val value, const char* what) const;
  loom::Value local_value(Val value);
  Val add_woven(loom::Value local);
  std::span<const Val> call(Slot& caller, OpId op, std::span<const Val> args);
  void count_call(Slot& caller, const char* what);
  void wait(Slot& waiter, std::coroutine_handle<> handle);
  std::uint32_t add_chunk(Var chunk);
  void start_admitted();
  void run_weave();
  // drop_intermediates, keeping the values of chunks_[first_chunk...] (those added since the
  // nodes from first_node were recorded: a step need not look at older chunks).
  void drop_since(std::uint32_t first_node, std::size_t first_chunk);
  void resume_readers();
  void resume(Slot& s, std::coroutine_handle<> handle);
  void finish(Slot& s);
  void fail_program(Slot& s, const std::string& message);
  static std::string failure_text(const Slot& s, const std::string& why);

  const loom::Loom* loom_;
  Tape* tape_;
  EngineOptions options_;
  loom::Weaver weaver_;
  loom::Executor executor_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::uint32_t> admitted_;  // not started yet
  std::vector<std::uint32_t> live_;      // started, not finished
  std::vector<ValueSlot> values_;
  std::vector<Val> woven_;                        // values of the current step's weave
  std::vector<Var> chunks_;                       // where computed values live
  std::vector<std::uint64_t> chunk_import_step_;  // the step a chunk was last imported into
  std::vector<std::uint32_t> chunk_import_index_;
  std::vector<Var> import_chunks_;  // this step's imports
  std::vector<loom::ValueLocation> import_rows_;
  std::vector<loom::Value> local_args_;  // scratch for call()
  std::vector<Val> call_outputs_;
  std::vector<std::uint32_t> result_chunk_map_;
  std::uint64_t step_ = 0;
  FlowStats stats_;
};

}  // namespace weft::flow
WEFT_API_END
