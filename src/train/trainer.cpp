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

#include "batch_shares.h"
#include "progress.h"
#include "tensor_match.h"
#include "weft/backend/cpu.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/dist/communicator.h"

namespace weft::train {
namespace {

constexpr std::string_view kBestPrefix = "best/";
constexpr std::string_view kAveragePrefix = "average/";

using BatchBody = std::function<void(const Batch&)>;
using IdSpan = std::span<const std::size_t>;

// Consecutive batches of `batch_size` ids (the last one shorter).
std::vector<IdSpan> batches_of(IdSpan ids, std::size_t batch_size) {
  std::vector<IdSpan> batches;
  for (std::size_t first = 0; first < ids.size(); first += batch_size) {
    batches.push_back(ids.subspan(first, std::min(batch_size, ids.size() - first)));
  }
  return batches;
}

// Rank `rank`'s contiguous share of `ids` among `ranks` (sizes differ by at most one).
IdSpan shard_of(IdSpan ids, int rank, int ranks) {
  const std::size_t n = ids.size(), r = std::size_t(rank), k = std::size_t(ranks);
  const std::size_t first = n * r / k, last = n * (r + 1) / k;
  return ids.subspan(first, last - first);
}

// Calls body on each batch in order (empty batches included: a rank's empty shard). With
// `ahead`, batch k+1 is prepared on a background thread while body runs on batch k (the
// future's destructor waits for it, so an exception in body leaves no thread behind).
void for_each_batch(TrainableModel& model, Split split, const std::vector<IdSpan>& batches,
                    bool ahead, const BatchBody& body) {
  auto launch = [&](std::size_t b) {
    return std::async(std::launch::async, [&model, split, batch = batches[b]] {
      return batch.empty() ? nullptr : model.prepare_batch(split, batch);
    });
  };
  std::future<std::unique_ptr<PreparedBatch>> next;
  if (ahead && !batches.empty()) next = launch(0);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    std::unique_ptr<PreparedBatch> prepared =
        ahead ? next.get()
              : (batches[b].empty() ? nullptr : model.prepare_batch(split, batches[b]));
    if (ahead && b + 1 < batches.size()) next = launch(b + 1);
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

// A description of what every rank must agree on before training together: the model, its
// data and the run's options. Ranks that differ are named.
std::string run_fingerprint(const TrainableModel& model, std::span<const Parameter> parameters,
                            const TrainerOptions& options) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const Parameter& p : parameters) shapes.push_back({p.name(), p.shape().to_string()});
  // The config as JSON where it is (so that a difference names the option), else as text.
  nlohmann::json config = nlohmann::json::parse(model.config_json(), nullptr, false);
  if (config.is_discarded()) config = model.config_json();
  return nlohmann::json{{"model", model.name()},
                        {"config", config},
                        {"examples",
                         {model.num_examples(Split::kTrain), model.num_examples(Split::kDev),
                          model.num_examples(Split::kTest)}},
                        {"parameters", shapes},
                        {"trainer", nlohmann::json::parse(options.to_json())}}
      .dump();
}

// Appends "path: A on rank 0, B on rank r" for each leaf where two fingerprints differ (objects
// are compared key by key, arrays item by item, so the message names the option itself).
void describe_differences(const nlohmann::json& root, const nlohmann::json& other,
                          const std::string& path, std::size_t rank,
                          std::vector<std::string>& out) {
  if (root == other) return;
  if (root.is_object() && other.is_object()) {
    for (const auto& [key, value] : root.items())
      describe_differences(value, other.contains(key) ? other.at(key) : nlohmann::json(),
                           path + "." + key, rank, out);
    for (const auto& [key, value] : other.items())
      if (!root.contains(key)) describe_differences(nullptr, value, path + "." + key, rank, out);
    return;
  }
  if (root.is_array() && other.is_array() && root.size() == other.size()) {
    for (std::size_t i = 0; i < root.size(); ++i)
      describe_differences(root[i], other[i], path + "[" + std::to_string(i) + "]", rank, out);
    return;
  }
  const auto text = [](const nlohmann::json& v) { return v.is_null() ? "absent" : v.dump(); };
  out.push_back(path.substr(1) + ": " + text(root) + " on rank 0, " + text(other) + " on rank " +
                std::to_string(rank));
}

void check_ranks_agree(dist::Communicator& comm, const std::string& fingerprint) {
  const std::vector<std::string> all = comm.all_gather(fingerprint);
  const nlohmann::json root = nlohmann::json::parse(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    std::vector<std::string> differences;
    describe_differences(root, nlohmann::json::parse(all[r]), "", r, differences);
    constexpr std::size_t kShown = 8;
    std::string listed;
    for (std::size_t i = 0; i < std::min(differences.size(), kShown); ++i)
      listed += (i ? "; " : "") + differences[i];
    if (differences.size() > kShown)
      listed += "; and " + std::to_string(differences.size() - kShown) + " more";
    fail("trainer", "rank ", r, " differs from rank 0: ", listed,
         " (every rank must run the same model on the same data with the same options)");
  }
}

// The sum of every trainable value, to check that the ranks' parameters stay identical.
double parameter_checksum(std::span<const Parameter> parameters) {
  double total = 0;
  for (const Parameter& p : parameters) {
    for (float v : p.value().to_float_vector()) total += double(v);
  }
  return total;
}

// Preparing the next batch on a background thread pays when the machine has a core to spare
// for it; not when the ranks sharing the machine take every core already: each rank's preparer
// then competes with its own runner and with the other ranks (measured on 2 cores, SST, 2
// ranks: 1621 ex/s preparing ahead, 2137 without; BENCHMARKS.md "Data-parallel training").
bool prepare_ahead_here(bool requested, const dist::Communicator& comm) {
  if (!requested || comm.local_size() <= 1) return requested;
  return unsigned(comm.local_size()) < std::max(1u, std::thread::hardware_concurrency());
}

// A gradient matrix with at least this many rows may be row-sparse (an embedding table's, nonzero
// in the rows of the words a batch used): the all-reduce sends only the rows some rank used.
constexpr std::int64_t kSparseGradientRows = 256;

// Float views of the parameters' gradients (host tensors), for the all-reduce: the dense ones
// (bucketed), the dense tables that may be mostly zero rows, with their row length, and the
// parameters whose gradient is held as rows (Parameter::grad_is_row_sparse).
struct GradientBuffers {
  std::vector<std::span<float>> dense;
  std::vector<std::pair<std::span<float>, std::size_t>> tables;
  std::vector<Parameter> row_sparse;
};

GradientBuffers gradient_buffers(std::span<const Parameter> parameters) {
  GradientBuffers buffers;
  for (const Parameter& p : parameters) {
    if (p.grad_is_row_sparse()) {
      buffers.row_sparse.push_back(p);
      continue;
    }
    Tensor& grad = const_cast<Parameter&>(p).grad();
    if (grad.device() != Device::kCpu) {
      fail("trainer", "data-parallel training needs gradients on the CPU; '", p.name(), "' is on ",
           device_name(grad.device()));
    }
    const std::span<float> data(grad.data<float>(), std::size_t(grad.numel()));
    if (grad.rank() == 2 && grad.shape()[0] >= kSparseGradientRows) {
      buffers.tables.emplace_back(data, std::size_t(grad.shape()[1]));
    } else {
      buffers.dense.push_back(data);
    }
  }
  return buffers;
}

// Sums a row-sparse gradient over the ranks and leaves it row-sparse, so each rank's lazy
// update touches the rows the global batch used, as one process would: the ranks agree on the
// union of their rows (an all-reduce of a row mask, a float per row), then sum those rows
// packed, each rank's scaled by its `share`.
void all_reduce_row_sparse(dist::Communicator& comm, Parameter& p, float share) {
  const RowSparseGrad& mine = p.row_sparse_grad();
  if (mine.rows.device() != Device::kCpu) {
    fail("trainer", "data-parallel training needs gradients on the CPU; '", p.name(), "' is on ",
         device_name(mine.rows.device()));
  }
  const std::vector<std::int32_t> ids = mine.indices.to_int_vector();
  const std::size_t cols = std::size_t(p.value().row_size());
  std::vector<float> mask(std::size_t(p.shape()[0]), 0.0f);
  for (std::int32_t id : ids) mask[std::size_t(id)] = 1.0f;
  comm.all_reduce_sum(std::span<float>(mask));
  std::vector<std::int32_t> all;
  for (std::size_t r = 0; r < mask.size(); ++r)
    if (mask[r] > 0) all.push_back(std::int32_t(r));
  std::vector<float> packed(all.size() * cols, 0.0f);
  const float* rows = mine.rows.data<float>();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::size_t at =
        std::size_t(std::lower_bound(all.begin(), all.end(), ids[k]) - all.begin());
    for (std::size_t c = 0; c < cols; ++c) packed[at * cols + c] = share * rows[k * cols + c];
  }
  comm.all_reduce_sum(std::span<float>(packed));
  const std::int64_t k = std::int64_t(all.size());
  p.zero_grad();
  p.add_grad_rows(Tensor::from_vector(Shape{k}, all),
                  Tensor::from_vector(p.shape().with_rows(k), packed));
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
  dist::Communicator& comm;  // the ranks training together (a single process by default)
  // On several ranks: every training example's cost, by which each batch is shared out.
  std::vector<double> costs;
};

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) { options_.validate(); }

