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
#include <thread>

#include "data_parallel.h"
#include "progress.h"
#include "tensor_match.h"
#include "trainer_settings.h"
#include "weft/backend/cpu.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"
#include "weft/core/job_threads.h"
#include "weft/core/rng.h"

namespace weft::train {
namespace {

constexpr std::string_view kBestPrefix = "best/";
constexpr std::string_view kAveragePrefix = "average/";

using BatchBody = std::function<void(const Batch&)>;
using detail::IdSpan;

// Consecutive batches of `batch_size` ids (the last one shorter).
std::vector<IdSpan> batches_of(IdSpan ids, std::size_t batch_size) {
  std::vector<IdSpan> batches;
  for (std::size_t first = 0; first < ids.size(); first += batch_size) {
    batches.push_back(ids.subspan(first, std::min(batch_size, ids.size() - first)));
  }
  return batches;
}

// Calls body on each batch in order (empty batches included: a rank's empty shard). With
// `ahead`, batch k+1 is prepared while body runs on batch k, by one thread kept for the loop and
// run off body's CPU where another is allowed (JobThreads: a thread started per batch costs a
// small batch's preparation, and Linux often woke it on body's own CPU). An exception in body
// drops the preparation not begun and waits for the one begun.
void for_each_batch(TrainableModel& model, Split split, const std::vector<IdSpan>& batches,
                    bool ahead, const BatchBody& body) {
  using Prepared = std::unique_ptr<PreparedBatch>;
  auto prepare = [&model, split](IdSpan batch) -> Prepared {
    return batch.empty() ? nullptr : model.prepare_batch(split, batch);
  };
  if (!ahead) {
    for (const IdSpan& batch : batches) body(Batch{split, batch, prepare(batch).get()});
    return;
  }
  JobThreads preparer(1);
  auto launch = [&](std::size_t b) {
    auto promise = std::make_shared<std::promise<Prepared>>();
    std::future<Prepared> future = promise->get_future();
    preparer.submit([promise, &prepare, batch = batches[b]] {
      try {
        promise->set_value(prepare(batch));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return future;
  };
  std::future<Prepared> next;
  if (!batches.empty()) next = launch(0);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const Prepared prepared = next.get();
    if (b + 1 < batches.size()) next = launch(b + 1);
    body(Batch{split, batches[b], prepared.get()});
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

std::string checkpoint_config(const TrainableModel& model, const nlohmann::json& trainer) {
  nlohmann::json model_config =
      nlohmann::json::parse(model.config_json(), nullptr, /*allow_exceptions=*/false);
  if (model_config.is_discarded())
    fail("trainer", "model '", model.name(),
         "' returned a config that is not JSON: ", model.config_json());
  return nlohmann::json{{"model", model_config}, {"trainer", trainer}}.dump();
}

// average = d * average + (1 - d) * value on the parameter's device, through the optimizers'
// kernel: an SGD step on `average` with the gradient `value`, rate -(1 - d), after shrinking by d.
void blend_into(Tensor& average, const Tensor& value, double d) {
  backend::UpdateArgs args;
  args.rule = backend::UpdateRule::kSgd;
  args.shrink = float(d);
  args.learning_rate = -float(1.0 - d);
  backend::apply_update(args, average, value, nullptr, nullptr);
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
  // With weight averaging: the average of the trainable parameters, in the optimizer's order.
  std::vector<Tensor> average;
  std::unique_ptr<detail::Progress> progress;
  std::ofstream log;
  detail::DataParallel ranks;  // the ranks training together (a single process by default)
};

Trainer::Trainer(TrainerOptions options)
    : options_(std::move(options)),
      settings_(std::make_unique<detail::TrainerSettings>(detail::settings_of(options_))) {}

Trainer::~Trainer() = default;

TrainResult Trainer::fit(TrainableModel& model) {
  const detail::TrainerSettings& o = *settings_;
  if (o.threads > 0) set_num_threads(o.threads);
  if (model.num_examples(Split::kTrain) == 0)
    fail("trainer", "model '", model.name(), "' has no training examples");
  Run run{model,
          model.parameters(),
          Rng(o.seed),
          {},
          {},
          {},
          {},
          {},
          detail::DataParallel(communicator())};
  optimizer_ = make_optimizer(o.optimizer, run.parameters);
  schedule_ = o.schedule;
  if (schedule_.kind == ScheduleKind::kCosine && schedule_.total_steps == 0) {
    const std::size_t batches =
        (model.num_examples(Split::kTrain) + o.batch_size - 1) / o.batch_size;
    schedule_.total_steps = std::int64_t(batches) * o.epochs;
    if (schedule_.total_steps <= schedule_.warmup_steps) {
      fail("trainer", "the cosine schedule decays after its ", schedule_.warmup_steps,
           " warmup steps, but the whole run is ", schedule_.total_steps, " steps (", o.epochs,
           " epochs x ", batches, " batches of ", o.batch_size,
           "): use fewer warmup steps or more epochs");
    }
    schedule_.validate();
  }
  run.state.rng = run.rng.state();
  const bool resuming = !o.resume_from.empty();
  if (resuming) resume(run);
  if (run.ranks.together()) run.ranks.start(model, run.parameters, o.recorded, run.state, run.rng);
  if (o.average_decay > 0 && run.average.empty()) run.average = trainable_values();
  const bool root = run.ranks.is_root();
  if (!o.log_path.empty() && root) {
    run.log.open(o.log_path, resuming ? std::ios::app : std::ios::trunc);
    if (!run.log) fail("trainer", "cannot open the log '", o.log_path, "' for writing");
  }
  run.progress = std::make_unique<detail::Progress>(root ? o.progress : ProgressMode::kOff,
                                                    o.progress_stream, o.epochs);
  TrainResult result;
  while (run.state.epoch < o.epochs) {
    EpochRecord record = train_epoch(run);
    finish_epoch(run, record);
    result.epochs.push_back(std::move(record));
  }
  if (o.restore_best && !o.best_metric.empty() && run.state.best_dev)
    restore_best(run);
  else if (!run.average.empty())
    set_trainable_values(run.average);  // the model a run returns is its average
  result.state = run.state;
  return result;
}

std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  Rng shuffle(mix64(seed, 0x5eedf00dull + std::uint64_t(epoch)));
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
  return order;
}

EpochRecord Trainer::train_epoch(Run& run) {
  EpochRecord record;
  record.epoch = run.state.epoch + 1;
  // The order comes from the seed and the epoch alone: the same on every rank, whatever their
  // number, and after a resume.
  const std::size_t n = run.model.num_examples(Split::kTrain);
  std::vector<std::size_t> order(n);
  if (settings_->shuffle)
    order = epoch_order(n, settings_->seed, record.epoch);
  else
    std::iota(order.begin(), order.end(), std::size_t(0));
  // Every global batch, and this rank's share of each (of equal cost on every rank).
  const std::vector<IdSpan> global = batches_of(order, settings_->batch_size);
  const std::vector<IdSpan> mine = run.ranks.shares_of(global);
  run.progress->start_epoch(record.epoch, std::int64_t(order.size()));
  const auto start = std::chrono::steady_clock::now();
  double loss_sum = 0;
  std::size_t batch_index = 0;
  for_each_batch(run.model, Split::kTrain, mine, run.ranks.prepare_ahead(settings_->prepare_ahead),
                 [&](const Batch& batch) {
                   const BatchFigures figures =
                       train_step(run, batch, global[batch_index++].size(), record);
                   loss_sum += figures.loss_sum;
                   record.examples += figures.examples;
                   record.train.merge(figures.metrics);
                   run.progress->update(record.examples, loss_sum / double(record.examples));
                 });
  record.train = run.ranks.merged(record.train);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.examples_per_second = record.seconds > 0 ? double(record.examples) / record.seconds : 0;
  record.train.add_mean("loss", loss_sum / double(record.examples), double(record.examples));
  record.step = run.state.step;
  run.state.epoch = record.epoch;
  return record;
}

BatchFigures Trainer::train_step(Run& run, const Batch& batch, std::size_t global_size,
                                 EpochRecord& record) {
  const detail::TrainerSettings& o = *settings_;
  const double lr = schedule_.at(run.state.step);
  const std::span<const Parameter> parameters = optimizer_->parameters();
  optimizer_->zero_grad();
  BatchFigures figures;
  if (!batch.example_ids.empty()) {
    figures = run.model.train_batch(batch, run.rng);
    check_figures(figures, Split::kTrain, run.state.step);
  }
  if (run.ranks.together()) {
    run.ranks.reduce_step(parameters, batch.example_ids.size(), global_size, figures, record);
    check_figures(figures, Split::kTrain, run.state.step);
  }
  if (o.clip_value > 0) clip_grad_value(parameters, o.clip_value);
  if (o.clip_norm > 0) clip_grad_norm(parameters, o.clip_norm);
  optimizer_->step(lr);
  ++run.state.step;
  if (!run.average.empty() && run.state.step % o.average_every == 0) update_average(run);
#ifndef NDEBUG
  if (run.ranks.together() && run.state.step % 50 == 0)
    run.ranks.check_replicas(parameters, run.state.step);
#endif
  record.learning_rate = lr;
  if (o.on_step) o.on_step(run.state.step, figures.loss_sum / double(figures.examples), lr);
  return figures;
}

void Trainer::update_average(Run& run) const {
  const double n = double(run.state.step / settings_->average_every - 1);
  const double d = std::min(std::pow(settings_->average_decay, double(settings_->average_every)),
                            (1 + n) / (10 + n));
  const std::vector<Parameter>& trainable = optimizer_->parameters();
  for (std::size_t i = 0; i < trainable.size(); ++i)
    blend_into(run.average[i], trainable[i].value(), d);
}

std::vector<Tensor> Trainer::trainable_values() const {
  std::vector<Tensor> values;
  for (const Parameter& p : optimizer_->parameters()) values.push_back(p.value().clone());
  return values;
}

void Trainer::set_trainable_values(const std::vector<Tensor>& values) const {
  const std::vector<Parameter>& trainable = optimizer_->parameters();
  for (std::size_t i = 0; i < trainable.size(); ++i) {
    Parameter p = trainable[i];
    detail::copy_values(values[i], p.value());
  }
}

// Whether an epoch whose dev figure is `value` (and dev loss `loss`) beats the best so far: a
// better figure, or the same figure at a lower loss (short runs often tie, e.g. at 0% exact
// match, and the first epoch would otherwise stay the best however far the loss fell).
bool Trainer::improves_best(const TrainingState& state, double value,
                            std::optional<double> loss) const {
  if (!state.best_dev) return true;
  const double best = *state.best_dev;
  if (value != best) return settings_->best_mode == BestMode::kMax ? value > best : value < best;
  return loss && (!state.best_dev_loss || *loss < *state.best_dev_loss);
}

void Trainer::finish_epoch(Run& run, EpochRecord& record) {
  // With weight averaging the average is the model evaluated, kept and written as the best;
  // the live values come back before the epoch checkpoint (which holds both).
  std::vector<Tensor> live;
  if (!run.average.empty()) {
    live = trainable_values();
    set_trainable_values(run.average);
  }
  if (run.model.num_examples(Split::kDev) > 0) record.dev = evaluate(run.model, Split::kDev);
  if (!settings_->best_metric.empty()) {
    if (record.dev.empty())
      fail("trainer", "best_metric '", settings_->best_metric, "' needs a dev split, but model '",
           run.model.name(), "' has no dev examples");
    if (!record.dev.contains(settings_->best_metric))
      fail("trainer", "best_metric '", settings_->best_metric,
           "' is not among the dev figures: ", record.dev.to_json());
    const double value = record.dev.value(settings_->best_metric);
    const std::optional<double> loss =
        record.dev.contains("loss") ? std::optional(record.dev.value("loss")) : std::nullopt;
    record.best = improves_best(run.state, value, loss);
    if (record.best) {
      run.state.best_dev = value;
      run.state.best_dev_loss = loss;
      run.state.best_epoch = record.epoch;
      run.best.clear();
      if (settings_->keep_best_in_memory) run.best = trainable_values();
    }
  }
  const bool root = run.ranks.is_root();
  if (root) run.state.rng = run.rng.state();
  if (root && record.best && !settings_->best_checkpoint_path.empty())
    save(run, settings_->best_checkpoint_path, /*with_average=*/false);
  if (!live.empty()) set_trainable_values(live);
  if (root && !settings_->checkpoint_path.empty())
    save(run, settings_->checkpoint_path, /*with_average=*/true);
  if (run.log.is_open()) {
    run.log << record.to_json() << '\n';
    run.log.flush();
    if (!run.log) fail("trainer", "writing the log '", settings_->log_path, "' failed");
  }
  run.progress->end_epoch(record);
}

void Trainer::restore_best(Run& run) const {
  if (!run.best.empty()) {
    set_trainable_values(run.best);
  } else if (!settings_->best_checkpoint_path.empty()) {
    load_checkpoint(settings_->best_checkpoint_path, run.parameters);
  }
}

MetricSet Trainer::evaluate(TrainableModel& model, Split split) {
  const detail::DataParallel ranks(communicator());
  std::vector<std::size_t> ids(model.num_examples(split));
  std::iota(ids.begin(), ids.end(), std::size_t(0));
  // Each rank evaluates a contiguous share of the split; the figures are summed over ranks and
  // the per-example scores gathered, so split-level figures see every example.
  // The loss is summed exactly (a model's loss_terms, else its batches' sums), so with terms it
  // is the same at any batch size whenever each term is (the batch-invariant mode).
  MetricSet figures;
  ExactSum loss;
  double examples = 0;
  std::vector<ExampleScores> scores;
  for_each_batch(model, split, batches_of(ranks.shard(ids), settings_->batch_size),
                 ranks.prepare_ahead(settings_->prepare_ahead), [&](const Batch& batch) {
                   BatchFigures f = model.eval_batch(batch);
                   check_figures(f, split, -1);
                   if (f.loss_terms.empty())
                     loss.add(f.loss_sum);
                   else
                     loss.add(f.loss_terms);
                   examples += double(f.examples);
                   figures.merge(f.metrics);
                   for (ExampleScores& row : f.scores) scores.push_back(std::move(row));
                 });
  double totals[2] = {loss.value(), examples};
  ranks.sum(totals);
  figures = ranks.merged(figures);
  scores = ranks.gathered(scores);
  if (totals[1] > 0) figures.add_mean("loss", totals[0] / totals[1], totals[1]);
  if (!scores.empty()) {
    std::sort(scores.begin(), scores.end(),
              [](const ExampleScores& a, const ExampleScores& b) { return a.example < b.example; });
    model.finish_split(split, scores, figures);
  }
  return figures;
}

dist::Communicator& Trainer::communicator() const {
  if (settings_->communicator != nullptr) return *settings_->communicator;
  static const std::unique_ptr<dist::Communicator> single = dist::single_process();
  return *single;
}

void Trainer::save(Run& run, const std::string& path, bool with_average) const {
  io::TensorMap extra;
  for (std::size_t i = 0; i < run.best.size(); ++i)
    extra.emplace(std::string(kBestPrefix) + optimizer_->parameters()[i].name(), run.best[i]);
  if (with_average) {
    for (std::size_t i = 0; i < run.average.size(); ++i)
      extra.emplace(std::string(kAveragePrefix) + optimizer_->parameters()[i].name(),
                    run.average[i]);
  }
  save_checkpoint(path, run.parameters, optimizer_.get(), run.state,
                  {run.model.name(), checkpoint_config(run.model, settings_->recorded)}, extra);
}

void Trainer::resume(Run& run) {
  const std::string& path = settings_->resume_from;
  Checkpoint c = load_checkpoint(path, run.parameters, optimizer_.get());
  if (optimizer_->steps() != c.state.step)
    fail("trainer", "cannot resume from '", path, "': its optimizer made ", optimizer_->steps(),
         " steps but its training state says ", c.state.step);
  run.rng.set_state(c.state.rng);
  run.state = c.state;
  // The tensors of the checkpoint named `prefix` + a trainable parameter's name, in the
  // optimizer's order: none, or one for every trainable parameter, of its shape.
  const auto tensors_named = [&](std::string_view prefix, std::string_view what) {
    std::vector<detail::ExpectedTensor> expected;
    for (const Parameter& p : optimizer_->parameters())
      expected.push_back({std::string(prefix) + p.name(), p.shape(), DType::kFloat32});
    io::TensorMap found;
    for (const auto& [name, tensor] : c.extra)
      if (name.starts_with(prefix)) found.emplace(name, tensor);
    std::vector<Tensor> tensors;
    if (found.empty()) return tensors;
    const std::vector<std::string> problems =
        detail::compare_tensors(expected, found, what, "the model");
    if (!problems.empty())
      fail("trainer", "cannot resume from '", path, "': ", detail::join(problems));
    for (const detail::ExpectedTensor& e : expected) tensors.push_back(found.at(e.name));
    return tensors;
  };
  if (settings_->keep_best_in_memory) run.best = tensors_named(kBestPrefix, "best-model tensor");
  if (settings_->average_decay > 0) {
    const std::vector<Tensor> average = tensors_named(kAveragePrefix, "weight-average tensor");
    if (!average.empty()) {
      run.average = trainable_values();  // on the parameters' device
      for (std::size_t i = 0; i < average.size(); ++i)
        detail::copy_values(average[i], run.average[i]);
    }
  }
}

}  // namespace weft::train
