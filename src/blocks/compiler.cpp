// Compiling a root block into a loom (one operation per Function-like block), weaving batches
// (threads merged with Weaver::append in input order), running them, and eval().
#include "weft/blocks/compiler.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "compiled.h"
#include "internal.h"
#include "weft/backend/cuda.h"
#include "weft/loom/batch_plan.h"

namespace weft::blocks {

// ---- WeaveState ---------------------------------------------------------------------------

struct WeaveState::Caches {
  struct KeyHash {
    std::size_t operator()(const std::pair<const void*, std::int64_t>& k) const {
      return std::hash<const void*>()(k.first) ^ (std::hash<std::int64_t>()(k.second) * 31);
    }
  };
  std::unordered_map<std::pair<const void*, std::int64_t>, loom::Value, KeyHash> memo;
  std::deque<Input> kept;
  std::unordered_map<std::string, WeaveList> collected;
};

void WeaveState::set_example(std::int32_t example) {
  example_ = example;
  for (auto& [name, values] : caches_->collected) values.clear();
}

WeaveList& WeaveState::collected(const std::string& name) { return caches_->collected[name]; }

WeaveState::WeaveState(const detail::Compiled& compiled, loom::Weaver& weaver,
                       detail::WovenRecords& records)
    : compiled_(&compiled), weaver_(&weaver), records_(&records), caches_(new Caches) {}

WeaveState::~WeaveState() = default;

loom::TypeId WeaveState::type_id(const Type& type) const {
  auto it = compiled_->type_ids.find(type.identity());
  if (it != compiled_->type_ids.end()) return it->second;
  return compiled_->loom.type_id(type.type_shape());
}

loom::OpId WeaveState::operation_of(const detail::BlockImpl* block) const {
  auto it = compiled_->operations.find(block);
  if (it == compiled_->operations.end())
    fail("blocks", block->describe(), " was not compiled into this loom");
  return it->second;
}

loom::Value WeaveState::memoized(const detail::BlockImpl* block, std::int64_t key,
                                 const std::function<loom::Value()>& make) {
  auto [it, inserted] = caches_->memo.try_emplace({block, key}, 0);
  if (inserted) {
    try {
      it->second = make();
    } catch (...) {
      caches_->memo.erase(it);
      throw;
    }
  }
  return it->second;
}

const Input* WeaveState::keep(Input value) {
  caches_->kept.push_back(std::move(value));
  return &caches_->kept.back();
}

void WeaveState::record_metric(const detail::BlockImpl* metric, loom::Value value,
                               const Input* label) {
  auto& m = records_->metrics[compiled_->metric_of.at(metric)];
  m.values.push_back(value);
  m.examples.push_back(example_);
  if (label) m.labels.push_back(*label);
}

// ---- Compiling ----------------------------------------------------------------------------

namespace {

void check_output_type(const Type& type) {
  if (type.kind() == Type::Kind::kBroadcast || type.is_input())
    fail("blocks", "the root block's output cannot contain ", type.to_string(),
         " (only tensors, tuples and sequences of them)");
  if (type.is_tuple())
    for (const Type& item : type.items()) check_output_type(item);
  if (type.kind() == Type::Kind::kSequence) check_output_type(type.element());
}

void register_types(detail::Compiled& c, const Type& type) {
  for (const Type& t : type.terminals())
    if (t.is_tensor()) c.type_ids.emplace(t.identity(), c.loom.add_type(t.type_shape()));
}

void register_metric(detail::Compiled& c, const detail::BlockImpl& block) {
  const std::string& name = *block.metric_name();
  const Type& in = block.in()->type();
  const Type value = in.is_tensor() ? in : in.items()[0];
  const bool labelled = !in.is_tensor();
  for (std::uint32_t m = 0; m < c.metric_names.size(); ++m) {
    if (c.metric_names[m] != name) continue;
    if (c.metric_types[m] != value || c.metric_labelled[m] != labelled)
      fail("blocks", "Metric ", name, " has incompatible types: it is used with ",
           c.metric_types[m].to_string(), c.metric_labelled[m] ? " (labelled)" : "", " and ",
           value.to_string(), labelled ? " (labelled)" : "");
    c.metric_of[&block] = m;
    return;
  }
  c.metric_of[&block] = std::uint32_t(c.metric_names.size());
  c.metric_names.push_back(name);
  c.metric_types.push_back(value);
  c.metric_labelled.push_back(labelled);
}

// Post-order walk over every block reachable from the root (references reach their target).
void compile_blocks(detail::Compiled& c, const Block& root) {
  std::unordered_set<const detail::BlockImpl*> seen;
  std::unordered_set<std::string> op_names;
  std::unordered_map<std::string, Type> collected;
  std::vector<std::pair<Block, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [block, expanded] = stack.back();
    stack.pop_back();
    const detail::BlockImpl& impl = block.impl();
    if (!expanded) {
      if (!seen.insert(&impl).second) continue;
      c.blocks.push_back(block);
      stack.push_back({block, true});
      for (const Block& child : impl.children()) stack.push_back({child, false});
      continue;
    }
    impl.validate();
    if (impl.in()->known()) register_types(c, impl.in()->type());
    if (impl.out()->known()) register_types(c, impl.out()->type());
    if (auto spec = impl.operation()) {
      std::string name = spec->name;
      for (int k = 2; !op_names.insert(name).second; ++k)
        name = spec->name + "_" + std::to_string(k);
      c.operations[&impl] = c.loom.add_operation(name, spec->inputs, spec->outputs,
                                                 std::move(spec->body), spec->options);
    }
    if (impl.metric_name()) register_metric(c, impl);
    if (impl.reads_values()) c.reads_values = true;
    if (const auto* collect = impl.collect_name()) {
      const Type& element =
          impl.kind() == "Collect" ? impl.in()->type() : impl.out()->type().element();
      auto [it, inserted] = collected.emplace(*collect, element);
      if (!inserted && it->second != element)
        fail("blocks", "collection '", *collect,
             "' is used with two types: ", it->second.to_string(), " and ", element.to_string(),
             " (", impl.describe(), ")");
    }
  }
}

}  // namespace

