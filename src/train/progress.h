// The trainer's console output: on a terminal a progress bar redrawn in place (examples/s,
// running loss, ETA) at most ten times a second; elsewhere (files, CI logs) one plain line
// per epoch. Private to src/train.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "weft/train/trainer.h"

namespace weft::train::detail {

class Progress {
 public:
  Progress(ProgressMode mode, std::FILE* stream, std::int64_t epochs);
  bool is_bar() const { return bar_; }

  void start_epoch(std::int64_t epoch, std::int64_t examples);
  // `done` examples so far with this running mean loss; redraws when due.
  void update(std::int64_t done, double mean_loss);
  // Ends the bar, if any, and prints the epoch's summary line.
  void end_epoch(const EpochRecord& record);

 private:
  void draw(std::int64_t done, double mean_loss, double seconds);

  std::FILE* stream_;
  bool enabled_ = true;
  bool bar_ = false;
  std::int64_t epochs_;
  std::int64_t epoch_ = 0;
  std::int64_t examples_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace weft::train::detail
