// A served model's batching worker: the queue, the weaving thread that forms and weaves batches,
// the running thread that owns the Model's execution, reloads and the model's metrics.
#include "model_worker.h"

#include <algorithm>
#include <exception>
#include <set>

#include "weft/core/error.h"
#include "weft/models/block_model.h"
#include "weft/models/saved_model.h"

namespace weft::serve::detail {

using Clock = std::chrono::steady_clock;

void PendingRequest::finish(std::size_t index, nlohmann::json result, std::string error) {
  std::lock_guard<std::mutex> lock(mutex);
  results[index] = std::move(result);
  errors[index] = std::move(error);
  if (--remaining == 0) done.notify_all();
}

void PendingRequest::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return remaining == 0; });
}

void Histogram::add(double value) {
  std::size_t bucket = 0;
  while (bucket < bounds.size() && value > bounds[bucket]) ++bucket;
  ++counts[bucket];
  sum += value;
  ++count;
}

ModelWorker::ModelWorker(std::string name, std::string checkpoint, const ServerOptions& options)
    : name_(std::move(name)), options_(options), checkpoint_(std::move(checkpoint)) {
  model_ = models::load_model(checkpoint_, models::ModelUse::kInfer, options_.overrides, name_);
  weaver_ = std::thread([this] { weave_loop(); });
  runner_ = std::thread([this] { run_loop(); });
}

ModelWorker::~ModelWorker() { stop(); }

std::shared_ptr<models::Model> ModelWorker::model() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_;
}

std::string ModelWorker::checkpoint() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return checkpoint_;
}

bool ModelWorker::submit(std::vector<QueuedInstance> instances) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || queue_.size() + instances.size() > options_.max_queue) return false;
  for (QueuedInstance& instance : instances) queue_.push_back(std::move(instance));
  queue_changed_.notify_all();
  return true;
}

void ModelWorker::reload(const std::string& checkpoint) {
  std::lock_guard<std::mutex> serial(reload_mutex_);
  std::shared_ptr<models::Model> fresh;
  try {
    fresh = models::load_model(checkpoint, models::ModelUse::kInfer, options_.overrides, name_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++reload_failures_;
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  model_ = std::move(fresh);  // instances already parsed keep the model that parsed them
  checkpoint_ = checkpoint;
  ++stats_.reloads;
}

void ModelWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  slot_changed_.notify_all();
  if (weaver_.joinable()) weaver_.join();
  if (runner_.joinable()) runner_.join();
}

std::optional<ModelWorker::Batch> ModelWorker::next_batch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // At most one woven batch waits ahead of the running one.
  queue_changed_.wait(lock,
                      [&] { return (!queue_.empty() && !slot_) || (stopping_ && queue_.empty()); });
  if (queue_.empty()) return std::nullopt;
  // Under load (the last batch served several requests) wait a little for more instances; a
  // quiet server answers at once, so batching costs a lone client nothing.
  const std::size_t max_batch = std::max<std::size_t>(1, options_.max_batch);
  if (max_batch > 1 && last_batch_requests_ > 1 && options_.max_wait_ms > 0) {
    const auto deadline =
        Clock::now() + std::chrono::microseconds(std::int64_t(options_.max_wait_ms * 1000));
    queue_changed_.wait_until(lock, deadline,
                              [&] { return stopping_ || queue_.size() >= max_batch; });
  }
  Batch batch;
  const std::shared_ptr<models::Model> model = queue_.front().model;
  std::set<const PendingRequest*> requests;
  while (!queue_.empty() && batch.items.size() < max_batch && queue_.front().model == model) {
    batch.items.push_back(std::move(queue_.front()));
    queue_.pop_front();
    requests.insert(batch.items.back().request.get());
  }
  last_batch_requests_ = requests.size();
  return batch;
}