Trainer::~Trainer() = default;

TrainResult Trainer::fit(TrainableModel& model) {
  if (options_.threads > 0) set_num_threads(options_.threads);
  if (model.num_examples(Split::kTrain) == 0)
    fail("trainer", "model '", model.name(), "' has no training examples");
  Run run{model, model.parameters(), Rng(options_.seed), {}, {}, {}, {}, {}, communicator(), {}};
  optimizer_ = make_optimizer(options_.optimizer, run.parameters);
  schedule_ = options_.schedule;
  if (schedule_.kind == ScheduleKind::kCosine && schedule_.total_steps == 0) {
    const std::size_t batches =
        (model.num_examples(Split::kTrain) + options_.batch_size - 1) / options_.batch_size;
    schedule_.total_steps = std::int64_t(batches) * options_.epochs;
    if (schedule_.total_steps <= schedule_.warmup_steps) {
      fail("trainer", "the cosine schedule decays after its ", schedule_.warmup_steps,
           " warmup steps, but the whole run is ", schedule_.total_steps, " steps (",
           options_.epochs, " epochs x ", batches, " batches of ", options_.batch_size,
           "): use fewer warmup steps or more epochs");
    }
    schedule_.validate();
  }
  run.state.rng = run.rng.state();
  const bool resuming = !options_.resume_from.empty();
  if (resuming) resume(run);
  if (run.comm.size() > 1) start_together(run);
  if (options_.average_decay > 0 && run.average.empty()) run.average = trainable_values();
  const bool root = run.comm.is_root();
  if (!options_.log_path.empty() && root) {
    run.log.open(options_.log_path, resuming ? std::ios::app : std::ios::trunc);
    if (!run.log) fail("trainer", "cannot open the log '", options_.log_path, "' for writing");
  }
  run.progress = std::make_unique<detail::Progress>(root ? options_.progress : ProgressMode::kOff,
                                                    options_.progress_stream, options_.epochs);
  TrainResult result;
  while (run.state.epoch < options_.epochs) {
    EpochRecord record = train_epoch(run);
    finish_epoch(run, record);
    result.epochs.push_back(std::move(record));
  }
  if (options_.restore_best && !options_.best_metric.empty() && run.state.best_dev)
    restore_best(run);
  else if (!run.average.empty())
    set_trainable_values(run.average);  // the model a run returns is its average
  result.state = run.state;
  return result;
}

