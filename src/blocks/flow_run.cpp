// Running a root that reads computed values (a model-decided Loop) on the flow engine: each
// example is a flow::Program that weaves the example into a scratch weaver, issues the values
// it has not issued yet as engine calls, and when a Loop needs a value not computed yet, waits
// for the step that computes it and weaves the example again from its start (compiler.h says
// why; the replay matches the calls already issued by their position in the weave).
#include <cstring>
#include <optional>

#include "compiled.h"
#include "weft/core/error.h"
#include "weft/flow/flow.h"

namespace weft::blocks::detail {
namespace {

// Thrown through the blocks when a value is read before it is computed. Not a std::exception,
// so no block's error wrapper catches it.
struct AwaitValue {
  loom::Value value;
};

// One example: which engine value each scratch value became, and its last weave's state.
class ExampleReplay final : public WeaveState::Reader {
 public:
  ExampleReplay(flow::Engine& engine, const Input* input) : engine_(&engine), input_(input) {}

  Tensor read(loom::Value value) override {
    if (value < val_of_.size() && engine_->computed(val_of_[value]))
      return engine_->value(val_of_[value]);
    throw AwaitValue{value};
  }
  flow::Val val(loom::Value value) const { return val_of_.at(value); }
  const Input* input() const { return input_; }
  // Issues the weave's values from the first one not issued yet, in order.
  void issue(flow::Context& ctx, const loom::Weaver& weave);

  std::unique_ptr<WovenRecords> records;
  std::unique_ptr<WeaveState> state;  // the last weave's (it keeps the Inputs made while weaving)
  WeaveValue result;

 private:
  flow::Engine* engine_;
  const Input* input_;
  std::vector<flow::Val> val_of_;
  std::vector<flow::Val> args_;
};

void ExampleReplay::issue(flow::Context& ctx, const loom::Weaver& weave) {
  const loom::Loom& loom = weave.loom();
  while (val_of_.size() < weave.num_values()) {
    const auto v = loom::Value(val_of_.size());
    const loom::Weaver::ValueInfo& info = weave.info(v);
    switch (info.kind) {
      case loom::ValueKind::kConstant: {
        const loom::TypeShape& ts = loom.type(info.type);
        Tensor row = Tensor::empty(ts.shape, ts.dtype);
        const std::size_t bytes = row.nbytes();
        std::memcpy(row.raw_data(), weave.constant_bytes(info.type).data() + info.index * bytes,
                    bytes);
        val_of_.push_back(ctx.constant(info.type, row));
        break;
      }
      case loom::ValueKind::kParameter:
        val_of_.push_back(ctx.parameter(info.type, weave.parameters()[info.index]));
        break;
      case loom::ValueKind::kCallOutput: {
        args_.clear();
        for (loom::Value a : weave.call_args(info.index)) args_.push_back(val_of_[a]);
        for (flow::Val out : ctx.call(weave.calls()[info.index].op, args_)) val_of_.push_back(out);
        break;
      }
      default:
        fail("blocks", "a block wove a batch input or an imported value, which a root run on the ",
             "flow engine cannot replay");
    }
  }
}

// What the examples of one batch share: one weave at a time runs (the engine is one thread).
struct FlowBatch {
  const Compiled& compiled;
  const BlockImpl& root;
  std::size_t outputs;
  loom::Weaver scratch;
  FlowBatch(const Compiled& c, const Block& r, std::size_t n)
      : compiled(c), root(r.impl()), outputs(n), scratch(c.loom) {}
};

// Weaves the example once; the value it must wait for, or nothing when its weave is complete.
std::optional<loom::Value> weave_once(flow::Context& ctx, FlowBatch& batch, ExampleReplay& ex) {
  batch.scratch.clear();
  ex.records = std::make_unique<WovenRecords>();
  ex.records->outputs.resize(batch.outputs);
  ex.records->output_examples.resize(batch.outputs);
  ex.records->metrics.resize(batch.compiled.metric_names.size());
  ex.state = std::make_unique<WeaveState>(batch.compiled, batch.scratch, *ex.records);
  ex.state->set_example(std::int32_t(ctx.example()));
  ex.state->set_reader(&ex);
  const bool void_input = batch.root.in()->type().is_void();
  try {
    ex.result =
        batch.root.eval(*ex.state, void_input ? WeaveValue{} : WeaveValue::of_input(ex.input()));
  } catch (const AwaitValue& wait) {
    ex.issue(ctx, batch.scratch);
    return wait.value;
  }
  ex.issue(ctx, batch.scratch);
  return std::nullopt;
}

// An example's program: weave, wait for the value read, weave again, until the weave completes.
flow::Program replay_example(flow::Context& ctx, FlowBatch& batch, ExampleReplay& ex) {
  for (;;) {
    const std::optional<loom::Value> wait = weave_once(ctx, batch, ex);
    if (!wait) co_return;
    co_await ctx.read(ex.val(*wait));
  }
}

// Runs every example's program to its end; throws the first failure, naming the example.
std::vector<ExampleReplay> run_examples(flow::Engine& engine, FlowBatch& batch,
                                        std::span<const Input> inputs) {
  std::vector<ExampleReplay> examples;
  examples.reserve(inputs.size());
  for (const Input& input : inputs) {
    ExampleReplay& ex = examples.emplace_back(engine, &input);
    engine.admit([&](flow::Context& ctx) { return replay_example(ctx, batch, ex); },
                 "input " + describe_input(input));
  }
  engine.run();
  std::size_t failed = 0, first = 0;
  for (std::size_t i = inputs.size(); i-- > 0;)
    if (engine.state(i) == flow::ProgramState::kFailed) ++failed, first = i;
  if (failed)
    throw Error(
        engine.error(first) +
        (failed > 1 ? " (and " + std::to_string(failed - 1) + " more examples failed)" : ""));
  return examples;
}

flow::EngineOptions engine_options(const CompilerOptions& options) {
  flow::EngineOptions o;
  o.max_steps = UINT32_MAX - 1;  // the Loops' own bounds end every example
  o.strategy = options.strategy;
  return o;
}

Var gather_all(const flow::Engine& engine, const std::vector<flow::Val>& values) {
  return values.empty() ? Var() : engine.gather(values);
}

}  // namespace

EvalValue eval_on_flow(const Compiled& compiled, const Block& root, const Input& input) {
  Tape tape;
  tape.set_grad_enabled(false);
  flow::Engine engine(compiled.loom, tape, engine_options(CompilerOptions{}));
  FlowBatch batch(compiled, root, 0);
  std::vector<ExampleReplay> examples =
      run_examples(engine, batch, std::span<const Input>(&input, 1));
  const ExampleReplay& ex = examples[0];
  return to_eval_value(root.impl().out()->type(), ex.result,
                       [&](loom::Value v) { return engine.value(ex.val(v)); });
}

}  // namespace weft::blocks::detail

