// Ensembles of checkpoints (models/ensemble.h): loading and checking the members, and the
// probability average. Running the members is the lead model's (Model::add_ensemble_member;
// BlockModel runs each member's own compiler on its own tape).
#include "weft/models/ensemble.h"

#include <algorithm>
#include <cmath>

#include "weft/core/error.h"
#include "weft/models/saved_model.h"

namespace weft::models {

Tensor average_softmax(std::span<const Tensor> logits) {
  if (logits.empty()) fail("ensemble", "nothing to average");
  const Shape shape = logits[0].shape();
  if (shape.rank() < 1 || shape[shape.rank() - 1] < 1)
    fail("ensemble", "logits need a class axis but have shape ", shape);
  const auto classes = std::size_t(shape[shape.rank() - 1]);
  std::vector<double> sum(std::size_t(shape.numel()), 0.0);
  std::vector<double> p(classes);
  for (const Tensor& t : logits) {
    if (t.shape() != shape)
      fail("ensemble", "the members' logits differ in shape: ", shape, " and ", t.shape());
    const std::vector<float> values = t.to_float_vector();
    for (std::size_t row = 0; row < values.size(); row += classes) {
      const float* x = values.data() + row;
      const double top = *std::max_element(x, x + classes);
      double total = 0;
      for (std::size_t k = 0; k < classes; ++k) total += p[k] = std::exp(double(x[k]) - top);
      for (std::size_t k = 0; k < classes; ++k) sum[row + k] += p[k] / total;
    }
  }
  std::vector<float> out(sum.size());
  const double n = double(logits.size());
  // The log of the mean, floored so that a probability that underflowed stays finite.
  for (std::size_t i = 0; i < sum.size(); ++i)
    out[i] = float(std::log(std::max(sum[i] / n, 1e-30)));
  return Tensor::from_vector(shape, out);
}

std::unique_ptr<Model> load_ensemble(std::span<const std::string> paths, ModelUse use,
                                     const nlohmann::json& overrides,
                                     std::string_view expected_name) {
  if (paths.empty()) fail("model", "an ensemble needs at least one checkpoint");
  std::unique_ptr<Model> lead = load_model(paths[0], use, overrides, expected_name);
  if (paths.size() == 1) return lead;
  if (lead->ensemble_averaging() == EnsembleAveraging::kNone)
    fail("model", "'", paths[0], "': model '", lead->name(),
         "' cannot be ensembled (its outputs are not class scores)");
  const SavedModel first = read_saved_model(paths[0]);
  for (std::size_t i = 1; i < paths.size(); ++i) {
    const SavedModel saved = read_saved_model(paths[i]);
    if (saved.name != first.name)
      fail("model", "'", paths[i], "': holds model '", saved.name, "' but '", paths[0], "' holds '",
           first.name, "'; an ensemble averages checkpoints of one model");
    if (saved.assets != first.assets)
      fail("model", "'", paths[i], "': its assets (vocabulary, label names) differ from those of '",
           paths[0], "'; an ensemble needs checkpoints trained on the same ones");
    lead->add_ensemble_member(load_model(paths[i], ModelUse::kInfer, overrides, first.name));
  }
  return lead;
}

}  // namespace weft::models
