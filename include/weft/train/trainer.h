// The train / eval loop, generic over TrainableModel: seeded shuffling each epoch, mini-batch
// forward/backward by the model, clipping, optimizer updates under a learning-rate schedule,
// dev evaluation with best-model selection, atomic checkpoints every epoch, resuming from one
// (model, optimizer, epoch, step, RNG: the run continues exactly as if never stopped), optional
// weight averaging (the model evaluated and kept is an exponential moving average), an
// optional background thread preparing the next batch, a progress bar on terminals, and a
// JSON-lines log with one object per epoch. Same seed, data and thread count: same numbers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/core/named_enum.h"
#include "weft/core/rng.h"
#include "weft/train/checkpoint.h"
#include "weft/train/metrics.h"
#include "weft/train/optimizer.h"
#include "weft/train/schedule.h"
#include "weft/train/trainer_options.h"

// The typed form of TrainerOptions the training loop runs on: private to src/train, so declared
// outside the exported API (its first declaration decides its visibility).
namespace weft::train::detail {
struct TrainerSettings;
}

WEFT_API_BEGIN
namespace weft::dist {
class Communicator;
}

namespace weft::train {

#define WEFT_SPLITS(X) \
  X(kTrain, "train")   \
  X(kDev, "dev")       \
  X(kTest, "test")
enum class Split { WEFT_SPLITS(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(Split, WEFT_SPLITS, split_name, parse_split, "weft", "split")

// Work done for a batch ahead of time (a weave, tensors of its inputs), owned by the trainer
// between prepare_batch and train_batch / eval_batch. Models derive their own.
class PreparedBatch {
 public:
  virtual ~PreparedBatch() = default;
};

struct Batch {
  Split split = Split::kTrain;
  std::span<const std::size_t> example_ids;  // indices into the split, in [0, num_examples)
  PreparedBatch* prepared = nullptr;         // what prepare_batch returned for these ids
};

// A model the Trainer can fit. It owns its data; the trainer only deals in example indices.
//
//   struct Classifier : train::TrainableModel {
//     std::vector<Parameter> parameters() override { return {w, b}; }
//     std::size_t num_examples(train::Split s) const override { return data(s).size(); }
//     train::BatchFigures train_batch(const train::Batch& batch, Rng& rng) override {
//       tape.clear();
//       TapeScope scope(tape);
//       auto [x, labels] = inputs(batch.split, batch.example_ids);
//       auto out = train::classification_loss(linear(dropout(x, 0.1f, rng), w, b), labels);
//       tape.backward(out.loss);  // the batch's mean loss
//       return out.figures;       // loss sum, count, "accuracy"
//     }
//     train::BatchFigures eval_batch(const train::Batch& batch) override { ... }
//   };
//   train::TrainerOptions options;  // trainer_options.h: epochs, batch_size, optimizer, ...
//   options.set("epochs", 5).set("optimizer", "adam");
//   train::Trainer(options).fit(model);
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  virtual std::string name() const { return "model"; }
  // Free-form JSON text stored in checkpoints (sizes, hyperparameters).
  virtual std::string config_json() const { return "{}"; }
  virtual std::vector<Parameter> parameters() = 0;
  virtual std::size_t num_examples(Split split) const = 0;

  // Forward and backward over the batch: accumulate into the parameters' gradients the
  // gradient of the batch's MEAN loss (no update; gradients are zero on entry). `rng` is
  // for dropout and the like.
  virtual BatchFigures train_batch(const Batch& batch, Rng& rng) = 0;
  // Forward only (no gradients needed).
  virtual BatchFigures eval_batch(const Batch& batch) = 0;
  // Optional work for a batch that reads neither parameters nor an RNG (e.g. weaving its
  // examples). With the option prepare_ahead it runs on a background thread while the
  // previous batch trains, so it must not touch state that train_batch changes.
  virtual std::unique_ptr<PreparedBatch> prepare_batch(Split /*split*/,
                                                       std::span<const std::size_t> /*ids*/) {
    return nullptr;
  }
  // What training on one example costs, relative to the others (e.g. its number of nodes):
  // a data-parallel run gives its ranks shares of each batch of equal total cost. Any positive
  // number; the default, 1 for every example, balances the number of examples.
  virtual double example_cost(Split /*split*/, std::size_t /*id*/) const { return 1.0; }
  // The split-level figures (RMSE, ROC-AUC) from the scores eval_batch returned for every
  // evaluated example of the split, sorted by example index: the same whatever the order,
  // grouping or sharding of the batches.
  virtual void finish_split(Split /*split*/, std::span<const ExampleScores> /*scores*/,
                            MetricSet& /*figures*/) const {}
};

// Weight averaging (Polyak, option average_weights = D > 0): the trainer keeps an exponential
// moving average of the trainable parameters, updated after every `average_every` updates:
//   average = d * average + (1 - d) * value,  d = min(D^average_every, (1+n)/(10+n))
// with n the updates of the average before this one (so the first few weigh about equally
// instead of the initial values lingering). The average is the model: it is evaluated on dev,
// kept as the best, written to the best checkpoint and left in the parameters at the end, while
// training goes on from the live values. The epoch checkpoints hold the live values and the
// average (as "average/<name>"), so a resumed run averages on exactly; one resumed from a
// checkpoint without an average starts it from the resumed values.
//
// The best epoch (option best_metric, a dev figure; ties go to the lower dev loss) is kept in
// memory (and in the epoch checkpoints, as "best/<name>") unless keep_best_in_memory is off;
// restoring then reads the best checkpoint, which must then be set.

// One epoch's figures, as written to the JSON-lines log.
struct EpochRecord {
  std::int64_t epoch = 0;
  std::int64_t step = 0;      // optimizer updates made after the epoch
  double learning_rate = 0;   // the rate of the epoch's last update
  MetricSet train;            // "loss" and the model's figures
  MetricSet dev;              // empty without a dev split
  std::int64_t examples = 0;  // training examples seen this epoch
  double seconds = 0;         // training time (without dev evaluation)
  double examples_per_second = 0;
  // Of `seconds`, the time in the gradient all-reduce (data-parallel runs only), waiting for
  // the slowest rank included, and the steps it was spent over.
  double all_reduce_seconds = 0;
  std::int64_t all_reduce_steps = 0;
  bool best = false;  // this epoch improved the best dev figure (or tied it at a lower dev loss)

