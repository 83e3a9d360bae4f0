// Registered models' options as CLI11 flags (model_flags.h).
#include "model_flags.h"

#include <CLI/CLI.hpp>
#include <functional>

#include "weft/core/error.h"
#include "weft/models/registry.h"

namespace weft::tool {
namespace {

std::string flag_name(const std::string& option) {
  std::string flag = "--" + option;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

std::string help_of(const models::OptionSpec& spec) {
  std::string help = spec.help;
  if (!spec.choices.empty()) {
    help += " (";
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      help += (i ? ", " : "") + spec.choices[i];
    }
    help += ")";
  }
  if (spec.kind != models::OptionKind::kBool) {
    const std::string shown = spec.default_value.is_string() ? spec.default_value.get<std::string>()
                                                             : spec.default_value.dump();
    help += " [default: " + (shown.empty() ? std::string("none") : shown) + "]";
  }
  return help;
}

}  // namespace

void ModelFlags::bind(CLI::App& parent, const std::function<void(CLI::App&)>& add_shared) {
  for (const models::ModelEntry* entry : models::registered_models()) {
    auto model = std::make_unique<Model>();
    model->name = entry->name;
    model->command = parent.add_subcommand(entry->name, entry->summary);
    const models::OptionValues defaults = entry->default_options();
    for (const models::OptionSpec& spec : defaults.schema()) {
      auto flag = std::make_unique<Flag>();
      flag->option = spec.name;
      flag->is_bool = spec.kind == models::OptionKind::kBool;
      if (flag->is_bool) {
        flag->cli = model->command->add_flag(flag_name(spec.name), flag->flag, help_of(spec));
      } else {
        flag->cli = model->command->add_option(flag_name(spec.name), flag->text, help_of(spec))
                        ->type_name(spec.kind == models::OptionKind::kInt     ? "INT"
                                    : spec.kind == models::OptionKind::kFloat ? "FLOAT"
                                                                              : "TEXT");
      }
      model->flags.push_back(std::move(flag));
    }
    add_shared(*model->command);
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
  nlohmann::json out = nlohmann::json::object();
  for (const auto& model : models_) {
    if (model->name != name) continue;
    models::OptionValues values = models::find_model(name).default_options();
    for (const auto& flag : model->flags) {
      if (flag->cli->count() == 0) continue;
      if (flag->is_bool) {
        values.set(flag->option, flag->flag, flag_name(flag->option));
      } else {
        values.set_text(flag->option, flag->text, flag_name(flag->option));
      }
      out[flag->option] = values.value(flag->option);
    }
  }
  return out;
}

void check_model_name(int argc, char** argv) {
  if (argc < 3) return;
  const std::string command = argv[1], name = argv[2];
  if (command != "train" && command != "eval" && command != "infer") return;
  if (name.empty() || name[0] == '-') return;
  (void)models::find_model(name);  // throws "unknown model 'x' (known: ...)"
}

}  // namespace weft::tool
