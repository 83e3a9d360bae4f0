// The models `weft train / eval / infer` know, by name: how to build one from the command
// line's options, and each model's default training recipe.
#pragma once

#include <memory>

#include "commands.h"
#include "weft/models/model.h"
#include "weft/train/trainer.h"

namespace weft::tool {

// "calculator" or "sentiment"; throws weft::Error listing the known names otherwise.
std::unique_ptr<models::Model> make_model(const ModelOptions& options);
// The model's recipe (optimizer, rate, batch size, epochs, best-model figure) with the
// command line's non-default choices applied on top.
train::TrainerOptions training_recipe(const TrainOptions& options);
// For eval / infer: the hidden size stored in a checkpoint's config, so they rebuild the
// trained shape unless --hidden says otherwise; no training set is needed.
ModelOptions with_checkpoint_config(ModelOptions options, const std::string& checkpoint);

}  // namespace weft::tool