EpochRecord Trainer::train_epoch(Run& run) {
  EpochRecord record;
  record.epoch = run.state.epoch + 1;
  // The order comes from the seed and the epoch alone: the same on every rank, whatever their
  // number, and after a resume.
  std::vector<std::size_t> order(run.model.num_examples(Split::kTrain));
  std::iota(order.begin(), order.end(), std::size_t(0));
  if (options_.shuffle) {
    Rng shuffle(mix64(options_.seed, 0x5eedf00dull + std::uint64_t(record.epoch)));
    for (std::size_t i = order.size() - 1; i > 0; --i)
      std::swap(order[i], order[shuffle.below(i + 1)]);
  }
  dist::Communicator& comm = run.comm;
  const bool together = comm.size() > 1;
  // Every global batch, and this rank's share of each (of equal cost on every rank).
  const std::vector<IdSpan> global = batches_of(order, options_.batch_size);
  std::vector<std::vector<std::size_t>> shares;
  std::vector<IdSpan> mine;
  if (together) {
    shares.reserve(global.size());
    for (IdSpan batch : global)
      shares.push_back(detail::balanced_share(batch, run.costs, comm.rank(), comm.size()));
    mine.assign(shares.begin(), shares.end());
  } else {
    mine = global;
  }
  run.progress->start_epoch(record.epoch, std::int64_t(order.size()));
  const auto start = std::chrono::steady_clock::now();
  double loss_sum = 0;
  std::size_t batch_index = 0;
  const std::span<const Parameter> parameters = optimizer_->parameters();
  for_each_batch(
      run.model, Split::kTrain, mine, prepare_ahead_here(options_.prepare_ahead, comm),
      [&](const Batch& batch) {
        const double lr = schedule_.at(run.state.step);
        const std::size_t global_size = global[batch_index++].size();
        optimizer_->zero_grad();
        BatchFigures figures;
        if (!batch.example_ids.empty()) {
          figures = run.model.train_batch(batch, run.rng);
          check_figures(figures, Split::kTrain, run.state.step);
        }
        if (together) {
          const auto reduce_start = std::chrono::steady_clock::now();
          // Each rank's gradient is of its shard's mean loss: weighted by the shard's share, the
          // sum over ranks is the gradient of the global batch's mean loss.
          const float share = float(double(batch.example_ids.size()) / double(global_size));
          const GradientBuffers buffers = gradient_buffers(parameters);
          for (std::span<float> buffer : buffers.dense)
            for (float& g : buffer) g *= share;
          dist::all_reduce_buckets(comm, buffers.dense);
          for (const auto& [table, cols] : buffers.tables) {
            dist::all_reduce_sparse_rows(comm, table, cols, share);
          }
          for (Parameter p : buffers.row_sparse) all_reduce_row_sparse(comm, p, share);
          double totals[2] = {figures.loss_sum, double(figures.examples)};
          comm.all_reduce_sum(std::span<double>(totals));
          figures.loss_sum = totals[0];
          figures.examples = std::int64_t(totals[1]);
          record.all_reduce_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - reduce_start)
                  .count();
          ++record.all_reduce_steps;
          check_figures(figures, Split::kTrain, run.state.step);
        }
        if (options_.clip_value > 0) clip_grad_value(parameters, options_.clip_value);
        if (options_.clip_norm > 0) clip_grad_norm(parameters, options_.clip_norm);
        optimizer_->step(lr);
        ++run.state.step;
        if (!run.average.empty() && run.state.step % options_.average_every == 0)
          update_average(run);
#ifndef NDEBUG
        if (together && run.state.step % 50 == 0) check_replicas(run);
#endif
        record.learning_rate = lr;
        if (options_.on_step) {
          options_.on_step(run.state.step, figures.loss_sum / double(figures.examples), lr);
        }
        loss_sum += figures.loss_sum;
        record.examples += figures.examples;
        record.train.merge(figures.metrics);
        run.progress->update(record.examples, loss_sum / double(record.examples));
      });
  if (together) record.train = merged_over_ranks(comm, record.train);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.examples_per_second = record.seconds > 0 ? double(record.examples) / record.seconds : 0;
  record.train.add_mean("loss", loss_sum / double(record.examples), double(record.examples));
  record.step = run.state.step;
  run.state.epoch = record.epoch;
  return record;
}

