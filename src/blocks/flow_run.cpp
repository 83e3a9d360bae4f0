// Running a root that reads computed values (a model-decided Loop) on the flow engine: each
// example is a flow::Program that weaves the example into a weaver of its own on a Fiber. When a
// Loop reads a value not computed yet, the fiber suspends where it is (every block's frame kept),
// the program issues the values woven since its last read as engine calls and awaits the read
// value; the next step resumes the fiber there. So each example is woven once, in the order
// its Loops decide, and the host work is linear in its calls and reads.
#include <cstring>

#include "compiled.h"
#include "fiber.h"
#include "weft/core/error.h"
#include "weft/flow/flow.h"

namespace weft::blocks::detail {
namespace {

struct FlowBatch;

// One example: its weave (kept while it runs), which engine value each woven value became, and
// the value its weave waits for.
class ExampleRun final : public WeaveState::Reader {
 public:
  ExampleRun(flow::Engine& engine, const FlowBatch& batch, const Input* input,
             std::int32_t example);

  // Called by a Loop inside the fiber: the row, once the engine has computed it.
  Tensor read(loom::Value value) override;
  flow::Val val(loom::Value value) const { return val_of_.at(value); }
  // Weaves on until the example reads a value not computed yet; true once its weave is complete.
  bool weave_on() { return fiber_.resume(); }
  loom::Value awaited() const { return awaited_; }
  // Issues the weave's values from the first one not issued yet, in order.
  void issue(flow::Context& ctx);
  std::int64_t woven_calls() const { return std::int64_t(weaver_.num_calls()); }

  WovenRecords records;
  WeaveValue result;

 private:
  void weave(const FlowBatch& batch);

  flow::Engine* engine_;
  const Input* input_;
  loom::Weaver weaver_;
  WeaveState state_;
  loom::Value awaited_ = 0;
  std::vector<flow::Val> val_of_;
  std::vector<flow::Val> args_;
  Fiber fiber_;  // last: destroyed (its frames unwound) before the weave state they refer to
};

Tensor ExampleRun::read(loom::Value value) {
  if (value >= val_of_.size() || !engine_->computed(val_of_[value])) {
    awaited_ = value;
    fiber_.suspend();  // the program issues what was woven and awaits the value
  }
  return engine_->value(val_of_[value]);
}

void ExampleRun::issue(flow::Context& ctx) {
  const loom::Weaver& weave = weaver_;
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

// What the examples of one batch share.
struct FlowBatch {
  const Compiled& compiled;
  const BlockImpl& root;
  std::size_t outputs;
  FlowBatch(const Compiled& c, const Block& r, std::size_t n)
      : compiled(c), root(r.impl()), outputs(n) {}
};

ExampleRun::ExampleRun(flow::Engine& engine, const FlowBatch& batch, const Input* input,
                       std::int32_t example)
    : engine_(&engine),
      input_(input),
      weaver_(batch.compiled.loom),
      state_(batch.compiled, weaver_, records),
      fiber_([this, &batch] { weave(batch); }) {
  state_.set_example(example);
}

// The fiber's body: the example's whole weave, suspended at each read of a pending value.
void ExampleRun::weave(const FlowBatch& batch) {
  records.outputs.resize(batch.outputs);
  records.output_examples.resize(batch.outputs);
  records.metrics.resize(batch.compiled.metric_names.size());
  state_.set_reader(this);
  const bool void_input = batch.root.in()->type().is_void();
  result = batch.root.eval(state_, void_input ? WeaveValue{} : WeaveValue::of_input(input_));
}

// An example's program: weave until a read waits, issue what was woven, await the value, resume.
flow::Program run_example(flow::Context& ctx, ExampleRun& ex) {
  while (!ex.weave_on()) {
    ex.issue(ctx);
    co_await ctx.read(ex.val(ex.awaited()));
  }
  ex.issue(ctx);
}

// Runs every example's program to its end; throws the first failure, naming the example.
// The runs are held by pointer: a fiber's body refers to its run, which must not move.
std::vector<std::unique_ptr<ExampleRun>> run_examples(flow::Engine& engine, const FlowBatch& batch,
                                                      std::span<const Input> inputs) {
  std::vector<std::unique_ptr<ExampleRun>> examples;
  examples.reserve(inputs.size());
  for (const Input& input : inputs) {
    ExampleRun& ex = *examples.emplace_back(
        std::make_unique<ExampleRun>(engine, batch, &input, std::int32_t(examples.size())));
    engine.admit([&ex](flow::Context& ctx) { return run_example(ctx, ex); },
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
  const auto examples = run_examples(engine, batch, std::span<const Input>(&input, 1));
  const ExampleRun& ex = *examples[0];
  return to_eval_value(root.impl().out()->type(), ex.result,
                       [&](loom::Value v) { return engine.value(ex.val(v)); });
}

}  // namespace weft::blocks::detail

namespace weft::blocks {

BatchResult Compiler::run_flow(const WovenBatch& batch, Tape& tape) const {
  flow::Engine engine(compiled_->loom, tape, detail::engine_options(options_), options_.device);
  detail::FlowBatch flow_batch(*compiled_, root_, output_types_.size());
  const auto examples = detail::run_examples(engine, flow_batch, batch.flow_inputs_);
  auto outcome = std::make_shared<detail::FlowOutcome>();
  const std::size_t n = output_types_.size(), m = compiled_->metric_names.size();
  std::vector<std::vector<flow::Val>> outputs(n), metrics(m);
  outcome->output_examples.resize(n);
  outcome->metrics.resize(m);
  for (std::int32_t e = 0; e < std::int32_t(examples.size()); ++e) {
    detail::ExampleRun& ex = *examples[std::size_t(e)];
    outcome->woven_calls += ex.woven_calls();
    std::size_t position = 0;
    detail::record_outputs(root_.impl().out()->type(), ex.result, position, e, ex.records);
    for (std::size_t k = 0; k < n; ++k) {
      for (loom::Value v : ex.records.outputs[k]) outputs[k].push_back(ex.val(v));
      for (std::int32_t row : ex.records.output_examples[k])
        outcome->output_examples[k].push_back(row);
    }
    for (std::size_t k = 0; k < m; ++k) {
      const detail::WovenRecords::Metric& rows = ex.records.metrics[k];
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