// Appends the example's output values to their positions (sequences add rows).
void detail::record_outputs(const Type& type, const WeaveValue& value, std::size_t& position,
                            std::int32_t example, detail::WovenRecords& records) {
  switch (type.kind()) {
    case Type::Kind::kTensor:
      records.outputs[position].push_back(value.tensor);
      records.output_examples[position].push_back(example);
      ++position;
      return;
    case Type::Kind::kTuple:
      for (std::size_t i = 0; i < type.items().size(); ++i)
        record_outputs(type.items()[i], value.items[i], position, example, records);
      return;
    case Type::Kind::kSequence: {
      const std::size_t first = position;
      for (const WeaveValue& element : value.items) {
        position = first;
        record_outputs(type.element(), element, position, example, records);
      }
      position = first + type.element().terminals().size();
      return;
    }
    default:
      return;
  }
}

Compiler::Compiler(Block root, CompilerOptions options)
    : Compiler(std::move(root), options, false) {}

Compiler::Compiler(Block root, CompilerOptions options, bool for_eval)
    : root_(std::move(root)),
      options_(options),
      compiled_(std::make_unique<detail::Compiled>(options.max_depth)) {
  if (options_.device != Device::kCpu && !cuda_available())
    fail("blocks", "the compiler's device is ", device_name(options_.device),
         " but CUDA cannot be used: ", cuda_unavailable_reason());
  const detail::BlockImpl& impl = root_.impl();
  if (!impl.in()->known()) impl.in()->set(Type::input());
  const Type& in = impl.in()->type();
  if (!in.is_input() && !in.is_void())
    fail("blocks", "the root block ", impl.describe(), " must take Input or Void, not ",
         in.to_string());
  compile_blocks(*compiled_, root_);
  const Type& out = impl.out()->type();
  if (for_eval) return;
  check_output_type(out);
  output_types_ = out.terminals();
  if (output_types_.empty() && compiled_->metric_names.empty())
    fail("blocks", "the root block ", impl.describe(), " has no outputs (", out.to_string(),
         ") and no metrics");
}

Compiler::~Compiler() = default;

const loom::Loom& Compiler::loom() const { return compiled_->loom; }