void Trainer::update_average(Run& run) const {
  const double n = double(run.state.step / options_.average_every - 1);
  const double d = std::min(std::pow(options_.average_decay, double(options_.average_every)),
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

void Trainer::finish_epoch(Run& run, EpochRecord& record) {
  // With weight averaging the average is the model evaluated, kept and written as the best;
  // the live values come back before the epoch checkpoint (which holds both).
  std::vector<Tensor> live;
  if (!run.average.empty()) {
    live = trainable_values();
    set_trainable_values(run.average);
  }
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
      if (options_.keep_best_in_memory) run.best = trainable_values();
    }
  }
  if (run.comm.is_root()) run.state.rng = run.rng.state();
  const bool root = run.comm.is_root();
  if (root && record.best && !options_.best_checkpoint_path.empty())
    save(run, options_.best_checkpoint_path, /*with_average=*/false);
  if (!live.empty()) set_trainable_values(live);
  if (root && !options_.checkpoint_path.empty())
    save(run, options_.checkpoint_path, /*with_average=*/true);
  if (run.log.is_open()) {
    run.log << record.to_json() << '\n';
    run.log.flush();
    if (!run.log) fail("trainer", "writing the log '", options_.log_path, "' failed");
  }
  run.progress->end_epoch(record);
}

void Trainer::restore_best(Run& run) const {
  if (!run.best.empty()) {
    set_trainable_values(run.best);
  } else if (!options_.best_checkpoint_path.empty()) {
    load_checkpoint(options_.best_checkpoint_path, run.parameters);
  }
}

