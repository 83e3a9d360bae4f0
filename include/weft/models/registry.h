// The model registry: every model by name, with a one-line summary, its option schema, the form
// of its examples, its training recipe (defaults over the Trainer's option schema,
// weft/train/trainer_options.h) and its factory. The command line, Python, the server and
// distributed training read models from here and never special-case one. The built-in models
// are listed in builtin_models.cpp, one line each; a program adds its own with register_model.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"
#include "weft/models/model.h"
#include "weft/models/options.h"
#include "weft/train/trainer.h"

WEFT_API_BEGIN
namespace weft::models {

struct ModelEntry {
  std::string name;     // "sentiment"
  std::string summary;  // one line, for --help and listings
  std::string input;    // the form of one example, as `weft infer` reads it (one line of text)
  std::vector<OptionSpec> options;  // the model's own; common_options() are added in front
  // How the model trains by default (the paper's recipe where there is one): values of the
  // Trainer's options, {"epochs": 8, "optimizer": "adam", "learning_rate": 0.003, ...}, which
  // the front ends apply before the user's own.
  std::function<nlohmann::json(const OptionValues&)> recipe;
  std::function<std::unique_ptr<Model>(const OptionValues&, const ModelInit&)> create;

  // common_options() followed by the model's own, at their defaults.
  OptionValues default_options() const;
  // `base` (the Trainer's defaults) with the recipe for these model options on top, and the
  // model's seed as the Trainer's. Throws naming the recipe's option that the schema refuses.
  train::TrainerOptions training_options(const OptionValues& values,
                                         train::TrainerOptions base = {}) const;
  // {"name", "summary", "input", "options": [schema...], "recipe": {...}} (recipe at defaults).
  nlohmann::json to_json() const;
};

// Adds a model; throws if the name is taken or the entry is incomplete (no factory, recipe,
// or a malformed option schema).
void register_model(ModelEntry entry);
// Every registered model, the built-in ones first, in registration order.
std::vector<const ModelEntry*> registered_models();
std::vector<std::string> model_names();
// Throws "[weft] unknown model 'x' (known: ...)" for a name not registered.
const ModelEntry& find_model(std::string_view name);

// Builds the model `options` were made for (their owner) for training: checks the options,
// reads the data and builds the layers.
std::unique_ptr<Model> create_model(const OptionValues& options,
                                    const ModelInit& init = ModelInit{});

}  // namespace weft::models
WEFT_API_END
