// classification_loss and l2_penalty (see weft/train/losses.h).
#include "weft/train/losses.h"

#include <set>

#include "weft/core/error.h"

namespace weft::train {

ClassificationLoss classification_loss(Var logits, const Tensor& labels,
                                       const std::string& accuracy_name) {
  Var losses = softmax_cross_entropy(logits, labels);
  ClassificationLoss out{mean(losses), {}};
  for (float l : losses.value().to_float_vector()) out.figures.loss_sum += double(l);
  out.figures.examples = labels.numel();
  out.figures.metrics.add_hits(accuracy_name, argmax_hits(logits.value(), labels), labels.numel());
  return out;
}

Var l2_penalty(std::span<const Parameter> parameters, float weight) {
  Var total;
  std::set<const void*> seen;
  for (const Parameter& p : parameters) {
    if (!p.trainable() || !seen.insert(p.identity()).second) continue;
    Var term = l2_loss(Var(p));
    total = total.defined() ? total + term : term;
  }
  if (!total.defined()) fail("l2_penalty", "no trainable parameters were given");
  return total * weight;
}

}  // namespace weft::train