namespace weft::blocks {

BatchResult Compiler::run_flow(const WovenBatch& batch, Tape& tape) const {
  flow::Engine engine(compiled_->loom, tape, detail::engine_options(options_), options_.device);
  detail::FlowBatch flow_batch(*compiled_, root_, output_types_.size());
  std::vector<detail::ExampleReplay> examples =
      detail::run_examples(engine, flow_batch, batch.flow_inputs_);
  auto outcome = std::make_shared<detail::FlowOutcome>();
  const std::size_t n = output_types_.size(), m = compiled_->metric_names.size();
  std::vector<std::vector<flow::Val>> outputs(n), metrics(m);
  outcome->output_examples.resize(n);
  outcome->metrics.resize(m);
  for (std::int32_t e = 0; e < std::int32_t(examples.size()); ++e) {
    detail::ExampleReplay& ex = examples[std::size_t(e)];
    std::size_t position = 0;
    detail::record_outputs(root_.impl().out()->type(), ex.result, position, e, *ex.records);
    for (std::size_t k = 0; k < n; ++k) {
      for (loom::Value v : ex.records->outputs[k]) outputs[k].push_back(ex.val(v));
      for (std::int32_t row : ex.records->output_examples[k])
        outcome->output_examples[k].push_back(row);
    }
    for (std::size_t k = 0; k < m; ++k) {
      const detail::WovenRecords::Metric& rows = ex.records->metrics[k];
      for (loom::Value v : rows.values) metrics[k].push_back(ex.val(v));
      for (std::int32_t row : rows.examples) outcome->metrics[k].examples.push_back(row);
      for (const Input& label : rows.labels) outcome->metrics[k].labels.push_back(label);
    }
  }
  BatchResult result;
  result.batch_ = &batch;
  result.compiled_ = compiled_.get();
  for (const auto& values : outputs) result.outputs_.push_back(detail::gather_all(engine, values));
  for (std::size_t k = 0; k < m; ++k)
    outcome->metrics[k].values = detail::gather_all(engine, metrics[k]);
  const flow::FlowStats& stats = engine.stats();
  outcome->stats.batched_calls = outcome->stats.min_batched_calls = stats.batched_calls;
  outcome->stats.nodes = stats.calls;
  result.flow_ = std::move(outcome);
  return result;
}

}  // namespace weft::blocks
