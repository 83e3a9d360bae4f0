// Options as data: a small schema (name, kind, default, range or choices, help, and the option's
// role) that every front end reads — the command line turns it into flags, Python into keyword
// arguments, a server into its model description — and OptionValues, the checked values a model
// or the Trainer is built from. Values from a checkpoint go through the same checks as values
// from a user, so a corrupt or hostile file cannot ask for what the command line would refuse.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

enum class OptionKind { kInt, kFloat, kBool, kString };
std::string_view option_kind_name(OptionKind kind);  // "int", "float", "bool", "string"

// What an option is for, which decides where its value comes from when a checkpoint is loaded.
enum class OptionRole {
  kArchitecture,  // shapes the parameters or the computation: stored in checkpoints and taken
                  // from them; a different value given with a checkpoint is an error
  kData,          // which data is read (folder, sizes, seed): taken from a checkpoint unless
                  // given again; not needed to run one
  kRuntime,       // how this process runs (threads, device, paths): never taken from a file
  kTraining,      // how a model is fitted (the Trainer's options): recorded in checkpoints
};
// "architecture", "data", "runtime", "training"
std::string_view option_role_name(OptionRole role);

struct OptionSpec {
  std::string name{};  // snake_case: "recurrent_dropout" (flag --recurrent-dropout)
  OptionKind kind = OptionKind::kInt;
  nlohmann::json default_value{};  // of the kind; a string option may default to ""
  std::string help{};
  OptionRole role = OptionRole::kArchitecture;
  double min = -std::numeric_limits<double>::infinity();  // kInt, kFloat: inclusive range
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices{};  // kString: the allowed values, when not empty

  // {"name", "kind", "default", "help", "role", "min"?, "max"?, "choices"?}
  nlohmann::json to_json() const;
};

// Checked option values, one per entry of a schema, starting at the defaults.
class OptionValues {
 public:
  OptionValues() = default;
  // The defaults of `schema` (a registry entry's: common_options() and then the model's own; or
  // the Trainer's). `owner` (a model name, "trainer") prefixes error messages. Throws if two
  // entries share a name or a default fails its own checks.
  OptionValues(std::string owner, std::vector<OptionSpec> schema);

  const std::string& owner() const { return owner_; }
  const std::vector<OptionSpec>& schema() const { return schema_; }
  const OptionSpec* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // Sets a value after checking its kind, range and choices; `source` says where it came from
  // in errors ("--hidden", "checkpoint 'x.safetensors'"). Integers are accepted for floats.
  // Throws "[<owner>] <source>: ..." naming the option and the allowed values.
  void set(std::string_view name, const nlohmann::json& value, std::string_view source);
  // Parses text as the option's kind ("150", "0.25", "true"/"false", any string), then set().
  void set_text(std::string_view name, std::string_view text, std::string_view source);
  // set() for every member of a JSON object; unknown names are an error listing the known ones.
  void update(const nlohmann::json& values, std::string_view source);

  const nlohmann::json& value(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  bool flag(std::string_view name) const;
  const std::string& text(std::string_view name) const;

  // Every value, by name: what checkpoints store.
  const nlohmann::json& values() const { return values_; }
  // The values of one role only.
  nlohmann::json values_of(OptionRole role) const;

 private:
  const OptionSpec& spec(std::string_view name) const;

  std::string owner_;
  std::vector<OptionSpec> schema_;
  nlohmann::json values_ = nlohmann::json::object();
};

}  // namespace weft
WEFT_API_END