MetricSet Trainer::evaluate(TrainableModel& model, Split split) {
  dist::Communicator& comm = communicator();
  std::vector<std::size_t> ids(model.num_examples(split));
  std::iota(ids.begin(), ids.end(), std::size_t(0));
  // Each rank evaluates a contiguous share of the split; the figures are summed over ranks and
  // the per-example scores gathered, so split-level figures see every example.
  const IdSpan mine = shard_of(ids, comm.rank(), comm.size());
  MetricSet figures;
  double totals[2] = {0, 0};  // loss sum, examples
  std::vector<ExampleScores> scores;
  for_each_batch(model, split, batches_of(mine, options_.batch_size),
                 prepare_ahead_here(options_.prepare_ahead, comm), [&](const Batch& batch) {
                   BatchFigures f = model.eval_batch(batch);
                   check_figures(f, split, -1);
                   totals[0] += f.loss_sum;
                   totals[1] += double(f.examples);
                   figures.merge(f.metrics);
                   for (ExampleScores& row : f.scores) scores.push_back(std::move(row));
                 });
  if (comm.size() > 1) {
    comm.all_reduce_sum(std::span<double>(totals));
    figures = merged_over_ranks(comm, figures);
    scores = gathered_over_ranks(comm, scores);
  }
  if (totals[1] > 0) figures.add_mean("loss", totals[0] / totals[1], totals[1]);
  if (!scores.empty()) {
    std::sort(scores.begin(), scores.end(),
              [](const ExampleScores& a, const ExampleScores& b) { return a.example < b.example; });
    model.finish_split(split, scores, figures);
  }
  return figures;
}

dist::Communicator& Trainer::communicator() const {
  if (options_.communicator != nullptr) return *options_.communicator;
  static const std::unique_ptr<dist::Communicator> single = dist::single_process();
  return *single;
}

MetricSet Trainer::merged_over_ranks(dist::Communicator& comm, const MetricSet& mine) {
  MetricSet all;
  for (const std::string& text : comm.all_gather(mine.serialize()))
    all.merge(MetricSet::parse(text));
  return all;
}

std::vector<ExampleScores> Trainer::gathered_over_ranks(dist::Communicator& comm,
                                                        const std::vector<ExampleScores>& mine) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ExampleScores& row : mine) rows.push_back({row.example, row.values});
  std::vector<ExampleScores> all;
  for (const std::string& text : comm.all_gather(rows.dump())) {
    for (const nlohmann::json& row : nlohmann::json::parse(text)) {
      all.push_back({row[0].get<std::size_t>(), row[1].get<std::vector<double>>()});
    }
  }
  return all;
}

// Before the first step of a run on several ranks: the ranks agree on the model, data and
// options; rank 0's parameters (initial, or resumed) go to every rank; ranks other than 0 draw
// their dropout from their own stream.
void Trainer::start_together(Run& run) {
  check_ranks_agree(run.comm, run_fingerprint(run.model, run.parameters, options_));
  for (Parameter& p : run.parameters) {
    Tensor& value = p.value();
    if (value.device() != Device::kCpu) {
      fail("trainer", "data-parallel training needs parameters on the CPU; '", p.name(), "' is on ",
           device_name(value.device()));
    }
    run.comm.broadcast(
        std::span<std::byte>(static_cast<std::byte*>(value.raw_data()), value.nbytes()), 0);
  }
  const std::size_t examples = run.model.num_examples(Split::kTrain);
  run.costs.resize(examples);
  for (std::size_t id = 0; id < examples; ++id) {
    const double cost = run.model.example_cost(Split::kTrain, id);
    if (!(cost > 0) || !std::isfinite(cost))
      fail("trainer", "model '", run.model.name(), "' gives training example ", id, " the cost ",
           cost, "; costs must be positive and finite");
    run.costs[id] = cost;
  }
  if (!run.comm.is_root()) {
    const auto& s = run.state.rng;
    run.rng = Rng(mix64(mix64(s[0], s[1]) ^ mix64(s[2], s[3]), std::uint64_t(run.comm.rank())));
  }
}

void Trainer::check_replicas(Run& run) const {
  const double mine = parameter_checksum(optimizer_->parameters());
  const std::vector<std::string> all = run.comm.all_gather(std::to_string(mine));
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      fail("trainer", "after step ", run.state.step, " rank ", r,
           "'s parameters differ from rank 0's (checksums ", all[r], " vs ", all[0], ")");
    }
  }
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
  if (options_.keep_best_in_memory) run.best = tensors_named(kBestPrefix, "best-model tensor");
  if (options_.average_decay > 0) {
    const std::vector<Tensor> average = tensors_named(kAveragePrefix, "weight-average tensor");
    if (!average.empty()) {
      run.average = trainable_values();  // on the parameters' device
      for (std::size_t i = 0; i < average.size(); ++i)
        detail::copy_values(average[i], run.average[i]);
    }
  }
}

}  // namespace weft::train
