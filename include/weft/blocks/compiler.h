// The blocks compiler: turns a root block (Input -> tensors, tuples or sequences of tensors,
// and/or metrics) into a loom with ONE operation per Function-like block instance, then weaves
// batches of examples (on several threads when the batch is large: one Weaver each, merged in
// input order), runs them forward on a tape (backward is tape.backward on any loss), and hands
// back outputs per example in input order and metrics per name. eval() runs a block on one
// value interactively.
//
// Roots whose blocks read computed values (a Loop whose stop the model decides) cannot be woven
// before they run: needs_flow() is true, weave() only keeps the examples, and run() weaves each
// example as a flow::Engine program. The program weaves the example on a stack of its own (a
// fiber) until a Loop reads a value not computed yet, issues what it wove as calls of the
// engine's next step, waits for that step and resumes the weave where it stopped. So the first
// step is the static weave of every example up to its first read (encoders batched as today),
// each later step batches the examples' next iterations, and everything lies on one tape. Each
// example is woven once: host time linear in its calls and reads.
// Roots without such a block keep the static weave: nothing changes for them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/blocks/blocks.h"
#include "weft/core/export.h"
#include "weft/loom/executor.h"

WEFT_API_BEGIN
namespace weft::blocks {

// Weaving runs the blocks' C++ callables (InputTransform, OneOf keys) on several threads for
// large batches: they must be safe to call concurrently (pure functions are).
struct CompilerOptions {
  int max_depth = 0;  // 0: unlimited
  loom::Strategy strategy = loom::Strategy::kByDepth;
  // Steps of more calls than this run as several batched calls of at most this many rows
  // (loom::limit_step_rows), so a level's arrays stay in cache; 0: no limit.
  std::uint32_t max_step_rows = 0;
  int threads = 0;                        // weaving threads; 0: hardware concurrency
  std::size_t examples_per_thread = 256;  // below this a batch is woven on one thread
  // Where batches run: the loom executor's device. The weave's constants are copied there;
  // the parameters the blocks use must live there too (nn::ParameterStore's device), and the
  // outputs and metrics come back there.
  Device device = Device::kCpu;
};

namespace detail {
struct Compiled;
struct WovenRecords;
struct FlowOutcome;

// The examples of one weave, without copies: `pool` in order, or (by_id) pool[ids[0]],
// pool[ids[1]], ... (the ids checked in range by Compiler::weave).
struct ExampleList {
  std::span<const Input> pool;
  std::span<const std::size_t> ids;
  bool by_id = false;
  std::size_t size() const { return by_id ? ids.size() : pool.size(); }
  const Input& operator[](std::size_t i) const { return by_id ? pool[ids[i]] : pool[i]; }
  ExampleList slice(std::size_t begin, std::size_t count) const {
    return by_id ? ExampleList{pool, ids.subspan(begin, count), true}
                 : ExampleList{pool.subspan(begin, count), {}, false};
  }
};
}  // namespace detail

// A woven batch: the weave of every example plus where its outputs and metric rows are.
class WovenBatch {
 public:
  WovenBatch();
  ~WovenBatch();
  WovenBatch(WovenBatch&&) noexcept;
  WovenBatch& operator=(WovenBatch&&) noexcept;
  const loom::Weaver& weaver() const { return *weaver_; }
  std::size_t size() const { return examples_; }
  // The deepest loom level of the batch (what the original's max_depth reports).
  int depth() const { return weaver_->deepest(); }

 private:
  friend class Compiler;
  friend class BatchResult;
  std::unique_ptr<loom::Weaver> weaver_;
  std::unique_ptr<detail::WovenRecords> records_;
  // Made by weave() on the weaving thread, so a batch woven ahead is scheduled ahead too, and
  // planned: its constants and every gather's references packed for one upload (batch_plan.h).
  std::unique_ptr<loom::Schedule> schedule_;
  std::unique_ptr<loom::BatchPlan> plan_;
  std::size_t examples_ = 0;
  // A root that needs the flow engine: the examples, woven when the batch runs.
  std::vector<Input> flow_inputs_;
};

// The rows of one metric over a batch.
struct MetricValues {
  Var values;                          // [rows, ...]; undefined when there are no rows
  std::vector<std::int32_t> examples;  // the example each row came from
  std::vector<Input> labels;           // one per row for labelled metrics, else empty
  std::size_t rows() const { return examples.size(); }
};

// The outcome of running a batch: Vars on the run's tape.
class BatchResult {
 public:
  // The root's flattened tensor outputs, in pre-order of the output type. For tensors and
  // tuples, row i is example i; under a Sequence each element adds a row (output_examples
  // tells whose). Undefined when no example produced a row.
  std::size_t num_outputs() const { return outputs_.size(); }
  Var output(std::size_t k = 0) const;
  const std::vector<std::int32_t>& output_examples(std::size_t k = 0) const;
  // A metric by name (throws naming the known metrics when absent).
  MetricValues metric(const std::string& name) const;
  std::vector<std::string> metric_names() const;
  // Replace an output's or a metric's values with others of the same shape (an ensemble's
  // averaged logits, models/block_model.h): output(k) and metric(name) return them from then on.
  // Throws naming the output or metric when it does not exist or the shape differs.
  void replace_output(std::size_t k, Var values);
  void replace_metric(const std::string& name, Var values);
  // The static weave's run (throws for a batch that ran on the flow engine).
  const loom::LoomResult& loom_result() const;
  // On the flow engine: batched_calls, min_batched_calls (taken equal) and nodes, over steps.
  const loom::RunStats& stats() const;
  // On the flow engine: the loom calls the examples' weaves made, counted in their weavers (an
  // example is woven once, so this equals stats().nodes: host work linear in its calls). 0 for
  // a static weave.
  std::int64_t flow_woven_calls() const;

