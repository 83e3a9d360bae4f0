// Registered models' options as CLI11 flags (model_flags.h).
#include "model_flags.h"

#include <CLI/CLI.hpp>
#include <functional>

#include "weft/core/error.h"
#include "weft/models/registry.h"

namespace weft::tool {
void ModelFlags::bind(CLI::App& parent,
                      const std::function<void(CLI::App&, const models::ModelEntry&)>& add_shared) {
  for (const models::ModelEntry* entry : models::registered_models()) {
    auto model = std::make_unique<Model>();
    model->name = entry->name;
    model->command = parent.add_subcommand(entry->name, entry->summary);
    model->flags.bind(*model->command, entry->default_options());
    add_shared(*model->command, *entry);
    models_.push_back(std::move(model));
  }
  parent.require_subcommand(1);
}

std::string ModelFlags::chosen() const {
  for (const auto& model : models_) {
    if (model->command->parsed()) return model->name;
  }
  return "";
}

nlohmann::json ModelFlags::given() const {
  const std::string name = chosen();
  for (const auto& model : models_) {
    if (model->name == name) return model->flags.given();
  }
  return nlohmann::json::object();
}

void check_model_name(int argc, char** argv) {
  if (argc < 3) return;
  const std::string command = argv[1], name = argv[2];
  if (command != "train" && command != "eval" && command != "infer") return;
  if (name.empty() || name[0] == '-') return;
  (void)models::find_model(name);  // throws "unknown model 'x' (known: ...)"
}

}  // namespace weft::tool
