// The Trainer's options read once into typed fields (what the training loop runs on), checked
// across options. Private to src/train: the options themselves are the schema's
// (weft/train/trainer_options.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "weft/train/trainer.h"

namespace weft::train::detail {

struct TrainerSettings {
  int epochs = 0;
  std::size_t batch_size = 0;
  std::uint64_t seed = 0;
  bool shuffle = true;
  OptimizerSpec optimizer;
  LrSchedule schedule;  // a cosine's total_steps 0: filled in by Trainer::fit
  double clip_norm = 0;
  double clip_value = 0;
  std::string best_metric;
  BestMode best_mode = BestMode::kMax;
  bool restore_best = true;
  double average_decay = 0;  // the option average_weights
  int average_every = 1;
  bool keep_best_in_memory = true;
  std::string checkpoint_path;
  std::string best_checkpoint_path;
  std::string resume_from;
  std::string log_path;
  bool prepare_ahead = true;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
  std::FILE* progress_stream = stderr;
  dist::Communicator* communicator = nullptr;
  std::function<void(std::int64_t, double, double)> on_step;
  nlohmann::json recorded;  // TrainerOptions::recorded()
};

// Reads and checks the options (throws "[trainer] ..." as TrainerOptions::validate).
TrainerSettings settings_of(const TrainerOptions& options);

}  // namespace weft::train::detail
