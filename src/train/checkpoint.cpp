// Checkpoint save and load (layout in weft/train/checkpoint.h) on top of io::safetensors,
// which already writes atomically and validates the file's structure. This layer adds the
// naming scheme, the metadata (parsed with nlohmann-json) and the model/optimizer matching.
#include "weft/train/checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "tensor_match.h"
#include "weft/core/error.h"
#include "weft/io/json_lines.h"

namespace weft::train {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kModelPrefix = "model/";
constexpr std::string_view kOptimizerPrefix = "optimizer/";
constexpr const char* kFormat = "weft-checkpoint";

bool starts_with(const std::string& name, std::string_view prefix) {
  return name.compare(0, prefix.size(), prefix) == 0;
}

// Each parameter handle once; names must be unique.
std::vector<Parameter> unique_parameters(std::span<const Parameter> parameters,
                                         const std::string& path) {
  std::vector<Parameter> out;
  std::set<const void*> seen;
  std::set<std::string> names;
  for (const Parameter& p : parameters) {
    if (!p.defined()) fail("checkpoint", "'", path, "': a parameter handle is undefined");
    if (!seen.insert(p.identity()).second) continue;
    if (!names.insert(p.name()).second)
      fail("checkpoint", "'", path, "': two different parameters are named '", p.name(),
           "'; checkpoint names must be unique");
    out.push_back(p);
  }
  return out;
}

std::string training_state_json(const TrainingState& state) {
  Json j = {{"epoch", state.epoch},
            {"step", state.step},
            {"rng", state.rng},
            {"best_epoch", state.best_epoch}};
  j["best_dev"] = state.best_dev ? Json(*state.best_dev) : Json(nullptr);
  j["best_dev_loss"] = state.best_dev_loss ? Json(*state.best_dev_loss) : Json(nullptr);
  return j.dump();
}

template <typename T>
T json_field(const Json& j, const char* key, const std::string& path) {
  if (!j.contains(key))
    fail("checkpoint", "'", path, "': training_state lacks '", key, "': ", io::json_excerpt(j));
  try {
    return j.at(key).get<T>();
  } catch (const Json::exception&) {
    fail("checkpoint", "'", path, "': training_state '", key,
         "' has the wrong type: ", io::json_excerpt(j.at(key)));
  }
}

TrainingState parse_training_state(const std::string& text, const std::string& path) {
  const Json j = io::parse_json(text, "'" + path + "': training_state", "checkpoint");
  if (!j.is_object())
    fail("checkpoint", "'", path, "': training_state is not a JSON object: ", io::json_excerpt(j));
  TrainingState state;
  state.epoch = json_field<std::int64_t>(j, "epoch", path);
  state.step = json_field<std::int64_t>(j, "step", path);
  state.best_epoch = json_field<std::int64_t>(j, "best_epoch", path);
  const Json& rng = j.contains("rng") ? j.at("rng") : Json();
  if (!rng.is_array() || rng.size() != 4 ||
      !std::all_of(rng.begin(), rng.end(), [](const Json& w) { return w.is_number_unsigned(); }))
    fail("checkpoint", "'", path, "': training_state 'rng' must be 4 unsigned integers, got ",
         io::json_excerpt(rng));
  for (std::size_t i = 0; i < 4; ++i) state.rng[i] = rng[i].get<std::uint64_t>();
  for (auto [key, field] :
       {std::pair{"best_dev", &state.best_dev}, std::pair{"best_dev_loss", &state.best_dev_loss}})
    if (j.contains(key) && !j.at(key).is_null()) *field = json_field<double>(j, key, path);
  return state;
}

std::string metadata_field(const io::Metadata& metadata, const char* key, const std::string& path) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) fail("checkpoint", "'", path, "': the metadata lacks '", key, "'");
  return it->second;
}