void ModelWorker::weave_loop() {
  for (;;) {
    std::optional<Batch> batch = next_batch();
    if (!batch) break;
    batch->examples.reserve(batch->items.size());
    for (QueuedInstance& item : batch->items) batch->examples.push_back(std::move(item.example));
    try {
      if (const auto* block =
              dynamic_cast<const models::BlockModel*>(batch->items.front().model.get())) {
        batch->woven = block->weave_examples(batch->examples);
      }
    } catch (const std::exception&) {
      batch->weave_failed = true;  // some instance cannot be woven: the runner finds which
    }
    std::lock_guard<std::mutex> lock(mutex_);
    slot_ = std::move(batch);
    slot_changed_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  weaver_done_ = true;
  slot_changed_.notify_all();
}

void ModelWorker::run_loop() {
  for (;;) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      slot_changed_.wait(lock, [&] { return slot_.has_value() || weaver_done_; });
      if (!slot_) break;
      batch = std::move(*slot_);
      slot_.reset();
      running_batch_ = true;
    }
    queue_changed_.notify_all();
    std::vector<Answer> answers = run_batch(batch);
    std::set<const PendingRequest*> requests;
    for (const QueuedInstance& item : batch.items) requests.insert(item.request.get());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_batch_ = false;
      ++stats_.batches;
      stats_.examples += batch.items.size();
      if (requests.size() > 1) ++stats_.shared_batches;
      batch_sizes_.add(double(batch.items.size()));
      const auto now = Clock::now();
      recent_.emplace_back(now, batch.items.size());
      while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) {
        recent_.pop_front();
      }
    }
    // Counted before answering, so a client that got its answer sees its batch in the stats.
    for (std::size_t i = 0; i < batch.items.size(); ++i) {
      batch.items[i].request->finish(batch.items[i].index, std::move(answers[i].first),
                                     std::move(answers[i].second));
    }
  }
}

std::vector<ModelWorker::Answer> ModelWorker::run_batch(Batch& batch) {
  models::Model& model = *batch.items.front().model;
  if (!batch.weave_failed) {
    try {
      auto* block = dynamic_cast<models::BlockModel*>(&model);
      std::vector<nlohmann::json> results = block != nullptr && batch.woven
                                                ? block->predict_woven(*batch.woven)
                                                : model.predict(batch.examples);
      batch.woven.reset();
      if (results.size() == batch.items.size()) {
        std::vector<Answer> answers;
        answers.reserve(results.size());
        for (nlohmann::json& result : results)
          answers.emplace_back(std::move(result), std::string());
        return answers;
      }
    } catch (const std::exception&) {
      // Retried one by one below, so one bad instance fails alone.
    }
  }
  batch.woven.reset();
  return run_one_by_one(batch);
}

std::vector<ModelWorker::Answer> ModelWorker::run_one_by_one(Batch& batch) {
  models::Model& model = *batch.items.front().model;
  std::vector<Answer> answers;
  for (std::size_t i = 0; i < batch.items.size(); ++i) {
    std::string error;
    nlohmann::json result;
    try {
      std::vector<nlohmann::json> results = model.predict(std::span(&batch.examples[i], 1));
      if (results.size() != 1)
        fail(name_, "the model gave ", results.size(), " predictions for one example");
      result = std::move(results[0]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    answers.emplace_back(std::move(result), std::move(error));
  }
  return answers;
}

void ModelWorker::record_request(int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;
  if (status >= 0 && status < int(status_counts_.size())) ++status_counts_[std::size_t(status)];
  latency_.add(seconds);
}

ModelStats ModelWorker::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

ModelWorker::Snapshot ModelWorker::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot s;
  s.stats = stats_;
  for (std::size_t code = 0; code < status_counts_.size(); ++code) {
    if (status_counts_[code] != 0) s.statuses.emplace_back(int(code), status_counts_[code]);
  }
  s.latency = latency_;
  s.batch_sizes = batch_sizes_;
  s.queue_depth = queue_.size();
  std::size_t examples = 0;
  for (const auto& [when, n] : recent_) examples += n;
  s.examples_per_second = double(examples) / 10.0;
  s.reload_failures = reload_failures_;
  return s;
}

}  // namespace weft::serve::detail