  // {"epoch":1,"step":..,"learning_rate":..,"train":{..},"dev":{..},"examples":..,
  //  "seconds":..,"examples_per_second":..,"best":..}, plus "all_reduce_seconds" and
  //  "all_reduce_steps" in a data-parallel run
  std::string to_json() const;
};

struct TrainResult {
  std::vector<EpochRecord> epochs;  // the epochs run by this call
  TrainingState state;              // after the last epoch
};

// The order in which an epoch visits `n` training examples: 0..n-1 shuffled from the seed and
// the epoch (1-based) alone, the same on every rank and after a resume (a Fisher-Yates shuffle
// drawn from Rng(mix64(seed, 0x5eedf00d + epoch))). Exposed for loops outside the Trainer that
// want its batches (weft.train.epoch_order).
std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::int64_t epoch);

class Trainer {
 public:
  explicit Trainer(TrainerOptions options);
  ~Trainer();

  const TrainerOptions& options() const { return options_; }
  // Trains the model for the remaining epochs (all, or those after the resumed checkpoint).
  TrainResult fit(TrainableModel& model);
  // "loss" and the model's figures over a whole split, in order, in batches.
  MetricSet evaluate(TrainableModel& model, Split split);
  // The optimizer of the last fit (null before).
  Optimizer* optimizer() { return optimizer_.get(); }
  // The schedule of the last fit, with a cosine's total_steps filled in.
  const LrSchedule& schedule() const { return schedule_; }

 private:
  struct Run;
  EpochRecord train_epoch(Run& run);
  // One optimizer update from this rank's `batch` of a global batch of `global_size` examples.
  BatchFigures train_step(Run& run, const Batch& batch, std::size_t global_size,
                          EpochRecord& record);
  void finish_epoch(Run& run, EpochRecord& record);
  void resume(Run& run);
  void save(Run& run, const std::string& path, bool with_average) const;
  void update_average(Run& run) const;
  // Copies of the trainable parameters' values, in the optimizer's order; and the reverse.
  std::vector<Tensor> trainable_values() const;
  void set_trainable_values(const std::vector<Tensor>& values) const;
  void restore_best(Run& run) const;
  bool improves_best(const TrainingState& state, double value, std::optional<double> loss) const;
  dist::Communicator& communicator() const;

  TrainerOptions options_;
  std::unique_ptr<const detail::TrainerSettings> settings_;  // options_ read and checked
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
};

}  // namespace weft::train
WEFT_API_END
