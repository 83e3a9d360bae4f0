// The Trainer's options, declared once as a schema (weft/core/options.h): name, kind, default,
// range and help of every option, in trainer_option_schema(). Every front end reads that one
// table: the command line makes its flags from it, Python maps keyword arguments onto it, a
// model's recipe is a set of defaults over it, and checkpoints record its values. A value that is
// unknown or out of range fails the same way whichever front end it came through.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/core/options.h"

WEFT_API_BEGIN
namespace weft::dist {
class Communicator;
}

namespace weft::train {

#define WEFT_BEST_MODES(X) \
  X(kMax, "max")           \
  X(kMin, "min")
enum class BestMode { WEFT_BEST_MODES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(BestMode, WEFT_BEST_MODES, best_mode_name, parse_best_mode, "trainer", "best mode")
// kAuto: a bar on a terminal, lines elsewhere.
#define WEFT_PROGRESS_MODES(X) \
  X(kAuto, "auto")             \
  X(kBar, "bar")               \
  X(kLines, "lines")           \
  X(kOff, "off")
enum class ProgressMode { WEFT_PROGRESS_MODES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(ProgressMode, WEFT_PROGRESS_MODES, progress_mode_name, parse_progress_mode,
                "trainer", "progress mode")

// Every option of the Trainer: epochs, batch_size, seed, shuffle, the optimizer's (optimizer,
// learning_rate, momentum, weight_decay, ...), the schedule's (schedule, warmup_steps, ...),
// clipping, best-epoch selection, weight averaging (average_weights, average_every), and the
// runtime ones (checkpoint, best_checkpoint, resume, log, progress, threads, prepare_ahead).
// `weft train <model> --help` lists them with their help.
const std::vector<OptionSpec>& trainer_option_schema();

struct TrainerOptions {
  // The schema's defaults.
  TrainerOptions();
  // Values over trainer_option_schema() or a schema that extends it (options the Trainer does not
  // read are checked and recorded in checkpoints all the same).
  explicit TrainerOptions(OptionValues given);

  // set() / update() of `values` (errors name `source`: "--epochs", "weft.train.Trainer").
  TrainerOptions& set(std::string_view name, const nlohmann::json& value,
                      std::string_view source = "TrainerOptions");
  TrainerOptions& update(const nlohmann::json& values, std::string_view source);

  // The checks that span options (a restore_best that needs a best_checkpoint, the optimizer's
  // and the schedule's own): throws "[trainer] ..." naming them.
  void validate() const;
  // What checkpoints and the ranks' agreement record: every value but the runtime ones.
  nlohmann::json recorded() const;
  // "8 epochs, batch 64, adam beta1=0.9 ..., constant lr=0.003", for logs (checks as validate).
  std::string summary() const;

  OptionValues values;
  std::FILE* progress_stream = stderr;
  // Data parallelism over the communicator's ranks (weft/dist) when it has more than one: every
  // rank runs the same Trainer on the same model and data; each weaves and runs its shard of
  // every global batch of batch_size examples, gradients are averaged with one bucketed
  // all-reduce per step, and every rank applies the same update. Evaluation is sharded and its
  // figures reduced; only rank 0 shows progress, logs and writes checkpoints. Null: one process.
  dist::Communicator* communicator = nullptr;
  // Called after every optimizer update with the step count (from 1), the global batch's mean
  // loss and the learning rate used; on every rank alike.
  std::function<void(std::int64_t step, double loss, double learning_rate)> on_step{};
};

}  // namespace weft::train
WEFT_API_END
