// A served model's batching worker: the queue, the running thread that streams it through
// predict_stream (which weaves the next batch while this one runs), reloads and the model's
// metrics.
#include "model_worker.h"

#include "decoding_loop.h"
#include "weft/backend/cpu.h"

#include <algorithm>
#include <exception>
#include <set>

#include "weft/models/saved_model.h"
#include "weft/tensor/allocator.h"

namespace weft::serve::detail {

using Clock = std::chrono::steady_clock;

void PendingRequest::finish(std::size_t index, nlohmann::json result, std::string error) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    results[index] = std::move(result);
    errors[index] = std::move(error);
    last = --remaining == 0;
  }
  // Woken after the unlock, so the HTTP thread does not wake only to wait for the mutex. The
  // caller holds the request (a shared_ptr), so it outlives the waiter's return.
  if (last) done.notify_all();
}

void PendingRequest::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return remaining == 0; });
}

namespace {

double now_seconds_since(Clock::time_point then) {
  return std::chrono::duration<double>(Clock::now() - then).count();
}

}  // namespace

void DecodeStats::count_step(Clock::time_point now, std::uint64_t step_tokens) {
  if (recent.empty() || now - recent.back().start > std::chrono::milliseconds(100))
    recent.push_back({now});
  ++recent.back().steps;
  recent.back().tokens += step_tokens;
  while (now - recent.front().start > std::chrono::seconds(10)) recent.pop_front();
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
  decodes_ = model_->decoding() != nullptr;
  if (decodes_) {
    decoding_ = std::make_unique<DecodingLoop>(*this, options_);
    runner_ = std::thread([this] { decoding_->run(); });
  } else {
    runner_ = std::thread([this] { run_loop(); });
  }
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
  const auto now = Clock::now();
  for (QueuedInstance& instance : instances) {
    instance.queued_at = now;
    queue_.push_back(std::move(instance));
  }
  queue_changed_.notify_all();
  return true;
}

template <typename Ready>
void ModelWorker::wait_for_work(std::unique_lock<std::mutex>& lock, Ready ready) {
  if (options_.release_memory_idle_s > 0) {
    const std::chrono::duration<double> idle(options_.release_memory_idle_s);
    if (queue_changed_.wait_for(lock, idle, ready)) return;
    // Idle: nothing this worker runs holds tensors now, so what the pools cache is spare. Both
    // pools, since the model may run on either; an unused pool has nothing to hand back.
    lock.unlock();
    release_cached_memory(Device::kCpu);
    release_cached_memory(Device::kCuda);
    lock.lock();
    ++stats_.memory_releases;
  }
  queue_changed_.wait(lock, ready);
}

std::vector<QueuedInstance> ModelWorker::take_queued(std::size_t max_sequences, bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wait) wait_for_work(lock, [&] { return !queue_.empty() || stopping_; });
  std::vector<QueuedInstance> taken;
  std::size_t sequences = 0;
  while (!queue_.empty()) {
    const QueuedInstance& front = queue_.front();
    const std::size_t width = std::size_t(std::max(1, front.decode.beam));
    // One model per take (instances parsed by a reloaded model start another generation).
    if (sequences + width > max_sequences) break;
    if (!taken.empty() && front.model != taken.front().model) break;
    sequences += width;
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return taken;
}

std::size_t ModelWorker::queue_depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

bool ModelWorker::stopping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopping_;
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
  if (runner_.joinable()) runner_.join();
}

