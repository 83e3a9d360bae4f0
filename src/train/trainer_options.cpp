// The Trainer's option schema (trainer_options.h), the options read into the typed settings the
// training loop runs on (trainer_settings.h), and the JSON form of epoch records (the JSON-lines
// log).
#include "weft/train/trainer_options.h"

#include <cmath>

#include "trainer_settings.h"
#include "weft/core/error.h"

namespace weft::train {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

OptionSpec training(std::string name, OptionKind kind, nlohmann::json default_value,
                    std::string help, double min = -kUnbounded, double max = kUnbounded,
                    std::vector<std::string> choices = {}) {
  return {.name = std::move(name),
          .kind = kind,
          .default_value = std::move(default_value),
          .help = std::move(help),
          .role = OptionRole::kTraining,
          .min = min,
          .max = max,
          .choices = std::move(choices)};
}

OptionSpec runtime(OptionSpec spec) {
  spec.role = OptionRole::kRuntime;
  return spec;
}

std::vector<OptionSpec> fitting_options() {
  using K = OptionKind;
  return {
      training("epochs", K::kInt, 10, "Passes over the training set", 0, 1e9),
      training("batch_size", K::kInt, 32, "Examples per update (the global batch on several ranks)",
               1, 1 << 20),
      training("seed", K::kInt, 0, "Seed of the shuffling and of the dropout draws", 0),
      training("shuffle", K::kBool, true, "Shuffle the training examples every epoch"),
      training("optimizer", K::kString, "sgd", "The update rule", -kUnbounded, kUnbounded,
               enum_names<OptimizerKind>()),
      training("learning_rate", K::kFloat, 0.01, "Step size (the schedule's peak)", 0),
      training("momentum", K::kFloat, 0.0, "SGD momentum, in [0, 1)", 0, 1),
      training("nesterov", K::kBool, false, "SGD with Nesterov momentum"),
      training("initial_accumulator", K::kFloat, 0.0, "Adagrad's starting sum of squares", 0),
      training("beta1", K::kFloat, 0.9, "Adam's first-moment decay, in [0, 1)", 0, 1),
      training("beta2", K::kFloat, 0.999, "Adam's second-moment decay, in [0, 1)", 0, 1),
      training("epsilon", K::kFloat, 1e-8, "Adam's and Adagrad's denominator floor", 0),
      training("weight_decay", K::kFloat, 0.0, "Weight decay", 0),
      training("weight_decay_mode", K::kString, "l2",
               "l2: added to the gradient; decoupled: the value shrinks by rate x decay (AdamW)",
               -kUnbounded, kUnbounded, enum_names<WeightDecayMode>()),
      training("embedding_lr_scale", K::kFloat, 1.0,
               "Learning rate of the word vectors (the parameters named embedding_prefix...) "
               "relative to the rest",
               0),
      training("embedding_prefix", K::kString, "embedding/",
               "What the names of the parameters embedding_lr_scale applies to start with"),
      training("sparse_updates", K::kString, "lazy",
               "Row-sparse gradients (word vectors): lazy, only the rows a batch used, or dense, "
               "every row as a dense gradient would",
               -kUnbounded, kUnbounded, enum_names<SparseUpdate>()),
  };
}

std::vector<OptionSpec> schedule_and_selection_options() {
  using K = OptionKind;
  return {
      training("schedule", K::kString, "constant", "Learning-rate schedule", -kUnbounded,
               kUnbounded, enum_names<ScheduleKind>()),
      training("warmup_steps", K::kInt, 0, "Linear warm-up updates", 0),
      training("gamma", K::kFloat, 0.1, "Decay factor per step_size updates (step, exponential)",
               0),
      training("step_size", K::kInt, 1, "Updates per decay by gamma (step, exponential)", 1),
      training("total_steps", K::kInt, 0,
               "The update where a cosine reaches min_lr (0: the end of the run)", 0),
      training("min_lr", K::kFloat, 0.0, "Where a cosine schedule ends", 0),
      training("clip_norm", K::kFloat, 0.0, "Clip the global gradient norm to this (0: off)", 0),
      training("clip_value", K::kFloat, 0.0, "Clamp each gradient element to +-this (0: off)", 0),
      training("best_metric", K::kString, "",
               "The dev figure that selects the best epoch: loss or one the model reports "
               "(empty: no selection); epochs that tie go to the lower dev loss"),
      training("best_mode", K::kString, "max", "Whether the best epoch's figure is the highest",
               -kUnbounded, kUnbounded, enum_names<BestMode>()),
      training("restore_best", K::kBool, true, "End with the best epoch's parameters"),
      training("keep_best_in_memory", K::kBool, true,
               "Keep the best epoch's parameters in memory and in the epoch checkpoints (off: "
               "restore from best_checkpoint)"),
      training("average_weights", K::kFloat, 0.0,
               "Evaluate and keep an exponential moving average of the weights, with this decay "
               "per update (0: off)",
               0, 0.999999),
      training("average_every", K::kInt, 1, "Updates between updates of the weight average", 1,
               1000000),
  };
}

std::vector<OptionSpec> runtime_options() {
  using K = OptionKind;
  return {
      runtime(training("checkpoint", K::kString, "", "Write a checkpoint here after every epoch")),
      runtime(training("best_checkpoint", K::kString, "",
                       "Write the best model (by the dev figure) here")),
      runtime(training("resume", K::kString, "", "Continue training from this checkpoint")),
      runtime(training("log", K::kString, "", "Append one JSON line per epoch to this file")),
      runtime(training(
          "progress", K::kString, "auto",
          "How training reports: a bar redrawn in place, a line per epoch, nothing, or auto "
          "(a bar on a terminal, lines elsewhere)",
          -kUnbounded, kUnbounded, enum_names<ProgressMode>())),
      runtime(training("threads", K::kInt, 0, "GEMM threads (0: leave as they are)", 0, 1024)),
      runtime(training("prepare_ahead", K::kBool, true,
                       "Prepare (weave) the next batch on a background thread")),
  };
}

OptimizerSpec optimizer_of(const OptionValues& v) {
  OptimizerSpec o;
  o.kind = parse_optimizer_kind(v.text("optimizer"));
  o.momentum = v.number("momentum");
  o.nesterov = v.flag("nesterov");
  o.initial_accumulator = v.number("initial_accumulator");
  o.beta1 = v.number("beta1");
  o.beta2 = v.number("beta2");
  o.epsilon = v.number("epsilon");
  o.weight_decay = v.number("weight_decay");
  o.weight_decay_mode = parse_weight_decay_mode(v.text("weight_decay_mode"));
  // A scale of 1 is no scale: the rule list stays empty, as it always was by default.
  if (v.number("embedding_lr_scale") != 1.0)
    o.learning_rate_scales = {{v.text("embedding_prefix"), v.number("embedding_lr_scale")}};
  o.sparse_update = parse_sparse_update(v.text("sparse_updates"));
  o.validate();
  return o;
}

LrSchedule schedule_of(const OptionValues& v) {
  LrSchedule s;
  s.kind = parse_schedule_kind(v.text("schedule"));
  s.learning_rate = v.number("learning_rate");
  s.warmup_steps = v.integer("warmup_steps");
  s.gamma = v.number("gamma");
  s.step_size = v.integer("step_size");
  s.total_steps = v.integer("total_steps");
  s.min_lr = v.number("min_lr");
  LrSchedule whole_run = s;  // total_steps 0: filled in by Trainer::fit
  if (whole_run.kind == ScheduleKind::kCosine && whole_run.total_steps == 0)
    whole_run.total_steps = whole_run.warmup_steps + 1;
  whole_run.validate();
  return s;
}

}  // namespace

