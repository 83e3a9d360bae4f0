// One option schema (weft/core/options.h) as CLI11 flags on a command: --name-with-dashes for
// each option (a bool one as a flag: --x, --x=false), its help read from the schema with the
// choices and the default it will take, and the values given, typed and checked by the schema,
// so a bad value fails as it would from Python or a file. A model's options and the Trainer's
// are bound this way (model_flags.h, train_command.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/options.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace weft::tool {

class OptionFlags {
 public:
  // Adds a flag to `command` for each option of `shown`'s schema but those named in `skip` (bound
  // by another schema on the same command); the help gives `shown`'s value as the default.
  void bind(CLI::App& command, const OptionValues& shown,
            const std::vector<std::string>& skip = {});
  // The options given on the command line, typed as the schema says ({"hidden": 150, ...}).
  // Throws weft::Error naming the flag when a value does not parse or is out of range.
  nlohmann::json given() const;

 private:
  struct Flag {
    std::string option;  // the schema's name
    std::string text;    // as typed
    bool flag = false;   // a bool option given as a flag
    bool is_bool = false;
    CLI::Option* cli = nullptr;
  };
  OptionValues checker_;
  std::vector<std::unique_ptr<Flag>> flags_;
};

// "--recurrent-dropout" for the option "recurrent_dropout".
std::string flag_name(const std::string& option);
// An option's line of --help: its help, its choices, and `shown` as the default.
std::string flag_help(const OptionSpec& spec, const nlohmann::json& shown);

}  // namespace weft::tool