void Compiler::weave_range(const detail::ExampleList& examples, std::size_t first,
                           loom::Weaver& weaver, detail::WovenRecords& records) const {
  records.outputs.resize(output_types_.size());
  records.output_examples.resize(output_types_.size());
  records.metrics.resize(compiled_->metric_names.size());
  WeaveState state(*compiled_, weaver, records);
  const detail::BlockImpl& root = root_.impl();
  const Type& out = root.out()->type();
  const bool void_input = root.in()->type().is_void();
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const auto example = std::int32_t(first + i);
    state.set_example(example);
    WeaveValue value;
    try {
      value = root.eval(state, void_input ? WeaveValue{} : WeaveValue::of_input(&examples[i]));
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (in example " + std::to_string(example) + ")");
    }
    std::size_t position = 0;
    record_outputs(out, value, position, example, records);
  }
}

WovenBatch::WovenBatch() = default;
WovenBatch::~WovenBatch() = default;
WovenBatch::WovenBatch(WovenBatch&&) noexcept = default;
WovenBatch& WovenBatch::operator=(WovenBatch&&) noexcept = default;

bool Compiler::needs_flow() const { return compiled_->reads_values; }

WovenBatch Compiler::weave(std::span<const Input> examples) const {
  return weave_list(detail::ExampleList{examples, {}, false});
}

WovenBatch Compiler::weave(std::span<const Input> pool, std::span<const std::size_t> ids) const {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= pool.size())
      fail("blocks", "example id ", ids[i], " (position ", i,
           " of the batch) is out of range: ", "there are ", pool.size(), " examples");
  }
  return weave_list(detail::ExampleList{pool, ids, true});
}

WovenBatch Compiler::weave_list(const detail::ExampleList& examples) const {
  if (needs_flow()) {  // woven as it runs (run_flow)
    WovenBatch batch;
    batch.examples_ = examples.size();
    batch.weaver_ = std::make_unique<loom::Weaver>(compiled_->loom);
    batch.flow_inputs_.reserve(examples.size());
    for (std::size_t i = 0; i < examples.size(); ++i) batch.flow_inputs_.push_back(examples[i]);
    return batch;
  }
  WovenBatch batch = weave_unscheduled(examples);
  schedule(batch);
  return batch;
}

void Compiler::schedule(WovenBatch& batch) const {
  batch.schedule_ =
      std::make_unique<loom::Schedule>(loom::make_schedule(*batch.weaver_, options_.strategy));
  loom::limit_step_rows(*batch.schedule_, options_.max_step_rows);
  // Result list k: output k, then metric m as list outputs.size() + m (BatchResult reads them).
  std::vector<std::vector<loom::Value>> lists = batch.records_->outputs;
  for (const auto& metric : batch.records_->metrics) lists.push_back(metric.values);
  batch.plan_ = std::make_unique<loom::BatchPlan>(
      loom::make_batch_plan(*batch.weaver_, *batch.schedule_, 0, {}, lists));
}

