// Loss helpers for models written over the autodiff ops: a classification loss that returns
// both the Var to backpropagate (the batch's mean) and the BatchFigures the Trainer wants
// (loss sum, count, accuracy hits), and an explicit L2 penalty over parameters for models that
// regularise in the loss rather than in the optimizer.
#pragma once

#include <span>
#include <string>

#include "weft/autodiff/ops.h"
#include "weft/core/export.h"
#include "weft/train/metrics.h"

WEFT_API_BEGIN
namespace weft::train {

struct ClassificationLoss {
  Var loss;              // mean over the batch of -log softmax(logits)[label], a scalar
  BatchFigures figures;  // loss_sum, examples and "<accuracy_name>" hits
};

// logits [B, C], labels int32 [B].
ClassificationLoss classification_loss(Var logits, const Tensor& labels,
                                       const std::string& accuracy_name = "accuracy");

// weight * sum over the trainable parameters (each once) of ||p||^2 / 2, a scalar on the
// current tape; its gradient is weight * p.
Var l2_penalty(std::span<const Parameter> parameters, float weight);

}  // namespace weft::train
WEFT_API_END
