// The training loop (see weft/train/trainer.h). Everything that decides numbers (shuffle
// order, dropout draws, learning rates) comes from the step count and one Rng whose state is
// checkpointed after each epoch, which is what makes a resumed run continue bit for bit.
#include "weft/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <numeric>

#include "progress.h"
#include "tensor_match.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"

namespace weft::train {
namespace {

constexpr std::string_view kBestPrefix = "best/";

using BatchBody = std::function<void(const Batch&)>;

// Calls body on consecutive batches of ids. With `ahead`, batch k+1 is prepared on a
// background thread while body runs on batch k (the future's destructor waits for it, so an
// exception in body leaves no thread behind).
void for_each_batch(TrainableModel& model, Split split, std::span<const std::size_t> ids,
                    std::size_t batch_size, bool ahead, const BatchBody& body) {
  const std::size_t count = (ids.size() + batch_size - 1) / batch_size;
  auto ids_of = [&](std::size_t b) {
    return ids.subspan(b * batch_size, std::min(batch_size, ids.size() - b * batch_size));
  };
  auto launch = [&](std::size_t b) {
    return std::async(std::launch::async, [&model, split, batch = ids_of(b)] {
      return model.prepare_batch(split, batch);
    });
  };
  std::future<std::unique_ptr<PreparedBatch>> next;
  if (ahead && count > 0) next = launch(0);
  for (std::size_t b = 0; b < count; ++b) {
    std::unique_ptr<PreparedBatch> prepared =
        ahead ? next.get() : model.prepare_batch(split, ids_of(b));
    if (ahead && b + 1 < count) next = launch(b + 1);
    body(Batch{split, ids_of(b), prepared.get()});
  }
}

void check_figures(const BatchFigures& figures, Split split, std::int64_t step) {
  if (figures.metrics.contains("loss"))
    fail("trainer", "the model reported a metric named 'loss' for a ", split_name(split),
         " batch; that name is reserved for BatchFigures::loss_sum");
  if (figures.examples <= 0)
    fail("trainer", "a ", split_name(split), " batch reported ", figures.examples,
         " examples; BatchFigures::examples must count the batch's examples");
  if (!std::isfinite(figures.loss_sum))
    fail("trainer", "the ", split_name(split), " loss is ", figures.loss_sum, " at step ", step,
         "; lower the learning rate or clip gradients (clip_norm)");
}

std::string checkpoint_config(const TrainableModel& model, const TrainerOptions& options) {
  nlohmann::json model_config =
      nlohmann::json::parse(model.config_json(), nullptr, /*allow_exceptions=*/false);
  if (model_config.is_discarded())
    fail("trainer", "model '", model.name(),
         "' returned a config that is not JSON: ", model.config_json());
  return nlohmann::json{{"model", model_config},
                        {"trainer", nlohmann::json::parse(options.to_json())}}
      .dump();
}

}  // namespace

struct Trainer::Run {
  TrainableModel& model;
  std::vector<Parameter> parameters;  // every parameter, for checkpoints
  Rng rng;
  TrainingState state;
  // The trainable parameters' values at the best epoch (frozen ones cannot differ), in the
  // optimizer's order; empty if none or when not kept in memory.
  std::vector<Tensor> best;
  std::unique_ptr<detail::Progress> progress;
  std::ofstream log;
};

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) { options_.validate(); }

Trainer::~Trainer() = default;

TrainResult Trainer::fit(TrainableModel& model) {
  if (options_.threads > 0) set_num_threads(options_.threads);
  if (model.num_examples(Split::kTrain) == 0)
    fail("trainer", "model '", model.name(), "' has no training examples");
  Run run{model, model.parameters(), Rng(options_.seed), {}, {}, {}, {}};
  optimizer_ = make_optimizer(options_.optimizer, run.parameters);
  schedule_ = options_.schedule;
  if (schedule_.kind == ScheduleKind::kCosine && schedule_.total_steps == 0) {
    const std::size_t batches =
        (model.num_examples(Split::kTrain) + options_.batch_size - 1) / options_.batch_size;
    schedule_.total_steps = std::int64_t(batches) * options_.epochs;
    schedule_.validate();
  }
  run.state.rng = run.rng.state();
  const bool resuming = !options_.resume_from.empty();
  if (resuming) resume(run);
  if (!options_.log_path.empty()) {
    run.log.open(options_.log_path, resuming ? std::ios::app : std::ios::trunc);
    if (!run.log) fail("trainer", "cannot open the log '", options_.log_path, "' for writing");
  }
  run.progress = std::make_unique<detail::Progress>(options_.progress, options_.progress_stream,
                                                    options_.epochs);
  TrainResult result;
  while (run.state.epoch < options_.epochs) {
    EpochRecord record = train_epoch(run);
    finish_epoch(run, record);
    result.epochs.push_back(std::move(record));
  }
  if (options_.restore_best && !options_.best_metric.empty() && run.state.best_dev)
    restore_best(run);
  result.state = run.state;
  return result;
}

