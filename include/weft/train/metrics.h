// Running figures for training and evaluation: exact sums, weighted running means (losses), hit
// counters (accuracy), and MetricSet, a small map of named figures that batches fill, epochs
// merge, and the trainer's log writes as JSON. MetricSet's figures are exact sums plus weights,
// so merging batch results in any grouping gives the same mean, to the bit, as one pass over
// every example.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::train {

// A sum of doubles kept exactly (a fixed-point accumulator wide enough for every finite double),
// so it is the same to the bit whatever the order or grouping of its terms; value() rounds it
// once, to nearest. Non-finite terms are summed apart and make the value non-finite.
class ExactSum {
 public:
  void add(double term);
  void add(std::span<const float> terms);
  void merge(const ExactSum& other);
  double value() const;

 private:
  static constexpr int kLimbBits = 32;
  // Bit 0 of limb 0 is worth 2^kLowestBit, below the lowest bit of the smallest double's
  // mantissa as frexp gives it (2^-1126); 70 limbs reach past 2^1024 with room for carries.
  static constexpr int kLowestBit = -1152;
  static constexpr int kLimbs = 70;
  void add_finite(double term);
  void carry();  // each limb back into [0, 2^32), the top one keeping the sign

  std::array<std::int64_t, kLimbs> limbs_{};
  int unnormalised_ = 0;  // terms added since the last carry
  double special_ = 0;    // the sum of the non-finite terms
  bool has_special_ = false;
};

// The mean of values added with weights (a batch's mean loss with weight = its size).
class RunningMean {
 public:
  void add(double value, double weight = 1.0);
  void merge(const RunningMean& other);
  void reset() { *this = RunningMean(); }
  double sum() const { return sum_; }
  double weight() const { return weight_; }
  // 0 before anything was added.
  double mean() const { return weight_ > 0 ? sum_ / weight_ : 0.0; }

 private:
  double sum_ = 0;
  double weight_ = 0;
};

// hits / total, for accuracies.
class HitCounter {
 public:
  void add(std::int64_t hits, std::int64_t total);
  void merge(const HitCounter& other);
  void reset() { *this = HitCounter(); }
  std::int64_t hits() const { return hits_; }
  std::int64_t total() const { return total_; }
  // 0 before anything was added.
  double rate() const { return total_ > 0 ? double(hits_) / double(total_) : 0.0; }

 private:
  std::int64_t hits_ = 0;
  std::int64_t total_ = 0;
};

// Named running figures. A name is either a mean (add_mean) or a hit rate (add_hits); using
// one name both ways is an error. Names iterate in sorted order, so logs are stable.
class MetricSet {
 public:
  void add_mean(const std::string& name, double value, double weight = 1.0);
  // The mean of `terms` (one per row, say), each of weight 1, summed exactly: the figure does
  // not depend on how the rows were split into batches.
  void add_mean_of(const std::string& name, std::span<const float> terms);
  void add_hits(const std::string& name, std::int64_t hits, std::int64_t total);
  // Adds every figure of `other` (same kinds required for shared names).
  void merge(const MetricSet& other);
  void clear() { figures_.clear(); }

  bool empty() const { return figures_.empty(); }
  bool contains(const std::string& name) const { return figures_.count(name) != 0; }
  // The figure's current value (mean or rate); throws naming the known figures if absent.
  double value(const std::string& name) const;
  std::vector<std::string> names() const;
  // {"accuracy": 0.91, "loss": 0.25}: every figure's value, sorted by name.
  std::string to_json() const;
  // Every figure's kind, sum and weight, for sending to another process; parse gives back an
  // equal set (throws weft::Error on text that serialize did not write).
  std::string serialize() const;
  static MetricSet parse(std::string_view text);

 private:
  struct Figure {
    bool is_hits = false;
    ExactSum sum;       // hits for hit rates
    double weight = 0;  // total for hit rates
  };
  Figure& figure(const std::string& name, bool is_hits);
  std::map<std::string, Figure> figures_;
};

// One example's values kept for a figure that does not decompose into per-batch means (RMSE,
// ROC-AUC): the example's index in its split and the values the model needs to finish it.
struct ExampleScores {
  std::size_t example = 0;
  std::vector<double> values;
};

// What a batch contributes: the SUM of its examples' losses, their count, and any figures
// (accuracy as add_hits, ...): what a model hands the Trainer. The name "loss" is reserved
// for the trainer, which adds loss_sum / examples under it. `scores` are collected over a
// split and handed to TrainableModel::finish_split.
// `loss_terms`, when not empty, are the terms (a row's loss each) whose float sum loss_sum is:
// evaluation sums them exactly instead, so its loss does not depend on the batch size.
struct BatchFigures {
  double loss_sum = 0;
  std::int64_t examples = 0;
  MetricSet metrics;
  std::vector<ExampleScores> scores{};
  std::vector<float> loss_terms{};
};

// The number of rows of logits [B, C] whose largest entry (first on ties) is at the label
// (int32 [B]): the hits of an accuracy. Throws on mismatched shapes.
std::int64_t argmax_hits(const Tensor& logits, const Tensor& labels);

}  // namespace weft::train
WEFT_API_END
