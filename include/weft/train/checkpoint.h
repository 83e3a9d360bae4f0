// Training checkpoints: a model's parameters, the optimizer state and the training state
// (epoch, step, RNG state, best dev figure) in ONE safetensors file, written atomically
// (temporary file + rename, so a failed save leaves the previous checkpoint intact). Layout:
//   "model/<parameter name>"        float32, every parameter (trainable or not)
//   "optimizer/<kind>/..."          the optimizer's state() (see optimizer.h), if saved
//   "<other>/..."                   extra tensors (the trainer keeps "best/<name>" there)
//   __metadata__: format "weft-checkpoint", format_version, model_name, config (JSON text),
//                 optimizer (its describe()), training_state (JSON: epoch, step, rng as four
//                 unsigned 64-bit integers, best_dev, best_epoch, best_dev_loss: absent
//                 in files from before it, read as none)
// Loading validates everything before changing anything and names every mismatch. Tensors
// may live on any device: saving copies them to the host for writing, loading copies each
// value to the device of the parameter or optimizer slot it goes into, so a file written from
// a CUDA run loads into a CPU model and back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/io/safetensors.h"
#include "weft/train/optimizer.h"

WEFT_API_BEGIN
namespace weft::train {

inline constexpr int kCheckpointFormatVersion = 1;

struct TrainingState {
  std::int64_t epoch = 0;               // epochs completed
  std::int64_t step = 0;                // optimizer updates made
  std::array<std::uint64_t, 4> rng{};   // Rng::state()
  std::optional<double> best_dev;       // the best dev figure so far, if any
  std::int64_t best_epoch = 0;          // the epoch that reached it
  std::optional<double> best_dev_loss;  // that epoch's dev loss (what breaks ties), if any

  bool operator==(const TrainingState&) const = default;
};

struct CheckpointInfo {
  std::string model_name;
  std::string config_json = "{}";  // free-form JSON text (must parse as JSON)
};

struct Checkpoint {
  int format_version = kCheckpointFormatVersion;
  CheckpointInfo info;
  TrainingState state;
  bool has_optimizer = false;
  std::string optimizer_description;
  io::TensorMap extra;  // tensors outside model/ and optimizer/
};

// Writes the checkpoint atomically. `optimizer` may be null (parameters only). Extra tensor
// names must not start with "model/" or "optimizer/". Parameter names must be unique.
void save_checkpoint(const std::string& path, std::span<const Parameter> parameters,
                     const Optimizer* optimizer, const TrainingState& state,
                     const CheckpointInfo& info, const io::TensorMap& extra = {});

// Reads `path`, checks that its parameters match `parameters` exactly (names, dtypes,
// shapes) and, when `optimizer` is given, that its optimizer state matches; throws
// "[checkpoint] 'path': ..." listing every mismatch, missing and unexpected name, leaving the
// model and optimizer untouched. Then copies the values in and returns the rest. With a null
// optimizer the file's optimizer state is ignored (loading a model for evaluation).
Checkpoint load_checkpoint(const std::string& path, std::span<const Parameter> parameters,
                           Optimizer* optimizer = nullptr);

// Reads only the metadata and extra tensors (no model needed), validating the format.
Checkpoint read_checkpoint_info(const std::string& path);

}  // namespace weft::train
WEFT_API_END
