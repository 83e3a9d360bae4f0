// The model registry (models/registry.h): the built-in models (listed in builtin_models.cpp)
// and the models a program registers itself.
#include "weft/models/registry.h"

#include <mutex>

#include "weft/core/error.h"

namespace weft::models {

// The built-in models' entries, in registration order (builtin_models.cpp).
std::vector<ModelEntry> builtin_model_entries();

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<ModelEntry>> entries;
};

void check_entry(const ModelEntry& entry, const std::vector<std::unique_ptr<ModelEntry>>& taken) {
  if (entry.name.empty()) fail("registry", "a model entry has no name");
  for (const auto& other : taken) {
    if (other->name == entry.name) fail("registry", "a model named '", entry.name, "' exists");
  }
  if (!entry.create) fail("registry", "model '", entry.name, "' has no factory");
  if (!entry.recipe) fail("registry", "model '", entry.name, "' has no recipe");
  // Checks the schema (unique names, valid defaults) and the recipe at those defaults.
  entry.training_options(entry.default_options()).validate();
}

Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry();
    for (ModelEntry& builtin : builtin_model_entries()) {
      auto entry = std::make_unique<ModelEntry>(std::move(builtin));
      check_entry(*entry, r->entries);
      r->entries.push_back(std::move(entry));
    }
    return r;
  }();
  return *instance;
}

}  // namespace

train::TrainerOptions ModelEntry::training_options(const OptionValues& values,
                                                   train::TrainerOptions base) const {
  base.update(recipe(values), "the recipe of model '" + name + "'");
  base.set("seed", values.integer("seed"), "the model's seed");
  return base;
}

OptionValues ModelEntry::default_options() const {
  std::vector<OptionSpec> schema = common_options();
  schema.insert(schema.end(), options.begin(), options.end());
  return OptionValues(name, std::move(schema));
}

nlohmann::json ModelEntry::to_json() const {
  const OptionValues defaults = default_options();
  nlohmann::json schema = nlohmann::json::array();
  for (const OptionSpec& spec : defaults.schema()) schema.push_back(spec.to_json());
  return {{"name", name},
          {"summary", summary},
          {"input", input},
          {"options", schema},
          {"recipe", recipe(defaults)}};
}

void register_model(ModelEntry entry) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  check_entry(entry, r.entries);
  r.entries.push_back(std::make_unique<ModelEntry>(std::move(entry)));
}

std::vector<const ModelEntry*> registered_models() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<const ModelEntry*> out;
  for (const auto& entry : r.entries) out.push_back(entry.get());
  return out;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelEntry* entry : registered_models()) names.push_back(entry->name);
  return names;
}

const ModelEntry& find_model(std::string_view name) {
  for (const ModelEntry* entry : registered_models()) {
    if (entry->name == name) return *entry;
  }
  std::string known;
  for (const std::string& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  fail("weft", "unknown model '", name, "' (known: ", known, ")");
}

std::unique_ptr<Model> create_model(const OptionValues& options, const ModelInit& init) {
  const ModelEntry& entry = find_model(options.owner());
  // Re-check the values against the entry's schema: options made by hand must not skip it.
  OptionValues checked = entry.default_options();
  checked.update(options.values(), "options");
  return entry.create(checked, init);
}

}  // namespace weft::models
