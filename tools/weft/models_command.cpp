// `weft models`: the registered models, one line each, or (--json) each model's description
// from the registry — summary, input form, option schema and recipe — for scripts and servers.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "weft/models/registry.h"

namespace weft::tool {

CLI::App* add_models(CLI::App& app, ModelsOptions& options) {
  CLI::App* cmd = app.add_subcommand("models", "List the registered models");
  cmd->add_flag("--json", options.json,
                "Each model's summary, input form, options and recipe as JSON");
  return cmd;
}

int run_models(const ModelsOptions& options) {
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const models::ModelEntry* entry : models::registered_models()) {
      out.push_back(entry->to_json());
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const models::ModelEntry* entry : models::registered_models()) {
    fmt::print("{:<12} {}\n", entry->name, entry->summary);
  }
  fmt::print("(weft train <model> --help lists a model's flags; --json describes them all)\n");
  return 0;
}

}  // namespace weft::tool
