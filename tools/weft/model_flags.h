// A registered model's options as command-line flags: one subcommand per model under `weft
// train / eval / infer` (so `weft train sentiment --help` lists sentiment's own flags, read from
// the registry's option schema), and the values the user gave, as JSON, for OptionValues.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "option_flags.h"

namespace weft::models {
struct ModelEntry;
}

namespace weft::tool {

class ModelFlags {
 public:
  // Adds one subcommand per registered model to `parent`, each with the model's flags
  // (--hidden, --recurrent-dropout, ...); `add_shared` adds the command's own flags to each.
  void bind(CLI::App& parent,
            const std::function<void(CLI::App&, const models::ModelEntry&)>& add_shared);
  // The model whose subcommand was given (empty before parsing or when none was).
  std::string chosen() const;
  // The options given on the command line, typed as the schema says ({"hidden": 150, ...}).
  // Throws weft::Error naming the flag when a value does not parse.
  nlohmann::json given() const;

 private:
  struct Model {
    std::string name;
    CLI::App* command = nullptr;
    OptionFlags flags;
  };
  std::vector<std::unique_ptr<Model>> models_;
};

// `weft train nope`: an unknown model name where a model is expected gives "unknown model
// 'nope' (known: ...)" rather than CLI11's generic message. Throws weft::Error.
void check_model_name(int argc, char** argv);

}  // namespace weft::tool