 private:
  friend class Compiler;
  std::shared_ptr<const WovenBatch> owned_;
  const WovenBatch* batch_ = nullptr;
  const detail::Compiled* compiled_ = nullptr;
  std::unique_ptr<loom::LoomResult> loom_;  // null when the batch ran on the flow engine
  std::shared_ptr<const detail::FlowOutcome> flow_;
  std::vector<Var> outputs_;
  std::vector<std::pair<std::string, Var>> replaced_metrics_;
};

class Compiler {
 public:
  // Infers the root's input type (Input when not fixed), validates every block (types known,
  // declarations resolved, compositions complete, metric types consistent) and registers the
  // loom types and operations. Throws weft::Error naming the block on any problem, or when
  // options.device is CUDA and this build or machine has none.
  explicit Compiler(Block root, CompilerOptions options = {});
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  const loom::Loom& loom() const;
  const Block& root() const { return root_; }
  const CompilerOptions& options() const { return options_; }
  // Where batches run (options().device): put the tensors a model feeds its loss there.
  Device device() const { return options_.device; }
  // The root's tensor outputs, flattened (what output(k) holds).
  const std::vector<Type>& output_types() const { return output_types_; }
  // The names of the metrics the root's blocks record (known before any batch runs).
  const std::vector<std::string>& metric_names() const;
  // True when a block reads computed values (a model-decided Loop): batches run on the flow
  // engine (see the top of this file). Bad user data then throws from run(), naming the example.
  bool needs_flow() const;

  // Weaves examples (in parallel when there are many); user data errors throw naming the
  // block, the value and the example's index.
  WovenBatch weave(std::span<const Input> examples) const;
  // Weaves pool[ids[0]], pool[ids[1]], ... as examples 0, 1, ... of one batch, reading them in
  // place (a model weaves a batch of its split by example ids). Throws naming an id out of range.
  WovenBatch weave(std::span<const Input> pool, std::span<const std::size_t> ids) const;
  // Any C++ type with nlohmann's to_json.
  template <typename T>
  WovenBatch weave_values(std::span<const T> values) const {
    std::vector<Input> inputs(values.begin(), values.end());
    return weave(inputs);
  }
  // Merges batches that this compiler wove separately (e.g. shards of a batch woven on the
  // user's own threads: weave() is const and may run concurrently) into one batch, in the
  // given order: example i of shard k becomes example (examples of shards 0..k-1) + i. Running
  // it gives the same outputs and metrics as weaving all the examples at once.
  WovenBatch merge(std::vector<WovenBatch> shards) const;
  // Runs a woven batch forward on `tape` (the batch must outlive the result).
  BatchResult run(const WovenBatch& batch, Tape& tape) const;
  // weave + run; the result keeps the batch.
  BatchResult forward(std::span<const Input> examples, Tape& tape) const;
  // weave(pool, ids) + run.
  BatchResult forward(std::span<const Input> pool, std::span<const std::size_t> ids,
                      Tape& tape) const;

 private:
  friend struct EvalAccess;
  WovenBatch weave_list(const detail::ExampleList& examples) const;
  WovenBatch weave_unscheduled(const detail::ExampleList& examples) const;
  // Fills batch.schedule_ (options().strategy, max_step_rows) and batch.plan_ (the outputs'
  // and metrics' gathers planned after the steps').
  void schedule(WovenBatch& batch) const;
  // for_eval: any output type is accepted (eval returns Input, Broadcast and Void values too).
  Compiler(Block root, CompilerOptions options, bool for_eval);
  void weave_range(const detail::ExampleList& examples, std::size_t first, loom::Weaver& weaver,
                   detail::WovenRecords& records) const;
  // run() for a root that needs the flow engine (flow_run.cpp).
  BatchResult run_flow(const WovenBatch& batch, Tape& tape) const;

  Block root_;
  CompilerOptions options_;
  std::unique_ptr<detail::Compiled> compiled_;
  std::vector<Type> output_types_;
};

// A value computed by eval: a tensor (per-example shape, no batch axis), a tuple or sequence
// of values, user data, or nothing.
struct EvalValue {
  Type::Kind kind = Type::Kind::kVoid;
  weft::Tensor tensor;
  Input input;
  std::vector<EvalValue> items;
  // The tensor's values (tensor values only).
  std::vector<float> floats() const { return tensor.to_float_vector(); }
  const EvalValue& operator[](std::size_t i) const { return items.at(i); }
  std::size_t size() const { return items.size(); }
};

// A value's terminals by its type, in pre-order (the original's type.flatten): tensors and
// Input values; a sequence gives its elements' terminals in turn, Void nothing. Throws when
// the value does not have the type's structure.
std::vector<EvalValue> flatten(const Type& type, const EvalValue& value);
// The inverse (the original's type.unflatten): a value of `type` from consecutive terminals.
// A type holding a Sequence needs `shaped_like`, a value of the type whose sequence lengths
// are used; a fixed-size type does not. Throws when the terminals are too few, too many, or
// not of the terminal types.
EvalValue unflatten(const Type& type, std::span<const EvalValue> terminals,
                    const EvalValue* shaped_like = nullptr);

// Runs `block` on one input (like the original's block.eval): compiles it as a root, weaves,
// runs forward without gradients. The block's input type becomes Input if it was unknown.
EvalValue eval(const Block& block, const Input& input = nullptr);
// The deepest loom level `block` reaches on `input` (the original's Block.max_depth).
int max_depth(const Block& block, const Input& input = nullptr);

}  // namespace weft::blocks
WEFT_API_END
