// The batch plumbing shared by the models written with blocks (models/blocks_runner.h).
#include "weft/models/blocks_runner.h"

#include <algorithm>
#include <cmath>

#include "weft/autodiff/ops.h"
#include "weft/nn/mode.h"

namespace weft::models {
namespace {

struct PreparedWeave : train::PreparedBatch {
  blocks::WovenBatch woven;
};

blocks::WovenBatch weave_ids(const blocks::Compiler& compiler,
                             std::span<const nlohmann::json> examples,
                             std::span<const std::size_t> ids) {
  std::vector<nlohmann::json> batch;
  batch.reserve(ids.size());
  for (std::size_t id : ids) batch.push_back(examples[id]);
  return compiler.weave(batch);
}

}  // namespace

void BlocksRunner::compile(blocks::Block root, blocks::CompilerOptions options) {
  root_ = std::move(root);
  compiler_ = std::make_unique<blocks::Compiler>(root_, options);
}

std::unique_ptr<train::PreparedBatch> BlocksRunner::prepare(
    std::span<const nlohmann::json> examples, std::span<const std::size_t> ids) const {
  auto prepared = std::make_unique<PreparedWeave>();
  prepared->woven = weave_ids(*compiler_, examples, ids);
  return prepared;
}

blocks::BatchResult BlocksRunner::run(const train::Batch& batch,
                                      std::span<const nlohmann::json> examples, bool training,
                                      Rng* rng) {
  const blocks::WovenBatch* woven = nullptr;
  if (auto* prepared = dynamic_cast<PreparedWeave*>(batch.prepared)) {
    woven = &prepared->woven;
  } else {
    local_ = weave_ids(*compiler_, examples, batch.example_ids);
    woven = &local_;
  }
  tape_.clear();
  tape_.set_grad_enabled(training);
  TapeScope scope(tape_);
  nn::ForwardMode mode(training, rng);
  return compiler_->run(*woven, tape_);
}

blocks::BatchResult BlocksRunner::infer(std::span<const nlohmann::json> examples) {
  tape_.clear();
  tape_.set_grad_enabled(false);
  TapeScope scope(tape_);
  nn::ForwardMode mode(false);
  return compiler_->forward(examples, tape_);
}

MetricLoss metric_cross_entropy(const blocks::MetricValues& metric) {
  std::vector<std::int32_t> labels;
  labels.reserve(metric.labels.size());
  for (const nlohmann::json& label : metric.labels) labels.push_back(label.get<std::int32_t>());
  MetricLoss loss;
  loss.rows = std::int64_t(labels.size());
  loss.labels = Tensor::from_vector({loss.rows}, labels);
  loss.sum = sum(softmax_cross_entropy(metric.values, loss.labels));
  return loss;
}

train::BatchFigures classify_examples(const blocks::MetricValues& metric, bool training,
                                      const char* accuracy_name) {
  const MetricLoss loss = metric_cross_entropy(metric);
  if (training) loss.sum.tape().backward(loss.sum * (1.f / float(loss.rows)));
  train::BatchFigures figures;
  figures.loss_sum = loss.sum.value().item();
  figures.examples = loss.rows;
  if (accuracy_name != nullptr) {
    figures.metrics.add_hits(accuracy_name, train::argmax_hits(metric.values.value(), loss.labels),
                             loss.rows);
  }
  return figures;
}

nlohmann::json probabilities_json(std::span<const float> logits) {
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t k = 0; k < logits.size(); ++k) total += p[k] = std::exp(double(logits[k] - top));
  nlohmann::json out = nlohmann::json::array();
  for (double v : p) out.push_back(std::round(v / total * 1e6) / 1e6);
  return out;
}

}  // namespace weft::models
