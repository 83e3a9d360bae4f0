// What every model written with blocks does with a batch: weave its examples (ahead of time on
// the trainer's background thread, or on the spot), then run the weave on the model's tape in
// training mode (gradients on, dropout from the trainer's Rng) or inference mode. Also the
// classification pieces the models share: the cross-entropy of a labelled metric and softmax
// probabilities as JSON.
#pragma once

#include <memory>
#include <span>

#include <nlohmann/json.hpp>

#include "weft/blocks/compiler.h"
#include "weft/train/trainer.h"

namespace weft::models {

class BlocksRunner {
 public:
  // Compiles the model's root block (once, after its layers exist).
  void compile(blocks::Block root, blocks::CompilerOptions options = {});
  const blocks::Block& root() const { return root_; }
  const blocks::Compiler& compiler() const { return *compiler_; }

  // The weave of examples[ids], for TrainableModel::prepare_batch.
  std::unique_ptr<train::PreparedBatch> prepare(std::span<const nlohmann::json> examples,
                                                std::span<const std::size_t> ids) const;
  // Runs a batch: its prepared weave, or examples[batch ids] woven now. The result's Vars live
  // on the runner's tape until the next run; add the loss to them and call backward.
  blocks::BatchResult run(const train::Batch& batch, std::span<const nlohmann::json> examples,
                          bool training, Rng* rng);
  // Runs examples forward in inference mode.
  blocks::BatchResult infer(std::span<const nlohmann::json> examples);

 private:
  blocks::Block root_;
  std::unique_ptr<blocks::Compiler> compiler_;
  Tape tape_;
  blocks::WovenBatch local_;  // a batch woven on the spot, kept while its result is used
};

// Softmax cross-entropy of a metric's rows against their integer labels.
struct MetricLoss {
  Var sum;        // the summed loss, a scalar on the metric's tape
  Tensor labels;  // int32 [rows]
  std::int64_t rows = 0;
};
MetricLoss metric_cross_entropy(const blocks::MetricValues& metric);

// A batch classified through a metric with one row per example: backpropagates the mean
// cross-entropy when training; the figures hold the summed loss, the rows and, under
// `accuracy_name` unless it is null, the argmax hits.
train::BatchFigures classify_examples(const blocks::MetricValues& metric, bool training,
                                      const char* accuracy_name = "accuracy");

// The softmax of one row of logits, each probability rounded to 6 decimals.
nlohmann::json probabilities_json(std::span<const float> logits);

}  // namespace weft::models
