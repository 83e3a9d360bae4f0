// Ensembles, as Tai et al. (2015) and Looks et al. (2017) report them: several checkpoints of one
// model (different seeds) run on the same examples, their class probabilities averaged. The
// ensemble is a Model like any other, so `weft eval`, `weft infer` and library users evaluate and
// predict with it through the same calls; its figures are those of the averaged probabilities.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/models/model.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::models {

// Row-wise log of the mean over `logits` (same shapes, classes on the last axis) of their
// softmax probabilities, computed in double on the CPU; float32, shaped like the inputs.
Tensor average_softmax(std::span<const Tensor> logits);

// Loads the checkpoints in `paths` as one model. One path: load_model(path, use, ...). More: the
// first is loaded for `use` and leads (its data, parse_example, options); the others are loaded
// for inference with the same overrides and run on the lead's examples. Throws one line, "[model]
// 'path': ...", when a checkpoint holds another model, other assets (vocabulary, label names) or
// other outputs than the first, or when the model cannot be ensembled (EnsembleAveraging::kNone).
std::unique_ptr<Model> load_ensemble(std::span<const std::string> paths, ModelUse use,
                                     const nlohmann::json& overrides = nlohmann::json::object(),
                                     std::string_view expected_name = {});

}  // namespace weft::models
WEFT_API_END
