// One served model's batching worker (private to the server): a bounded queue of parsed
// instances from any number of requests, a weaving thread that forms batches (at most max_batch
// instances, waiting at most max_wait_ms for more while there is load) and weaves them, and a
// running thread, the only one that runs the Model, so weaving the next batch overlaps running
// this one. A reload swaps the Model under the queue's lock; instances keep the Model that
// parsed them, and a batch never mixes two.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/blocks/compiler.h"
#include "weft/models/model.h"
#include "weft/serve/server.h"

namespace weft::serve::detail {

// One predict request's instances and their answers; the HTTP thread waits on it.
struct PendingRequest {
  explicit PendingRequest(std::size_t n) : results(n), errors(n), remaining(n) {}
  void finish(std::size_t index, nlohmann::json result, std::string error);
  void wait();

  std::mutex mutex;
  std::condition_variable done;
  std::vector<nlohmann::json> results;
  std::vector<std::string> errors;  // empty: a prediction
  std::size_t remaining;
};

struct QueuedInstance {
  std::shared_ptr<PendingRequest> request;
  std::size_t index = 0;
  nlohmann::json example;
  std::shared_ptr<models::Model> model;  // the one that parsed it
};

// Prometheus-style buckets.
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1) {}
  void add(double value);
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last is +Inf
  double sum = 0;
  std::uint64_t count = 0;
};

class ModelWorker {
 public:
  ModelWorker(std::string name, std::string checkpoint, const ServerOptions& options);
  ~ModelWorker();

  const std::string& name() const { return name_; }
  std::shared_ptr<models::Model> model() const;
  std::string checkpoint() const;
  // Queues a request's parsed instances; false (nothing queued) when the queue would overflow.
  bool submit(std::vector<QueuedInstance> instances);
  // Loads a checkpoint and swaps it in; throws (the old model keeps serving) when it fails.
  void reload(const std::string& checkpoint);
  // Finishes every queued instance, then ends the threads.
  void stop();

  struct Snapshot {
    ModelStats stats;
    std::vector<std::pair<int, std::uint64_t>> statuses;  // (code, requests)
    Histogram latency{{}};
    Histogram batch_sizes{{}};
    std::size_t queue_depth = 0;
    double examples_per_second = 0;  // over the last 10 seconds
    std::uint64_t reload_failures = 0;
  };
  void record_request(int status, double seconds);
  ModelStats stats() const;
  Snapshot snapshot() const;

 private:
  struct Batch {
    std::vector<QueuedInstance> items;
    std::vector<nlohmann::json> examples;
    std::optional<blocks::WovenBatch> woven;  // for a BlockModel, woven ahead
    bool weave_failed = false;
  };
  void weave_loop();
  void run_loop();
  std::optional<Batch> next_batch();
  using Answer = std::pair<nlohmann::json, std::string>;  // a prediction or an error
  std::vector<Answer> run_batch(Batch& batch);
  std::vector<Answer> run_one_by_one(Batch& batch);

  const std::string name_;
  const ServerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::condition_variable slot_changed_;
  std::deque<QueuedInstance> queue_;
  std::shared_ptr<models::Model> model_;
  std::string checkpoint_;
  std::optional<Batch> slot_;  // a woven batch waiting for the running thread
  bool running_batch_ = false;
  bool stopping_ = false;
  bool weaver_done_ = false;
  std::size_t last_batch_requests_ = 0;
  std::mutex reload_mutex_;

  // Metrics (under mutex_).
  ModelStats stats_;
  std::array<std::uint64_t, 600> status_counts_{};
  Histogram latency_{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}};
  Histogram batch_sizes_{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};
  std::uint64_t reload_failures_ = 0;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::size_t>> recent_;  // rate

  std::thread weaver_;
  std::thread runner_;
};

}  // namespace weft::serve::detail