WovenBatch Compiler::weave_unscheduled(const detail::ExampleList& examples) const {
  WovenBatch batch;
  batch.examples_ = examples.size();
  const std::size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads = std::max<std::size_t>(
      1, std::min<std::size_t>(
             options_.threads > 0 ? std::size_t(options_.threads) : hardware,
             examples.size() / std::max<std::size_t>(1, options_.examples_per_thread)));
  if (threads == 1) {
    batch.weaver_ = std::make_unique<loom::Weaver>(compiled_->loom);
    batch.records_ = std::make_unique<detail::WovenRecords>();
    weave_range(examples, 0, *batch.weaver_, *batch.records_);
    return batch;
  }
  std::vector<std::unique_ptr<loom::Weaver>> weavers(threads);
  std::vector<detail::WovenRecords> records(threads);
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  const std::size_t per = (examples.size() + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    weavers[t] = std::make_unique<loom::Weaver>(compiled_->loom);
    const std::size_t begin = std::min(examples.size(), t * per);
    const std::size_t end = std::min(examples.size(), begin + per);
    workers.emplace_back([&, t, begin, end] {
      try {
        weave_range(examples.slice(begin, end - begin), begin, *weavers[t], records[t]);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  batch.weaver_ = std::move(weavers[0]);
  batch.records_ = std::make_unique<detail::WovenRecords>(std::move(records[0]));
  for (std::size_t t = 1; t < threads; ++t) {
    const loom::Value offset = batch.weaver_->append(*weavers[t]);
    batch.records_->append(std::move(records[t]), offset);
  }
  return batch;
}

WovenBatch Compiler::merge(std::vector<WovenBatch> shards) const {
  if (shards.empty()) fail("blocks", "merge needs at least one woven batch");
  for (std::size_t k = 0; k < shards.size(); ++k)
    if (!shards[k].weaver_ || &shards[k].weaver().loom() != &compiled_->loom)
      fail("blocks", "merge: batch ", k, " of ", shards.size(), " was not woven by this compiler");
  WovenBatch merged = std::move(shards[0]);
  for (std::size_t k = 1; k < shards.size(); ++k) {
    if (needs_flow()) {
      for (Input& input : shards[k].flow_inputs_) merged.flow_inputs_.push_back(std::move(input));
      merged.examples_ += shards[k].examples_;
      continue;
    }
    const loom::Value offset = merged.weaver_->append(*shards[k].weaver_);
    merged.records_->append(std::move(*shards[k].records_), offset, std::int32_t(merged.examples_));
    merged.examples_ += shards[k].examples_;
  }
  if (shards.size() > 1 && !needs_flow()) schedule(merged);
  return merged;
}

BatchResult Compiler::run(const WovenBatch& batch, Tape& tape) const {
  if (&batch.weaver().loom() != &compiled_->loom)
    fail("blocks", "the batch was woven by another compiler");
  if (needs_flow()) return run_flow(batch, tape);
  BatchResult result;
  result.batch_ = &batch;
  result.compiled_ = compiled_.get();
  loom::Executor executor(compiled_->loom, tape, options_.device);
  if (!batch.schedule_ || !batch.plan_) fail("blocks", "the batch was moved from or never woven");
  result.loom_ = std::make_unique<loom::LoomResult>(
      executor.run(batch.weaver(), *batch.schedule_, batch.plan_.get()));
  for (std::size_t k = 0; k < batch.records_->outputs.size(); ++k)
    result.outputs_.push_back(result.loom_->planned_gather(k));
  return result;
}

BatchResult Compiler::forward(std::span<const Input> examples, Tape& tape) const {
  auto batch = std::make_shared<WovenBatch>(weave(examples));
  BatchResult result = run(*batch, tape);
  result.owned_ = std::move(batch);
  return result;
}

BatchResult Compiler::forward(std::span<const Input> pool, std::span<const std::size_t> ids,
                              Tape& tape) const {
  auto batch = std::make_shared<WovenBatch>(weave(pool, ids));
  BatchResult result = run(*batch, tape);
  result.owned_ = std::move(batch);
  return result;
}

Var BatchResult::output(std::size_t k) const {
  if (k >= outputs_.size())
    fail("blocks", "output ", k, " does not exist (the root has ", outputs_.size(), " outputs)");
  return outputs_[k];
}

const std::vector<std::int32_t>& BatchResult::output_examples(std::size_t k) const {
  output(k);
  return flow_ ? flow_->output_examples[k] : batch_->records_->output_examples[k];
}

const loom::LoomResult& BatchResult::loom_result() const {
  if (!loom_)
    fail("blocks", "this batch ran on the flow engine (its root reads computed values): it has ",
         "no single loom run");
  return *loom_;
}

const loom::RunStats& BatchResult::stats() const { return flow_ ? flow_->stats : loom_->stats(); }
std::int64_t BatchResult::flow_woven_calls() const { return flow_ ? flow_->woven_calls : 0; }

std::vector<std::string> BatchResult::metric_names() const { return compiled_->metric_names; }
const std::vector<std::string>& Compiler::metric_names() const { return compiled_->metric_names; }

MetricValues BatchResult::metric(const std::string& name) const {
  for (std::size_t m = 0; m < compiled_->metric_names.size(); ++m) {
    if (compiled_->metric_names[m] != name) continue;
    MetricValues out;
    if (flow_) {
      out = flow_->metrics[m];
    } else {
      const auto& rows = batch_->records_->metrics[m];
      if (!rows.values.empty())
        out.values = loom_->planned_gather(batch_->records_->outputs.size() + m);
      out.examples = rows.examples;
      out.labels = rows.labels;
    }
    const auto replaced = std::find_if(replaced_metrics_.begin(), replaced_metrics_.end(),
                                       [&](const auto& r) { return r.first == name; });
    if (replaced != replaced_metrics_.end()) out.values = replaced->second;
    return out;
  }
  std::string known;
  for (const auto& n : compiled_->metric_names) known += (known.empty() ? "'" : ", '") + n + "'";
  fail("blocks", "no metric named '", name, "' (metrics: ", known.empty() ? "none" : known, ")");
}

namespace {

void check_same_shape(const Var& old_values, const Var& new_values, std::string_view what) {
  const Shape before = old_values.defined() ? old_values.value().shape() : Shape{};
  const Shape after = new_values.defined() ? new_values.value().shape() : Shape{};
  if (before != after)
    fail("blocks", "cannot replace ", what, ": its values have shape ", before,
         " but the new ones ", after);
}

}  // namespace

void BatchResult::replace_output(std::size_t k, Var values) {
  check_same_shape(output(k), values, "output " + std::to_string(k));
  outputs_[k] = std::move(values);
}

void BatchResult::replace_metric(const std::string& name, Var values) {
  check_same_shape(metric(name).values, values, "metric '" + name + "'");
  for (auto& [n, v] : replaced_metrics_)
    if (n == name) {
      v = std::move(values);
      return;
    }
  replaced_metrics_.emplace_back(name, std::move(values));
}

// ---- eval ---------------------------------------------------------------------------------

struct EvalAccess {
  static EvalValue eval(const Block& block, const Input& input, int* depth);
};

EvalValue detail::to_eval_value(const Type& type, const WeaveValue& value,
                                const std::function<Tensor(loom::Value)>& tensor_of) {
  EvalValue out;
  out.kind = value.kind;
  switch (value.kind) {
    case Type::Kind::kTensor:
      out.tensor = tensor_of(value.tensor).reshaped(type.shape()).clone();
      break;
    case Type::Kind::kInput:
      out.input = *value.input;
      break;
    case Type::Kind::kTuple:
      for (std::size_t i = 0; i < value.items.size(); ++i)
        out.items.push_back(to_eval_value(type.items()[i], value.items[i], tensor_of));
      break;
    case Type::Kind::kSequence:
    case Type::Kind::kBroadcast:
      for (const WeaveValue& item : value.items)
        out.items.push_back(to_eval_value(type.element(), item, tensor_of));
      break;
    case Type::Kind::kVoid:
      break;
  }
  return out;
}

EvalValue EvalAccess::eval(const Block& block, const Input& input, int* depth) {
  const Compiler compiler(block, CompilerOptions{}, true);
  const auto& c = *compiler.compiled_;
  if (c.reads_values) {
    if (depth)
      fail("blocks", "max_depth: ", block.describe(), " reads computed values (a Loop), so its ",
           "depth is known only step by step");
    return detail::eval_on_flow(c, compiler.root_, input);
  }
  loom::Weaver weaver(c.loom);
  detail::WovenRecords records;
  records.metrics.resize(c.metric_names.size());
  WeaveState state(c, weaver, records);
  const detail::BlockImpl& root = compiler.root_.impl();
  WeaveValue value =
      root.eval(state, root.in()->type().is_void() ? WeaveValue{} : WeaveValue::of_input(&input));
  if (depth) *depth = weaver.deepest();
  Tape tape;
  tape.set_grad_enabled(false);
  loom::Executor executor(c.loom, tape);
  loom::LoomResult result = executor.run(weaver, compiler.options_.strategy);
  return detail::to_eval_value(root.out()->type(), value, [&](loom::Value v) {
    return result.gather(std::span<const loom::Value>(&v, 1)).value();
  });
}

namespace {
// eval accepts any output (Input, Broadcast too): compile with a relaxed root check.
EvalValue eval_block(const Block& block, const Input& input, int* depth) {
  const detail::BlockImpl& impl = block.impl();
  if (!impl.in()->known()) impl.in()->set(Type::input());
  return EvalAccess::eval(block, input, depth);
}
}  // namespace

EvalValue eval(const Block& block, const Input& input) { return eval_block(block, input, nullptr); }

int max_depth(const Block& block, const Input& input) {
  int depth = 0;
  eval_block(block, input, &depth);
  return depth;
}

}  // namespace weft::blocks
