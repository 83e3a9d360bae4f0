// Data-parallel training's machinery, apart from the epoch loop that calls it: the ranks agree
// on what they train and start from rank 0's parameters, share out every global batch by cost,
// and after each backward sum their gradients (bucketed dense, sparse rows, row-sparse tables)
// and figures, so every rank applies the same update. Evaluation is sharded and its figures
// gathered. With one process every step is the identity. Private to src/train.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/dist/communicator.h"
#include "weft/train/trainer.h"

namespace weft::train::detail {

using IdSpan = std::span<const std::size_t>;

class DataParallel {
 public:
  explicit DataParallel(dist::Communicator& comm) : comm_(comm) {}

  bool together() const { return comm_.size() > 1; }
  bool is_root() const { return comm_.is_root(); }

  // Before the first step of a run on several ranks: the ranks agree on the model, its data and
  // `trainer` (TrainerOptions::recorded()); rank 0's parameters (initial, or resumed) go to
  // every rank; the training examples' costs are read; ranks other than 0 draw their dropout
  // from their own stream, derived from `state`'s.
  void start(TrainableModel& model, std::span<Parameter> parameters, const nlohmann::json& trainer,
             const TrainingState& state, Rng& rng);
  // This rank's share of each global batch, of equal cost on every rank (the batches
  // themselves with one process). Valid until the next call.
  std::vector<IdSpan> shares_of(const std::vector<IdSpan>& global);
  // After this rank's backward over `mine` of a global batch of `global` examples: the gradients
  // of `trainable` and the figures summed over the ranks, each rank's gradient weighted by its
  // share, so every rank holds the global batch's mean gradient. The time it takes, waiting for
  // the slowest rank included, goes into `record`.
  void reduce_step(std::span<const Parameter> trainable, std::size_t mine, std::size_t global,
                   BatchFigures& figures, EpochRecord& record) const;
  // Fails unless every rank's trainable parameters are the same after `step` (a debug check).
  void check_replicas(std::span<const Parameter> trainable, std::int64_t step) const;

  // This rank's contiguous share of a split's ids to evaluate, and the figures and per-example
  // scores of every rank's share.
  IdSpan shard(IdSpan ids) const;
  void sum(std::span<double> totals) const;
  MetricSet merged(const MetricSet& mine) const;
  std::vector<ExampleScores> gathered(const std::vector<ExampleScores>& mine) const;
  // Whether to prepare batches on a background thread, as requested, on this machine's cores.
  bool prepare_ahead(bool requested) const;

 private:
  dist::Communicator& comm_;
  std::vector<double> costs_;  // every training example's, by which batches are shared out
  std::vector<std::vector<std::size_t>> shares_;
};

}  // namespace weft::train::detail
