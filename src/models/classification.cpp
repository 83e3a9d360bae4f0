// The classification pieces the models share (models/classification.h).
#include "weft/models/classification.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "weft/autodiff/ops.h"

namespace weft::models {

MetricLoss metric_cross_entropy(const blocks::MetricValues& metric) {
  std::vector<std::int32_t> labels;
  labels.reserve(metric.labels.size());
  for (const nlohmann::json& label : metric.labels) labels.push_back(label.get<std::int32_t>());
  MetricLoss loss;
  loss.rows = std::int64_t(labels.size());
  // The labels go where the logits are (the model's device).
  loss.labels = Tensor::from_vector({loss.rows}, labels).to(metric.values.value().device());
  loss.losses = softmax_cross_entropy(metric.values, loss.labels);
  loss.sum = sum(loss.losses);
  return loss;
}

train::BatchFigures classify_examples(const blocks::MetricValues& metric, bool training,
                                      const char* accuracy_name) {
  const MetricLoss loss = metric_cross_entropy(metric);
  if (training) loss.sum.tape().backward(loss.sum * (1.f / float(loss.rows)));
  train::BatchFigures figures;
  figures.loss_sum = loss.sum.value().item();
  figures.examples = loss.rows;
  if (!training) figures.loss_terms = loss.losses.value().to_float_vector();
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