const std::vector<OptionSpec>& trainer_option_schema() {
  static const std::vector<OptionSpec> schema = [] {
    std::vector<OptionSpec> all = fitting_options();
    for (auto part : {schedule_and_selection_options(), runtime_options()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return schema;
}

TrainerOptions::TrainerOptions() : values("trainer", trainer_option_schema()) {}

TrainerOptions::TrainerOptions(OptionValues given) : values(std::move(given)) {
  for (const OptionSpec& spec : trainer_option_schema()) {
    if (!values.contains(spec.name))
      fail("trainer", "the options lack '", spec.name, "', which the Trainer's schema declares");
  }
}

TrainerOptions& TrainerOptions::set(std::string_view name, const nlohmann::json& value,
                                    std::string_view source) {
  values.set(name, value, source);
  return *this;
}

TrainerOptions& TrainerOptions::update(const nlohmann::json& given, std::string_view source) {
  values.update(given, source);
  return *this;
}

void TrainerOptions::validate() const { (void)detail::settings_of(*this); }

std::string TrainerOptions::summary() const {
  const detail::TrainerSettings s = detail::settings_of(*this);
  return std::to_string(s.epochs) + " epochs, batch " + std::to_string(s.batch_size) + ", " +
         s.optimizer.describe() + ", " + s.schedule.describe();
}

nlohmann::json TrainerOptions::recorded() const {
  nlohmann::json out = nlohmann::json::object();
  for (const OptionSpec& spec : values.schema())
    if (spec.role != OptionRole::kRuntime) out[spec.name] = values.value(spec.name);
  return out;
}

detail::TrainerSettings detail::settings_of(const TrainerOptions& options) {
  const OptionValues& v = options.values;
  TrainerSettings s;
  s.epochs = int(v.integer("epochs"));
  s.batch_size = std::size_t(v.integer("batch_size"));
  s.seed = std::uint64_t(v.integer("seed"));
  s.shuffle = v.flag("shuffle");
  s.optimizer = optimizer_of(v);
  s.schedule = schedule_of(v);
  s.clip_norm = v.number("clip_norm");
  s.clip_value = v.number("clip_value");
  s.best_metric = v.text("best_metric");
  s.best_mode = parse_best_mode(v.text("best_mode"));
  s.restore_best = v.flag("restore_best");
  s.average_decay = v.number("average_weights");
  s.average_every = int(v.integer("average_every"));
  s.keep_best_in_memory = v.flag("keep_best_in_memory");
  s.checkpoint_path = v.text("checkpoint");
  s.best_checkpoint_path = v.text("best_checkpoint");
  s.resume_from = v.text("resume");
  s.log_path = v.text("log");
  s.prepare_ahead = v.flag("prepare_ahead");
  s.threads = int(v.integer("threads"));
  s.progress = parse_progress_mode(v.text("progress"));
  s.progress_stream = options.progress_stream;
  s.communicator = options.communicator;
  s.on_step = options.on_step;
  s.recorded = options.recorded();
  if (!s.best_metric.empty() && s.restore_best && !s.keep_best_in_memory &&
      s.best_checkpoint_path.empty())
    fail("trainer",
         "restore_best without keep_best_in_memory needs a best_checkpoint to restore from");
  return s;
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
