// TrainerOptions validation and the JSON forms of options and epoch records (the trainer's
// checkpoint config and its JSON-lines log), written with nlohmann-json.
#include <nlohmann/json.hpp>

#include "weft/core/error.h"
#include "weft/train/trainer.h"

namespace weft::train {

std::string_view split_name(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kDev:
      return "dev";
    case Split::kTest:
      return "test";
  }
  return "?";
}

void TrainerOptions::validate() const {
  if (epochs < 0) fail("trainer", "epochs must be >= 0, got ", epochs);
  if (batch_size == 0) fail("trainer", "batch_size must be >= 1");
  if (clip_norm < 0) fail("trainer", "clip_norm must be >= 0 (0 = off), got ", clip_norm);
  if (clip_value < 0) fail("trainer", "clip_value must be >= 0 (0 = off), got ", clip_value);
  if (!(average_decay >= 0 && average_decay < 1))
    fail("trainer", "average_decay must be in [0, 1) (0 = no weight averaging), got ",
         average_decay);
  if (average_every < 1)
    fail("trainer", "average_every must be >= 1 optimizer update, got ", average_every);
  if (threads < 0) fail("trainer", "threads must be >= 0 (0 = leave as is), got ", threads);
  if (!best_metric.empty() && restore_best && !keep_best_in_memory && best_checkpoint_path.empty())
    fail("trainer",
         "restore_best without keep_best_in_memory needs a best_checkpoint_path to "
         "restore from");
  optimizer.validate();
  LrSchedule whole_run = schedule;  // total_steps 0: filled in by Trainer::fit
  if (whole_run.kind == ScheduleKind::kCosine && whole_run.total_steps == 0)
    whole_run.total_steps = whole_run.warmup_steps + 1;
  whole_run.validate();
}

std::string TrainerOptions::to_json() const {
  nlohmann::json j = {{"epochs", epochs},
                      {"batch_size", batch_size},
                      {"seed", seed},
                      {"shuffle", shuffle},
                      {"optimizer", optimizer.describe()},
                      {"schedule", schedule.describe()},
                      {"clip_norm", clip_norm},
                      {"clip_value", clip_value},
                      {"best_metric", best_metric},
                      {"best_mode", best_mode == BestMode::kMax ? "max" : "min"},
                      {"threads", threads}};
  if (average_decay > 0) {
    j["average_decay"] = average_decay;
    j["average_every"] = average_every;
  }
  return j.dump();
}

std::string EpochRecord::to_json() const {
  nlohmann::json j = {{"epoch", epoch},
                      {"step", step},
                      {"learning_rate", learning_rate},
                      {"train", nlohmann::json::parse(train.to_json())},
                      {"dev", nlohmann::json::parse(dev.to_json())},
                      {"examples", examples},
                      {"seconds", seconds},
                      {"examples_per_second", examples_per_second},
                      {"best", best}};
  if (all_reduce_steps > 0) {
    j["all_reduce_seconds"] = all_reduce_seconds;
    j["all_reduce_steps"] = all_reduce_steps;
  }
  return j.dump();
}

}  // namespace weft::train
