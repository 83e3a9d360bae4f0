// Self-contained checkpoints: a checkpoint written by the Trainer for a registered model holds
// the model's name, its checked options and its assets (vocabularies, label names, feature
// tables) beside the parameters, so `weft infer` rebuilds the model with no data folder and
// `weft eval` encodes its data exactly as the trained model did.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/models/model.h"
#include "weft/models/options.h"

WEFT_API_BEGIN
namespace weft::models {

struct SavedModel {
  std::string path;
  std::string name;  // a registered model
  OptionValues options;
  nlohmann::json assets = nlohmann::json::object();
};

// Writes the model's parameters with its name, options and assets (no optimizer or training
// state), atomically, in the layout the Trainer's checkpoints have: what load_model reads.
void save_model(const std::string& path, Model& model);

// Reads a checkpoint's model description without its parameters. Throws one line, "[model]
// 'path': ...", when the file is not a Weft checkpoint, holds no model description, names a model
// that is not registered, or has options that are missing or fail the model's checks.
SavedModel read_saved_model(const std::string& path);

// Builds the model a checkpoint holds, for `use`, and loads its parameters. `overrides` (a JSON
// object of option values, e.g. from the command line) may change data and runtime options;
// an architecture option that differs from the checkpoint's is an error naming both values.
// With `expected_name`, a checkpoint of another model is refused.
std::unique_ptr<Model> load_model(const std::string& path, ModelUse use,
                                  const nlohmann::json& overrides = nlohmann::json::object(),
                                  std::string_view expected_name = {});

}  // namespace weft::models
WEFT_API_END