void ModelWorker::run_loop() {
  adopt_num_threads();  // this thread's OpenMP count is the default, not the process's setting
  for (;;) {
    std::shared_ptr<models::Model> model;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wait_for_work(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and every instance answered
      model = queue_.front().model;
    }
    std::size_t in_batch = 0;  // instances given to the batch being read
    models::StreamingOptions streaming;
    streaming.batch_size = std::int64_t(std::max<std::size_t>(1, options_.max_batch));
    streaming.batches_ahead = 1;
    streaming.source_thread = true;     // the source waits for requests while batches run
    streaming.isolate_failures = true;  // a bad instance fails alone
    streaming.on_batch = [&](std::int64_t, std::int64_t size) { count_batch(std::size_t(size)); };
    // A failure that is not an instance's ends the stream while the source may be waiting for
    // requests: wake it, so the instances in flight are answered now, not at the next request.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      source_interrupted_ = false;
    }
    streaming.interrupt_source = [&] {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        source_interrupted_ = true;
      }
      queue_changed_.notify_all();
    };
    const models::ExampleSource source = [&](models::StreamExample& next) {
      return next_instance(next, model.get(), in_batch);
    };
    // Answered after the batch was counted, so a client that got its answer sees its batch in
    // the stats.
    const models::PredictionSink sink = [&](models::StreamedPrediction& prediction) {
      InFlight item;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        item = std::move(in_flight_.front());
        in_flight_.pop_front();
      }
      item.request->finish(item.index, std::move(prediction.prediction),
                           std::move(prediction.error));
    };
    try {
      models::predict_stream(*model, source, sink, streaming);
    } catch (const std::exception& e) {
      // Not an instance's failure (those are isolated): answer every instance still waiting.
      std::deque<InFlight> unanswered;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        unanswered.swap(in_flight_);
      }
      for (InFlight& item : unanswered)
        item.request->finish(item.index, nlohmann::json(), name_ + ": " + e.what());
    }
  }
}

bool ModelWorker::next_instance(models::StreamExample& next, const models::Model* model,
                                std::size_t& in_batch) {
  const std::size_t max_batch = std::max<std::size_t>(1, options_.max_batch);
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_work(lock, [&] { return !queue_.empty() || stopping_ || source_interrupted_; });
  if (queue_.empty() || source_interrupted_) return false;  // stopping and drained, or interrupted
  // A batch's first instance: under load (the last batch served several requests) wait a
  // little for more; a quiet server answers at once, so batching costs a lone client nothing.
  if (in_batch == 0 && max_batch > 1 && last_batch_requests_ > 1 && options_.max_wait_ms > 0) {
    const auto deadline =
        Clock::now() + std::chrono::microseconds(std::int64_t(options_.max_wait_ms * 1000));
    queue_changed_.wait_until(lock, deadline, [&] {
      return stopping_ || source_interrupted_ || queue_.size() >= max_batch;
    });
    if (source_interrupted_) return false;
  }
  // Instances parsed by a reloaded model start the next stream.
  if (queue_.front().model.get() != model) return false;
  QueuedInstance& front = queue_.front();
  next.example = std::move(front.example);
  in_flight_.push_back({std::move(front.request), front.index});
  queue_.pop_front();
  ++in_batch;
  if (queue_.empty() || queue_.front().model.get() != model || in_batch == max_batch) {
    next.ends_batch = true;  // the queue ran dry: the batch goes now
    in_batch = 0;
  }
  return true;
}

void ModelWorker::count_batch(std::size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<const PendingRequest*> requests;
  for (std::size_t i = 0; i < size && i < in_flight_.size(); ++i)
    requests.insert(in_flight_[i].request.get());
  last_batch_requests_ = requests.size();
  ++stats_.batches;
  stats_.examples += size;
  if (requests.size() > 1) ++stats_.shared_batches;
  batch_sizes_.add(double(size));
  const auto now = Clock::now();
  recent_.emplace_back(now, size);
  while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) {
    recent_.pop_front();
  }
}

void ModelWorker::record_request(int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;
  if (status >= 0 && status < int(status_counts_.size())) ++status_counts_[std::size_t(status)];
  latency_.add(seconds);
}

void ModelWorker::record_cancelled() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.cancelled;
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
  s.decodes = decodes_;
  s.decode = decode_stats_;
  std::uint64_t steps = 0, tokens = 0;
  for (const DecodeStats::Tick& tick : s.decode.recent) {
    if (now_seconds_since(tick.start) > 10) continue;
    steps += tick.steps;
    tokens += tick.tokens;
  }
  s.decode.steps_per_second = double(steps) / 10.0;
  s.decode.tokens_per_second = double(tokens) / 10.0;
  return s;
}

}  // namespace weft::serve::detail