EpochRecord Trainer::train_epoch(Run& run) {
  EpochRecord record;
  record.epoch = run.state.epoch + 1;
  std::vector<std::size_t> order(run.model.num_examples(Split::kTrain));
  std::iota(order.begin(), order.end(), std::size_t(0));
  if (options_.shuffle)
    for (std::size_t i = order.size() - 1; i > 0; --i)
      std::swap(order[i], order[run.rng.below(i + 1)]);
  run.progress->start_epoch(record.epoch, std::int64_t(order.size()));
  const auto start = std::chrono::steady_clock::now();
  double loss_sum = 0;
  const std::span<const Parameter> parameters = optimizer_->parameters();
  for_each_batch(run.model, Split::kTrain, order, options_.batch_size, options_.prepare_ahead,
                 [&](const Batch& batch) {
                   const double lr = schedule_.at(run.state.step);
                   optimizer_->zero_grad();
                   BatchFigures figures = run.model.train_batch(batch, run.rng);
                   check_figures(figures, Split::kTrain, run.state.step);
                   if (options_.clip_value > 0) clip_grad_value(parameters, options_.clip_value);
                   if (options_.clip_norm > 0) clip_grad_norm(parameters, options_.clip_norm);
                   optimizer_->step(lr);
                   ++run.state.step;
                   record.learning_rate = lr;
                   loss_sum += figures.loss_sum;
                   record.examples += figures.examples;
                   record.train.merge(figures.metrics);
                   run.progress->update(record.examples, loss_sum / double(record.examples));
                 });
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.examples_per_second = record.seconds > 0 ? double(record.examples) / record.seconds : 0;
  record.train.add_mean("loss", loss_sum / double(record.examples), double(record.examples));
  record.step = run.state.step;
  run.state.epoch = record.epoch;
  return record;
}

void Trainer::finish_epoch(Run& run, EpochRecord& record) {
  if (run.model.num_examples(Split::kDev) > 0) record.dev = evaluate(run.model, Split::kDev);
  if (!options_.best_metric.empty()) {
    if (record.dev.empty())
      fail("trainer", "best_metric '", options_.best_metric, "' needs a dev split, but model '",
           run.model.name(), "' has no dev examples");
    if (!record.dev.contains(options_.best_metric))
      fail("trainer", "best_metric '", options_.best_metric,
           "' is not among the dev figures: ", record.dev.to_json());
    const double value = record.dev.value(options_.best_metric);
    const std::optional<double>& best = run.state.best_dev;
    record.best = !best || (options_.best_mode == BestMode::kMax ? value > *best : value < *best);
    if (record.best) {
      run.state.best_dev = value;
      run.state.best_epoch = record.epoch;
      run.best.clear();
      if (options_.keep_best_in_memory)
        for (const Parameter& p : optimizer_->parameters()) run.best.push_back(p.value().clone());
    }
  }
  run.state.rng = run.rng.state();
  if (record.best && !options_.best_checkpoint_path.empty())
    save(run, options_.best_checkpoint_path);
  if (!options_.checkpoint_path.empty()) save(run, options_.checkpoint_path);
  if (run.log.is_open()) {
    run.log << record.to_json() << '\n';
    run.log.flush();
    if (!run.log) fail("trainer", "writing the log '", options_.log_path, "' failed");
  }
  run.progress->end_epoch(record);
}

void Trainer::restore_best(Run& run) const {
  const std::vector<Parameter>& trainable = optimizer_->parameters();
  if (!run.best.empty()) {
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      Parameter p = trainable[i];
      detail::copy_values(run.best[i], p.value());
    }
  } else if (!options_.best_checkpoint_path.empty()) {
    load_checkpoint(options_.best_checkpoint_path, run.parameters);
  }
}

MetricSet Trainer::evaluate(TrainableModel& model, Split split) {
  std::vector<std::size_t> ids(model.num_examples(split));
  std::iota(ids.begin(), ids.end(), std::size_t(0));
  MetricSet figures;
  double loss_sum = 0;
  std::int64_t examples = 0;
  std::vector<ExampleScores> scores;
  for_each_batch(model, split, ids, options_.batch_size, options_.prepare_ahead,
                 [&](const Batch& batch) {
                   BatchFigures f = model.eval_batch(batch);
                   check_figures(f, split, -1);
                   loss_sum += f.loss_sum;
                   examples += f.examples;
                   figures.merge(f.metrics);
                   for (ExampleScores& row : f.scores) scores.push_back(std::move(row));
                 });
  if (examples > 0) figures.add_mean("loss", loss_sum / double(examples), double(examples));
  if (!scores.empty()) {
    std::sort(scores.begin(), scores.end(),
              [](const ExampleScores& a, const ExampleScores& b) { return a.example < b.example; });
    model.finish_split(split, scores, figures);
  }
  return figures;
}

void Trainer::save(Run& run, const std::string& path) const {
  io::TensorMap extra;
  for (std::size_t i = 0; i < run.best.size(); ++i)
    extra.emplace(std::string(kBestPrefix) + optimizer_->parameters()[i].name(), run.best[i]);
  save_checkpoint(path, run.parameters, optimizer_.get(), run.state,
                  {run.model.name(), checkpoint_config(run.model, options_)}, extra);
}

void Trainer::resume(Run& run) {
  const std::string& path = options_.resume_from;
  Checkpoint c = load_checkpoint(path, run.parameters, optimizer_.get());
  if (optimizer_->steps() != c.state.step)
    fail("trainer", "cannot resume from '", path, "': its optimizer made ", optimizer_->steps(),
         " steps but its training state says ", c.state.step);
  run.rng.set_state(c.state.rng);
  run.state = c.state;
  std::vector<detail::ExpectedTensor> expected;
  for (const Parameter& p : optimizer_->parameters())
    expected.push_back({std::string(kBestPrefix) + p.name(), p.shape(), DType::kFloat32});
  io::TensorMap best;
  for (const auto& [name, tensor] : c.extra)
    if (name.compare(0, kBestPrefix.size(), kBestPrefix) == 0) best.emplace(name, tensor);
  if (best.empty() || !options_.keep_best_in_memory) return;
  const std::vector<std::string> problems =
      detail::compare_tensors(expected, best, "best-model tensor", "the model");
  if (!problems.empty())
    fail("trainer", "cannot resume from '", path, "': ", detail::join(problems));
  for (const detail::ExpectedTensor& e : expected) run.best.push_back(best.at(e.name));
}

}  // namespace weft::train