// The metadata and extra tensors of a loaded file; checks the format first.
Checkpoint parse_checkpoint(const io::SafetensorsContents& contents, const std::string& path) {
  const auto format = contents.metadata.find("format");
  if (format == contents.metadata.end() || format->second != kFormat)
    fail("checkpoint", "'", path, "' is not a Weft checkpoint (its metadata has no format \"",
         kFormat, "\"); a plain safetensors file can be read with io::load_safetensors");
  Checkpoint c;
  const std::string version = metadata_field(contents.metadata, "format_version", path);
  if (version != std::to_string(kCheckpointFormatVersion))
    fail("checkpoint", "'", path, "' has format version ", version, "; this Weft reads version ",
         kCheckpointFormatVersion);
  c.info.model_name = metadata_field(contents.metadata, "model_name", path);
  c.info.config_json = metadata_field(contents.metadata, "config", path);
  c.state = parse_training_state(metadata_field(contents.metadata, "training_state", path), path);
  const auto optimizer = contents.metadata.find("optimizer");
  c.has_optimizer = optimizer != contents.metadata.end();
  if (c.has_optimizer) c.optimizer_description = optimizer->second;
  for (const auto& [name, tensor] : contents.tensors)
    if (!starts_with(name, kModelPrefix) && !starts_with(name, kOptimizerPrefix))
      c.extra.emplace(name, tensor);
  return c;
}

io::SafetensorsContents read_file(const std::string& path) {
  try {
    return io::load_safetensors(path);
  } catch (const Error& e) {
    fail("checkpoint", "cannot load '", path, "': ", e.what());
  }
}

// Tensors under `prefix`, with the prefix removed.
io::TensorMap strip_prefix(const io::TensorMap& tensors, std::string_view prefix) {
  io::TensorMap out;
  for (const auto& [name, tensor] : tensors)
    if (starts_with(name, prefix)) out.emplace(name.substr(prefix.size()), tensor);
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, std::span<const Parameter> parameters,
                     const Optimizer* optimizer, const TrainingState& state,
                     const CheckpointInfo& info, const io::TensorMap& extra) {
  if (Json::parse(info.config_json, nullptr, /*allow_exceptions=*/false).is_discarded())
    fail("checkpoint", "cannot save '", path,
         "': the config is not valid JSON: ", info.config_json);
  io::TensorMap tensors;
  for (const Parameter& p : unique_parameters(parameters, path))
    tensors.emplace(std::string(kModelPrefix) + p.name(), p.value());
  io::Metadata metadata = {{"format", kFormat},
                           {"format_version", std::to_string(kCheckpointFormatVersion)},
                           {"model_name", info.model_name},
                           {"config", info.config_json},
                           {"training_state", training_state_json(state)}};
  if (optimizer != nullptr) {
    metadata["optimizer"] = optimizer->spec().describe();
    for (const auto& [name, tensor] : optimizer->state())
      tensors.emplace(std::string(kOptimizerPrefix) + name, tensor);
  }
  for (const auto& [name, tensor] : extra) {
    if (starts_with(name, kModelPrefix) || starts_with(name, kOptimizerPrefix))
      fail("checkpoint", "cannot save '", path, "': extra tensor '", name,
           "' uses a reserved prefix (model/ or optimizer/)");
    tensors.emplace(name, tensor);
  }
  io::save_safetensors(path, tensors, metadata);
}

Checkpoint load_checkpoint(const std::string& path, std::span<const Parameter> parameters,
                           Optimizer* optimizer) {
  const io::SafetensorsContents contents = read_file(path);
  Checkpoint c = parse_checkpoint(contents, path);
  std::vector<Parameter> model = unique_parameters(parameters, path);
  std::vector<detail::ExpectedTensor> expected;
  for (const Parameter& p : model) expected.push_back({p.name(), p.shape(), DType::kFloat32});
  const io::TensorMap stored = strip_prefix(contents.tensors, kModelPrefix);
  std::vector<std::string> problems =
      detail::compare_tensors(expected, stored, "parameter", "the model");
  const io::TensorMap optimizer_state = strip_prefix(contents.tensors, kOptimizerPrefix);
  if (optimizer != nullptr && !c.has_optimizer) {
    problems.push_back("the file has no optimizer state (it was saved without an optimizer)");
  } else if (optimizer != nullptr) {
    const std::vector<std::string> more = optimizer->state_problems(optimizer_state);
    if (!more.empty() && c.optimizer_description.rfind(optimizer->kind_name(), 0) != 0)
      problems.push_back("the file holds the state of '" + c.optimizer_description +
                         "' but the optimizer is '" + optimizer->spec().describe() + "'");
    else
      problems.insert(problems.end(), more.begin(), more.end());
  }
  if (!problems.empty()) fail("checkpoint", "'", path, "': ", detail::join(problems));
  for (Parameter& p : model) detail::copy_values(stored.at(p.name()), p.value());
  if (optimizer != nullptr) optimizer->load_state(optimizer_state, "checkpoint");
  return c;
}

Checkpoint read_checkpoint_info(const std::string& path) {
  return parse_checkpoint(read_file(path), path);
}

}  // namespace weft::train
