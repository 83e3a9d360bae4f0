// What the compiler shares with its flow path (flow_run.cpp), not installed: the compiled loom
// and its ids, and the per-batch records of where outputs and metric rows are.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/blocks/compiler.h"

namespace weft::blocks::detail {

struct Compiled {
  loom::Loom loom;
  std::unordered_map<const void*, loom::TypeId> type_ids;  // by Type identity
  std::unordered_map<const BlockImpl*, loom::OpId> operations;
  std::unordered_map<const BlockImpl*, std::uint32_t> metric_of;
  std::vector<std::string> metric_names;
  std::vector<Type> metric_types;
  std::vector<bool> metric_labelled;
  // Every block reached from the root (a ForwardDeclaration's target included, which its
  // references hold only weakly): a compiled model keeps its blocks alive.
  std::vector<Block> blocks;
  // A block reads computed values (a model-decided Loop): batches run on the flow engine.
  bool reads_values = false;
  explicit Compiled(int max_depth) : loom(max_depth) {}
};

struct WovenRecords {
  struct Metric {
    std::vector<loom::Value> values;
    std::vector<std::int32_t> examples;
    std::vector<Input> labels;
  };
  std::vector<std::vector<loom::Value>> outputs;  // per flattened output position
  std::vector<std::vector<std::int32_t>> output_examples;
  std::vector<Metric> metrics;

  // Appends another thread's records whose values were renumbered by `offset` (and examples
  // by `first_example`, for a batch woven on its own).
  void append(WovenRecords&& other, loom::Value offset, std::int32_t first_example = 0) {
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      for (loom::Value v : other.outputs[k]) outputs[k].push_back(v + offset);
      for (std::int32_t e : other.output_examples[k])
        output_examples[k].push_back(e + first_example);
    }
    for (std::size_t m = 0; m < metrics.size(); ++m) {
      Metric& mine = metrics[m];
      Metric& theirs = other.metrics[m];
      for (loom::Value v : theirs.values) mine.values.push_back(v + offset);
      for (std::int32_t e : theirs.examples) mine.examples.push_back(e + first_example);
      for (Input& label : theirs.labels) mine.labels.push_back(std::move(label));
    }
  }
};

// The outcome of a batch run on the flow engine (flow_run.cpp): what BatchResult reads in place
// of a LoomResult and the woven records.
struct FlowOutcome {
  std::vector<std::vector<std::int32_t>> output_examples;
  std::vector<MetricValues> metrics;  // by metric index
  loom::RunStats stats;
  // The loom calls the examples' weaves made (each example is woven once: equal to stats.nodes).
  std::int64_t woven_calls = 0;
};

// Appends the example's output values to their positions (sequences add rows).
void record_outputs(const Type& type, const WeaveValue& value, std::size_t& position,
                    std::int32_t example, WovenRecords& records);

// eval() of a root that reads computed values: the one example run as a flow program, without
// gradients.
EvalValue eval_on_flow(const Compiled& compiled, const Block& root, const Input& input);
// A woven value as an EvalValue, its tensors read by `tensor_of`.
EvalValue to_eval_value(const Type& type, const WeaveValue& value,
                        const std::function<Tensor(loom::Value)>& tensor_of);

}  // namespace weft::blocks::detail
