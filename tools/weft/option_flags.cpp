// Option schemas as CLI11 flags (option_flags.h).
#include "option_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>

namespace weft::tool {

std::string flag_name(const std::string& option) {
  std::string flag = "--" + option;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string flag_help(const OptionSpec& spec, const nlohmann::json& shown) {
  std::string help = spec.help;
  if (!spec.choices.empty()) {
    help += " (";
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      help += (i ? ", " : "") + spec.choices[i];
    }
    help += ")";
  }
  const std::string text = shown.is_string() ? shown.get<std::string>() : shown.dump();
  help += " [default: " + (text.empty() ? std::string("none") : text) + "]";
  return help;
}

void OptionFlags::bind(CLI::App& command, const OptionValues& shown,
                       const std::vector<std::string>& skip) {
  checker_ = shown;
  for (const OptionSpec& spec : shown.schema()) {
    if (std::find(skip.begin(), skip.end(), spec.name) != skip.end()) continue;
    auto flag = std::make_unique<Flag>();
    flag->option = spec.name;
    flag->is_bool = spec.kind == OptionKind::kBool;
    const std::string help = flag_help(spec, shown.value(spec.name));
    if (flag->is_bool) {
      flag->cli = command.add_flag(flag_name(spec.name), flag->flag, help);
    } else {
      flag->cli = command.add_option(flag_name(spec.name), flag->text, help)
                      ->type_name(spec.kind == OptionKind::kInt     ? "INT"
                                  : spec.kind == OptionKind::kFloat ? "FLOAT"
                                                                    : "TEXT");
    }
    flags_.push_back(std::move(flag));
  }
}

nlohmann::json OptionFlags::given() const {
  OptionValues values = checker_;
  nlohmann::json out = nlohmann::json::object();
  for (const auto& flag : flags_) {
    if (flag->cli->count() == 0) continue;
    if (flag->is_bool) {
      values.set(flag->option, flag->flag, flag_name(flag->option));
    } else {
      values.set_text(flag->option, flag->text, flag_name(flag->option));
    }
    out[flag->option] = values.value(flag->option);
  }
  return out;
}

}  // namespace weft::tool
