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
#include "weft/core/rng.h"
#include "weft/train/checkpoint.h"
#include "weft/train/metrics.h"
#include "weft/train/optimizer.h"
#include "weft/train/schedule.h"

WEFT_API_BEGIN
namespace weft::dist {
class Communicator;
}

namespace weft::train {

enum class Split { kTrain, kDev, kTest };
std::string_view split_name(Split split);  // "train", "dev", "test"

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
//   train::TrainerOptions options;  // epochs, batch_size, optimizer, schedule, best_metric...
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
  // examples). With TrainerOptions::prepare_ahead it runs on a background thread while the
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

enum class BestMode { kMax, kMin };
enum class ProgressMode { kAuto, kBar, kLines, kOff };  // kAuto: a bar on a terminal

struct TrainerOptions {
  int epochs = 10;
  std::size_t batch_size = 32;
  std::uint64_t seed = 0;
  bool shuffle = true;
  OptimizerSpec optimizer;
  // A cosine schedule with total_steps 0 decays over the whole run (epochs x batches).
  LrSchedule schedule;
  double clip_norm = 0;   // clip the global gradient norm to this, when > 0
  double clip_value = 0;  // clamp each gradient element to +-this, when > 0
  // The dev figure that selects the best epoch: "loss" or a metric the model reports; empty:
  // no selection. At the end the parameters are the best epoch's when restore_best is set.
  std::string best_metric;
  BestMode best_mode = BestMode::kMax;
  bool restore_best = true;
  // Weight averaging (Polyak): when average_decay > 0 the trainer keeps an exponential moving
  // average of the trainable parameters, updated after every `average_every` optimizer updates:
  //   average = d * average + (1 - d) * value,  d = min(average_decay^average_every, (1+n)/(10+n))
  // with n the updates of the average before this one (so the first few weigh about equally
  // instead of the initial values lingering). The average is the model: it is evaluated on
  // dev, kept as the best, written to best_checkpoint_path and left in the parameters at the
  // end, while training goes on from the live values. The epoch checkpoints hold the live
  // values and the average (as "average/<name>"), so a resumed run averages on exactly; one
  // resumed from a checkpoint without an average starts it from the resumed values.
  double average_decay = 0;  // per optimizer update, in [0, 1); 0: off
  int average_every = 1;     // optimizer updates between updates of the average
  // Keep a copy of the best epoch's trainable parameters in memory (and in the epoch
  // checkpoints, as "best/<name>", so a resumed run restores the same best). Off, restoring
  // reads best_checkpoint_path instead, which must then be set.
  bool keep_best_in_memory = true;
  std::string checkpoint_path;       // written (atomically) after every epoch when set
  std::string best_checkpoint_path;  // written when the dev figure improves, when set
  std::string resume_from;           // a checkpoint to continue from (must exist), when set
  std::string log_path;              // JSON lines, one per epoch (appended when resuming)
  // Prepare the next batch on a background thread (data-parallel ranks that fill their machine's
  // cores prepare inline instead).
  bool prepare_ahead = true;
  int threads = 0;  // CPU threads (set_num_threads) when > 0
  ProgressMode progress = ProgressMode::kAuto;
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

  void validate() const;
  // The options as JSON text, stored in checkpoints' config.
  std::string to_json() const;
};

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
  bool best = false;  // this epoch improved the best dev figure

  // {"epoch":1,"step":..,"learning_rate":..,"train":{..},"dev":{..},"examples":..,
  //  "seconds":..,"examples_per_second":..,"best":..}, plus "all_reduce_seconds" and
  //  "all_reduce_steps" in a data-parallel run
  std::string to_json() const;
};

struct TrainResult {
  std::vector<EpochRecord> epochs;  // the epochs run by this call
  TrainingState state;              // after the last epoch
};

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
  void finish_epoch(Run& run, EpochRecord& record);
  void resume(Run& run);
  void save(Run& run, const std::string& path, bool with_average) const;
  void update_average(Run& run) const;
  // Copies of the trainable parameters' values, in the optimizer's order; and the reverse.
  std::vector<Tensor> trainable_values() const;
  void set_trainable_values(const std::vector<Tensor>& values) const;
  void restore_best(Run& run) const;
  void start_together(Run& run);
  void check_replicas(Run& run) const;
  dist::Communicator& communicator() const;
  static MetricSet merged_over_ranks(dist::Communicator& comm, const MetricSet& mine);
  static std::vector<ExampleScores> gathered_over_ranks(dist::Communicator& comm,
                                                        const std::vector<ExampleScores>& mine);

  TrainerOptions options_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
};

}  // namespace weft::train
WEFT_API_END
