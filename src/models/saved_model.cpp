// Loading a model from a self-contained checkpoint (models/saved_model.h).
#include "weft/models/saved_model.h"

#include <filesystem>
#include <system_error>

#include "weft/core/error.h"
#include "weft/io/json_lines.h"
#include "weft/models/registry.h"
#include "weft/train/checkpoint.h"

namespace weft::models {

using nlohmann::json;

void save_model(const std::string& path, Model& model) {
  const json config{{"model", json::parse(model.config_json())}};
  const std::vector<Parameter> parameters = model.parameters();
  train::save_checkpoint(path, parameters, nullptr, train::TrainingState{},
                         {model.name(), config.dump()});
}

// Architecture and data options come from the checkpoint; runtime ones (threads, device) are
// this process's own.
SavedModel read_saved_model(const std::string& path) {
  const train::Checkpoint checkpoint = train::read_checkpoint_info(path);
  const std::string where = "'" + path + "'";
  if (checkpoint.info.model_name.empty()) fail("model", where, ": the checkpoint names no model");
  const ModelEntry* entry = nullptr;
  try {
    entry = &find_model(checkpoint.info.model_name);
  } catch (const Error&) {
    std::string known;
    for (const std::string& name : model_names()) known += (known.empty() ? "" : ", ") + name;
    fail("model", where, ": holds a '", checkpoint.info.model_name,
         "' model, which is not registered (known: ", known, ")");
  }
  // The trainer stores {"model": Model::config_json(), "trainer": {...}}.
  const json config = io::parse_json(checkpoint.info.config_json, where + ": config", "model");
  const json model = config.is_object() ? config.value("model", json()) : json();
  if (!model.is_object() || !model.contains("options") || !model["options"].is_object()) {
    fail("model", where,
         ": the checkpoint holds no model options (written by a Weft before checkpoints were "
         "self-contained, or not by the Trainer); train it again");
  }
  SavedModel saved;
  saved.path = path;
  saved.name = entry->name;
  saved.options = entry->default_options();
  const json& stored = model["options"];
  for (const OptionSpec& spec : saved.options.schema()) {
    if (spec.role == OptionRole::kArchitecture && !stored.contains(spec.name)) {
      fail("model", where, ": the stored options lack '", spec.name, "'");
    }
  }
  for (const auto& [name, value] : stored.items()) {
    const OptionSpec* spec = saved.options.find(name);
    if (spec == nullptr) {
      fail("model", where, ": the stored options have '", name, "', which '", saved.name,
           "' does not know");
    }
    if (spec->role != OptionRole::kRuntime) saved.options.set(name, value, "checkpoint " + where);
  }
  saved.assets = model.value("assets", json::object());
  if (!saved.assets.is_object()) fail("model", where, ": the stored assets are not an object");
  return saved;
}

std::unique_ptr<Model> load_model(const std::string& path, ModelUse use, const json& overrides,
                                  std::string_view expected_name) {
  SavedModel saved = read_saved_model(path);
  if (!expected_name.empty() && saved.name != expected_name) {
    fail("model", "checkpoint '", path, "' holds a '", saved.name, "' model, not '", expected_name,
         "'");
  }
  if (!overrides.is_object()) fail("model", "option overrides must be a JSON object");
  for (const auto& [name, value] : overrides.items()) {
    const OptionSpec* spec = saved.options.find(name);
    if (spec != nullptr && spec->role == OptionRole::kArchitecture) {
      OptionValues probe = saved.options;
      probe.set(name, value, "option '" + name + "'");
      if (probe.value(name) != saved.options.value(name)) {
        fail("model", "checkpoint '", path, "' was trained with ", name, "=",
             saved.options.value(name).dump(), "; ", name, "=", value.dump(),
             " would not fit its parameters");
      }
    }
    saved.options.set(name, value, "option '" + name + "'");
  }
  // Every parameter is stored in the file as float32 (4 bytes), so the file's size bounds the
  // parameters its options may ask for: a forged option (a hidden size of 60,000) fails here,
  // before the model allocates, instead of exhausting memory.
  std::error_code size_error;
  const std::uintmax_t file_bytes = std::filesystem::file_size(path, size_error);
  ModelInit init{.use = use, .assets = &saved.assets};
  if (!size_error) {
    init.max_parameter_elements = std::int64_t(file_bytes / 4) + 1;
    init.parameter_budget_reason =
        "that checkpoint '" + path + "' (" + std::to_string(file_bytes) + " bytes) can hold";
  }
  std::unique_ptr<Model> model = find_model(saved.name).create(saved.options, init);
  train::load_checkpoint(path, model->parameters());
  return model;
}

}  // namespace weft::models
