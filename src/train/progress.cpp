// The trainer's progress bar and epoch lines (see progress.h).
#include "progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace weft::train::detail {
namespace {

constexpr std::chrono::milliseconds kRedrawInterval(100);
constexpr int kBarWidth = 24;

std::string clock_text(double seconds) {
  const auto s = std::int64_t(std::max(seconds, 0.0) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string figures_text(const MetricSet& metrics) {
  std::string text;
  for (const std::string& name : metrics.names())
    text += fmt::format(" {} {:.4f}", name, metrics.value(name));
  return text;
}

}  // namespace

Progress::Progress(ProgressMode mode, std::FILE* stream, std::int64_t epochs)
    : stream_(stream), epochs_(epochs) {
  enabled_ = mode != ProgressMode::kOff && stream != nullptr;
  bar_ = enabled_ && (mode == ProgressMode::kBar ||
                      (mode == ProgressMode::kAuto && ::isatty(::fileno(stream)) == 1));
}

void Progress::start_epoch(std::int64_t epoch, std::int64_t examples) {
  epoch_ = epoch;
  examples_ = examples;
  start_ = std::chrono::steady_clock::now();
  drawn_ = false;
}

void Progress::update(std::int64_t done, double mean_loss) {
  if (!bar_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < kRedrawInterval && done < examples_) return;
  last_draw_ = now;
  drawn_ = true;
  draw(done, mean_loss, std::chrono::duration<double>(now - start_).count());
}

void Progress::draw(std::int64_t done, double mean_loss, double seconds) {
  const double fraction = examples_ > 0 ? double(done) / double(examples_) : 1.0;
  const int filled = std::clamp(int(fraction * kBarWidth), 0, kBarWidth);
  const double rate = seconds > 0 ? double(done) / seconds : 0.0;
  const double eta = rate > 0 ? double(examples_ - done) / rate : 0.0;
  fmt::print(stream_, "\repoch {}/{} [{}{}] {}/{}  {:.0f} ex/s  loss {:.4f}  ETA {}\x1b[K", epoch_,
             epochs_, std::string(std::size_t(filled), '='),
             std::string(std::size_t(kBarWidth - filled), ' '), done, examples_, rate, mean_loss,
             clock_text(eta));
  std::fflush(stream_);
}

void Progress::end_epoch(const EpochRecord& record) {
  if (!enabled_) return;
  if (bar_ && drawn_) fmt::print(stream_, "\r\x1b[K");
  std::string line =
      fmt::format("epoch {}/{}  train{}", record.epoch, epochs_, figures_text(record.train));
  if (!record.dev.empty()) line += " | dev" + figures_text(record.dev);
  line += fmt::format(" | {:.0f} ex/s {:.2f} s lr {:.6g}{}", record.examples_per_second,
                      record.seconds, record.learning_rate, record.best ? " (best)" : "");
  if (record.all_reduce_steps > 0) {
    line += fmt::format(" | all-reduce {:.1f} ms/step ({:.0f}% of training)",
                        1e3 * record.all_reduce_seconds / double(record.all_reduce_steps),
                        record.seconds > 0 ? 100 * record.all_reduce_seconds / record.seconds : 0.);
  }
  fmt::print(stream_, "{}\n", line);
  std::fflush(stream_);
}

}  // namespace weft::train::detail
