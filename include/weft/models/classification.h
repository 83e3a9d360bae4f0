// What the classifying models share: the softmax cross-entropy of a labelled metric, a batch's
// figures (loss, accuracy) from it, and softmax probabilities as JSON for predictions.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "weft/blocks/compiler.h"
#include "weft/core/export.h"
#include "weft/train/metrics.h"

WEFT_API_BEGIN
namespace weft::models {

// Softmax cross-entropy of a metric's rows against their integer labels.
struct MetricLoss {
  Var losses;     // each row's loss, [rows]
  Var sum;        // the summed loss, a scalar on the metric's tape
  Tensor labels;  // int32 [rows]
  std::int64_t rows = 0;
};
MetricLoss metric_cross_entropy(const blocks::MetricValues& metric);

// A batch classified through a metric with one row per example: backpropagates the mean
// cross-entropy when training; the figures hold the summed loss (and, evaluating, each row's
// loss as its loss_terms), the rows and, under
// `accuracy_name` unless it is null, the argmax hits.
train::BatchFigures classify_examples(const blocks::MetricValues& metric, bool training,
                                      const char* accuracy_name = "accuracy");

// The softmax of one row of logits, each probability rounded to 6 decimals.
nlohmann::json probabilities_json(std::span<const float> logits);

}  // namespace weft::models
WEFT_API_END
